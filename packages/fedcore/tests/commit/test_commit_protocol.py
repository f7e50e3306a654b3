"""The commit protocol under crashes and concurrent writers; the metadata table at scale."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fed_dev.crash import Crash, crash_at
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.commit.markers import marker_folder
from fedcore.commit.transaction import STEPS, Transaction
from fedcore.exceptions import CommitConflictError
from fedcore.metadata.folding import compact_metadata
from fedcore.metadata.format import ADD, Op
from fedcore.metadata.table import MetadataTable
from fedcore.steps import observe_steps
from fedcore.table import create_table
from fedcore.timeline import COMMIT
from fedcore.write.client import WriteClient

from ..write.test_writes import FAST_HEARTBEAT, make_table, physical_files, rows, trips


def wait_for_heartbeat_expiry() -> None:
    time.sleep(0.5)  # FAST_HEARTBEAT: 100 ms, two tolerated misses


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_leaves_the_commit_all_or_nothing(backend: Backend, step: str) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2]))
    before = rows(table)
    with pytest.raises(Crash), observe_steps(crash_at(step)):
        WriteClient(table).upsert(trips([1, 3], fare=100.0))
    after_crash = rows(table)
    committed = {1: ("us", 101.0), 2: ("us", 12.0), 3: ("us", 103.0)}
    assert after_crash == (committed if step == "completed" else before)

    wait_for_heartbeat_expiry()
    WriteClient(table).upsert(trips([9], "zz"))  # the next writer recovers first
    recovered = rows(table)
    del recovered[9]
    # Past the commit decision the write is rolled forward; before it, rolled back.
    assert recovered == (committed if step in ("outcome", "completed") else before)
    assert table.timeline().pending() == []
    live = {table.fs.to_physical(s.path).split("://", 1)[-1] for s in table.file_slices()}
    on_disk = {p.split("://", 1)[-1] for p in physical_files(backend, backend.storage_path)}
    superseded = 1 if step in ("outcome", "completed") else 0
    assert live <= on_disk
    assert len(on_disk - live) == superseded, "no orphan data file is left behind"


DYING_WRITER = """
import json, os, sys
import pyarrow.parquet as pq
from fed_dev.crash import exit_at
from fedcore.steps import observe_steps
from fedcore.table import load_table
from fedcore.write.client import WriteClient

path, options, heartbeat, step, data = sys.argv[1:]
table = load_table(path, options=json.loads(heartbeat), storage_options=json.loads(options))
with observe_steps(exit_at(step, 17)):  # the process is gone: no finally, no heartbeat thread
    WriteClient(table).upsert(pq.read_table(data))
"""


@pytest.mark.parametrize("step", ["data", "metadata", "outcome"])
def test_a_writer_process_killed_mid_commit_is_recovered(backend: Backend, step: str, tmp_path: Path) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2]))
    before = rows(table)
    pq.write_table(trips([1, 3], fare=100.0), tmp_path / "batch.parquet")
    args = [table.path, json.dumps(backend.storage_options), json.dumps(FAST_HEARTBEAT), step]
    child = subprocess.run(
        [sys.executable, "-c", DYING_WRITER, *args, str(tmp_path / "batch.parquet")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 17, child.stderr
    assert rows(table) == before, "a dead writer's work is invisible"
    assert table.timeline().pending() != []

    wait_for_heartbeat_expiry()
    WriteClient(table).upsert(trips([9], "zz"))  # the next writer recovers first
    recovered = rows(table)
    del recovered[9]
    committed = {1: ("us", 101.0), 2: ("us", 12.0), 3: ("us", 103.0)}
    assert recovered == (committed if step == "outcome" else before)
    assert table.timeline().pending() == []
    live = {table.fs.to_physical(s.path).split("://", 1)[-1] for s in table.file_slices()}
    on_disk = {p.split("://", 1)[-1] for p in physical_files(backend, backend.storage_path)}
    assert len(on_disk - live) == (1 if step == "outcome" else 0), "no orphan data file is left behind"


def test_writers_touching_the_same_file_group_exactly_one_commits(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2]))
    winner: list[str] = []

    def interleave(step: str) -> None:
        if step == "data" and not winner:  # A has written a marker; B runs to completion now
            winner.append(WriteClient(table).upsert(trips([2], fare=500.0)).instant)

    with pytest.raises(CommitConflictError, match="conflicts with instant"), observe_steps(interleave):
        WriteClient(table).upsert(trips([1], fare=100.0))
    assert rows(table) == {1: ("us", 11.0), 2: ("us", 502.0)}
    assert [i.action for i in table.timeline()][-1] == "rollback"
    assert len(physical_files(backend, backend.storage_path)) == 2, "the loser's file was deleted"


def test_a_claim_left_by_a_rolled_back_writer_does_not_block_the_file_group(backend: Backend) -> None:
    """A claim whose holder's outcome is a rollback can never become a commit: the next writer
    of that file-group version releases it and commits (before, every later update of the file
    group failed with a conflict naming an instant that no longer existed)."""
    table = make_table(backend)
    WriteClient(table).upsert(trips([1]))
    (current,) = table.file_slices()
    handle, ghost = table.handle, "20200101000000000"
    fs = handle.fs.table_fs
    fs.pipe_file(handle.outcome_path(ghost), b"rollback\n")
    claim = handle.claim_path(f"{current.file_id}_{current.base_instant}")
    fs.pipe_file(claim, ghost.encode())
    result = WriteClient(table).upsert(trips([1], fare=100.0))
    assert rows(table) == {1: ("us", 101.0)}
    assert fs.cat_file(claim).decode() == result.instant


def test_a_claim_is_released_when_a_rollback_by_another_process_missed_its_marker(backend: Backend) -> None:
    """Another process rolls back a live writer it took for dead: it lists the writer's markers,
    the writer then marks and takes a claim, and the roller deletes the markers. The writer's
    commit then loses to the rollback's outcome, and its own abort releases the claim no marker
    names any more."""
    table = make_table(backend)
    WriteClient(table).upsert(trips([1]))
    (current,) = table.file_slices()
    handle = table.handle
    name = f"{current.file_id}_{current.base_instant}"
    writer = Transaction(handle, COMMIT)
    writer.begin()
    writer.inflight(b"")
    fs = handle.fs.table_fs
    fs.pipe_file(handle.outcome_path(writer.time), b"rollback\n")  # the roller's decision ...
    writer._claim(name)  # ... the writer's claim after the roller listed its markers ...
    fs.rm(marker_folder(handle, writer.time), recursive=True)  # ... which the roller then deletes
    with pytest.raises(CommitConflictError, match="rolled back by another process"):
        writer.commit(b"{}", [])
    writer.end(CommitConflictError("lost"))
    assert not fs.exists(handle.claim_path(name))
    WriteClient(table).upsert(trips([1], fare=100.0))
    assert rows(table) == {1: ("us", 101.0)}


def test_racing_threads_exactly_one_commits(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1]))
    barrier = threading.Barrier(2, timeout=30)
    results: dict[str, object] = {}

    def at_metadata(step: str) -> None:
        if step == "metadata":
            barrier.wait()  # both have written their data before either claims

    def write(name: str, fare: float) -> None:
        try:
            with observe_steps(at_metadata):
                results[name] = WriteClient(table).upsert(trips([1], fare=fare))
        except CommitConflictError as exc:
            results[name] = exc

    threads = [threading.Thread(target=write, args=(n, f)) for n, f in (("a", 100.0), ("b", 200.0))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    errors = [r for r in results.values() if isinstance(r, CommitConflictError)]
    assert len(errors) == 1, results
    (fare,) = [f for n, f in (("a", 101.0), ("b", 201.0)) if not isinstance(results[n], Exception)]
    assert rows(table) == {1: ("us", fare)}


def test_concurrent_writers_to_different_file_groups_both_commit(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2], ["us", "de"]))
    done: list[str] = []

    def interleave(step: str) -> None:
        if step == "data" and not done:
            done.append(WriteClient(table).upsert(trips([2], "de", fare=500.0)).instant)

    with observe_steps(interleave):
        WriteClient(table).upsert(trips([1], fare=100.0))
    assert rows(table) == {1: ("us", 101.0), 2: ("de", 502.0)}


def test_metadata_lookups_and_commits_scale_with_what_they_touch(tmp_path: Path) -> None:
    table = create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["id"], partition_fields=["p"])
    index = MetadataTable(
        table.fs.table_fs,
        table.path,
        table.timeline,
        layout=table.handle.layout,
        shard_rows=2_000,
        row_group_rows=256,
    )
    partitions = [f"p={i:04d}" for i in range(1_000)]
    delta_sizes = []
    for commit in range(20):
        transaction = Transaction(table.handle, COMMIT)
        transaction.begin()
        ops = [
            Op(
                p,
                f"{commit:08x}-{j}-0000-0000-000000000000-0_0-1-0_2026010100000{commit:04d}.parquet",
                1000,
                ADD,
            )
            for p in partitions[commit * 50 : commit * 50 + 50]
            for j in range(20)
        ]
        transaction.commit(b"{}", ops)
        delta_sizes.append(len(table.fs.table_fs.cat_file(index.delta_path(transaction.time))))
    assert max(delta_sizes) < 2 * min(delta_sizes), "a commit writes in proportion to its files"
    assert compact_metadata(index) is not None
    manifest = index.manifest(index.manifest_times()[-1])
    assert manifest is not None
    assert manifest.shard_count >= 8
    largest_shard = max(s[1] for s in manifest.shards if s)

    index.stats.bytes = index.stats.requests = 0
    found = index.files(["p=0123"])
    assert len(found["p=0123"].files) == 20
    # About one shard, whatever the table size: shards double as the table grows.
    assert index.stats.bytes <= 2 * largest_shard, (index.stats.bytes, largest_shard)  # + the manifest
    assert index.stats.requests <= 4
    assert sum(len(f.files) for f in index.files().values()) == 20_000


def test_one_marker_object_names_every_file_a_write_makes(backend: Backend) -> None:
    """Markers live on the table path's one hot prefix: a write marks its files with one
    request, not one per file, and a rollback still finds every file it names."""
    table = make_table(backend, **{P.MAX_FILE_SIZE: "1"})  # one row per file
    with pytest.raises(Crash), observe_steps(crash_at("metadata")):
        WriteClient(table).write(trips(range(30), ["us", "de", "fr"] * 10), "insert")
    (pending,) = table.timeline().pending()
    fs = table.fs.table_fs
    markers = fs.find(marker_folder(table.handle, pending.time))
    assert len(markers) == 1
    assert markers[0].rsplit("/", 1)[-1].startswith("MARKERS-")
    lines = fs.cat_file(markers[0]).decode().splitlines()
    assert len(lines) == 30
    assert all(line.endswith(".parquet.marker.CREATE") for line in lines)
    assert len(physical_files(backend, backend.storage_path)) == 30
    wait_for_heartbeat_expiry()
    WriteClient(table).write(trips([99], "it"), "insert")  # recovers first: the 30 files go
    assert len(physical_files(backend, backend.storage_path)) == 1
    assert sorted(rows(table)) == [99]
