"""``fed repair``: rebuild the metadata table from storage and the timeline.

A federated table has no listing fallback: its metadata table is the only list of
its files. When that is deleted, truncated or garbled, the repair tool brings it
back from what survives: the timeline (active and archived) says which files each
completed write made and which cleans and rollbacks removed
(``fedcore.services.history``); a listing of every prefix under the strategy's roots says
which of those are in storage, and their sizes (``fedcore.services.inventory``).

What goes into the rebuilt state: every file a completed, not rolled-back write
recorded and no completed clean deleted, with the file groups replace commits
retired. Files in storage that no completed write recorded (a failed attempt's, a
rolled-back write's) stay out and are reported as orphans; files of writes still
in flight stay out too, and arrive with those writes' own deltas if they complete;
files of another table (``History.judge``: in a folder two tables share, or a copied
table's source's) stay out and are reported apart: never adopted.

Files the timeline records but storage lacks are never silently dropped: a read
would then quietly return an older version of their records. If one of them is
the newest slice of its file group the table has lost data, and repair refuses
unless told ``allow_missing`` (then they stay recorded, so a read that needs them
fails with ``DataFileMissingError`` rather than going back in time). Missing older
slices (an interrupted clean) are recorded and reported; the next clean drops them.

Switching over (``MetadataTable.rebuild``): the state is written as the compaction
manifest of the newest completed instant, created or replaced atomically, so a
reader sees the old metadata table or the new one, never a mix. Writes that
complete while a repair runs are included: an instant pending at the listing stays
excluded from the rebuilt state and its delta applies once it completes, as after
a compaction, and so do the deltas of instants begun later. A compaction that
completes during the repair (it would have built on the old state) makes the
repair fail after the switch, telling to run it again, which then supersedes it.

Time travel to instants before the repair reads the old metadata table's deltas
and manifests where they survive; where they do not, it fails with
``MetadataTableError``, never with a wrong answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from fedcore.exceptions import FedError, RepairError
from fedcore.handle import HasHandle, handle_of
from fedcore.metadata.file_index import PartitionFiles
from fedcore.metadata.rebuild import rebuild
from fedcore.metadata.table import IndexCache, MetadataTable
from fedcore.services.history import History, load_history, require_metadata_table
from fedcore.services.inventory import Inventory, StoredFile, take_inventory, writer_instant
from fedcore.steps import observers_now, reached

if TYPE_CHECKING:
    from fedcore.handle import TableHandle
    from fedcore.timeline import Timeline

#: Names shown per kind of problem in a report's text (all are in the report itself).
SHOWN: Final = 10


@dataclass
class RepairReport:
    table: str
    #: The instant the rebuilt state is as of (None: the table has no completed instant).
    instant: str | None
    dry_run: bool
    inventory: Inventory
    #: partition -> file name -> size: the rebuilt state.
    state: dict[str, dict[str, int]] = field(default_factory=dict)
    orphans: list[StoredFile] = field(default_factory=list)
    #: Files of instants still pending (or begun after the listing): left to their writers.
    in_flight: list[StoredFile] = field(default_factory=list)
    #: Files in the table's folders that are another table's (``History.judge``): left alone.
    foreign: list[StoredFile] = field(default_factory=list)
    #: (partition, name) of newest slices the timeline records and storage lacks.
    missing_latest: list[tuple[str, str]] = field(default_factory=list)
    #: (partition, name) of older slices the timeline records and storage lacks.
    missing_older: list[tuple[str, str]] = field(default_factory=list)
    #: (partition, name, recorded size, size in storage)
    size_mismatches: list[tuple[str, str, int, int]] = field(default_factory=list)
    #: Compared with the metadata table as it was (None when it could not be read).
    added: list[tuple[str, str]] | None = None
    dropped: list[tuple[str, str]] | None = None
    old_error: str | None = None
    seconds: float = 0.0

    @property
    def files(self) -> int:
        return sum(len(files) for files in self.state.values())

    def format(self) -> str:
        verb = "Would rebuild" if self.dry_run else "Rebuilt"
        if self.instant is None:
            return f"Table {self.table} has no completed instant: its metadata table is empty, nothing to do."
        inv = self.inventory
        lines = [
            f"{verb} the metadata table of {self.table} as of instant {self.instant}: "
            f"{self.files:,} files in {len(self.state):,} partitions.",
            f"Listed {len(inv.files):,} data files over {inv.folders:,} folders in {inv.seconds:.1f} s "
            f"({inv.files_per_second:,.0f} files/s); {inv.foreign:,} other objects passed by.",
        ]
        if self.old_error is not None:
            lines.append(f"The metadata table as it was could not be read: {self.old_error}")
        elif self.added is not None and self.dropped is not None:
            lines.append(
                "Compared with the metadata table as it was: "
                + (
                    "the same files."
                    if not self.added and not self.dropped
                    else f"{len(self.added):,} files added, {len(self.dropped):,} dropped."
                )
            )
            lines += _shown("added", [f"{p}/{n}" for p, n in self.added])
            lines += _shown("dropped", [f"{p}/{n}" for p, n in self.dropped])
        if self.in_flight:
            lines.append(f"Left to writes in flight: {_files(len(self.in_flight))}.")
        if self.foreign:
            lines.append(
                f"Left alone: {_files(len(self.foreign))} of another table (their instants or file "
                "groups are none of this table's writes)."
            )
            lines += _shown("foreign", [f.path for f in self.foreign])
        if self.orphans:
            lines.append(
                f"Left alone: {_files(len(self.orphans))} no completed write recorded (orphans: "
                "`fed verify --delete-orphans` removes them)."
            )
            lines += _shown("orphan", [o.path for o in self.orphans])
        if self.missing_older:
            lines.append(
                f"Warning: {len(self.missing_older):,} superseded files the timeline records are not in "
                "storage (an interrupted clean?): they stay recorded, time travel to them fails, and "
                "the next clean drops them."
            )
            lines += _shown("missing", [f"{p}/{n}" for p, n in self.missing_older])
        if self.missing_latest:
            lines.append(
                f"Warning: {len(self.missing_latest):,} files holding the newest version of their file "
                "group are not in storage: they stay recorded, and reads that need them fail."
            )
            lines += _shown("missing", [f"{p}/{n}" for p, n in self.missing_latest])
        if self.size_mismatches:
            lines.append(
                f"Warning: {len(self.size_mismatches):,} files differ in size from what their write "
                "recorded; the sizes in storage were kept."
            )
            lines += _shown(
                "size", [f"{p}/{n}: {a:,} recorded, {b:,} stored" for p, n, a, b in self.size_mismatches]
            )
        lines.append(
            f"Done in {self.seconds:.1f} s." if not self.dry_run else "Dry run: nothing was written."
        )
        return "\n".join(lines)


def _files(count: int) -> str:
    return f"{count:,} file" if count == 1 else f"{count:,} files"


def _shown(kind: str, items: list[str]) -> list[str]:
    out = [f"  {kind}: {item}" for item in items[:SHOWN]]
    if len(items) > SHOWN:
        out.append(f"  ... and {len(items) - SHOWN:,} more")
    return out


def repair_metadata(
    table: HasHandle,
    *,
    dry_run: bool = False,
    allow_missing: bool = False,
    progress: Callable[[int], None] | None = None,
) -> RepairReport:
    """Rebuild ``table``'s metadata table from storage (see the module docstring).

    ``dry_run``: report what would be written, write nothing. ``allow_missing``: rebuild
    even when files holding the newest version of their file group are missing from
    storage. ``progress`` gets the count of objects each listed folder added. Steps
    (``fedcore.steps``): "listed", "rebuilt" and "switched"."""
    table = handle_of(table)
    start = time.monotonic()
    require_metadata_table(table, "repair")
    timeline = table.timeline()
    history = load_history(table, timeline)
    inventory = take_inventory(table, progress)
    history.listed_again(table.timeline())
    reached("listed")
    report = RepairReport(table.name, history.upto, dry_run, inventory)
    if history.upto is None:
        report.seconds = time.monotonic() - start
        return report
    state = _rebuilt_state(table, history, inventory, report)
    _compare_with_old(table, timeline, report)
    if report.missing_latest and not allow_missing:
        raise RepairError(
            f"{len(report.missing_latest):,} files holding the newest version of their file group are "
            f"missing from storage (e.g. {'/'.join(report.missing_latest[0])}): the table has lost data. "
            + (
                f"{len(history.pending)} instants are pending: let their writers finish or roll them "
                "back first. "
                if history.pending
                else ""
            )
            + "Restore the files, or rebuild anyway with --allow-missing (they stay recorded, so reads "
            "that need them fail instead of returning older versions)"
        )
    if not dry_run:
        index = MetadataTable(
            table.fs.table_fs,
            table.path,
            lambda: timeline,
            layout=table.layout,
            folder=table.metadata_folder,
            cache=IndexCache(),
        )
        rebuild(
            index,
            history.upto,
            state,
            history.pending,
            history.schema,
            observers_now(),
            folded=[i.time for i in timeline.completed()],
            listed_from=timeline.instants[0].time if timeline.instants else None,
        )
        newer = [t for t in index.manifest_times() if t > history.upto]
        if newer:
            raise RepairError(
                f"a metadata-table compaction up to {newer[-1]} completed while the repair ran and was "
                "built on the old metadata table: run the repair again"
            )
    report.seconds = time.monotonic() - start
    return report


def _rebuilt_state(
    table: TableHandle, history: History, inventory: Inventory, report: RepairReport
) -> dict[str, PartitionFiles]:
    state: dict[str, PartitionFiles] = {}
    latest = history.latest_slices(table.layout.log_files, table.log_slicing(history.timeline))
    for key, recorded in sorted(history.files.items()):
        partition, name = key
        stored = inventory.files.get(key)
        size = recorded
        if stored is None:
            (report.missing_latest if key in latest else report.missing_older).append(key)
        else:
            size = stored.size
            if recorded and recorded != stored.size:
                report.size_mismatches.append((partition, name, recorded, stored.size))
        state.setdefault(partition, PartitionFiles(replaced=dict(history.replaced.get(partition, {}))))
        state[partition].files[name] = size
        if key in history.stats:
            state[partition].stats[name] = history.stats[key]
    for key, stored in sorted(inventory.files.items()):
        if key in history.files:
            continue
        kind = history.judge(*key, writer_instant(table, stored))
        if kind == "in flight":
            report.in_flight.append(stored)
        elif kind == "foreign":
            report.foreign.append(stored)
        else:
            report.orphans.append(stored)
    report.state = {p: dict(files.files) for p, files in state.items()}
    return state


def _compare_with_old(table: TableHandle, timeline: Timeline, report: RepairReport) -> None:
    old = MetadataTable(
        table.fs.table_fs,
        table.path,
        lambda: timeline,
        layout=table.layout,
        folder=table.metadata_folder,
        cache=IndexCache(),
    )
    try:
        files = old.files()
    except FedError as exc:
        report.old_error = str(exc)
        return
    before = {(p, n) for p, f in files.items() for n in f.files}
    after = {(p, n) for p, names in report.state.items() for n in names}
    report.added = sorted(after - before)
    report.dropped = sorted(before - after)
