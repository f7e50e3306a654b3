"""``fed rollback``: undo a failed write, or the latest completed one.

A pending instant is rolled back only once its writer's heartbeat has expired
(a live writer is never undone under its feet). A completed write can be rolled
back while nothing was written after it and no clean since deleted a file-group
version it superseded (those are what a rollback restores): its files are deleted
through the storage strategy, the rollback's metadata-table delta removes them
(and restores file groups a replace commit had retired), and only then is the
commit's instant file removed, so a crash half way leaves readers on either the
old or the new state.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from fedcore.commit.pending import wait_for_services
from fedcore.commit.transaction import (
    Transaction,
    check_begun_by_fed,
    is_failed,
    log_slot,
    release_claim,
    remove_instant_files,
    roll_back_pending,
    rollback_body,
    stat_claims,
)
from fedcore.exceptions import InvalidInstantError, RollbackError
from fedcore.files.filenames import BASE_FILE_RE
from fedcore.io.filesystems import read_object
from fedcore.metadata.operations import undo_ops
from fedcore.timeline import (
    CLEAN,
    INFLIGHT,
    REQUESTED,
    ROLLBACK,
    Instant,
    Timeline,
    parse_instant_time,
)
from fedcore.timeline.commit_metadata import CommitMetadata, deleted_files

if TYPE_CHECKING:
    from fedcore.handle import TableHandle


def rollback(table: TableHandle, instant_time: str) -> str:
    """Roll back ``instant_time``; returns the rollback instant's time."""
    parse_instant_time(instant_time)
    timeline = table.timeline()
    timeline = wait_for_services(table, timeline, "the rollback")
    instant = timeline.find(instant_time)
    if instant is None:
        raise InvalidInstantError(f"no instant {instant_time} on the timeline of {table.name}")
    if instant.action not in table.write_actions:
        raise RollbackError(
            f"{instant} is not a write; only writes (commits, replace and delta commits) roll back"
        )
    if not instant.is_completed:
        check_begun_by_fed(table, instant)
        if not is_failed(table, instant):
            raise RollbackError(f"{instant} is still being written (its heartbeat is fresh)")
        done = roll_back_pending(table, instant)
        if done is None:
            raise RollbackError(f"{instant} had already decided to commit; it was completed instead")
        return done
    later = [i for i in timeline.completed() if i.time > instant.time and i.action != ROLLBACK]
    writes = [i for i in later if i.action in table.write_actions]
    if writes:
        raise RollbackError(
            f"{instant} is not the latest write: {writes[0]} came after it; roll that back first"
        )
    metadata = table.commit_metadata(instant)
    if metadata.compacted:
        raise RollbackError(
            f"{instant} is a compaction: its base files hold what the log files before it held, "
            "so it changes no row; it is not rolled back"
        )
    _check_cleans_spared(table, instant, metadata, [i for i in later if i.action == CLEAN])
    return _roll_back_completed(table, instant, metadata, _claims_taken(table, timeline, metadata))


def _claims_taken(table: TableHandle, timeline: Timeline, metadata: CommitMetadata) -> list[tuple[str, str]]:
    """The (file id, version) claims a completed write took (``stat_claims``), to release as
    it is rolled back. A log file's is its place in its slice (``log_slot``), which the
    commit metadata records where the name does not say it (up to version 6) and Hudi 1.x's
    does not: found, for every version alike, as a writer finds it, from the file's group
    as ``timeline`` shows it (the write still completed, the latest on its slices)."""
    merge_on_read = table.config.merge_on_read
    claims = [claim for s in metadata.stats if not s.is_log for claim in stat_claims(s, merge_on_read)]
    logs = [s for s in metadata.stats if s.is_log]
    if not logs:
        return claims
    naming, slicing = table.layout.log_files, table.log_slicing(timeline)
    found = table.file_index_at(timeline).files(sorted({s.partition_path for s in logs}))
    for stat in logs:
        name = stat.path.rpartition("/")[2]
        files = found.get(stat.partition_path)
        group = files.groups(naming, slicing).get(stat.file_id) if files is not None else None
        if group is None:  # gone already (a rollback that died half way): no claim to find
            continue
        for start in group.starts():
            claims += [
                (stat.file_id, log_slot(start, place)) for place, at in group.logs_onto(start) if at == name
            ]
    return claims


def _check_cleans_spared(
    table: TableHandle, instant: Instant, metadata: CommitMetadata, cleans: list[Instant]
) -> None:
    """Rolling back a write brings back the file-group versions it superseded; a clean that
    ran after it may have deleted them, and then the write can no longer be rolled back."""
    needed = {(s.file_id, s.prev_commit) for s in metadata.stats if s.prev_commit not in ("", "null")}
    replaced = {file_id for ids in metadata.replaced.values() for file_id in ids}
    for clean in cleans:
        for names in deleted_files(
            read_object(table.fs.table_fs, table.layout.instants.path(table.path, clean))
        ).values():
            for name in names:
                match = BASE_FILE_RE.fullmatch(name)
                if match is None:
                    continue
                if (match[1], match[3]) in needed or match[1] in replaced:
                    raise RollbackError(
                        f"{instant} can no longer be rolled back: clean {clean.time} ran after it and "
                        f"deleted {name}, a version of file group {match[1]} that rolling back would "
                        "have to restore"
                    )


def _roll_back_completed(
    table: TableHandle, instant: Instant, metadata: CommitMetadata, claims: list[tuple[str, str]]
) -> str:
    start = time.monotonic()
    with Transaction(table, ROLLBACK) as transaction:
        transaction.inflight(b"")
        deleted: dict[str, list[str]] = {}
        for stat in metadata.stats:
            with contextlib.suppress(FileNotFoundError):
                table.fs.rm_file(stat.path)
            name = stat.path.rpartition("/")[2]
            deleted.setdefault(stat.partition_path, []).append(name)
        for file_id, version in claims:
            release_claim(table, f"{file_id}_{version}", instant.time)
        if metadata.replaced:
            previous = table.file_index.files(metadata.replaced, as_of=_before(table, instant))
            for partition, file_ids in metadata.replaced.items():
                slices = (
                    previous[partition].latest_base_files(table.layout.log_files)
                    if partition in previous
                    else {}
                )
                for file_id in file_ids:
                    if file_id in slices:
                        release_claim(table, f"{file_id}_{slices[file_id][0]}", instant.time)
        ops = undo_ops(instant.time, metadata)
        done = transaction.commit(rollback_body(transaction, instant, deleted, start), ops)
    remove_instant_files(table, instant, (None, INFLIGHT, REQUESTED))
    return done


def _before(table: TableHandle, instant: Instant) -> str | None:
    earlier = [i.time for i in table.timeline().completed(table.write_actions) if i.time < instant.time]
    return earlier[-1] if earlier else None
