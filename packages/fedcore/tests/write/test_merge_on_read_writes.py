"""Merge-on-read writes: upserts and deletes append log files onto the slice holding each key
(in the base file's own prefix), inserts go to base files, in delta commits; the commit
protocol, rollback, clean and repair cover log files; reads merge them."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from fed_dev.crash import Crash, crash_at
from fed_dev.testing import ENGINE_LAYOUTS, Backend, rows, trips
from fedcore import properties as P
from fedcore.cli.main import main
from fedcore.commit.transaction import STEPS
from fedcore.exceptions import (
    CommitConflictError,
    InvalidTableConfigError,
    RollbackError,
)
from fedcore.files.filenames import LOG_FILE_RE
from fedcore.log.blocks import BlockType, data_records, read_blocks
from fedcore.services.cleaning import clean
from fedcore.services.repair import repair_metadata
from fedcore.services.rollback import rollback
from fedcore.services.verify import verify_table
from fedcore.steps import observe_steps
from fedcore.table import Table, create_table, load_table
from fedcore.timeline import DELTA_COMMIT, Instant
from fedcore.timeline.service_plans import read_plan
from fedcore.write.client import WriteClient

from ..commit.test_commit_protocol import wait_for_heartbeat_expiry
from .test_writes import FAST_HEARTBEAT

Rows = dict[int, tuple[str, float]]


#: The table versions whose merge-on-read tables fedcore writes: 6 (Hudi 0.14/0.15, log files
#: named after their slice's base instant) and 8 (Hudi 1.x, a log file of its own per delta
#: commit, named after it; version 9 differs in configuration keys only).
VERSIONS = ["6", "8"]


def mor_table(backend: Backend, layout: str = "object_store", version: str = "6", **extra: str) -> Table:
    props = {**ENGINE_LAYOUTS[layout], **FAST_HEARTBEAT, **extra}
    if version != "6":
        props[P.WRITE_TABLE_VERSION] = version
    if props.get(P.STORAGE_STRATEGY_CLASS):
        props[P.STORAGE_PATH] = backend.storage_path
    return create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        table_type="MERGE_ON_READ",
        properties=props,
        storage_options=backend.storage_options,
    )


def read_optimized(table: Table) -> Rows:
    data = table.scan(query_type="read_optimized").to_arrow().to_pylist()
    return {r["trip_id"]: (r["country"], r["fare"]) for r in data}


def log_names(table: Table) -> list[str]:
    return sorted(name for s in table.file_slices() for name, _ in s.log_files)


def seeded(
    backend: Backend, layout: str = "object_store", version: str = "6", **extra: str
) -> tuple[Table, Rows]:
    """40 trips in two partitions, one base file each, and the rows a read must give."""
    table = mor_table(backend, layout, version, **extra)
    table.bulk_insert(trips(range(40), ["us", "de"] * 20))
    return table, {i: (["us", "de"][i % 2], 10.0 + i) for i in range(40)}


@pytest.mark.parametrize("version", VERSIONS)
def test_updates_and_deletes_append_log_files_that_reads_merge(backend: Backend, version: str) -> None:
    table, expected = seeded(backend, version=version)
    base_rows = rows(table)
    assert base_rows == expected
    bases = {s.file_id: s for s in table.file_slices()}

    updated = table.upsert(trips([0, 2, 4], "us", ts=2, fare=500.0))
    expected |= {i: ("us", 500.0 + i) for i in (0, 2, 4)}
    assert rows(table) == expected
    assert (updated.updated, updated.inserted, updated.files_written) == (3, 0, 1)
    us = next(s for s in table.file_slices() if s.partition_path == "country=us")
    assert us.base_file_name == bases[us.file_id].base_file_name, "the base file is not rewritten"
    assert [LOG_FILE_RE.fullmatch(name)[3] for name, _ in us.log_files] == ["1"]  # type: ignore[index]
    (log_path,) = us.log_paths
    (block,) = read_blocks(table.fs.cat_file(log_path), log_path)
    assert block.instant == updated.instant
    assert data_records(block).column("trip_id").to_pylist() == [0, 2, 4], "the changed rows only"

    deleted = table.delete(trips([1, 3, 6], ["de", "de", "us"]).select(["trip_id", "country"]))
    for key in (1, 3, 6):
        del expected[key]
    assert deleted.deleted == 3
    assert rows(table) == expected

    again = table.upsert(trips([3], "de", ts=3, fare=700.0))  # a deleted key written again
    expected[3] = ("de", 703.0)
    assert (again.updated, again.inserted) == (1, 0), "its record is still in the base file"
    assert rows(table) == expected

    # Snapshot merges the logs; read-optimized reads the base files as written.
    assert read_optimized(table) == base_rows
    assert rows(load_table(table.path, storage_options=backend.storage_options)) == expected
    assert {i.action for i in table.timeline()} == {DELTA_COMMIT}
    assert len(log_names(table)) == 4  # us: update, delete; de: delete, update
    for file_slice in table.file_slices():  # one log file per write per slice, in order
        blocks = [
            block.type
            for path in file_slice.log_paths
            for block in read_blocks(table.fs.cat_file(path), path)
        ]
        assert set(blocks) <= {BlockType.PARQUET_DATA, BlockType.DELETE}


@pytest.mark.parametrize("version", VERSIONS)
def test_inserts_go_to_base_files_and_never_to_a_slice_with_log_files(backend: Backend, version: str) -> None:
    table, expected = seeded(backend, version=version)
    table.upsert(trips([0], "us", fare=100.0))  # us now has a log file; de has none
    expected[0] = ("us", 100.0)
    slices = {s.partition_path: s for s in table.file_slices()}
    result = table.upsert(trips([100, 101], ["us", "de"]))
    expected |= {100: ("us", 110.0), 101: ("de", 111.0)}
    assert rows(table) == expected
    assert result.inserted == 2
    after = {s.partition_path: s for s in table.file_slices()}
    # de is small and has no log file: rewritten whole, as Hudi's small-file handling does.
    assert after["country=de"].file_id == slices["country=de"].file_id
    assert after["country=de"].base_instant == result.instant
    # us has a log file: its insert starts a new file group instead.
    us_groups = [s for s in table.file_slices() if s.partition_path == "country=us"]
    assert len(us_groups) == 2
    assert read_optimized(table)[100] == ("us", 110.0)


@pytest.mark.parametrize("layout", ENGINE_LAYOUTS)
def test_log_files_share_their_base_files_prefix_on_every_layout(tmp_path: Path, layout: str) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, _ = seeded(backend, layout)
    table.upsert(trips(range(0, 40, 3), ["us", "de"] * 7, fare=1.0))
    checked = 0
    for file_slice in table.file_slices():
        folder = table.fs.to_physical(file_slice.path).rpartition("/")[0]
        for path in file_slice.log_paths:
            assert table.fs.to_physical(path).rpartition("/")[0] == folder
            checked += 1
    assert checked == 2


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("version", VERSIONS)
def test_a_crash_at_any_step_of_a_delta_commit_is_all_or_nothing(
    tmp_path: Path, step: str, version: str
) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = seeded(backend, version=version)
    before_logs = log_names(table)
    with pytest.raises(Crash), observe_steps(crash_at(step)):
        WriteClient(table).upsert(trips([0, 1], ["us", "de"], fare=100.0))
    committed = expected | {0: ("us", 100.0), 1: ("de", 101.0)}
    assert rows(table) == (committed if step == "completed" else expected)

    wait_for_heartbeat_expiry()
    table.upsert(trips([2], "us", fare=300.0))  # the next writer recovers first
    assert rows(table) == (committed if step in ("outcome", "completed") else expected) | {2: ("us", 302.0)}
    live = set(log_names(table))
    on_disk = {p.name for p in Path(tmp_path / "storage").rglob(".*.log.*")}
    assert on_disk == live, "a failed delta commit's log files are deleted, the others kept"
    assert len(live) == len(before_logs) + (3 if step in ("outcome", "completed") else 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_appends_onto_one_slice_conflict_and_onto_different_slices_both_commit(
    backend: Backend, version: str
) -> None:
    table, expected = seeded(backend, version=version)
    winner: list[str] = []

    def same_group(step: str) -> None:
        if step == "data" and not winner:  # A has written its log file; B appends first
            winner.append(table.upsert(trips([2], "us", fare=500.0)).instant)

    with pytest.raises(CommitConflictError, match="conflicts with instant"), observe_steps(same_group):
        WriteClient(table).upsert(trips([0], "us", fare=100.0))
    expected[2] = ("us", 502.0)
    assert rows(table) == expected
    assert len(log_names(table)) == 1, "the loser's log file is deleted"

    done: list[str] = []

    def other_group(step: str) -> None:
        if step == "data" and not done:
            done.append(table.upsert(trips([1], "de", fare=500.0)).instant)

    with observe_steps(other_group):
        WriteClient(table).upsert(trips([0], "us", fare=100.0))
    expected |= {0: ("us", 100.0), 1: ("de", 501.0)}
    assert rows(table) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rewrite_racing_an_append_onto_the_same_slice_conflicts(tmp_path: Path, version: str) -> None:
    """An insert rewrites a small slice without log files; an update racing it appends onto
    that slice: one of them must lose, or the update would vanish under the new base file."""
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = seeded(backend, version=version)
    raced: list[str] = []

    def append_meanwhile(step: str) -> None:
        if step == "data" and not raced:
            raced.append(table.upsert(trips([0], "us", fare=900.0)).instant)

    with pytest.raises(CommitConflictError), observe_steps(append_meanwhile):
        WriteClient(table).upsert(trips([100], "us"))
    expected[0] = ("us", 900.0)
    assert rows(table) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_racing_threads_appending_onto_one_slice_exactly_one_commits(tmp_path: Path, version: str) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, _ = seeded(backend, version=version)
    barrier = threading.Barrier(2, timeout=30)
    results: dict[str, object] = {}

    def at_metadata(step: str) -> None:
        if step == "metadata":
            barrier.wait()

    def write(name: str, fare: float) -> None:
        try:
            with observe_steps(at_metadata):
                results[name] = WriteClient(table).upsert(trips([0], fare=fare))
        except CommitConflictError as exc:
            results[name] = exc

    threads = [threading.Thread(target=write, args=(n, f)) for n, f in (("a", 100.0), ("b", 200.0))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(isinstance(r, CommitConflictError) for r in results.values()) == 1, results
    (fare,) = [f for n, f in (("a", 100.0), ("b", 200.0)) if not isinstance(results[n], Exception)]
    assert rows(table)[0] == ("us", fare)


@pytest.mark.parametrize("version", VERSIONS)
def test_rolling_back_a_delta_commit_deletes_its_log_files_and_frees_their_place(
    backend: Backend, version: str
) -> None:
    table, expected = seeded(backend, version=version)
    table.upsert(trips([0], "us", fare=100.0))
    expected[0] = ("us", 100.0)
    undone = table.upsert(trips([0, 1], ["us", "de"], fare=200.0))
    rollback(table.handle, undone.instant)
    assert rows(table) == expected
    assert len(log_names(table)) == 1
    redone = table.upsert(trips([0], "us", fare=300.0))  # takes the rolled-back log's place
    expected[0] = ("us", 300.0)
    assert rows(table) == expected
    assert redone.files_written == 1
    # Version 6 numbers a slice's log files; Hudi 1.x's are each version 1 of a file of its own.
    versions = ["1", "2"] if version == "6" else ["1", "1"]
    assert sorted(LOG_FILE_RE.fullmatch(n)[3] for n in log_names(table)) == versions  # type: ignore[index]


@pytest.mark.parametrize("version", VERSIONS)
def test_clean_keeps_the_log_files_of_live_slices_and_deletes_older_slices(
    tmp_path: Path, version: str
) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = seeded(backend, version=version, **{P.CLEANER_COMMITS_RETAINED: "1"})
    for n in range(3):
        table.upsert(trips([0], "us", fare=100.0 * n))  # logs onto us's slice
        table.upsert(trips([200 + n], "de"))  # de: rewritten while it has no log files
        expected |= {0: ("us", 100.0 * n), 200 + n: ("de", 210.0 + n)}
    assert rows(table) == expected
    clean(table.handle, 1)
    assert rows(table) == expected
    stored = {p.name for p in Path(tmp_path / "storage").rglob("*") if p.is_file() and "hoodie" not in p.name}
    live = {Path(path).name for s in table.file_slices() for path, _ in s.files()}
    assert len([n for n in live if n.startswith(".")]) == 3
    assert live <= stored, "us's base file and its three log files stay"
    # Of de's four slices, the newest and the one before it (what the earliest retained
    # instant saw, as Hudi keeps it) stay.
    (kept,) = stored - live
    assert kept.startswith(next(s.file_id for s in table.file_slices() if s.partition_path == "country=de"))


@pytest.mark.parametrize("version", VERSIONS)
def test_verify_and_repair_account_for_log_files(tmp_path: Path, version: str) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = seeded(backend, version=version)
    table.upsert(trips([0, 1], ["us", "de"], fare=100.0))
    table.delete(trips([2], "us").select(["trip_id", "country"]))
    expected |= {0: ("us", 100.0), 1: ("de", 101.0)}
    del expected[2]
    report = verify_table(table)
    assert report.ok, report.format()
    assert report.referenced == 2 + 3
    for path in Path(tmp_path / "tables/trips/.hoodie/metadata").rglob("*"):
        if path.is_file():
            path.write_bytes(b"garbled")
    repaired = repair_metadata(load_table(table.path))
    assert (repaired.missing_latest, repaired.missing_older, repaired.orphans) == ([], [], [])
    assert sum(name.startswith(".") for files in repaired.state.values() for name in files) == 3
    assert rows(load_table(table.path)) == expected


def test_the_table_type_is_given_once_and_the_cli_creates_merge_on_read_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InvalidTableConfigError, match="given once"):
        create_table(
            f"file://{tmp_path}/a",
            name="a",
            record_key_fields=["trip_id"],
            table_type="MERGE_ON_READ",
            properties={P.TABLE_TYPE: "COPY_ON_WRITE", P.STORAGE_STRATEGY_CLASS: "hive"},
        )
    path = f"file://{tmp_path}/t"
    storage = f"file://{tmp_path}/s"
    created = ["create", path, "--name", "t", "--record-key", "trip_id", "--partition-by", "country"]
    options = ["--precombine", "ts", "--table-type", "MERGE_ON_READ", "--storage-strategy", "object_store"]
    code = main([*created, *options, "--storage-path", storage])
    assert code == 0
    table = load_table(path)
    assert (table.config.table_type, table.config.federated) == ("MERGE_ON_READ", True)
    pa.parquet.write_table(trips([1, 2]), tmp_path / "in.parquet")  # type: ignore[attr-defined]
    pa.parquet.write_table(trips([1], fare=50.0), tmp_path / "up.parquet")  # type: ignore[attr-defined]
    assert main(["write", path, str(tmp_path / "in.parquet")]) == 0
    assert main(["write", path, str(tmp_path / "up.parquet")]) == 0
    assert rows(load_table(path)) == {1: ("us", 51.0), 2: ("us", 12.0)}
    assert len(log_names(load_table(path))) == 1
    assert "deltacommit" in {i.action for i in load_table(path).timeline()}
    capsys.readouterr()


def test_a_compaction_hudi_scheduled_stops_writes_until_it_completes(tmp_path: Path) -> None:
    """A compaction another writer scheduled (no heartbeat of fed's: Apache Hudi's scheduler):
    a write waits for it its bounded time, then fails as a conflict that names the instant and
    who scheduled it; a clean and a compaction fail at once; once it is gone, writes go on."""
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = seeded(backend)
    requested = tmp_path / "tables/trips/.hoodie/20991231000000000.compaction.requested"
    requested.write_bytes(b"")
    hudis = "compaction 20991231000000000 is pending( after .*)? and was scheduled by another writer than fed"
    with pytest.raises(CommitConflictError, match=hudis) as refused:  # waited for, 0.3 s at most
        WriteClient(table, {P.COMPACTION_WAIT_MS: "300"}).upsert(trips([0], fare=1.0))
    assert "pending after 0 s (hoodie.fed.write.compaction.wait.ms is 300 ms)" in str(refused.value)
    assert "run it with Apache Hudi's compaction job, then retry the write" in str(refused.value)
    with pytest.raises(CommitConflictError, match=hudis):
        clean(table.handle, 1)
    with pytest.raises(CommitConflictError, match=hudis):
        table.compact()
    assert rows(table) == expected
    requested.unlink()  # (as Hudi's compaction job completing it would, for this empty plan)
    table.upsert(trips([0], fare=1.0))
    expected[0] = ("us", 1.0)
    assert rows(table) == expected


def test_a_write_waits_for_a_compaction_another_fed_writer_runs(backend: Backend) -> None:
    """A merge-on-read write that meets another fed writer's compaction waits for it to
    complete, then writes onto the slices it made; it never blames Apache Hudi."""
    table, expected = changed(backend)
    reached, release = threading.Event(), threading.Event()

    def hold(step: str) -> None:
        if step == "data" and not reached.is_set():
            reached.set()
            release.wait(30)

    compacted: list[object] = []
    compactor = threading.Thread(target=lambda: compacted.append(_compact_observed(table, hold)))
    compactor.start()
    assert reached.wait(30)
    written: list[object] = []
    writer = threading.Thread(
        target=lambda: written.append(_upsert(backend, trips([0], "us", ts=5, fare=7.0)))
    )
    writer.start()
    time.sleep(1.0)
    assert not written, "the write waits while the compaction runs"
    release.set()
    compactor.join(60)
    writer.join(60)
    assert compacted, "the compaction ended"
    assert not isinstance(compacted[0], Exception), compacted
    assert written, "the write ended"
    assert not isinstance(written[0], Exception), written
    expected[0] = ("us", 7.0)
    assert rows(load_table(table.path, storage_options=table.storage_options)) == expected


def _compact_observed(table: Table, hook: object) -> object:
    try:
        with observe_steps(hook):  # type: ignore[arg-type]
            return table.compact()
    except Exception as exc:
        return exc


def _upsert(backend: Backend, data: pa.Table, **options: str) -> object:
    try:
        table = load_table(backend.table_path, storage_options=backend.storage_options)
        return WriteClient(table, options).upsert(data)
    except Exception as exc:
        return exc


def test_a_write_goes_on_once_a_dead_writers_compaction_is_rolled_back(backend: Backend) -> None:
    table, expected = changed(backend)
    with pytest.raises(Crash), observe_steps(crash_at("data")):
        table.compact()
    assert [i.action for i in table.timeline().pending()] == ["compaction"]
    table.upsert(trips([1], "de", ts=5, fare=8.0))  # waits out its heartbeat, rolls it back
    expected[1] = ("de", 9.0)  # a fare of 8.0 + its id
    assert rows(table) == expected
    assert not table.timeline().pending()
    assert table.compact() is not None
    assert rows(table) == read_optimized(table) == expected


def test_a_fed_compaction_completing_as_a_write_looks_is_never_taken_for_hudis(backend: Backend) -> None:
    """Between a fed compaction's heartbeat going and its instant completing, it has no
    heartbeat and is still pending: a write that looks then must not call it Hudi's."""
    table, expected = changed(backend)
    done = table.compact()
    assert done is not None
    hoodie = f"{table.path}/.hoodie"
    fs = table.fs.table_fs
    completed = f"{hoodie}/{done.instant}.commit"
    body = fs.cat_file(completed)
    fs.rm_file(completed)  # as it was the moment its heartbeat went: pending, no heartbeat
    finish = threading.Timer(0.1, lambda: fs.pipe_file(completed, body))
    finish.start()
    table.upsert(trips([1], "de", ts=5, fare=8.0))
    finish.join()
    expected[1] = ("de", 9.0)  # a fare of 8.0 + its id
    assert rows(table) == expected


def test_a_hudi_written_merge_on_read_table_takes_fedcores_upserts(
    tmp_path: Path, hudi_rs_tables: Path
) -> None:
    from ..hudi.test_hudi_conformance import unpack

    table = load_table(unpack(hudi_rs_tables / "mor" / "avro" / "v6_trips_8i1u.zip", tmp_path))
    before = table.read()
    key = table.config.record_key_fields[0]
    first = before.slice(0, 1)
    changed = first.set_column(first.schema.get_field_index("fare"), "fare", pa.array([12345.0]))
    result = table.upsert(changed.drop_columns([c for c in changed.column_names if c.startswith("_hoodie")]))
    assert (result.updated, result.inserted) == (1, 0)
    after = load_table(table.path).read()
    assert after.num_rows == before.num_rows
    by_key = {r[key]: r["fare"] for r in after.to_pylist()}
    assert by_key[first.column(key)[0].as_py()] == 12345.0
    others = {r[key]: r["fare"] for r in before.to_pylist() if r[key] != first.column(key)[0].as_py()}
    assert others.items() <= by_key.items()


# --- compaction ------------------------------------------------------------------------------


def changed(backend: Backend, version: str = "6") -> tuple[Table, Rows]:
    """``seeded``, then updates, deletes and a deleted key written again: five log files, two
    on one slice, three on the other."""
    table, expected = seeded(backend, version=version)
    table.upsert(trips([0, 1], ["us", "de"], ts=2, fare=100.0))
    table.delete(trips([2, 3], ["us", "de"]).select(["trip_id", "country"]))
    table.upsert(trips([3], "de", ts=3, fare=300.0))
    expected |= {0: ("us", 100.0), 1: ("de", 101.0), 3: ("de", 303.0)}
    del expected[2]
    return table, expected


@pytest.mark.parametrize("version", VERSIONS)
def test_a_compaction_folds_log_files_into_new_base_files_and_reads_do_not_change(
    backend: Backend, version: str
) -> None:
    table, expected = changed(backend, version)
    assert rows(table) == expected
    before = {s.file_id: s for s in table.file_slices()}
    done = table.compact()
    assert done is not None
    assert (done.file_groups, done.log_files, done.rows_written) == (2, 5, len(expected))
    assert rows(table) == read_optimized(table) == expected, "read-optimized now sees every change"
    slices = table.file_slices()
    assert {s.file_id for s in slices} == set(before)
    assert all(s.base_instant == done.instant and not s.log_files for s in slices)
    for file_slice in slices:  # same group, same prefix
        old = table.fs.to_physical(before[file_slice.file_id].path).rpartition("/")[0]
        assert table.fs.to_physical(file_slice.path).rpartition("/")[0] == old
    # Hudi's timeline: the plan in the requested file, completed as a commit.
    timeline = table.timeline()
    assert [(i.action, i.state) for i in timeline if i.time == done.instant] == [("commit", "completed")]
    requested = Instant(done.instant, "compaction", "requested")
    plan = read_plan(table.fs.table_fs.cat_file(table.handle.layout.instants.path(table.path, requested)))
    assert sorted(op["fileId"] for op in plan) == sorted(before)
    assert sum(len(op["deltaFilePaths"]) for op in plan) == 5
    # Records keep the commit time of the write that last changed them.
    read = table.read(columns=["trip_id", "_hoodie_commit_time"]).to_pylist()
    times = {r["trip_id"]: r["_hoodie_commit_time"] for r in read}
    assert len({times[3], times[0], times[10]}) == 3
    # A delta commit after it appends onto the new slices.
    later = table.upsert(trips([10], "us", fare=1000.0))
    expected[10] = ("us", 1010.0)
    assert rows(table) == expected
    (us,) = [s for s in table.file_slices() if s.log_files]
    assert us.base_instant == done.instant
    # Named after its slice's base instant (version 6), or after the delta commit (Hudi 1.x).
    named = done.instant if version == "6" else later.instant
    assert LOG_FILE_RE.fullmatch(us.log_files[0][0])[2] == named  # type: ignore[index]
    assert later.instant > done.instant
    assert table.compact() is not None
    assert table.compact() is None, "nothing left to compact"


@pytest.mark.parametrize("version", VERSIONS)
def test_inline_compaction_runs_after_the_configured_delta_commits(tmp_path: Path, version: str) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = seeded(
        backend, version=version, **{P.COMPACT_INLINE: "true", P.COMPACT_INLINE_MAX_DELTA_COMMITS: "3"}
    )  # the bulk insert is delta commit 1
    table.upsert(trips([0], "us", fare=100.0))
    assert [i.action for i in table.timeline()].count("commit") == 0
    result = table.upsert(trips([1], "de", fare=100.0))  # the third: compacted after it
    expected |= {0: ("us", 100.0), 1: ("de", 101.0)}
    assert result.warnings == ()
    assert [i.action for i in table.timeline()][-1] == "commit"
    assert not log_names(table)
    assert rows(table) == read_optimized(table) == expected


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("version", VERSIONS)
def test_a_crash_at_any_step_of_a_compaction_changes_no_row(tmp_path: Path, step: str, version: str) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = changed(backend, version)
    with pytest.raises(Crash), observe_steps(crash_at(step)):
        table.compact()
    assert rows(table) == expected
    wait_for_heartbeat_expiry()
    table.upsert(trips([20], "us", fare=1.0))  # the next writer recovers first
    expected[20] = ("us", 21.0)
    assert rows(table) == expected
    finished = step in ("outcome", "completed")  # decided: rolled forward
    assert ("commit" in {i.action for i in table.timeline()}) == finished
    live = {Path(path).name for s in table.file_slices() for path, _ in s.files()}
    stored = {p.name for p in Path(tmp_path / "storage").rglob("*") if p.is_file() and "hoodie" not in p.name}
    assert live <= stored
    if not finished:
        assert table.compact() is not None
        assert rows(table) == read_optimized(table) == expected
        assert not {i for i in table.timeline() if not i.is_completed}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_compaction_and_an_append_onto_the_same_slice_one_wins(tmp_path: Path, version: str) -> None:
    """An upsert opened before the compaction was planned appends onto the old slice: if the
    compaction completes first, the append fails (its update would be lost under the new
    base file); while a compaction runs, new writes wait for it, a bounded time."""
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = changed(backend, version)
    compacted: list[str] = []

    def compact_meanwhile(step: str) -> None:
        if step == "data" and not compacted:
            done = table.compact()
            assert done is not None
            compacted.append(done.instant)

    with pytest.raises(CommitConflictError), observe_steps(compact_meanwhile):
        WriteClient(table).upsert(trips([10], "us", fare=500.0))
    assert rows(table) == read_optimized(table) == expected
    assert not log_names(table)

    refused: list[Exception] = []

    def write_meanwhile(step: str) -> None:
        if step == "data" and not refused:
            try:  # waits for the compaction, which waits for it: past its bound, a conflict
                WriteClient(table, {P.COMPACTION_WAIT_MS: "300"}).upsert(trips([10], "us", fare=500.0))
            except CommitConflictError as exc:
                refused.append(exc)

    table.upsert(trips([12], "us", fare=1.0))
    with observe_steps(write_meanwhile):
        table.compact()
    assert "which another fed writer is running, is still pending after" in str(refused[0])
    assert "retry the write once it completes" in str(refused[0])
    table.upsert(trips([10], "us", fare=500.0))  # the retry, the compaction completed
    expected[10] = ("us", 510.0)
    expected[12] = ("us", 13.0)
    assert rows(table) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_a_compaction_is_not_rolled_back_and_clean_deletes_the_slices_it_replaced(
    tmp_path: Path, version: str
) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = changed(backend, version)
    done = table.compact()
    assert done is not None
    with pytest.raises(RollbackError, match="is a compaction"):
        rollback(table.handle, done.instant)
    table.upsert(trips([10], "us", fare=1.0))
    expected[10] = ("us", 11.0)
    clean(table.handle, 1)
    assert rows(table) == expected
    stored = {p.name for p in Path(tmp_path / "storage").rglob("*") if p.is_file() and "hoodie" not in p.name}
    live = {Path(path).name for s in table.file_slices() for path, _ in s.files()}
    assert stored == live, "the old slices, base and log files, are cleaned"


@pytest.mark.parametrize("version", VERSIONS)
def test_fed_compact_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = changed(backend, version)
    capsys.readouterr()
    assert main(["compact", table.path]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Compacted at ")
    assert "5 log files folded into 2 new base files (39 rows" in out
    assert main(["compact", table.path]) == 0
    assert capsys.readouterr().out.strip() == "Nothing to compact: no file slice has log files"
    cow = create_table(f"file://{tmp_path}/cow", name="cow", record_key_fields=["trip_id"])
    assert main(["compact", cow.path]) == 2
    assert "copy-on-write" in capsys.readouterr().err
    assert rows(load_table(table.path)) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_archival_and_repair_over_delta_commits_and_compactions(tmp_path: Path, version: str) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = seeded(
        backend,
        version=version,
        **{
            P.COMPACT_INLINE: "true",
            P.COMPACT_INLINE_MAX_DELTA_COMMITS: "2",
            P.CLEANER_COMMITS_RETAINED: "1",
            P.ARCHIVE_MIN_INSTANTS: "2",
            P.ARCHIVE_MAX_INSTANTS: "3",
        },
    )
    for n in range(8):
        home = ["us", "de"][n % 2]  # where seeded put trip n: an update, not a second record
        table.upsert(trips([n, 100 + n], [home, "de"], ts=2 + n, fare=float(1000 * n)))
        expected |= {n: (home, 1000.0 * n + n), 100 + n: ("de", 1000.0 * n + 100 + n)}
    actions = [i.action for i in table.timeline()]
    assert "commit" in actions, "compacted inline"
    assert table.timeline().archived_through is not None, "archived"
    assert rows(load_table(table.path)) == expected
    for path in Path(tmp_path / "tables/trips/.hoodie/metadata").rglob("*"):
        if path.is_file():
            path.write_bytes(b"garbled")
    repaired = repair_metadata(load_table(table.path))
    assert (repaired.missing_latest, repaired.orphans) == ([], [])
    assert rows(load_table(table.path)) == expected
    assert verify_table(load_table(table.path)).ok


def test_the_iceberg_view_holds_the_read_optimized_rows_until_a_compaction(tmp_path: Path) -> None:
    """What Trino and Hive read of a merge-on-read table: its base files, as compacted last."""
    from pyiceberg.table import StaticTable

    from fedcore.iceberg import publish

    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, expected = changed(backend)

    def view_rows() -> Rows:
        result = publish(table)
        assert result.metadata_location is not None
        data = StaticTable.from_metadata(result.metadata_location).scan().to_arrow().to_pylist()
        return {r["trip_id"]: (r["country"], r["fare"]) for r in data}

    assert view_rows() == read_optimized(table) != expected
    table.compact()
    assert view_rows() == expected
    table.upsert(trips([10], "us", fare=1.0))
    assert view_rows() == expected, "until the next compaction"
    expected[10] = ("us", 11.0)
    table.compact()
    assert view_rows() == expected


def test_incremental_queries_and_time_travel_see_through_log_files_and_compactions(tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table, _ = seeded(backend)
    first = table.timeline().instants[-1].time
    table.upsert(trips([0, 1], ["us", "de"], fare=100.0))
    as_of_update = rows(table)
    update = table.timeline().instants[-1].time
    table.upsert(trips([4], "us", fare=400.0))

    def changed_ids(begin: str) -> list[int]:
        return sorted(table.changes(begin, columns=["trip_id"]).to_arrow().column("trip_id").to_pylist())

    assert changed_ids(first) == [0, 1, 4]
    assert changed_ids(update) == [4]
    done = table.compact()
    assert done is not None
    assert changed_ids(first) == [0, 1, 4], "a compaction keeps each record's commit time"
    assert changed_ids(update) == [4]
    assert changed_ids(done.instant) == []
    assert rows(table, as_of=update) == as_of_update, "time travel to before the compaction"


def test_migrating_to_a_merge_on_read_table_copies_fed_log_files_as_they_are(tmp_path: Path) -> None:
    from fedcore.services.migrate import migrate

    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    source, expected = changed(backend)
    in_source = dict(expected)
    mor = {P.TABLE_TYPE: "MERGE_ON_READ"}
    storage = {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: f"file://{tmp_path}/moved"}
    report = migrate(source.path, f"file://{tmp_path}/target", storage=storage, properties=mor)
    assert (report.copied, report.rewritten) == (2 + 5, 0), "two base files and five log files"
    target = load_table(f"file://{tmp_path}/target")
    assert target.config.merge_on_read
    assert rows(target) == expected
    assert read_optimized(target) == read_optimized(source)
    assert sorted(log_names(target)) == sorted(log_names(source)), "names kept"
    assert verify_table(target).ok
    target.upsert(trips([10], "us", fare=1.0))  # appends after the copied log files
    expected[10] = ("us", 11.0)
    assert rows(target) == expected
    assert target.compact() is not None
    assert rows(target) == read_optimized(target) == expected
    # A copy-on-write target (the default) gets the slices merged.
    merged = migrate(
        source.path, f"file://{tmp_path}/cow", storage={**storage, P.STORAGE_PATH: f"file://{tmp_path}/c"}
    )
    assert merged.rewritten == 2
    assert rows(load_table(f"file://{tmp_path}/cow")) == in_source


def test_migrating_a_hudi_1x_merge_on_read_table_merges_its_slices(tmp_path: Path) -> None:
    """A Hudi 1.x log file is placed by its delta commit's completion time, which the target's
    new timeline does not have, and a version-6 name says a slice, not a delta commit: the
    slices with log files are merged into base files, not copied."""
    from fedcore.services.migrate import migrate

    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    source, expected = changed(backend, "8")
    properties = {P.TABLE_TYPE: "MERGE_ON_READ"}
    storage = {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: f"file://{tmp_path}/moved"}
    report = migrate(source.path, f"file://{tmp_path}/target", storage=storage, properties=properties)
    assert (report.copied, report.rewritten) == (0, 2)
    target = load_table(f"file://{tmp_path}/target")
    assert (target.config.version, target.config.merge_on_read) == (6, True)
    assert rows(target) == read_optimized(target) == expected
    assert not log_names(target)
    target.upsert(trips([10], "us", fare=1.0))
    expected[10] = ("us", 11.0)
    assert rows(target) == expected
    assert len(log_names(target)) == 1


def test_keys_another_writer_put_in_log_files_are_found_not_inserted_again(tmp_path: Path) -> None:
    """A merge-on-read table fed did not write (no fed metadata table) may hold keys in log
    files only (Hudi with an index that can index log files puts inserts there): an upsert
    of such a key updates it, never adds a second row."""
    from fedcore.log.blocks import parquet_data_block
    from fedcore.schema.avro import to_avro_json
    from fedcore.schema.meta import with_meta_fields
    from fedcore.timeline.commit_metadata import CommitMetadata
    from fedcore.timeline.layout import V6

    path = f"file://{tmp_path}/t"
    table = create_table(
        path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        table_type="MERGE_ON_READ",
        properties={P.STORAGE_STRATEGY_CLASS: "hive", P.METADATA_ENABLE: "false"},
    )
    table.bulk_insert(trips([1, 2]))
    (base,) = table.file_slices()
    # Another writer's delta commit: key 7 inserted into the group's log file.
    instant = "20991231000000000"
    row = trips([7], fare=70.0)
    meta = pa.table(
        {
            "_hoodie_commit_time": [instant],
            "_hoodie_commit_seqno": [f"{instant}_0_1"],
            "_hoodie_record_key": ["7"],
            "_hoodie_partition_path": ["country=us"],
            "_hoodie_file_name": [base.file_id],
        }
    )
    records = pa.Table.from_arrays(
        [*meta.columns, *row.columns], names=[*meta.column_names, *row.column_names]
    )
    schema = table.schema()
    assert schema is not None
    block = parquet_data_block(records, instant, to_avro_json(with_meta_fields(schema), "trips"))
    name = f".{base.file_id}_{base.base_instant}.log.1_0-1-0"
    (tmp_path / "t" / "country=us" / name).write_bytes(block)
    (tmp_path / "t" / ".hoodie" / f"{instant}.deltacommit").write_bytes(
        V6.commits.encode(CommitMetadata("UPSERT", schema=to_avro_json(schema, "trips")))
    )
    table = load_table(path)
    assert rows(table) == {1: ("us", 11.0), 2: ("us", 12.0), 7: ("us", 77.0)}
    result = table.upsert(trips([7], fare=700.0))
    assert (result.updated, result.inserted) == (1, 0)
    assert rows(load_table(path)) == {1: ("us", 11.0), 2: ("us", 12.0), 7: ("us", 707.0)}


def _requested_replace(operation: str, file_ids: list[tuple[str, str]]) -> bytes:
    """Hudi's ``HoodieRequestedReplaceMetadata`` as its clustering scheduler writes it (the
    fields a reader needs): the operation and, for a clustering, the slices it rewrites."""
    slice_info = {
        "type": "record",
        "name": "HoodieSliceInfo",
        "fields": [
            {"name": "dataFilePath", "type": ["null", "string"], "default": None},
            {"name": "fileId", "type": "string"},
            {"name": "partitionPath", "type": ["null", "string"], "default": None},
        ],
    }
    group = {
        "type": "record",
        "name": "HoodieClusteringGroup",
        "fields": [{"name": "slices", "type": {"type": "array", "items": slice_info}}],
    }
    plan = {
        "type": "record",
        "name": "HoodieClusteringPlan",
        "fields": [{"name": "inputGroups", "type": {"type": "array", "items": group}}],
    }
    schema = {
        "type": "record",
        "name": "HoodieRequestedReplaceMetadata",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            {"name": "operationType", "type": ["null", "string"]},
            {"name": "clusteringPlan", "type": ["null", plan]},
            {"name": "version", "type": ["int", "null"]},
        ],
    }
    record = {
        "operationType": operation,
        "clusteringPlan": {
            "inputGroups": [
                {"slices": [{"dataFilePath": None, "fileId": f, "partitionPath": p}]} for p, f in file_ids
            ]
        },
        "version": 1,
    }
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), [record])
    return out.getvalue()


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_a_clustering_hudi_scheduled_stops_writes_and_an_insert_overwrite_does_not(
    tmp_path: Path, table_type: str
) -> None:
    """A pending replace commit whose requested metadata is a clustering's (Hudi's clustering
    scheduler, no heartbeat of fed's) rewrites the file groups it names once Hudi runs it: a
    write changing them meanwhile would be lost, so fed's writes are refused, naming it. One
    that is another writer's insert overwrite is a write: fed goes on beside it."""
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table = create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        table_type=table_type,  # type: ignore[arg-type]
        properties={**FAST_HEARTBEAT},
    )
    table.bulk_insert(trips(range(4)))
    groups = [("country=us", s.file_id) for s in table.file_slices()]
    hoodie = tmp_path / "tables/trips/.hoodie"
    (hoodie / "20991231000000000.replacecommit.requested").write_bytes(_requested_replace("CLUSTER", groups))
    with pytest.raises(
        CommitConflictError,
        match=r"clustering 20991231000000000 is pending after .* and was scheduled by another writer",
    ) as refused:
        WriteClient(table, {P.COMPACTION_WAIT_MS: "0"}).upsert(trips([1], fare=5.0))
    assert "run it with Apache Hudi's clustering job, then retry the write" in str(refused.value)
    (hoodie / "20991231000000000.replacecommit.requested").unlink()
    (hoodie / "20991231000000001.replacecommit.requested").write_bytes(
        _requested_replace("INSERT_OVERWRITE", [])
    )
    table.upsert(trips([1], fare=5.0))
    assert rows(table) == {0: ("us", 10.0), 1: ("us", 6.0), 2: ("us", 12.0), 3: ("us", 13.0)}
