"""Clean: delete file slices no query of a retained instant can need (Hudi's KEEP_LATEST_COMMITS).

With N commits retained, a snapshot as of any of the latest N write instants
must stay readable; that needs, per file group, every slice written at or after
the earliest retained instant plus the one slice visible at that instant. Older
slices, and file groups a replace commit retired before it, are deleted through
the storage strategy (wherever they live) and the deletions go into the
metadata table with the clean instant. Files are found through the metadata
table, never by listing.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from fedcore.commit_metadata import clean_metadata
from fedcore.filenames import BASE_FILE_RE
from fedcore.metadata.table import DELETE, Op
from fedcore.timeline import CLEAN, WRITE_ACTIONS
from fedcore.transaction import Transaction, roll_back_failed_writes

if TYPE_CHECKING:
    from fedcore.table import Table


def plan_clean(table: Table, retained: int) -> tuple[str | None, dict[str, dict[str, int]]]:
    """``(earliest retained instant, partition -> {file name: size} to delete)``."""
    writes = table.timeline().completed(WRITE_ACTIONS)
    if retained < 1 or len(writes) <= retained:
        return None, {}
    earliest = writes[-retained].time
    doomed: dict[str, dict[str, int]] = {}
    for partition, files in table.file_index.files().items():
        groups: dict[str, list[tuple[str, str]]] = {}
        for name in files.files:
            match = BASE_FILE_RE.fullmatch(name)
            if match is not None:
                groups.setdefault(match[1], []).append((match[3], name))
        for file_id, slices in groups.items():
            slices.sort()
            replaced_at = files.replaced.get(file_id)
            if replaced_at is not None and replaced_at < earliest:
                delete = slices
            else:
                older = [s for s in slices if s[0] < earliest]
                delete = older[:-1]  # the newest older slice is what the earliest instant sees
            for _, name in delete:
                doomed.setdefault(partition, {})[name] = files.files[name]
    return earliest, doomed


def clean(table: Table, retained: int, *, recover: bool = True) -> str | None:
    """Run a clean; the clean instant's time, or None when nothing was old enough to delete.

    ``recover=False`` skips rolling back failed writes first, for a writer that just did."""
    if recover:
        roll_back_failed_writes(table)
    earliest, doomed = plan_clean(table, retained)
    if not doomed:
        return None
    start = time.monotonic()
    transaction = Transaction(table, CLEAN)
    transaction.begin()
    transaction.inflight(b"")
    for partition, names in doomed.items():
        for name in names:
            path = f"{partition}/{name}" if partition else name
            # Already gone if an earlier clean died before completing.
            with contextlib.suppress(FileNotFoundError):
                table.fs.rm_file(path)
    body = clean_metadata(
        start=transaction.time,
        earliest_retained=earliest,
        deleted={p: list(names) for p, names in doomed.items()},
        took_ms=int((time.monotonic() - start) * 1000),
    )
    ops = [Op(p, name, size, DELETE) for p, names in doomed.items() for name, size in names.items()]
    return transaction.commit(body, ops)
