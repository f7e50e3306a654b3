"""``fed verify``: compare a table's metadata table with its storage.

Three kinds of disagreement, told apart with the timeline's account of every
completed instant (``fedcore.services.history``):

- **missing**: the metadata table references a file storage lacks (deleted outside
  fedcore): reads that need it fail. Also a size that differs from storage's.
- **unrecorded**: a completed write recorded a file the metadata table lost: the
  metadata table is damaged; ``fed repair`` restores it. Never deleted.
- **orphans**: the table's own files that nothing references: a failed task attempt's,
  a rolled-back write's whose deletion failed, a cleaned file whose deletion failed. Safe
  to delete; ``delete_orphans`` does, past a grace period.

Files of writes in flight (an instant still pending, or one begun after the
timeline was listed) are none of these and never deleted: a writer puts its data
files in storage before its instant completes. Nor are files of another table in a
folder the two share (tables created before each got a folder of its own) or the files
a copied table's source wrote since the copy: their instants or file groups are none of
this table's (``History.judge``), so they are reported apart, never deleted.

A table passes when nothing is missing and nothing is unrecorded; orphans only
cost storage.

``deep``: each referenced file is also read and checked against what the metadata table
recorded of it: a base file's Parquet footer must decode and hold the rows and column
statistics recorded (a truncated, zeroed or swapped file fails), a log file's blocks must
decode. One footer (or log file) read per file, in parallel; plain ``verify`` reads none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from fedcore.exceptions import DataFileCorruptError, FedError, RepairError
from fedcore.files.filenames import BASE_FILE_RE, file_instant
from fedcore.handle import HasHandle, handle_of
from fedcore.handle.identity import check_not_a_copy
from fedcore.io.filesystems import open_sized, read_object, remove_files
from fedcore.io.parquet import file_stats, open_parquet, read_file_stats
from fedcore.log.blocks import read_blocks
from fedcore.metadata.table import IndexCache, MetadataTable
from fedcore.services.history import load_history, require_metadata_table
from fedcore.services.inventory import Inventory, StoredFile, take_inventory, writer_instant

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

_SHOWN = 10
#: Files a deep check reads at once.
_DEEP_THREADS = 8


@dataclass
class VerifyReport:
    table: str
    #: The instant the metadata table was read as of (the newest completed one).
    instant: str | None
    inventory: Inventory
    referenced: int = 0
    #: (partition, name, recorded size) referenced and not in storage.
    missing: list[tuple[str, str, int]] = field(default_factory=list)
    #: (partition, name, recorded size, size in storage)
    size_mismatches: list[tuple[str, str, int, int]] = field(default_factory=list)
    unrecorded: list[StoredFile] = field(default_factory=list)
    orphans: list[StoredFile] = field(default_factory=list)
    in_flight: list[StoredFile] = field(default_factory=list)
    #: Files in the table's folders that are another table's (``History.judge``).
    foreign: list[StoredFile] = field(default_factory=list)
    #: (partition, name, what is wrong): files a deep check could not read as recorded.
    damaged: list[tuple[str, str, str]] = field(default_factory=list)
    #: Files a deep check read (0: not a deep check).
    checked: int = 0
    #: Physical paths of the orphans deleted.
    deleted: list[str] = field(default_factory=list)
    #: Why the metadata table could not be read, if it could not.
    metadata_error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Nothing referenced is missing or mis-sized and the metadata table is whole."""
        return not (
            self.missing or self.size_mismatches or self.unrecorded or self.metadata_error or self.damaged
        )

    def to_json(self) -> dict[str, Any]:
        def stored(files: list[StoredFile]) -> list[dict[str, Any]]:
            return [
                {
                    "partition": f.partition,
                    "name": f.name,
                    "size": f.size,
                    "modified": f.modified,
                    "path": f.path,
                }
                for f in files
            ]

        return {
            "table": self.table,
            "instant": self.instant,
            "ok": self.ok,
            "metadata_error": self.metadata_error,
            "referenced": self.referenced,
            "stored": len(self.inventory.files),
            "missing": [{"partition": p, "name": n, "size": s} for p, n, s in self.missing],
            "size_mismatches": [
                {"partition": p, "name": n, "recorded": a, "stored": b} for p, n, a, b in self.size_mismatches
            ],
            "unrecorded": stored(self.unrecorded),
            "checked": self.checked,
            "damaged": [{"partition": p, "name": n, "problem": w} for p, n, w in self.damaged],
            "orphans": stored(self.orphans),
            "in_flight": len(self.in_flight),
            "foreign": stored(self.foreign),
            "deleted": self.deleted,
            "listing": {
                "files": len(self.inventory.files),
                "folders": self.inventory.folders,
                "foreign_objects": self.inventory.foreign,
                "seconds": round(self.inventory.seconds, 3),
                "files_per_second": round(self.inventory.files_per_second, 1),
            },
        }

    def format(self) -> str:
        inv = self.inventory
        unjudged = self.metadata_error is not None  # nothing can be called an orphan
        rows: list[tuple[str, int | None]] = [
            ("referenced by the metadata table", None if unjudged else self.referenced),
            ("data files in storage", len(inv.files)),
            ("missing from storage", len(self.missing)),
            ("size differs from storage", len(self.size_mismatches)),
            ("unrecorded (metadata table lost them)", len(self.unrecorded)),
            ("orphans (nothing references them)", None if unjudged else len(self.orphans)),
            ("of writes in flight", len(self.in_flight)),
            ("of another table (never deleted)", len(self.foreign)),
        ]
        if self.checked:
            rows.append(("read and checked (--deep)", self.checked))
            rows.append(("damaged (not as recorded)", len(self.damaged)))
        if self.deleted:
            rows.append(("orphans deleted", len(self.deleted)))
        width = max(len(label) for label, _ in rows)
        lines = [f"Table {self.table}, as of instant {self.instant}:"]
        lines += [
            f"  {label.ljust(width)}  {'?' if count is None else format(count, ','):>10}"
            for label, count in rows
        ]
        lines.append(
            f"Listed {len(inv.files):,} data files over {inv.folders:,} folders in {inv.seconds:.1f} s "
            f"({inv.files_per_second:,.0f} files/s)."
        )
        if self.metadata_error:
            lines.append(f"The metadata table cannot be read: {self.metadata_error}")
        for label, items in (
            ("missing", [f"{p}/{n}" for p, n, _ in self.missing]),
            ("size", [f"{p}/{n}: {a:,} recorded, {b:,} stored" for p, n, a, b in self.size_mismatches]),
            ("unrecorded", [f.path for f in self.unrecorded]),
            ("damaged", [f"{p}/{n}: {w}" for p, n, w in self.damaged]),
            ("orphan", [f.path for f in self.orphans]),
            ("foreign", [f.path for f in self.foreign]),
        ):
            lines += [f"  {label}: {item}" for item in items[:_SHOWN]]
            if len(items) > _SHOWN:
                lines.append(f"  ... and {len(items) - _SHOWN:,} more {label} (--json lists all)")
        if self.unrecorded or self.metadata_error:
            lines.append("The metadata table is damaged: run `fed repair TABLE`.")
        if self.missing:
            lines.append(
                "Files the table references are gone: reads that need them fail. Restore them from a "
                f"copy, or roll back the writes that made them ({_rollbacks(n for _, n, _ in self.missing)})."
            )
        if self.damaged:
            lines.append(
                "Files the table references are damaged: restore them from a copy, or roll back the "
                f"writes that made them ({_rollbacks(n for _, n, _ in self.damaged)})."
            )
        lines.append("OK" if self.ok else "FAILED")
        return "\n".join(lines)


def _rollbacks(names: Iterable[str]) -> str:
    """The rollbacks that undo the writes that made some files, newest first (a completed
    write rolls back only once the writes after it have)."""
    names = list(names)
    bases = [n for n in names if BASE_FILE_RE.fullmatch(n)]
    instants = sorted({t for t in map(file_instant, bases) if t is not None}, reverse=True)
    text = ", then ".join(f"`fed rollback TABLE {t}`" for t in instants)
    if len(bases) < len(names):  # a log file's name holds its slice's instant, not its write's
        text += (", and " if text else "") + "for a log file, the delta commit `fed timeline TABLE` shows"
    return text + ", newest first"


def verify_table(
    table: HasHandle, progress: Callable[[int], None] | None = None, *, deep: bool = False
) -> VerifyReport:
    """Compare the metadata table's latest state with storage (see the module docstring);
    ``deep``: read every referenced file and check it against what was recorded of it."""
    table = handle_of(table)
    start = time.monotonic()
    require_metadata_table(table, "verify")
    timeline = table.timeline()
    history = load_history(table, timeline)
    report = VerifyReport(table.name, history.upto, take_inventory(table, progress))
    history.listed_again(table.timeline())
    referenced: dict[tuple[str, str], int] = {}
    recorded: dict[tuple[str, str], str] = {}
    try:
        index = MetadataTable(
            table.fs.table_fs,
            table.path,
            lambda: timeline,
            layout=table.layout,
            folder=table.metadata_folder,
            cache=IndexCache(),
        )
        for partition, files in index.files().items():
            referenced.update(((partition, name), size) for name, size in files.files.items())
            recorded.update(((partition, name), stats) for name, stats in files.stats.items())
    except FedError as exc:
        report.metadata_error = str(exc)
    report.referenced = len(referenced)
    stored = report.inventory.files
    for key, size in sorted(referenced.items()):
        found = stored.get(key)
        if found is None:
            report.missing.append((*key, size))
        elif size and found.size != size:
            report.size_mismatches.append((*key, size, found.size))
    for key, found in sorted(stored.items()):
        if key in referenced:
            continue
        kind = history.judge(*key, writer_instant(table, found))
        if kind == "in flight":
            report.in_flight.append(found)
        elif kind == "unrecorded":
            report.unrecorded.append(found)
        elif kind == "foreign":
            report.foreign.append(found)
        elif report.metadata_error is None:
            report.orphans.append(found)
    if deep:
        present = [(key, size) for key, size in sorted(referenced.items()) if key in stored]
        with ThreadPoolExecutor(_DEEP_THREADS) as pool:
            problems = pool.map(
                lambda item: _damage(table, item[0][0], item[0][1], item[1], recorded.get(item[0])), present
            )
            report.damaged = [(*key, why) for (key, _), why in zip(present, problems, strict=True) if why]
        report.checked = len(present)
    report.seconds = time.monotonic() - start
    return report


def _damage(table: TableHandle, partition: str, name: str, size: int, stats: str | None) -> str | None:
    """What is wrong with a referenced file as read back (None: it is as recorded): a base
    file's footer must decode and hold the recorded rows and column statistics; a log file's
    blocks must decode."""
    path = f"{partition}/{name}" if partition else name
    fs = table.fs
    try:
        if BASE_FILE_RE.fullmatch(name) is None:  # a log file: every block's framing and header
            read_blocks(read_object(fs, path), path)
            return None
        with fs.errors(path), open_sized(fs, path, size) as handle:
            metadata = open_parquet(handle).metadata
    except DataFileCorruptError as exc:
        return f"cannot be read as Parquet: {exc.__cause__}"
    except FedError as exc:
        return str(exc)
    if stats is None:
        return None
    rows, columns = read_file_stats(stats)
    if metadata.num_rows != rows:
        return f"{metadata.num_rows:,} rows, {rows:,} recorded (another file, or rewritten)"
    again = file_stats(metadata, columns.keys())
    if again is None or read_file_stats(again)[1] != columns:
        return "column statistics differ from those recorded (another file, or rewritten)"
    return None


def delete_orphans(table: TableHandle, report: VerifyReport, older_than: timedelta) -> list[str]:
    """Delete the report's orphans last modified more than ``older_than`` ago; their paths.

    Never a file of a write in flight, one the metadata table lost or another table's (none
    is an orphan), nothing when the metadata table could not be read, and nothing through a
    copy of another table (``CopiedTableError``): its files are that table's."""
    check_not_a_copy(table.path, table.config, table.strategy, table.storage_options)
    if report.metadata_error is not None:
        raise RepairError(
            "the metadata table cannot be read, so no file can be called an orphan: repair it first"
        )
    cutoff = time.time() - older_than.total_seconds()
    doomed = [f for f in report.orphans if 0 < f.modified < cutoff]  # no date: never deleted
    by_root: dict[str, list[str]] = {}
    for orphan in doomed:
        root = next(r for r in table.strategy.roots() if orphan.path.startswith(r.rstrip("/") + "/"))
        by_root.setdefault(root, []).append(orphan.path)
    for root, paths in by_root.items():
        remove_files(table.fs.filesystem_for_root(root), paths)
    report.deleted = sorted(p for paths in by_root.values() for p in paths)
    return report.deleted
