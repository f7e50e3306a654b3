"""Repair and verify: the metadata table rebuilt from storage, and audited against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from fed_dev.crash import Crash, crash_at
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import DataFileMissingError, MetadataTableError, RepairError
from fedcore.io.filesystems import filesystem_for
from fedcore.metadata.file_index import PartitionFiles
from fedcore.metadata.format import FOLDER
from fedcore.metadata.rebuild import rebuild
from fedcore.metadata.table import IndexCache, MetadataTable
from fedcore.services.history import load_history
from fedcore.services.repair import repair_metadata
from fedcore.services.verify import delete_orphans, verify_table
from fedcore.steps import observe_steps
from fedcore.table import Table, load_table
from fedcore.write.client import WriteClient

from ..write.test_writes import make_table, rows, trips

KEEP = {
    P.ARCHIVE_MIN_INSTANTS: "4",
    P.ARCHIVE_MAX_INSTANTS: "6",
    P.CLEANER_COMMITS_RETAINED: "2",
    P.METADATA_COMPACT_DELTAS: "3",
}
#: An instant no write of the table ever had: a file named after it is another table's.
FOREIGN_INSTANT = "20200101000000000"


def fresh(backend: Backend) -> Table:
    return load_table(backend.table_path, storage_options=backend.storage_options)


def slices(table: Table) -> dict[str, dict[str, int]]:
    """partition -> file name -> size, as the metadata table has them now."""
    index = MetadataTable(
        table.fs.table_fs, table.path, table.timeline, layout=table.handle.layout, cache=IndexCache()
    )
    return {p: dict(sorted(f.files.items())) for p, f in index.files().items()}


def mixed_history(backend: Backend) -> tuple[Table, str, str]:
    """Inserts, upserts, deletes, an insert_overwrite, cleans, archival, a write that failed
    and was rolled back, and one left failed at the end; returns the table, the physical
    path of a stray file of the table's nothing references (an orphan), and that of a file
    in its folders another table wrote."""
    table = make_table(backend, **KEEP)
    writer = WriteClient(table)
    writer.write(trips(range(0, 40), countries(range(0, 40))), "bulk_insert")
    for n in range(6):
        writer.upsert(trips([n, 10 + n, 20 + n], countries([n, 10 + n, 20 + n]), fare=100.0 * n))
    writer.write(trips([1, 5], countries([1, 5])), "delete")
    with pytest.raises(Crash), observe_steps(crash_at("metadata")):  # rolled back by the next write
        WriteClient(table).upsert(trips([7, 8], countries([7, 8]), fare=5.0))
    time.sleep(0.5)
    writer.write(trips(range(100, 104), "fr", fare=7.0), "insert_overwrite")
    for n in range(4):
        writer.upsert(trips([30 + n], countries([30 + n]), fare=9.0 * n))
    writer.write(trips([200, 201], "it"), "insert")
    history = load_history(table.handle)
    assert history.rolled_back, "a failed write was rolled back"
    assert history.cleaned, "cleans deleted files"
    assert any(history.replaced.values()), "insert_overwrite replaced file groups"
    assert len(history.written) > len(table.timeline().completed(["commit", "replacecommit"])), "archived"
    with (
        pytest.raises(Crash),
        observe_steps(crash_at("metadata")),
    ):  # left failed: its files are in storage, its instant pending
        WriteClient(table).upsert(trips([4, 300], ["us", "it"], fare=1.0))
    # A file of the write that was rolled back, left behind (its deletion failed): an orphan.
    partition, files = next(iter(slices(table).items()))
    name = next(iter(files))
    file_id, token, _ = name.split("_")
    stray = table.fs.to_physical(f"{partition}/{file_id}_{token}_{min(history.rolled_back)}.parquet")
    source = table.fs.to_physical(f"{partition}/{name}")
    fs = filesystem_for(stray, backend.storage_options)
    fs.pipe_file(stray, fs.cat_file(source))
    # A file another table wrote into the same folder (two tables of one name that share it,
    # as tables created before each got a folder of its own could): neither orphan nor adopted.
    foreign = table.fs.to_physical(f"{partition}/{uuid.uuid4()}-0_{token}_{FOREIGN_INSTANT}.parquet")
    fs.pipe_file(foreign, fs.cat_file(source))
    return table, stray, foreign


def countries(ids: range | list[int]) -> list[str]:
    """Each key keeps one partition (a key written to two partitions is two records)."""
    return [("us", "de", "fr", "nl")[i % 4] for i in ids]


def delete_metadata_table(table: Table) -> None:
    table.fs.table_fs.rm(f"{table.path}/{FOLDER}", recursive=True)


def test_repair_after_losing_the_metadata_table_gives_back_every_file_slice(backend: Backend) -> None:
    table, stray, foreign = mixed_history(backend)
    before, rows_before = slices(fresh(backend)), rows(fresh(backend))
    delete_metadata_table(table)
    with pytest.raises(MetadataTableError, match="fed repair"):
        fresh(backend).read()

    report = repair_metadata(fresh(backend))
    index = MetadataTable(table.fs.table_fs, table.path, table.timeline, layout=table.handle.layout)
    rebuilt = index.manifest(index.manifest_times()[-1])
    assert not rebuilt.footers, "the rebuilt manifest packs its shards' footers"
    assert [f is None for f in rebuilt.packed_footers] == [s is None for s in rebuilt.shards]
    assert slices(fresh(backend)) == before
    assert rows(fresh(backend)) == rows_before
    assert rows(table) == rows_before  # a handle that cached the old state recovers too
    assert [o.path.split("://")[-1] for o in report.orphans] == [stray.split("://")[-1]]
    assert [o.path.split("://")[-1] for o in report.foreign] == [foreign.split("://")[-1]]
    assert "1 file of another table" in report.format()
    pending = {i.time for i in table.timeline().pending()}
    assert report.in_flight
    assert {f.name.rsplit("_", 1)[1][:17] for f in report.in_flight} == pending
    assert report.old_error is not None
    assert not report.missing_latest
    assert f"{report.files:,} files" in report.format()
    # Writes go on from the repaired state.
    WriteClient(fresh(backend)).upsert(trips([4, 500], ["us", "it"], fare=3.0))
    expected = {**rows_before, 4: ("us", 7.0), 500: ("it", 503.0)}
    assert rows(fresh(backend)) == expected

    check = verify_table(fresh(backend))
    assert check.ok, check.format()
    assert [o.path for o in check.orphans] == [o.path for o in report.orphans]
    assert [o.path for o in check.foreign] == [o.path for o in report.foreign]


@pytest.mark.parametrize("damage", ["garbled shard", "truncated delta", "missing manifests"])
def test_repair_mends_a_damaged_metadata_table(backend: Backend, damage: str) -> None:
    table = make_table(backend, **KEEP)  # archival drops the deltas a manifest folded in
    writer = WriteClient(table)
    for n in range(9):
        writer.upsert(trips([n, 10 + n], ["us", "de"], fare=10.0 * n))
    WriteClient(table, {P.METADATA_COMPACT_DELTAS: "100"}).upsert(trips([3], fare=0.5))  # a delta after it
    before, rows_before = slices(fresh(backend)), rows(fresh(backend))
    index = MetadataTable(table.fs.table_fs, table.path, table.timeline, layout=table.handle.layout)
    fs, folder = table.fs.table_fs, f"{table.path}/{FOLDER}"
    manifests = index.manifest_times()
    assert manifests
    if damage == "garbled shard":
        name = next(s for s in index.manifest(manifests[-1]).shards if s)[0]
        fs.pipe_file(f"{folder}/base/{name}", b"PAR1 not parquet")
    elif damage == "truncated delta":
        last = table.timeline().completed()[-1].time
        assert last > manifests[-1]
        fs.pipe_file(index.delta_path(last), fs.cat_file(index.delta_path(last))[:40])
    else:
        fs.rm([f"{folder}/manifests/{t}.json" for t in manifests])
    with pytest.raises(MetadataTableError):
        fresh(backend).read()

    report = repair_metadata(fresh(backend))
    assert report.old_error is not None
    assert slices(fresh(backend)) == before
    assert rows(fresh(backend)) == rows_before
    writer = WriteClient(fresh(backend), {P.METADATA_COMPACT_DELTAS: "1"})
    writer.upsert(trips([1], fare=1.0))  # and compaction builds on the repaired state
    assert rows(fresh(backend)) == {**rows_before, 1: ("us", 2.0)}
    assert verify_table(fresh(backend)).ok


def test_dry_run_reports_and_writes_nothing(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips(range(6), ["us", "de", "fr"] * 2))
    metadata = f"{table.path}/{FOLDER}"
    listed = sorted(table.fs.table_fs.find(metadata))
    report = repair_metadata(fresh(backend), dry_run=True)
    assert sorted(table.fs.table_fs.find(metadata)) == listed
    assert report.added == []
    assert report.dropped == []
    assert report.files == 3
    assert len(report.state) == 3
    assert "Would rebuild" in report.format()
    assert "the same files" in report.format()


def test_repair_refuses_to_lose_the_newest_version_of_a_file_group(backend: Backend) -> None:
    table = make_table(backend)
    writer = WriteClient(table)
    writer.upsert(trips([1, 2], ["us", "de"]))
    writer.upsert(trips([2], "de", fare=50.0))
    newest = table.file_slices([("country", "=", "de")])[0].path
    table.fs.rm_file(newest)
    delete_metadata_table(table)
    with pytest.raises(RepairError, match="missing from storage"):
        repair_metadata(fresh(backend))
    report = repair_metadata(fresh(backend), allow_missing=True)
    assert report.missing_latest == [("country=de", newest.rpartition("/")[2])]
    # Recorded, so the read fails instead of returning the older version of key 2.
    with pytest.raises(DataFileMissingError):
        fresh(backend).read()
    assert fresh(backend).read(filters=[("country", "=", "us")]).num_rows == 1


def test_writes_that_complete_while_a_repair_runs_are_included(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2], ["us", "de"]))
    # (Writers read the metadata table, so the one repaired here is whole.)
    # One write is in flight when the repair lists storage (files written, not completed).
    held, go = threading.Event(), threading.Event()

    def hold(step: str) -> None:
        if step == "metadata":
            held.set()
            assert go.wait(30)

    def held_write() -> None:
        with observe_steps(hold):  # in the writing thread: steps are seen in their own context
            WriteClient(fresh(backend), {P.HEARTBEAT_INTERVAL_MS: "60000"}).write(trips([3], "fr"), "insert")

    pending = threading.Thread(target=held_write)
    pending.start()
    assert held.wait(30)

    def write_meanwhile(step: str) -> None:
        if step == "listed":  # another write starts and completes after the listing
            # Judging heartbeats by the held write's interval, not the table's 100 ms: else a
            # slow moment between the two writes makes it roll the held write back.
            WriteClient(fresh(backend), {P.HEARTBEAT_INTERVAL_MS: "60000"}).write(trips([4], "nl"), "insert")

    with observe_steps(write_meanwhile):
        report = repair_metadata(fresh(backend))
    assert report.in_flight
    go.set()
    pending.join(30)
    assert sorted(rows(fresh(backend))) == [1, 2, 3, 4]
    assert verify_table(fresh(backend)).ok


_KILL = """
import json, os, sys
from fed_dev.crash import exit_at
from fedcore.steps import observe_steps
from fedcore.services.repair import repair_metadata
from fedcore.table import load_table
args = json.loads(sys.argv[1])
table = load_table(args["table"], storage_options=args["options"])
with observe_steps(exit_at(args["step"], 9)):
    repair_metadata(table)
"""


@pytest.mark.parametrize("step", ["listed", "rebuilt", "switched"])
def test_a_repair_killed_midway_runs_again_to_the_same_state(backend: Backend, step: str) -> None:
    table = make_table(backend, **{P.METADATA_COMPACT_DELTAS: "2"})
    for n in range(4):
        WriteClient(table).upsert(trips([n, 10 + n], ["us", "de"], fare=float(n)))
    before, rows_before = slices(fresh(backend)), rows(fresh(backend))
    delete_metadata_table(table)
    payload = json.dumps({"table": backend.table_path, "options": backend.storage_options, "step": step})
    killed = subprocess.run([sys.executable, "-c", _KILL, payload], capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    # Before the switch no manifest is there: with every instant still on the timeline, each
    # is caught up from its commit metadata; after it, the rebuilt manifest serves.
    assert rows(fresh(backend)) == rows_before
    repair_metadata(fresh(backend))
    assert slices(fresh(backend)) == before
    assert rows(fresh(backend)) == rows_before


def test_verify_tells_missing_unrecorded_orphans_and_in_flight_apart(backend: Backend) -> None:
    table, stray, foreign = mixed_history(backend)
    check = verify_table(fresh(backend))
    assert check.ok
    assert not check.missing
    assert not check.unrecorded
    assert [o.path for o in check.orphans] == [stray]
    assert [o.path for o in check.foreign] == [foreign]
    assert check.in_flight

    # Lose a file from the metadata table (as damage would), and one from storage.
    state = slices(fresh(backend))
    partition = next(p for p in state if p != "country=it")
    lost = next(iter(state[partition]))
    history = load_history(fresh(backend).handle)
    assert history.upto is not None
    damaged = {
        p: PartitionFiles(
            {n: s for n, s in f.items() if (p, n) != (partition, lost)}, history.replaced.get(p, {})
        )
        for p, f in state.items()
    }
    index = MetadataTable(
        table.fs.table_fs, table.path, table.timeline, layout=table.handle.layout, cache=IndexCache()
    )
    rebuild(index, history.upto, damaged, history.pending, history.schema)
    gone = fresh(backend).file_slices([("country", "=", "it")])[0].path
    table.fs.rm_file(gone)

    check = verify_table(fresh(backend))
    assert not check.ok
    assert [(f.partition, f.name) for f in check.unrecorded] == [(partition, lost)]
    assert [(p, n) for p, n, _ in check.missing] == [("country=it", gone.rpartition("/")[2])]
    assert "run `fed repair TABLE`" in check.format()
    assert "FAILED" in check.format()
    body = check.to_json()
    assert body["ok"] is False
    assert body["orphans"][0]["path"] == stray
    assert body["foreign"][0]["path"] == foreign

    # Orphans go only past the grace period; unrecorded and in-flight files never.
    assert delete_orphans(fresh(backend).handle, check, timedelta(days=1)) == []
    assert delete_orphans(fresh(backend).handle, check, timedelta(0)) == [stray]
    assert backend.exists(foreign)
    after = verify_table(fresh(backend))
    assert not after.orphans
    assert [o.path for o in after.foreign] == [foreign]
    assert len(after.in_flight) == len(check.in_flight)
    assert [(f.partition, f.name) for f in after.unrecorded] == [(partition, lost)]


def test_the_grace_period_goes_by_modification_time(tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/t/trips", f"file://{tmp_path}/storage", None)
    _table, stray, _foreign = mixed_history(backend)
    old = time.time() - 3 * 86400
    os.utime(stray.removeprefix("file://"), (old, old))
    check = verify_table(fresh(backend))
    assert delete_orphans(fresh(backend).handle, check, timedelta(days=2)) == [stray]
    assert not os.path.exists(stray.removeprefix("file://"))


def _fed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedcore", *args], capture_output=True, text=True)


def test_the_commands(tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/t/trips", f"file://{tmp_path}/storage", None)
    table, stray, foreign = mixed_history(backend)
    rows_before = rows(fresh(backend))
    delete_metadata_table(table)

    verified = _fed("verify", backend.table_path)
    assert verified.returncode == 1
    assert "fed repair" in verified.stdout
    assert "FAILED" in verified.stdout
    dry = _fed("repair", backend.table_path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Would rebuild" in dry.stdout
    assert "Dry run: nothing was written" in dry.stdout
    repaired = _fed("repair", backend.table_path)
    assert repaired.returncode == 0, repaired.stderr
    assert "Rebuilt the metadata table of trips" in repaired.stdout
    assert "files/s" in repaired.stdout
    assert rows(fresh(backend)) == rows_before

    verified = _fed("verify", backend.table_path, "--json", "--delete-orphans", "--older-than", "0s")
    assert verified.returncode == 0, verified.stderr
    body: dict[str, Any] = json.loads(verified.stdout)
    assert body["ok"] is True
    assert body["deleted"] == [stray]
    assert body["in_flight"] > 0
    assert [f["path"] for f in body["foreign"]] == [foreign]
    assert not os.path.exists(stray.removeprefix("file://"))
    assert os.path.exists(foreign.removeprefix("file://"))
    assert rows(fresh(backend)) == rows_before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--delete-orphans"], "--delete-orphans and --older-than DURATION go together"),
        (["--older-than", "3 days"], "is not a duration"),
    ],
)
def test_verify_flags_are_checked(tmp_path: Path, args: list[str], message: str) -> None:
    backend = Backend("local", f"file://{tmp_path}/t/trips", f"file://{tmp_path}/storage", None)
    make_table(backend)
    result = _fed("verify", backend.table_path, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
