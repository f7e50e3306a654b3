"""A streaming sink's checkpoint in commit metadata: each micro-batch commits once.

Spark replays a micro-batch after a crash whenever it logged the batch's offsets but not
its completion in the query's checkpoint. A sink whose instant records the batch's id (in
Hudi's ``extraMetadata``, under Hudi's streaming sink's key ``_hudi_streaming_sink_checkpoint``,
as ``{"<batch id>": "<writer>"}``) finds, on the replay, that the batch already committed,
and commits nothing twice. The writer is the streaming query's id, which Spark keeps in the
query's checkpoint and so stays the same across restarts from it, and differs for another
query (or a new checkpoint) writing the same table.

A crash inside the batch's own commit leaves its instant pending; the restarted query is
the only live writer of that query (Spark runs one query per checkpoint at a time), so it
resolves those instants at once (``recover_writer``), rather than waiting for their
heartbeat to expire, before asking whether the batch committed.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Final

from fedcore.commit.transaction import roll_back_pending
from fedcore.handle import HasHandle, handle_of
from fedcore.io.filesystems import read_object
from fedcore.timeline import INFLIGHT

if TYPE_CHECKING:
    from collections.abc import Mapping


log = logging.getLogger(__name__)

#: Hudi's streaming sink's key in a commit's ``extraMetadata``.
SINK_CHECKPOINT_KEY: Final = "_hudi_streaming_sink_checkpoint"


def sink_checkpoint(batch_id: int, writer: str) -> dict[str, str]:
    """The ``extra_metadata`` of micro-batch ``batch_id``'s instant (``WriteClient.write``)."""
    return {SINK_CHECKPOINT_KEY: json.dumps({str(batch_id): writer})}


def _checkpoint(extra: Mapping[str, str]) -> tuple[int, str] | None:
    """(batch id, writer) an instant's extra metadata records, if any."""
    text = extra.get(SINK_CHECKPOINT_KEY)
    if not text:
        return None
    try:
        ((batch, writer),) = json.loads(text).items()
        return int(batch), str(writer)
    except (ValueError, TypeError, AttributeError):
        return None  # another writer's shape: not one of ours


def last_committed_batch(table: HasHandle, writer: str) -> int | None:
    """The id of the newest micro-batch ``writer`` committed, from the newest completed write
    carrying its checkpoint (None: none did). Reads the active timeline's commits newest
    first, so it usually stops at the first."""
    table = handle_of(table)
    timeline = table.timeline()
    for instant in reversed(timeline.completed(table.write_actions)):
        found = _checkpoint(table.commit_metadata(instant).extra)
        if found is not None and found[1] == writer:
            return found[0]
    return None


def recover_writer(table: HasHandle, writer: str) -> list[str]:
    """Resolve now the pending writes ``writer`` left (its process died in a commit): each is
    rolled back, or forward where it had decided to commit, without waiting for its
    heartbeat to expire. The caller knows the writer is dead. Returns their instant times.

    A write is known as the writer's by its inflight plan's extra metadata; one that died
    before writing its plan has written no data and is left to the heartbeat rule."""
    table = handle_of(table)
    fs = table.fs.table_fs
    resolved: list[str] = []
    for instant in table.timeline().pending():
        if instant.action not in table.write_actions:
            continue
        try:
            plan = read_object(fs, table.layout.instants.path(table.path, instant, INFLIGHT))
        except FileNotFoundError:
            continue
        found = _checkpoint(
            table.layout.commits.decode(plan, table.layout.instants.file_name(instant, INFLIGHT)).extra
        )
        if found is not None and found[1] == writer:
            log.warning(
                "%s: resolving instant %s, left by a dead run of writer %s", table.path, instant, writer
            )
            roll_back_pending(table, instant)
            resolved.append(instant.time)
    return resolved
