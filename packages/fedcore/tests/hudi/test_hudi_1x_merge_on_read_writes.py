"""fedcore writing merge-on-read tables of versions 8 and 9 (Hudi 1.x): delta commits append a
log file of their own per file group, named after the delta commit (``.<file id>_<delta
commit>.log.1_<token>``), whose slice follows from when the commit completed; compaction plans
of version 2 (file names), completed as commits; rollbacks delete files. After every write,
hudi-rs reads the whole rows (meta columns included) fedcore reads, and both equal a model.
Apache Hudi 1.2's Spark reader holds them too (``tox -e hudi``)."""

from __future__ import annotations

import io
import os
import threading
from datetime import timedelta
from pathlib import Path

import fastavro
import hudi
import pyarrow as pa
import pytest

from fed_dev.crash import Crash, crash_at
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import CommitConflictError
from fedcore.files.filenames import LOG_FILE_RE
from fedcore.log.blocks import BlockType, read_blocks
from fedcore.services.rollback import rollback
from fedcore.steps import observe_steps
from fedcore.table import Table, create_table, load_table
from fedcore.timeline import instant_time, parse_instant_time
from fedcore.timeline.avro_commit_codec import AvroCommitCodec
from fedcore.write.client import WriteClient

from ..commit.test_commit_protocol import wait_for_heartbeat_expiry
from .test_hudi_1x_writes import (
    COLUMNS,
    COMPLETED,
    FAST_HEARTBEAT,
    data_rows,
    hudi_rs_rows,
    timeline_names,
    trips,
    whole_rows,
)

Model = dict[int, tuple[str, int, float]]


def mor_table(path: str, version: str, storage_options: dict[str, str] | None = None, **extra: str) -> Table:
    return create_table(
        path,
        name="trips",
        record_key_fields=["id"],
        partition_fields=["country"],
        precombine_field="ts",
        table_type="MERGE_ON_READ",
        properties={P.WRITE_TABLE_VERSION: version, **FAST_HEARTBEAT, **extra},
        storage_options=storage_options,
    )


def check(path: str, model: Model, storage_options: dict[str, str] | None = None) -> None:
    """fedcore's rows equal the model, and hudi-rs reads fedcore's whole rows."""
    fed = load_table(path, storage_options=storage_options)
    assert data_rows(fed) == model
    if storage_options is None:
        assert hudi_rs_rows(path) == whole_rows(fed.scan().to_arrow())


def log_files(path: str, partition: str) -> list[str]:
    return sorted(
        n
        for n in os.listdir(Path(path.removeprefix("file://"), partition))
        if n.startswith(".") and ".log." in n
    )


def timeline_file(path: str, name: str) -> bytes:
    return Path(path.removeprefix("file://"), ".hoodie", "timeline", name).read_bytes()


def completed_file(path: str, instant: str) -> str:
    (name,) = [n for n in timeline_names(path) if n.startswith(f"{instant}_") and COMPLETED.fullmatch(n)]
    return name


@pytest.mark.parametrize("version", ["8", "9"])
def test_delta_commits_and_compactions_are_read_by_hudi_rs_as_fedcore_reads_them(
    tmp_path: Path, version: str
) -> None:
    path = str(tmp_path / "t")
    table = mor_table(path, version)
    model: Model = {}
    table.bulk_insert(trips([1, 2, 3, 4], "us", 10))
    table.bulk_insert(trips([5, 6], "de", 10))
    model |= {i: ("us", 10, 0.0 + i) for i in (1, 2, 3, 4)} | {i: ("de", 10, 0.0 + i) for i in (5, 6)}
    check(path, model)

    updated = table.upsert(trips([1, 2], "us", 20, 100.0))  # updates only: a log file
    model |= {1: ("us", 20, 101.0), 2: ("us", 20, 102.0)}
    check(path, model)
    (first,) = log_files(path, "country=us")
    found = LOG_FILE_RE.fullmatch(first)
    assert found is not None
    assert (found[2], found[3]) == (updated.instant, "1"), "named after its delta commit, version 1"
    blocks = read_blocks((tmp_path / "t" / "country=us" / first).read_bytes(), first)
    assert [b.instant for b in blocks] == [updated.instant]
    # Hudi 1.x's account of a log file in the delta commit's metadata.
    metadata = AvroCommitCodec().decode(timeline_file(path, completed_file(path, updated.instant)))
    (stat,) = metadata.stats
    assert (stat.path, stat.prev_commit, stat.log_version, stat.base_file) == (
        f"country=us/{first}",
        updated.instant,
        1,
        "",
    )

    table.upsert(trips([2], "us", 5, 200.0))  # an older ordering value: the stored record stays
    check(path, model)
    deleted = table.delete(trips([3], "us", 30))
    del model[3]
    check(path, model)
    us_logs = log_files(path, "country=us")
    assert len(us_logs) == 3, "a file of its own per delta commit, never an append"
    assert {LOG_FILE_RE.fullmatch(n)[3] for n in us_logs} == {"1"}  # type: ignore[index]
    assert any(LOG_FILE_RE.fullmatch(n)[2] == deleted.instant for n in us_logs)  # type: ignore[index]

    table.upsert(trips([5, 7], "de", 20, 500.0))  # an insert: the group's base file rewritten
    model |= {5: ("de", 20, 505.0), 7: ("de", 20, 507.0)}
    check(path, model)

    done = table.compact()
    assert done is not None
    assert (done.file_groups, done.log_files) == (1, 3)
    check(path, model)
    names = timeline_names(path)
    assert f"{done.instant}.compaction.requested" in names
    assert timeline_file(path, f"{done.instant}.compaction.inflight") == b""
    assert completed_file(path, done.instant).endswith(".commit")
    (plan,) = fastavro.reader(io.BytesIO(timeline_file(path, f"{done.instant}.compaction.requested")))
    assert plan["version"] == 2
    (operation,) = plan["operations"]
    assert sorted(operation["deltaFilePaths"]) == us_logs, "file names, not paths"
    assert "/" not in operation["dataFilePath"]
    # Hudi's rule for a compaction: planned after the delta commits it folds completed.
    completions = {m[1]: m[2] for m in map(COMPLETED.fullmatch, names) if m is not None}
    assert all(completions[LOG_FILE_RE.fullmatch(n)[2]] < done.instant for n in us_logs)  # type: ignore[index]
    read_optimized = load_table(path).scan(query_type="read_optimized").to_arrow()
    assert {r["id"] for r in read_optimized.to_pylist()} == set(model)

    later = table.upsert(trips([1], "us", 50, 500.0))  # onto the compaction's slice
    model[1] = ("us", 50, 501.0)
    check(path, model)
    table.delete(trips([4], "us", 50))
    del model[4]
    check(path, model)
    fed = load_table(path)
    (us,) = [s for s in fed.file_slices() if s.partition_path == "country=us"]
    assert us.base_instant == done.instant
    assert LOG_FILE_RE.fullmatch(us.log_files[0][0])[2] == later.instant  # type: ignore[index]
    assert fed.compact() is not None
    check(path, model)


def test_time_travel_and_read_optimized_reads_agree_with_hudi_rs(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = mor_table(path, "9")
    table.bulk_insert(trips([1, 2, 3], "us", 10))
    times = [table.upsert(trips([1], "us", 20 + step, 10.0 * step)).instant for step in range(3)]
    table.compact()
    times.append(table.upsert(trips([2], "us", 40, 2.0)).instant)
    fed = load_table(path)
    built = hudi.HudiTableBuilder.from_base_uri(path).build()
    for requested in times:
        completion = completed_file(path, requested).split("_")[1].split(".")[0]
        expected = pa.Table.from_batches(built.read(hudi.HudiReadOptions().with_as_of_timestamp(completion)))
        assert whole_rows(fed.read(as_of=completion)) == whole_rows(expected), requested
    optimized = built.read(
        hudi.HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    )
    assert whole_rows(fed.scan(query_type="read_optimized").to_arrow()) == whole_rows(
        pa.Table.from_batches(optimized)
    )


def test_time_travel_leaves_out_a_log_file_on_a_later_compactions_slice(tmp_path: Path) -> None:
    """A delta commit requested before a compaction was planned and completed after it (Hudi
    1.0.2's first write on a table its upgrade compacts) is on the compaction's slice, which as
    of the delta commit had not begun: time travel there leaves its log file out, as Hudi 1.x's
    readers do; the latest snapshot merges it onto the compacted base."""
    path = str(tmp_path / "t")
    table = mor_table(path, "9")
    first = table.bulk_insert(trips([1, 2], "us", 10)).instant
    late = table.upsert(trips([1], "us", 20, 100.0)).instant
    done = table.compact()
    assert done is not None
    # fed's own writes never complete so (a compaction planned without a delta commit loses to
    # it: ``test_an_append_completing_while_a_compaction_is_pending_wins_over_it``): the delta
    # commit's completed file is given the completion time Hudi's write would have had.
    folder = Path(path, ".hoodie", "timeline")
    compacted_at = completed_file(path, done.instant).split("_")[1].split(".")[0]
    after = instant_time(parse_instant_time(compacted_at) + timedelta(milliseconds=1))
    (folder / completed_file(path, late)).rename(folder / f"{late}_{after}.deltacommit")
    fed = load_table(path)
    as_first = whole_rows(fed.read(columns=COLUMNS, as_of=first))
    assert whole_rows(fed.read(columns=COLUMNS, as_of=late)) == as_first
    built = hudi.HudiTableBuilder.from_base_uri(path).build()
    rs = pa.Table.from_batches(built.read(hudi.HudiReadOptions().with_as_of_timestamp(late)))
    assert whole_rows(rs) == as_first, "hudi-rs leaves it out too"
    latest = whole_rows(fed.read(columns=COLUMNS))
    assert whole_rows(fed.read(columns=COLUMNS, as_of=done.instant)) == latest
    check(path, {1: ("us", 20, 101.0), 2: ("us", 10, 2.0)})
    (us,) = fed.file_slices()
    assert (us.base_instant, [late in name for name, _ in us.log_files]) == (done.instant, [True])


@pytest.mark.parametrize("step", ["data", "metadata", "claims"])
def test_a_failed_delta_commit_is_rolled_back_by_deleting_its_log_files(backend: Backend, step: str) -> None:
    table = mor_table(backend.table_path, "8", backend.storage_options)
    table.bulk_insert(trips([1, 2], "us", 10))
    table.upsert(trips([1], "us", 20, 100.0))
    model: Model = {1: ("us", 20, 101.0), 2: ("us", 10, 2.0)}
    with pytest.raises(Crash), observe_steps(crash_at(step)):
        table.upsert(trips([2], "us", 30, 300.0))
    wait_for_heartbeat_expiry()
    fresh = load_table(backend.table_path, options=FAST_HEARTBEAT, storage_options=backend.storage_options)
    fresh.upsert(trips([1], "us", 40, 400.0))  # rolls the failed write back first, then appends
    model[1] = ("us", 40, 401.0)
    check(backend.table_path, model, backend.storage_options)
    fed = load_table(backend.table_path, storage_options=backend.storage_options)
    (us,) = fed.file_slices()
    assert len(us.log_files) == 2, "the failed write's log file is gone"
    for path in us.log_paths:  # no rollback (command) blocks: Hudi 1.x deletes, never appends
        assert {b.type for b in read_blocks(fed.fs.cat_file(path), path)} <= {
            BlockType.PARQUET_DATA,
            BlockType.AVRO_DATA,
        }
    rollbacks = [i for i in fed.timeline().completed() if i.action == "rollback"]
    assert len(rollbacks) == 1
    assert rollbacks[0].completion_time is not None


def test_rolling_back_a_completed_delta_commit_frees_its_place_in_the_slice(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = mor_table(path, "9")
    table.bulk_insert(trips([1, 2], "us", 10))
    table.upsert(trips([1], "us", 20, 100.0))
    undone = table.upsert(trips([2], "us", 30, 300.0))
    rollback(table.handle, undone.instant)
    model: Model = {1: ("us", 20, 101.0), 2: ("us", 10, 2.0)}
    check(path, model)
    assert not any(undone.instant in n for n in log_files(path, "country=us"))
    assert not any(n.startswith(undone.instant) for n in timeline_names(path)), "no file of it is left"
    table.upsert(trips([2], "us", 40, 400.0))  # takes the rolled-back file's place
    model[2] = ("us", 40, 402.0)
    check(path, model)


def test_appends_onto_one_slice_conflict_and_a_compaction_racing_an_append_one_wins(tmp_path: Path) -> None:
    """Two delta commits onto one slice at once: each writes a file of its own, and fed's
    claim on the slice's next place lets one of them commit (the loser leaves nothing); an
    append racing a compaction of its slice: the compaction, completing first, wins (the
    append's update would be lost under the new base file), and writes after it go onto the
    compaction's slice."""
    path = str(tmp_path / "t")
    table = mor_table(path, "8")
    table.bulk_insert(trips([1, 2, 3], "us", 10))
    table.upsert(trips([1], "us", 20, 100.0))
    model: Model = {1: ("us", 20, 101.0), 2: ("us", 10, 2.0), 3: ("us", 10, 3.0)}

    def append_meanwhile(step: str) -> None:
        if step == "data" and not appended:
            appended.append(WriteClient(load_table(path)).upsert(trips([2], "us", 30, 300.0)).instant)

    appended: list[str] = []
    with pytest.raises(CommitConflictError), observe_steps(append_meanwhile):
        WriteClient(table).upsert(trips([3], "us", 30, 300.0))
    model[2] = ("us", 30, 302.0)
    check(path, model)
    (us,) = load_table(path).file_slices()
    assert len(us.log_files) == 2, "the loser's log file is deleted"

    compacted: list[str] = []

    def compact_meanwhile(step: str) -> None:
        if step == "data" and not compacted:
            done = load_table(path).compact()
            assert done is not None
            compacted.append(done.instant)

    with pytest.raises(CommitConflictError), observe_steps(compact_meanwhile):
        WriteClient(table).upsert(trips([3], "us", 40, 400.0))
    check(path, model)
    fed = load_table(path)
    assert [s.log_files for s in fed.file_slices()] == [()], "the losing append left nothing"
    later = fed.upsert(trips([3], "us", 40, 400.0))  # onto the compaction's slice
    model[3] = ("us", 40, 403.0)
    check(path, model)
    assert later.instant > compacted[0]


def test_an_append_completing_while_a_compaction_is_pending_wins_over_it(tmp_path: Path) -> None:
    """A delta commit opened before a compaction was planned completes after the compaction
    was requested: Hudi 1.x places its log file on the compaction's slice, whose base file would
    not hold its update; so the compaction, claiming the same place of the old slice, fails and
    is rolled back (nothing of it visible), and the file stays on the old slice."""
    path = str(tmp_path / "t")
    table = mor_table(path, "9")
    table.bulk_insert(trips([1, 2, 3], "us", 10))
    table.upsert(trips([1], "us", 20, 100.0))
    planned, go = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def compaction() -> None:
        def hold(step: str) -> None:
            if step == "data" and not planned.is_set():
                planned.set()
                go.wait(30)

        try:
            with observe_steps(hold):
                outcome["done"] = load_table(path).compact()
        except CommitConflictError as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=compaction)

    def compact_meanwhile(step: str) -> None:
        if step == "data" and not planned.is_set():
            worker.start()
            assert planned.wait(30), "the compaction was requested"

    with observe_steps(compact_meanwhile):
        appended = WriteClient(table).upsert(trips([2], "us", 30, 300.0))
    go.set()
    worker.join(60)
    assert isinstance(outcome.get("error"), CommitConflictError), outcome
    model: Model = {1: ("us", 20, 101.0), 2: ("us", 30, 302.0), 3: ("us", 10, 3.0)}
    check(path, model)
    fed = load_table(path)
    assert not [i for i in fed.timeline() if i.action == "compaction" or i.action == "commit"]
    (us,) = fed.file_slices()
    assert appended.instant in us.log_files[-1][0]
    done = fed.compact()  # planned again, now with both files
    assert done is not None
    assert done.log_files == 2
    check(path, model)


def test_a_crash_in_a_compaction_changes_no_row_and_it_runs_again(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = mor_table(path, "9")
    table.bulk_insert(trips([1, 2], "us", 10))
    table.upsert(trips([1], "us", 20, 100.0))
    model: Model = {1: ("us", 20, 101.0), 2: ("us", 10, 2.0)}
    with pytest.raises(Crash), observe_steps(crash_at("data")):
        table.compact()
    check(path, model)
    wait_for_heartbeat_expiry()
    fresh = load_table(path, options=FAST_HEARTBEAT)
    fresh.upsert(trips([2], "us", 30, 300.0))  # rolls the compaction back, appends onto the old slice
    model[2] = ("us", 30, 302.0)
    check(path, model)
    assert fresh.compact() is not None
    check(path, model)


def test_inline_compaction_and_cleaning_keep_the_table_hudi_rs_reads(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = mor_table(
        path,
        "9",
        **{
            str(P.COMPACT_INLINE): "true",
            str(P.COMPACT_INLINE_MAX_DELTA_COMMITS): "3",
            str(P.CLEANER_COMMITS_RETAINED): "2",
        },
    )
    model: Model = {}
    table.bulk_insert(trips([0, 1, 2], "us", 0))
    model |= {i: ("us", 0, 0.0 + i) for i in (0, 1, 2)}
    for step in range(1, 9):
        table.upsert(trips([step % 3], "us", step, 10.0 * step))
        model[step % 3] = ("us", step, 10.0 * step + step % 3)
        check(path, model)
    actions = [COMPLETED.fullmatch(n)[3] for n in timeline_names(path) if COMPLETED.fullmatch(n)]  # type: ignore[index]
    assert actions.count("commit") >= 2, "compacted inline"
    assert "clean" in actions
    live = {Path(p).name for s in load_table(path).file_slices() for p, _ in s.files()}
    stored = {n for n in os.listdir(tmp_path / "t" / "country=us") if not n.startswith(".hoodie")}
    assert live <= stored
    assert len(stored) < 12, "older slices were cleaned"


@pytest.mark.parametrize("cleaning", [True, False])
def test_archival_keeps_every_delta_commit_a_live_log_file_is_named_after(
    tmp_path: Path, cleaning: bool
) -> None:
    """A Hudi 1.x log file is placed by its delta commit's completion time, which readers find
    on the active timeline (Hudi's own history aside): archived into fed's archive while the
    file lives, the commit would be of unknown completion and its file merged onto the latest
    slice, over the compaction that already folded it in (commit-time ordering: stale rows).
    So archival waits for the cleaner to delete the file."""
    path = str(tmp_path / "t")
    table = mor_table(
        path,
        "9",
        **{
            str(P.RECORD_MERGE_MODE): "COMMIT_TIME_ORDERING",
            str(P.COMPACT_INLINE): "true",
            str(P.COMPACT_INLINE_MAX_DELTA_COMMITS): "3",
            str(P.CLEAN_AUTOMATIC): str(cleaning).lower(),
            str(P.CLEANER_COMMITS_RETAINED): "1",
            str(P.ARCHIVE_MIN_INSTANTS): "2",
            str(P.ARCHIVE_MAX_INSTANTS): "3",
        },
    )
    model: Model = {}
    table.bulk_insert(trips([0, 1, 2], "us", 0))
    model |= {i: ("us", 0, 0.0 + i) for i in (0, 1, 2)}
    for step in range(1, 13):
        table.upsert(trips([step % 3], "us", step, 10.0 * step))
        model[step % 3] = ("us", step, 10.0 * step + step % 3)
        check(path, model)
    fed = load_table(path)
    archived = fed.timeline().archived_through
    live = [LOG_FILE_RE.fullmatch(n)[2] for n in log_files(path, "country=us")]  # type: ignore[index]
    if cleaning:
        assert archived is not None, "archived once the cleaner deleted the old slices' files"
    assert archived is None or archived < min(live)
