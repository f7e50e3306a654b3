"""Which file slice a Hudi 1.x log file belongs to: its name carries the delta commit that
wrote it, and the slice is the one with the greatest start not after that commit's completion
time (Hudi's ``HoodieFileGroup.getBaseInstantTime``), not the instant the name carries."""

from __future__ import annotations

import json
import pickle
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedcore.exceptions import InvalidInstantError, UnsupportedTableError
from fedcore.files.file_group import LogSlicing, SliceFiles, file_groups
from fedcore.files.filenames import LogFileNamingV6, LogFileNamingV8, base_file_name, log_file_name
from fedcore.table import load_table

HUDI_RS_TABLES = Path(__file__).resolve().parents[4] / "tests" / "data" / "hudi-rs"
V8 = LogFileNamingV8()
FID = "3f2c7a7e-1b1e-4c55-9a7e-0d9d8c1b2a11-0"
T1, T2, T3 = "20260101000000100", "20260101000000200", "20260101000000300"


def base(instant: str) -> str:
    return base_file_name(FID, "0-1-2", instant)


def log(delta_commit: str, version: int = 1, token: str = "0-1-2") -> str:
    return log_file_name(FID, delta_commit, version, token)


def latest(
    names: list[str], slicing: LogSlicing, completed: set[str]
) -> tuple[str, str | None, tuple[str, ...]]:
    """The latest slice's start, base file and log files; ``completed``: the instants on the
    timeline that completed (an older one than the timeline's start completed too)."""
    (group,) = file_groups(names, V8, slicing).values()
    found = group.latest_slice(None, lambda t: t in completed or t < slicing.timeline_start)
    assert found is not None
    return found.base_instant, found.base_file, found.log_files


def test_a_delta_commit_that_completed_after_a_compaction_began_is_on_the_compactions_slice() -> None:
    early = "20260101000000150"  # requested before T2, completed after it
    on_time = "20260101000000120"  # requested and completed before T2
    names = [base(T1), base(T2), log(early), log(on_time)]
    slicing = LogSlicing(
        {T1: T1, T2: "20260101000000210", early: "20260101000000250", on_time: "20260101000000130"}
    )
    (group,) = file_groups(names, V8, slicing).values()
    assert group.logs_onto(T1) == [(1, log(on_time))], "completed before the compaction: the old slice"
    assert group.logs_onto(T2) == [(1, log(early))], "completed after it: the compaction's slice"
    assert latest(names, slicing, {T1, T2, early, on_time}) == (T2, base(T2), (log(early),))
    # Version 6 names the slice itself: the same names mean something else there.
    (v6,) = file_groups(names, LogFileNamingV6()).values()
    assert v6.starts() == [T1, on_time, early, T2]


def test_a_compaction_after_the_listing_places_a_log_file_completed_after_it_began() -> None:
    """Files listed as of an earlier instant lack a later compaction's base file: the slicing
    knows the compaction's slice of that group (in that partition), and a delta commit that
    completed after it began is on it, so the slice read as of then leaves the file out."""
    early = "20260101000000150"  # requested before T2, completed after it
    names = [base(T1), log(early)]
    slicing = LogSlicing(
        {T1: T1, T2: "20260101000000210", early: "20260101000000250"},
        compacted={("p=1", FID): frozenset({T2})},
    )
    (group,) = file_groups(names, V8, slicing, "p=1").values()
    assert (group.logs_onto(T1), group.logs_onto(T2)) == ([], [(1, log(early))])
    assert group.latest_slice(early, lambda _: True) == SliceFiles(T1, base(T1), ())
    # The same file id in another partition is another group, which that compaction did not write.
    (other,) = file_groups(names, V8, slicing, "p=2").values()
    assert other.logs_onto(T1) == [(1, log(early))]
    assert other.latest_slice(early, lambda _: True) == SliceFiles(T1, base(T1), (log(early),))


def test_log_files_after_a_pending_compaction_are_merged_onto_the_latest_started_slice() -> None:
    before, after = "20260101000000150", "20260101000000250"
    names = [base(T1), log(before), log(after)]
    slicing = LogSlicing(
        {T1: T1, before: "20260101000000160", after: "20260101000000260"}, pending_compactions={T2}
    )
    (group,) = file_groups(names, V8, slicing).values()
    assert group.logs_onto(T2) == [(1, log(after))]
    assert latest(names, slicing, {T1, before, after}) == (T1, base(T1), (log(before), log(after)))


def test_a_group_begun_after_a_pending_compaction_is_its_own_slice() -> None:
    first, second = "20260101000000250", "20260101000000350"
    names = [log(second), log(first)]
    slicing = LogSlicing({first: "20260101000000260", second: "20260101000000360"}, pending_compactions={T2})
    assert latest(names, slicing, {first, second}) == (first, None, (log(first), log(second)))


def test_a_failed_delta_commits_log_file_stays_on_the_latest_slice_and_in_order() -> None:
    failed, done = "20260101000000150", "20260101000000160"
    names = [base(T1), log(done), log(failed), log(done, version=2)]
    slicing = LogSlicing({T1: T1, done: "20260101000000170"}, timeline_start=T1)
    start, _, logs = latest(names, slicing, {T1, done})
    assert start == T1
    # Hudi's order: delta commit time, then version, then write token (the failed file's
    # blocks are skipped by the reader, block by block).
    assert logs == (log(failed), log(done), log(done, version=2))


def test_an_archived_delta_commits_completion_time_comes_from_the_archive() -> None:
    archived = "20251231000000000"
    history = {archived: "20260101000000150"}  # completed after T1 began
    slicing = LogSlicing({T1: T1, T2: T2}, timeline_start=T1, archived=history.get)
    assert slicing.completion_time(archived) == "20260101000000150"
    assert slicing.completion_time(T3) is None, "newer and not on the timeline: never completed"
    names = [base("20251230000000000"), base(T1), base(T2), log(archived)]
    (group,) = file_groups(names, V8, slicing).values()
    assert group.logs_onto(T1) == [(1, log(archived))]
    # Archived with no completion time found: onto the latest slice, as Hudi places it.
    unknown = LogSlicing({T1: T1, T2: T2}, timeline_start=T1, archived={}.get)
    (group,) = file_groups(names, V8, unknown).values()
    assert group.logs_onto(T2) == [(1, log(archived))]


def test_without_completion_times_base_files_are_known_and_slices_are_refused() -> None:
    (group,) = file_groups([base(T1), log(T2)], V8).values()
    assert group.latest_base() == (T1, base(T1))  # what a read-optimized query needs
    with pytest.raises(UnsupportedTableError, match="completed"):
        group.latest_slice(None, lambda _: True)


def test_hudi_1_0s_table_places_the_log_file_written_after_its_compaction_on_it(tmp_path: Path) -> None:
    """Apache Hudi 1.0's table: the delta commit after the compaction wrote a log file onto the
    compacted slice in one partition; the logs the compaction folded stay on the old slices."""
    with zipfile.ZipFile(HUDI_RS_TABLES / "mor" / "avro" / "v8_trips_8i3u1d.zip") as archive:
        archive.extractall(tmp_path)
    table = load_table(f"file://{tmp_path}/v8_trips_8i3u1d")
    compaction = "20251220210129235"
    timeline = table.timeline()
    assert [(i.time, i.action) for i in timeline.completed(["commit"])] == [(compaction, "commit")]
    slices = {s.partition_path: s for s in table.file_slices()}
    assert {p: s.base_instant for p, s in slices.items()} == dict.fromkeys(slices, compaction)
    assert [name.split("_")[1][:17] for name, _ in slices["city=sao_paulo"].log_files] == [
        "20251220210130911"
    ]
    assert slices["city=chennai"].log_files == slices["city=san_francisco"].log_files == ()


def test_time_travel_past_a_pending_write_is_refused_as_hudi_1x_refuses_it(tmp_path: Path) -> None:
    """A write requested by the instant read may still complete and change what that instant
    reads: Hudi 1.x refuses such a time travel, and so does fedcore."""
    with zipfile.ZipFile(HUDI_RS_TABLES / "mor" / "avro" / "v8_trips_8i3u1d.zip") as archive:
        archive.extractall(tmp_path)
    root = tmp_path / "v8_trips_8i3u1d"
    table = load_table(f"file://{root}")
    before = table.read(as_of="20251220210130911")
    (root / ".hoodie" / "timeline" / "20251220210130000.deltacommit.requested").write_bytes(b"")
    with pytest.raises(InvalidInstantError, match="20251220210130000 is pending"):
        table.read(as_of="20251220210130911")
    assert table.read(as_of="20251220210129235").num_rows == 6  # before it was requested
    assert sorted(map(str, table.read().to_pylist())) == sorted(map(str, before.to_pylist()))


#: Hudi's ``HoodieLSMTimelineInstant`` rows, as Hudi 1.x's archival writes them into
#: ``.hoodie/timeline/history/`` (hudi-common/src/main/avro/HoodieLSMTimelineInstant.avsc).
LSM_SCHEMA = pa.schema(
    [
        ("instantTime", pa.string()),
        ("completionTime", pa.string()),
        ("action", pa.string()),
        ("metadata", pa.binary()),
        ("plan", pa.binary()),
        ("version", pa.int32()),
    ]
)


def archive_into_history(root: Path, before: str, completion: dict[str, str]) -> None:
    """Move the instants requested before ``before`` out of the active timeline into an LSM
    history snapshot (one layer-0 file, ``manifest_1``, ``_version_``), as Hudi 1.x's
    archival does; ``completion`` overrides what their file names say."""
    timeline = root / ".hoodie" / "timeline"
    rows = []
    for path in sorted(timeline.glob("*_*.*")):
        requested, rest = path.name.split("_", 1)
        if requested < before:
            done, action = rest.split(".", 1)
            rows.append((requested, completion.get(requested, done), action, path.read_bytes()))
    for path in list(timeline.iterdir()):
        if path.is_file() and path.name[:17] < before:
            path.unlink()
    history = timeline / "history"
    history.mkdir(exist_ok=True)
    name = f"{rows[0][0]}_{rows[-1][0]}_0.parquet"
    table = pa.table(
        {
            "instantTime": [r[0] for r in rows],
            "completionTime": [r[1] for r in rows],
            "action": [r[2] for r in rows],
            "metadata": [r[3] for r in rows],
            "plan": [None] * len(rows),
            "version": [1] * len(rows),
        },
        LSM_SCHEMA,
    )
    pq.write_table(table, history / name)
    (history / "manifest_1").write_text(
        json.dumps({"files": [{"fileName": name, "fileLen": (history / name).stat().st_size}]})
    )
    (history / "_version_").write_text("1")


@pytest.mark.parametrize(
    ("completed_at", "on_latest"), [("20251220210129197", False), ("20251220210129300", True)]
)
def test_an_archived_delta_commits_log_file_is_placed_by_the_completion_time_hudi_archived(
    tmp_path: Path, completed_at: str, on_latest: bool
) -> None:
    """Hudi 1.0's table with its instants before the compaction archived into the LSM history:
    the chennai log file of the last archived delta commit lands on the compacted slice only
    if the history says that commit completed after the compaction began (129235)."""
    with zipfile.ZipFile(HUDI_RS_TABLES / "mor" / "avro" / "v8_trips_8i3u1d.zip") as archive:
        archive.extractall(tmp_path)
    root = tmp_path / "v8_trips_8i3u1d"
    expected = load_table(f"file://{root}").read()
    archive_into_history(root, "20251220210129235", {"20251220210128625": completed_at})
    table = load_table(f"file://{root}")
    assert table.timeline().instants[0].time == "20251220210129235", "the rest was archived"
    chennai = next(s for s in table.file_slices() if s.partition_path == "city=chennai")
    logs = [name for name, _ in chennai.log_files]
    assert len(logs) == (1 if on_latest else 0)
    assert all("_20251220210128625.log.1_" in name for name in logs)
    assert sorted(map(str, table.read().to_pylist())) == sorted(map(str, expected.to_pylist()))


def test_an_incremental_query_selects_by_completion_time_and_refuses_an_end_it_cannot_read(
    tmp_path: Path,
) -> None:
    """Hudi 1.1's table with its second write made to complete before its first (as two
    writers may): an incremental query takes the writes completed in its window, whatever
    their requested times; an end between the two completions would need a state of the table
    holding the later-requested write without the earlier one, which no requested time reads."""
    with zipfile.ZipFile(HUDI_RS_TABLES / "v9_txns_simple_nometa.zip") as archive:
        archive.extractall(tmp_path)
    root = tmp_path / "v9_txns_simple_nometa"
    timeline = root / ".hoodie" / "timeline"
    (first, first_done), (second, second_done) = (
        p.name.split(".")[0].split("_") for p in sorted(timeline.glob("*_*.commit"))[:2]
    )
    late = str(int(second_done) + 100)  # after the second's completion
    (timeline / f"{first}_{first_done}.commit").rename(timeline / f"{first}_{late}.commit")
    table = load_table(f"file://{root}")

    def commit_times(scan: object) -> set[str]:
        return set(scan.to_arrow().column("_hoodie_commit_time").to_pylist())  # type: ignore[attr-defined]

    # Completed after the second began: the second, then the first (and every later write).
    after = commit_times(table.changes(second))
    assert {first, second} <= after
    # Completed after the second's completion: the first is in, the second is not.
    changed = commit_times(table.changes(second_done))
    assert first in changed
    assert second not in changed
    with pytest.raises(InvalidInstantError, match=f"requested at {first} completed at {late}"):
        table.changes("000", end=second_done).to_arrow()
    assert commit_times(table.changes("000", end=late)) == {first, second}


def test_a_planned_scan_of_hudi_1x_log_files_pickles_for_an_engines_tasks(tmp_path: Path) -> None:
    """Spark's Python data source carries the planned scan to its workers: what places log
    files (the archived timeline's lookup among it) pickles, and reads the same after."""
    with zipfile.ZipFile(HUDI_RS_TABLES / "mor" / "avro" / "v8_trips_8i3u1d.zip") as archive:
        archive.extractall(tmp_path)
    plan = load_table(f"file://{tmp_path / 'v8_trips_8i3u1d'}").scan().plan()
    carried = pickle.loads(pickle.dumps(plan))
    assert [carried.read(s).to_pylist() for s in carried.slices] == [
        plan.read(s).to_pylist() for s in plan.slices
    ]
