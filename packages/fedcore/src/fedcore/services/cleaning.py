"""Clean: delete file slices no query of a retained instant can need (Hudi's KEEP_LATEST_COMMITS).

With N commits retained, a snapshot as of any of the latest N write instants
must stay readable; that needs, per file group, every slice written at or after
the earliest retained instant plus the one slice visible at that instant. Older
slices, and file groups a replace commit retired before it, are deleted through
the storage strategy (wherever they live) and the deletions go into the
metadata table with the clean instant. Files are found through the metadata
table, never by listing.

Cleaning is incremental, as Hudi's is by default: a slice only becomes
deletable when its file group is written again (or replaced) by an instant
that falls out of retention, so a clean looks only at the partitions written by
the instants between the previous clean's earliest retained instant and its
own. That keeps the clean a writer runs after each commit flat in the size of
the table; only the first clean of a table looks at every partition. A clean
with nothing to delete is still recorded when its look was costly (a full look,
or a window of many instants), so the next one starts from there. Files a savepoint on the
timeline keeps are never deleted, as Hudi's cleaner keeps them.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fedcore.commit.pending import refuse_beside_services
from fedcore.commit.transaction import Transaction, roll_back_failed_writes
from fedcore.files.file_group import LogSlicing, file_groups
from fedcore.files.filenames import LogFileNaming
from fedcore.io.filesystems import read_objects
from fedcore.metadata.operations import removal_ops
from fedcore.timeline import CLEAN, SAVEPOINT, Timeline
from fedcore.timeline.commit_metadata import savepointed_files
from fedcore.timeline.retention import last_clean_retained

if TYPE_CHECKING:
    from fedcore.handle import TableHandle
    from fedcore.metadata.file_index import PartitionFiles

#: Record a clean that deletes nothing once its window holds this many write instants.
EMPTY_CLEAN_WINDOW = 10


@dataclass
class CleanPlan:
    earliest_retained: str
    #: partition -> {file name: size} to delete
    doomed: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Partitions looked at; None for all of them (the first clean of a table).
    partitions: set[str] | None = None
    #: Write instants whose partitions were looked at.
    window: int = 0

    @property
    def worth_recording(self) -> bool:
        return bool(self.doomed) or self.partitions is None or self.window >= EMPTY_CLEAN_WINDOW


def plan_clean(table: TableHandle, retained: int, timeline: Timeline | None = None) -> CleanPlan | None:
    """What a clean keeping the latest ``retained`` writes would delete; None when nothing fell out."""
    timeline = table.timeline() if timeline is None else timeline
    writes = timeline.completed(table.write_actions)
    if retained < 1 or len(writes) <= retained:
        return None
    earliest = writes[-retained].time
    since = last_clean_retained(table.fs.table_fs, table.path, table.layout.instants, timeline)
    if since is not None and since >= earliest:
        return None
    plan = CleanPlan(earliest)
    if since is not None:
        window = [w for w in writes if since <= w.time < earliest]
        plan.window = len(window)
        plan.partitions = set()
        for instant in window:
            metadata = table.commit_metadata(instant)
            plan.partitions.update(s.partition_path for s in metadata.stats)
            plan.partitions.update(metadata.replaced)
        if not plan.partitions:
            return plan
    kept = _savepointed(table, timeline)
    slicing = table.log_slicing(timeline)
    for partition, files in table.file_index_at(timeline).files(plan.partitions).items():
        doomed = _doomed(files, earliest, table.layout.log_files, slicing)
        for name in kept.get(partition, ()):
            doomed.pop(name, None)
        if doomed:
            plan.doomed[partition] = doomed
    return plan


def _savepointed(table: TableHandle, timeline: Timeline) -> dict[str, set[str]]:
    """partition -> files a savepoint on the timeline keeps: as Hudi's cleaner does, a clean
    never deletes them (a restore to the savepoint needs them)."""
    savepoints = timeline.completed([SAVEPOINT])
    kept: dict[str, set[str]] = {}
    bodies = read_objects(table.fs.table_fs, [table.layout.instants.path(table.path, i) for i in savepoints])
    for data in bodies:
        for partition, names in savepointed_files(data).items():
            kept.setdefault(partition, set()).update(names)
    return kept


def _doomed(
    files: PartitionFiles, earliest: str, log_files: LogFileNaming, slicing: LogSlicing | None
) -> dict[str, int]:
    """The files of the slices no retained instant needs (``fedcore.files.file_group``;
    ``slicing``: what places a Hudi 1.x log file in its slice)."""
    doomed: dict[str, int] = {}
    for file_id, group in file_groups(files.files, log_files, slicing).items():
        starts = group.starts()
        replaced_at = files.replaced.get(file_id)
        if replaced_at is not None and replaced_at < earliest:
            delete = starts
        else:
            older = [start for start in starts if start < earliest]
            delete = older[:-1]  # the newest older slice is what the earliest instant sees
        for start in delete:
            for name in group.slice_names(start):
                doomed[name] = files.files[name]
    return doomed


@dataclass(frozen=True)
class CleanResult:
    """What a clean did, as ``fed clean`` reports it (without reading the clean instant back)."""

    #: The clean instant's time; None when nothing was old enough to delete.
    instant: str | None
    #: The latest writes the clean kept every file version of.
    retained: int
    files_deleted: int = 0
    #: The earliest write kept (the clean's ``earliestCommitToRetain``); None when no clean ran.
    earliest_retained: str | None = None


def clean(
    table: TableHandle, retained: int, *, recover: bool = True, timeline: Timeline | None = None
) -> CleanResult:
    """Run a clean keeping the latest ``retained`` writes; its ``instant`` is None when
    nothing was old enough to delete.

    ``recover=False`` skips rolling back failed writes first, for a writer that just did;
    ``timeline``, when the caller has just listed it, saves listing it again."""
    if recover and roll_back_failed_writes(table, timeline):
        timeline = None  # the rollbacks changed it
    timeline = table.timeline() if timeline is None else timeline
    refuse_beside_services(table, timeline, "the clean")
    plan = plan_clean(table, retained, timeline)
    if plan is None or not plan.worth_recording:
        return CleanResult(None, retained)
    doomed = plan.doomed
    start = time.monotonic()
    with Transaction(table, CLEAN) as transaction:
        transaction.inflight(b"")
        for partition, names in doomed.items():
            for name in names:
                path = f"{partition}/{name}" if partition else name
                # Already gone if an earlier clean died before completing.
                with contextlib.suppress(FileNotFoundError):
                    table.fs.rm_file(path)
        body = table.layout.services.clean(
            start=transaction.time,
            earliest_retained=plan.earliest_retained,
            deleted={p: list(names) for p, names in doomed.items()},
            took_ms=int((time.monotonic() - start) * 1000),
        )
        ops = removal_ops(doomed, sizes=doomed)
        instant = transaction.commit(body, ops)
    return CleanResult(instant, retained, len(ops), plan.earliest_retained)
