"""``fed rollback``: undo a failed write, or the latest completed one.

A pending instant is rolled back only once its writer's heartbeat has expired
(a live writer is never undone under its feet). A completed write can be rolled
back while nothing was written or cleaned after it: its files are deleted
through the storage strategy, the rollback's metadata-table delta removes them
(and restores file groups a replace commit had retired), and only then is the
commit's instant file removed, so a crash half way leaves readers on either the
old or the new state.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from fedcore.commit_metadata import rollback_metadata
from fedcore.exceptions import InvalidInstantError, RollbackError
from fedcore.metadata.table import DELETE, UNREPLACE, Op
from fedcore.timeline import INFLIGHT, REQUESTED, ROLLBACK, WRITE_ACTIONS, Instant, parse_instant_time
from fedcore.transaction import (
    Transaction,
    is_failed,
    release_claim,
    remove_instant_files,
    roll_back_pending,
)

if TYPE_CHECKING:
    from fedcore.table import Table


def rollback(table: Table, instant_time: str) -> str:
    """Roll back ``instant_time``; returns the rollback instant's time."""
    parse_instant_time(instant_time)
    timeline = table.timeline()
    instant = timeline.find(instant_time)
    if instant is None:
        raise InvalidInstantError(f"no instant {instant_time} on the timeline of {table.name}")
    if instant.action not in WRITE_ACTIONS:
        raise RollbackError(f"{instant} is not a write; only commits and replace commits roll back")
    if not instant.is_completed:
        if not is_failed(table, instant):
            raise RollbackError(f"{instant} is still being written (its heartbeat is fresh)")
        done = roll_back_pending(table, instant)
        if done is None:
            raise RollbackError(f"{instant} had already decided to commit; it was completed instead")
        return done
    later = [i for i in timeline.completed() if i.time > instant.time and i.action != ROLLBACK]
    if later:
        raise RollbackError(
            f"{instant} is not the latest change: {later[0]} came after it; roll that back first"
        )
    return _roll_back_completed(table, instant)


def _roll_back_completed(table: Table, instant: Instant) -> str:
    start = time.monotonic()
    metadata = table.commit_metadata(instant)
    transaction = Transaction(table, ROLLBACK)
    transaction.begin()
    transaction.inflight(b"")
    deleted: dict[str, list[str]] = {}
    ops: list[Op] = []
    for stat in metadata.stats:
        with contextlib.suppress(FileNotFoundError):
            table.fs.rm_file(stat.path)
        name = stat.path.rpartition("/")[2]
        deleted.setdefault(stat.partition_path, []).append(name)
        ops.append(Op(stat.partition_path, name, stat.file_size, DELETE))
        if stat.prev_commit not in ("", "null"):
            release_claim(table, f"{stat.file_id}_{stat.prev_commit}", instant.time)
    for partition, file_ids in metadata.replaced.items():
        ops.extend(Op(partition, file_id, 0, UNREPLACE) for file_id in file_ids)
    if metadata.replaced:
        previous = table.file_index.files(metadata.replaced, as_of=_before(table, instant))
        for partition, file_ids in metadata.replaced.items():
            slices = previous[partition].latest_slices() if partition in previous else {}
            for file_id in file_ids:
                if file_id in slices:
                    release_claim(table, f"{file_id}_{slices[file_id][0]}", instant.time)
    body = rollback_metadata(
        start=transaction.time,
        rolled_back=instant.time,
        action=instant.action,
        deleted=deleted,
        took_ms=int((time.monotonic() - start) * 1000),
    )
    done = transaction.commit(body, ops)
    remove_instant_files(table, instant, (None, INFLIGHT, REQUESTED))
    return done


def _before(table: Table, instant: Instant) -> str | None:
    earlier = [i.time for i in table.timeline().completed(WRITE_ACTIONS) if i.time < instant.time]
    return earlier[-1] if earlier else None
