"""The file changes of an instant that wrote no metadata-table delta, from its own metadata.

Every fedcore writer records its instant's delta before the instant completes. Another
writer of the same table does not: Apache Hudi's own writers on a Hive-layout table fed
created (a job not yet moved to fed), or a fedcore of layout 1 that wrote its delta into
the folder the table has since moved out of. Such an instant's changes are read back from
what Hudi's timeline holds for it, as Hudi's own readers would: a write's stats (files
added, with their sizes), a replace commit's retired file groups, a clean's and a
rollback's deleted files.

What cannot be caught up exactly is refused, naming the instant: a rollback that appended
rollback blocks to log files (their recorded sizes would be stale) or that undid a replace
commit whose changes the view already holds (the file groups it retired are known only to
that commit's metadata, which the rollback deleted). A rollback of a write the view never
took in (it failed, or it completed and was undone before fed saw it) only deletes files
the view does not hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fedcore.exceptions import MetadataTableError
from fedcore.metadata.format import Op
from fedcore.metadata.operations import commit_ops, removal_ops
from fedcore.timeline import CLEAN, DELTA_COMMIT, REPLACE_COMMIT, ROLLBACK, WRITE_ACTIONS
from fedcore.timeline.commit_codec import CommitCodec
from fedcore.timeline.commit_metadata import (
    appended_log_files,
    deleted_files,
    rolled_back_actions,
    rolled_back_instants,
)


def instant_ops(
    time: str,
    action: str,
    data: bytes,
    table: str,
    codec: CommitCodec,
    held: Callable[[str], bool] = lambda _: True,
) -> list[Op]:
    """The metadata-table ops of completed instant ``time`` (``action``), from the content of
    its completed timeline file (a write's decoded by the table version's ``codec``).
    ``held``: whether the view's state already holds an instant's changes (a rollback undoes
    only those). Raises ``MetadataTableError`` naming the instant when they cannot be known
    exactly."""
    try:
        if action in WRITE_ACTIONS | {DELTA_COMMIT}:
            return _write_ops(time, action, data, codec)
        if action == CLEAN:
            return removal_ops(deleted_files(data))
        if action == ROLLBACK:
            return _rollback_ops(data, held)
    except MetadataTableError as exc:
        raise _refused(time, action, table, str(exc)) from exc
    raise _refused(time, action, table, f"fedcore does not catch up {action} instants")


def _write_ops(time: str, action: str, data: bytes, codec: CommitCodec) -> list[Op]:
    metadata = codec.decode(data, f"{time}.{action}")
    for stat in metadata.stats:
        if stat.file_size <= 0:
            raise MetadataTableError(f"its write stat of {stat.path} records no file size")
    if action != REPLACE_COMMIT:
        metadata = replace(metadata, replaced={})  # only a replace commit retires file groups
    return commit_ops(time, metadata)


def _rollback_ops(data: bytes, held: Callable[[str], bool]) -> list[Op]:
    appended = appended_log_files(data)
    if appended:
        raise MetadataTableError(
            f"it appended rollback blocks to {len(appended)} log files ({appended[0]}, ...)"
        )
    actions = rolled_back_actions(data)
    for undone in rolled_back_instants(data):
        if not held(undone):
            continue  # never taken in: the files it deletes are not in the view
        action = actions.get(undone)
        if action == REPLACE_COMMIT:
            raise MetadataTableError(f"it rolled back the replace commit {undone}")
        if not action:
            raise MetadataTableError(f"its metadata does not say what action {undone} was")
    return removal_ops(deleted_files(data))


def _refused(time: str, action: str, table: str, why: str) -> MetadataTableError:
    return MetadataTableError(
        f"instant {time} ({action}) of table {table} was written without fed's metadata table "
        f"(by another writer, such as Apache Hudi's), and fed cannot take in its changes exactly: "
        f"{why}. Run `fed repair {table}` to rebuild the metadata table from storage"
    )
