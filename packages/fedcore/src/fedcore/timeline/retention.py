"""What a table can no longer show: instants archival moved out, versions a clean deleted.

One low module answers these questions for everyone above: the reader (may this
time travel go ahead?), the metadata table (does a view as of T still exist?), the
cleaner (where did the previous clean stop?) and archival (what must it keep?).
Each answer comes from the timeline the caller already listed, plus at most one
small read, never from the commit protocol or the table services themselves.
"""

from __future__ import annotations

from typing import Final

from fsspec import AbstractFileSystem

from fedcore.exceptions import InstantNotRetainedError
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import read_object
from fedcore.io.parquet import read_parquet
from fedcore.timeline import CLEAN, COMPLETED, Instant, InstantNaming, Timeline
from fedcore.timeline.archived import archive_folder, hudi_archive_files, read_hudi_archive
from fedcore.timeline.commit_metadata import earliest_retained
from fedcore.timeline.lsm import history_snapshot, read_history

#: Archive files are ``fed-archive-<boundary instant>-<newest archived instant>.parquet``
#: (``fed-archive-<boundary instant>.parquet`` before fed named the newest): Hudi's own
#: archived-timeline reader passes them by.
ARCHIVE_PREFIX: Final = "fed-archive-"


def archived_through(
    fs: AbstractFileSystem, table_path: str, naming: InstantNaming | None = None
) -> str | None:
    """The newest instant archival took off the active timeline, if any: fed's archive's
    boundary, or given the table's ``naming`` and of a table version with Hudi 1.x's archived
    timeline, the newest instant there (fed's archival of such tables, or a Hudi 1.x writer's)."""
    history = naming.history_folder(table_path) if naming is not None else None
    newest = history_snapshot(fs, history).newest if history is not None else None
    try:
        with storage_errors(archive_folder(table_path)):
            names = fs.ls(archive_folder(table_path), detail=False, refresh=True)
    except FileNotFoundError:
        return newest
    times = [
        name[len(ARCHIVE_PREFIX) :][:17]
        for name in (n.rsplit("/", 1)[-1] for n in names)
        if name.startswith(ARCHIVE_PREFIX)
    ]
    return max([*times, *([newest] if newest else [])], default=None)


def archived_file(
    fs: AbstractFileSystem, table_path: str, naming: InstantNaming, instant: Instant
) -> bytes | None:
    """A completed instant's timeline file as archival kept it: Hudi 1.x's archived timeline
    (where fed's archival of such a table version moves it), fed's archive, else Apache Hudi
    0.x's archived timeline; None when none holds it.

    For a caller whose listing showed the instant active and whose read then found it gone:
    another process's archival moved it out in between, and the file's content never
    changes. Reads only archive files that can hold the instant (named after a newer one)."""
    history = naming.history_folder(table_path)
    if history is not None:
        rows = read_history(fs, history, ["instantTime", "action", "metadata"], covering=instant.time)
        for time, action, metadata in zip(
            *(rows.column(c).to_pylist() for c in rows.column_names), strict=True
        ):
            # Rows name the action an instant completed as (a compaction's is a commit).
            if naming.parse(naming.file_name(instant, COMPLETED)) == Instant(time, action, COMPLETED):
                return metadata or b""
    folder = archive_folder(table_path)
    try:
        with storage_errors(folder):
            names = sorted(n.rsplit("/", 1)[-1] for n in fs.ls(folder, detail=False, refresh=True))
    except FileNotFoundError:
        return None
    wanted = naming.file_name(instant)
    for name in names:
        # fed-archive-<boundary>[-<newest>].parquet: every instant in it is at most the last.
        if not name.startswith(ARCHIVE_PREFIX) or name.removesuffix(".parquet")[-17:] < instant.time:
            continue
        archived = read_parquet(read_object(fs, f"{folder}/{name}"))
        files = archived.column("file").to_pylist()
        if wanted in files:
            content: bytes = archived.column("content")[files.index(wanted)].as_py()
            return content
    hudi = hudi_archive_files(fs, table_path, None)  # Hudi 1.x's history: read above
    for entry in read_hudi_archive(fs, sorted(hudi)) if hudi else ():
        if entry.time == instant.time and entry.action == instant.action:
            return entry.body
    return None


def check_not_archived(fs: AbstractFileSystem, table_path: str, naming: InstantNaming, as_of: str) -> None:
    boundary = archived_through(fs, table_path, naming)
    if boundary is not None and as_of <= boundary:
        raise InstantNotRetainedError(
            f"instant {as_of} was archived (the active timeline starts after {boundary})"
        )


def clean_retained(
    fs: AbstractFileSystem, table_path: str, naming: InstantNaming, clean: Instant
) -> str | None:
    """The earliest commit a completed clean kept the files of."""
    try:
        data = read_object(fs, naming.path(table_path, clean))
    except FileNotFoundError:  # another process's archival moved it out since the listing
        found = archived_file(fs, table_path, naming, clean)
        if found is None:
            raise
        data = found
    return earliest_retained(data)


def last_clean_retained(
    fs: AbstractFileSystem, table_path: str, naming: InstantNaming, timeline: Timeline
) -> str | None:
    """Where the latest clean left off: the earliest instant it retained."""
    cleans = timeline.completed([CLEAN])
    return clean_retained(fs, table_path, naming, cleans[-1]) if cleans else None


def check_not_cleaned(
    fs: AbstractFileSystem, table_path: str, naming: InstantNaming, timeline: Timeline, as_of: str
) -> None:
    """Raise InstantNotRetainedError if a clean after ``as_of`` deleted what it saw."""
    for clean in timeline.completed([CLEAN]):
        if clean.time <= as_of:
            continue
        retained = clean_retained(fs, table_path, naming, clean)
        if retained and as_of < retained:
            raise InstantNotRetainedError(
                f"the files of instant {as_of} were cleaned at {clean.time} "
                f"(it kept commits from {retained} on)"
            )
