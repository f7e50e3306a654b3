"""Archival: keep the active timeline short, so what every read and write lists stays small.

Each read and each commit lists ``.hoodie/``; without archival that listing grows
with every instant ever made, and so would the cost of a commit. Like Hudi, once
more than ``hoodie.keep.max.commits`` instants have completed, the oldest are
moved out until ``hoodie.keep.min.commits`` remain: of a table of version 8 or 9,
into Hudi 1.x's archived timeline (``.hoodie/timeline/history/``, ``fedcore.timeline.lsm``),
where Hudi's readers and writers find them as their own archival's; of version 6, into
``.hoodie/archived/`` (one zstd Parquet file per archival, named so Hudi's own
archived-timeline reader passes it by).

What may go: only instants the metadata table no longer needs. The boundary is
a compaction manifest, so the state of the table at the boundary is in the
sharded base and no view from the boundary on needs an archived instant's delta;
never an instant a pending write or the last clean's retained commits could
still need; never the latest write (it gives the table its schema). Time travel
to an instant at or before the boundary raises ``InstantNotRetainedError``.

Crash safety: the archive file is written (exclusively) before anything is
deleted, and an instant's requested and inflight files go before its completed
file, so a crash leaves every instant completed or archived, never looking like
a failed write that a rollback would undo.

Readers: before any instant goes, ``.hoodie/fed-archived-<boundary>`` says how far
archival goes, in the listing every read makes anyway; a long-lived handle whose cached
metadata-table manifest is older starts from a newer one (the archived instants are in
no delta its view would apply).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fedcore import properties as P
from fedcore.exceptions import ConfigError
from fedcore.io.atomic import create_exclusive
from fedcore.io.filesystems import read_object, read_objects, remove_files
from fedcore.io.parquet import read_parquet
from fedcore.metadata.cleanup import drop_older_than
from fedcore.steps import reached
from fedcore.timeline import (
    ARCHIVED_MARKER_PREFIX,
    COMPLETED,
    SAVEPOINT,
    Instant,
    InstantNaming,
    Timeline,
)
from fedcore.timeline.archived import archive_folder
from fedcore.timeline.lsm import append_history, history_rows, read_history
from fedcore.timeline.retention import ARCHIVE_PREFIX, last_clean_retained

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

_SCHEMA = pa.schema(
    [
        pa.field("instant", pa.string(), nullable=False),
        pa.field("action", pa.string(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
        pa.field("content", pa.binary(), nullable=False),
    ]
)


def archive(
    table: TableHandle,
    options: Mapping[str, str] | None = None,
    *,
    timeline: Timeline | None = None,
) -> list[str]:
    """Archive what the keep settings allow; the instant times archived, oldest first.

    ``timeline``: one the caller has just listed. Steps (``fedcore.steps``): "written" once
    the archive file exists, "pending-states" once the archived instants' requested and
    inflight files are gone, "moved" once their completed files are too (before the
    metadata table's older files go)."""
    index = table.metadata_table_or_none()
    if index is None:
        return []  # a listing index tells committed files apart by the active timeline
    options = table.options if options is None else options
    keep_min, keep_max = P.ARCHIVE_MIN_INSTANTS.of(options), P.ARCHIVE_MAX_INSTANTS.of(options)
    if not 0 < keep_min < keep_max:
        raise ConfigError(
            P.ARCHIVE_MIN_INSTANTS,
            f"{keep_min} must be positive and below {P.ARCHIVE_MAX_INSTANTS} ({keep_max})",
        )
    timeline = table.timeline() if timeline is None else timeline
    completed = timeline.completed()
    if len(completed) <= keep_max:
        return []
    bound = _bound(table, timeline, completed[-keep_min].time)
    manifests = [t for t in index.manifest_times() if t < bound]
    if not manifests:
        return []
    boundary = index.manifest(manifests[-1])
    # An instant the manifest lacks (pending when it was made, or completed since with an
    # older time) stays, and so does every instant after it: archiving a later write while
    # an earlier one stays active would leave a gap Hudi's readers take for an uncommitted
    # write (they count an instant as committed when it is active or older than the active
    # timeline's first instant).
    floor = min(
        (i.time for i in timeline.instants if i.time <= boundary.instant and boundary.lacks(i.time)),
        default=None,
    )
    doomed = [i for i in completed if i.time <= boundary.instant and (floor is None or i.time < floor)]
    if not doomed:
        return []
    files = _instant_files(table, {i.time for i in doomed})
    try:
        contents = read_objects(table.fs.table_fs, files)
    except FileNotFoundError:
        return []  # another writer's archival is moving these instants out right now
    _write_archive(table, boundary.instant, doomed[-1].time, files, contents)
    _mark_archived(table, timeline, boundary.instant)
    reached("written")
    completed_names = {table.layout.instants.file_name(i) for i in doomed}
    _remove(table, [path for path in files if path.rsplit("/", 1)[-1] not in completed_names])
    reached("pending-states")
    _remove(table, [path for path in files if path.rsplit("/", 1)[-1] in completed_names])
    reached("moved")
    drop_older_than(index, boundary)
    return [i.time for i in doomed]


def _bound(table: TableHandle, timeline: Timeline, keep_from: str) -> str:
    """Archival stops before this instant."""
    bounds = [keep_from]
    pending = timeline.pending()
    if pending:
        bounds.append(pending[0].time)
    writes = timeline.completed(table.write_actions)
    if writes:
        bounds.append(writes[-1].time)
    retained = last_clean_retained(table.fs.table_fs, table.path, table.layout.instants, timeline)
    if retained:
        bounds.append(retained)
    # Hudi's archival stops at the oldest savepoint (``hoodie.archive.beyond.savepoint`` off):
    # a restore to it needs the instants after it on the active timeline.
    savepoints = timeline.completed([SAVEPOINT])
    if savepoints:
        bounds.append(savepoints[0].time)
    oldest_log = _oldest_live_log(table, timeline)
    if oldest_log is not None:
        bounds.append(oldest_log)
    return min(bounds)


def _oldest_live_log(table: TableHandle, timeline: Timeline) -> str | None:
    """Of a table whose log files are named after their delta commits (Hudi 1.x), the oldest
    delta commit a live file group still has a log file of. Such a file is placed in its slice
    by its commit's completion time, which readers look up in the active timeline, and of an
    archived instant in Hudi's timeline history, which fed's archive is not: a file of an
    instant archived here would be taken for one of unknown completion, onto the group's latest
    slice (whose base file, once a compaction folded it in, already holds its records, and would
    then be overwritten by them). So no delta commit is archived while a file of it is live;
    the cleaner deletes them once a compaction's slice and the retained writes no longer need
    them. None: nothing holds archival back."""
    naming = table.layout.log_files
    if not (table.config.merge_on_read and naming.names_delta_commit):
        return None
    return min(
        (
            log.instant
            for files in table.file_index_at(timeline).files(None).values()
            for group in files.groups(naming).values()
            for log in group.logs
        ),
        default=None,
    )


def _mark_archived(table: TableHandle, timeline: Timeline, boundary: str) -> None:
    """Say in the timeline's listing, before any instant goes, that those up to ``boundary``
    are leaving: a long-lived handle's cached metadata-table view from before it lacks
    them (``Timeline.archived_through``). Older markers go: the newest one says it all."""
    folder = table.layout.instants.pointer_folder(table.path)
    with contextlib.suppress(FileExistsError):  # a crashed archival's retry
        create_exclusive(table.fs.table_fs, f"{folder}/{ARCHIVED_MARKER_PREFIX}{boundary}", b"")
    older = timeline.archived_through
    if older is not None and older < boundary:
        _remove(table, [f"{folder}/{ARCHIVED_MARKER_PREFIX}{older}"])


def _instant_files(table: TableHandle, times: set[str]) -> list[str]:
    """Every timeline file (all states) of the given instants, oldest first."""
    naming = table.layout.instants
    folder = naming.folder(table.path)
    names = sorted(
        entry.rsplit("/", 1)[-1] for entry in table.fs.table_fs.ls(folder, detail=False, refresh=True)
    )
    return [f"{folder}/{name}" for name in names if name[:17] in times and naming.parse(name) is not None]


def _remove(table: TableHandle, paths: list[str]) -> None:
    remove_files(table.fs.table_fs, paths)


def _write_archive(
    table: TableHandle, boundary: str, newest: str, files: list[str], contents: list[bytes]
) -> None:
    """Write the archived instants' files where the table version keeps them: Hudi 1.x's
    archived timeline, else an archive file of the instants up to ``newest`` that
    ``boundary`` lets go (named after both, since two archivals may share a boundary: the
    second moves out what a pending instant held back the first time)."""
    naming = table.layout.instants
    instants: list[Instant] = [naming.parse(path.rsplit("/", 1)[-1]) for path in files]  # type: ignore[misc]
    history = naming.history_folder(table.path)
    if history is not None:
        append_history(table.fs.table_fs, history, history_rows(instants, contents))
        return
    rows = pa.table(
        {
            "instant": [i.time for i in instants],
            "action": [i.action for i in instants],
            "file": [path.rsplit("/", 1)[-1] for path in files],
            "content": contents,
        },
        schema=_SCHEMA,
    )
    sink = io.BytesIO()
    pq.write_table(rows, sink, compression="zstd")
    path = f"{archive_folder(table.path)}/{ARCHIVE_PREFIX}{boundary}-{newest}.parquet"
    # Exists when an earlier archival of the same instants died before its deletions: finish them.
    with contextlib.suppress(FileExistsError):
        create_exclusive(table.fs.table_fs, path, sink.getvalue())


def read_archive(table: TableHandle) -> pa.Table:
    """Every archived timeline file: instant, action, file name, content. Of Hudi 1.x's
    archived timeline (tables of version 8 and 9), each instant's completed file."""
    parts = []
    naming = table.layout.instants
    history = naming.history_folder(table.path)
    if history is not None:
        parts.append(_completed_files(naming, read_history(table.fs.table_fs, history)))
    folder = archive_folder(table.path)
    try:
        names = sorted(table.fs.table_fs.ls(folder, detail=False, refresh=True))
    except FileNotFoundError:
        names = []
    parts += [read_parquet(read_object(table.fs.table_fs, n)) for n in names if ARCHIVE_PREFIX in n]
    return pa.concat_tables(parts) if parts else _SCHEMA.empty_table()


def _completed_files(naming: InstantNaming, rows: pa.Table) -> pa.Table:
    times, completions, actions = (
        rows.column(c).to_pylist() for c in ("instantTime", "completionTime", "action")
    )
    return pa.table(
        {
            "instant": times,
            "action": actions,
            "file": [
                naming.file_name(Instant(t, a, COMPLETED, completion_time=c))
                for t, a, c in zip(times, actions, completions, strict=True)
            ],
            "content": pc.fill_null(rows.column("metadata"), b""),
        },
        schema=_SCHEMA,
    )
