"""A streaming sink's checkpoint in commit metadata: found again after a crash at any step."""

from __future__ import annotations

import json

import pytest

from fed_dev.crash import Crash, crash_at
from fed_dev.testing import Backend
from fedcore.commit.transaction import STEPS
from fedcore.steps import observe_steps
from fedcore.timeline import INFLIGHT
from fedcore.write.checkpoints import (
    SINK_CHECKPOINT_KEY,
    last_committed_batch,
    recover_writer,
    sink_checkpoint,
)
from fedcore.write.client import WriteClient

from .test_writes import make_table, rows, trips


def test_each_writer_finds_its_own_last_batch(backend: Backend) -> None:
    table = make_table(backend)
    assert last_committed_batch(table, "query-a") is None
    WriteClient(table).write(trips([1]), "upsert", extra_metadata=sink_checkpoint(0, "query-a"))
    WriteClient(table).write(trips([2]), "upsert", extra_metadata=sink_checkpoint(0, "query-b"))
    WriteClient(table).write(trips([3]), "upsert", extra_metadata=sink_checkpoint(1, "query-a"))
    WriteClient(table).upsert(trips([4]))  # a batch write, recorded as no one's
    assert last_committed_batch(table, "query-a") == 1
    assert last_committed_batch(table, "query-b") == 0
    assert last_committed_batch(table, "query-c") is None
    newest = table.timeline().completed()[-2]
    extra = table.commit_metadata(newest).extra
    assert json.loads(extra[SINK_CHECKPOINT_KEY]) == {"1": "query-a"}  # Hudi's shape
    body = json.loads(table.fs.table_fs.cat_file(table.handle.layout.instants.path(table.path, newest)))
    assert body["extraMetadata"][SINK_CHECKPOINT_KEY] == extra[SINK_CHECKPOINT_KEY]
    assert "schema" in body["extraMetadata"]


@pytest.mark.parametrize("step", [s for s in STEPS if s != "requested"])
def test_a_dead_run_is_resolved_at_once_by_its_restart(backend: Backend, step: str) -> None:
    """The run died in its batch's commit; its heartbeat is still fresh, so another writer
    would wait for it to expire. The restarted run (the same writer) resolves it now: rolled
    forward once the commit was decided, else rolled back; then it knows whether its batch
    committed."""
    table = make_table(backend)
    WriteClient(table).upsert(trips([1]))
    with pytest.raises(Crash), observe_steps(crash_at(step)):
        WriteClient(table).write(trips([2]), "upsert", extra_metadata=sink_checkpoint(7, "query-a"))
    decided = step in ("outcome", "completed")
    assert len(table.timeline().pending()) == (0 if step == "completed" else 1)
    pending = table.timeline().pending()
    if pending:
        inflight = table.fs.table_fs.cat_file(
            table.handle.layout.instants.path(table.path, pending[0], INFLIGHT)
        )
        assert SINK_CHECKPOINT_KEY in json.loads(inflight)["extraMetadata"]

    assert recover_writer(table, "query-b") == []  # not the dead run's writer: left alone
    assert len(table.timeline().pending()) == len(pending)
    assert recover_writer(table, "query-a") == [i.time for i in pending]
    assert table.timeline().pending() == []
    assert last_committed_batch(table, "query-a") == (7 if decided else None)
    assert sorted(rows(table)) == ([1, 2] if decided else [1])
