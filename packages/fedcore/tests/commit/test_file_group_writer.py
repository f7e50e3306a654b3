"""What every batch of data files is written as: one marker batch naming the files in order
(before the first is written, the "data" step between), then the files under their names;
the same for a copy-on-write upsert, a merge-on-read log append, a compaction and a migration."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from fed_dev.testing import Backend, trips
from fedcore import properties as P
from fedcore.commit.file_group_writer import FileGroupWriter, NewFile
from fedcore.services.migrate import migrate
from fedcore.steps import observe_steps
from fedcore.table import Table, load_table
from fedcore.timeline.commit_metadata import WriteStat
from fedcore.write.client import WriteClient

from ..hudi.test_hudi_conformance import HUDI_WRITTEN_ZIPS, unpack
from ..write.test_merge_on_read_writes import mor_table
from ..write.test_writes import make_table

BASE = re.compile(r"[0-9a-f-]+-0_(?P<token>\d+-\d+-\d+)_(?P<instant>\d{17})\.parquet")
LOG = re.compile(r"\.[0-9a-f-]+-0_(?P<base>\d{17})\.log\.(?P<version>\d+)_(?P<token>\d+-\d{17}-\d+)")
COMMIT_STEPS = ["requested", "inflight"]
AFTER_DATA = ["metadata", "claims", "outcome", "completed"]


class Recorder:
    """The steps a write reaches, and the marker batches of ``table`` at each "data" step."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.steps: list[str] = []
        self.batches: list[dict[str, list[str]]] = []

    def __call__(self, step: str) -> None:
        self.steps.append(step)
        if step == "data":
            fs = self.table.fs.table_fs
            found = fs.find(f"{self.table.path}/{P.HOODIE_FOLDER}/.temp")
            self.batches.append(
                {
                    path.rsplit("/", 1)[-1]: fs.cat_file(path).decode().splitlines()
                    for path in found
                    if path.rsplit("/", 1)[-1].startswith("MARKERS-")
                }
            )


def latest_stats(table: Table) -> tuple[str, list[WriteStat]]:
    instant = table.timeline().completed()[-1]
    return instant.time, table.commit_metadata(instant).stats


def lines(stats: list[WriteStat], kind: str) -> list[str]:
    return [f"{s.path}.marker.{kind}" for s in stats]


def test_a_copy_on_write_upsert_marks_its_files_in_one_batch_then_writes_them(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2], ["us", "de"]))
    recorder = Recorder(table)
    with observe_steps(recorder):
        WriteClient(table).upsert(trips([1, 3, 4], ["us", "fr", "us"], fare=50.0))
    instant, stats = latest_stats(table)
    assert recorder.steps[:2] == COMMIT_STEPS
    assert recorder.steps[2:4] == ["data", "data"]
    assert recorder.steps[4:8] == AFTER_DATA
    # The new group of "fr", then the rewrite of "us" (its group, with the new key 4).
    rewrites = [(s.partition_path, s.prev_commit != "null") for s in stats]
    assert rewrites == [("country=fr", False), ("country=us", True)]
    names = [BASE.fullmatch(s.path.rsplit("/", 1)[-1]) for s in stats]
    assert [(m["token"], m["instant"]) for m in names if m] == [("0-1-0", instant), ("1-1-0", instant)]
    # Every "data" step sees the one batch, whole, named after the first file's token.
    for seen in recorder.batches:
        assert list(seen.values()) == [[*lines(stats[:1], "CREATE"), *lines(stats[1:], "MERGE")]]
        assert re.fullmatch(r"MARKERS-0-1-0-[0-9a-f]{12}", next(iter(seen)))


def test_a_merge_on_read_append_marks_its_log_files_then_writes_them(backend: Backend) -> None:
    table = mor_table(backend)
    WriteClient(table).upsert(trips([1, 2], ["us", "de"]))
    first, _ = latest_stats(table)
    recorder = Recorder(table)
    with observe_steps(recorder):
        WriteClient(table).upsert(trips([1, 2], ["us", "de"], fare=50.0))
    instant, stats = latest_stats(table)
    assert recorder.steps == [*COMMIT_STEPS, "data", "data", *AFTER_DATA]
    assert [s.partition_path for s in stats] == ["country=de", "country=us"]
    names = [LOG.fullmatch(s.path.rsplit("/", 1)[-1]) for s in stats]
    assert [(m["base"], m["version"], m["token"]) for m in names if m] == [
        (first, "1", f"0-{instant}-0"),
        (first, "1", f"1-{instant}-0"),
    ]
    for seen in recorder.batches:
        assert list(seen.values()) == [lines(stats, "APPEND")]
        assert re.fullmatch(r"MARKERS-0-1-0-[0-9a-f]{12}", next(iter(seen)))


def test_a_compaction_marks_its_base_files_then_writes_them(backend: Backend) -> None:
    table = mor_table(backend)
    WriteClient(table).upsert(trips([1, 2], ["us", "de"]))
    WriteClient(table).upsert(trips([1, 2], ["us", "de"], fare=50.0))
    recorder = Recorder(table)
    with observe_steps(recorder):
        assert table.compact() is not None
    instant, stats = latest_stats(table)
    assert recorder.steps == [*COMMIT_STEPS, "data", "data", *AFTER_DATA]
    assert [s.partition_path for s in stats] == ["country=de", "country=us"]
    names = [BASE.fullmatch(s.path.rsplit("/", 1)[-1]) for s in stats]
    assert [(m["token"], m["instant"]) for m in names if m] == [("0-1-0", instant), ("1-1-0", instant)]
    for seen in recorder.batches:
        assert list(seen.values()) == [lines(stats, "MERGE")]
        assert re.fullmatch(r"MARKERS-0-1-0-[0-9a-f]{12}", next(iter(seen)))


def test_a_failed_file_stops_the_batch_files_not_begun_are_never_written(backend: Backend) -> None:
    """One file fails: the error is the batch's, and the writes not yet begun are dropped
    (the marker batch names them all, so a rollback finds whatever was written)."""
    table = make_table(backend)
    begun: list[int] = []

    def write_one(item: int) -> int:
        begun.append(item)
        if item == 0:
            raise OSError("the store refused file 0")
        return item

    files = [NewFile(f"country=us/f{i}.parquet", "CREATE") for i in range(8)]
    writer = FileGroupWriter(table.handle, "20260101000000000", threads=1)
    with pytest.raises(OSError, match="refused file 0"):
        writer.write(files, list(range(8)), write_one, "0-0-0")
    assert begun[0] == 0
    assert len(begun) <= 2  # file 1 may have begun on the freed thread; no later one has
    marked = table.fs.table_fs.find(f"{table.path}/{P.HOODIE_FOLDER}/.temp/20260101000000000")
    assert [m.rsplit("/", 1)[-1][:10] for m in marked] == ["MARKERS-0-"]


def test_a_migration_marks_its_copies_in_one_batch_then_copies_them(tmp_path: Path) -> None:
    # Merge-on-read source, copy-on-write target: compacted slices are copied, the others rewritten.
    (archive,) = [z for z in HUDI_WRITTEN_ZIPS if z.name == "v6_mor_deletes.zip"]
    source = unpack(archive, tmp_path / "source")
    target = f"file://{tmp_path}/target"
    steps: list[str] = []
    batches: list[dict[str, list[str]]] = []

    def record(step: str) -> None:
        steps.append(step)
        if step == "data" and not batches:
            folder = tmp_path / "target" / P.HOODIE_FOLDER / ".temp"
            batches.append({p.name: p.read_text().splitlines() for p in folder.rglob("MARKERS-*")})

    storage = {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: f"file://{tmp_path}/storage"}
    with observe_steps(record):
        report = migrate(source, target, storage=storage)
    assert (report.copied, report.rewritten) == (1, 2)
    instant, stats = latest_stats(load_table(target))
    copied, rewritten = stats[:1], stats[1:]
    # The copies' batch is there at the first "data" step, before the rewrites' batches.
    (seen,) = batches
    assert list(seen.values()) == [lines(copied, "CREATE")]
    assert re.fullmatch(r"MARKERS-copies-[0-9a-f]{12}", next(iter(seen)))
    # A copy keeps its source's name; a rewrite is named by its task.
    assert BASE.fullmatch(copied[0].path.rsplit("/", 1)[-1])
    assert instant not in copied[0].path
    names = [BASE.fullmatch(s.path.rsplit("/", 1)[-1]) for s in rewritten]
    assert [(m["token"], m["instant"]) for m in names if m] == [("1-0-0", instant), ("0-0-0", instant)]
    # One "data" step for the copies, one per rewritten file, then "copied" and the commit.
    assert steps == [*COMMIT_STEPS, "data", "data", "data", "copied", *AFTER_DATA]


def test_a_migration_into_a_merge_on_read_table_marks_its_log_copies_as_appends(
    backend: Backend, tmp_path: Path
) -> None:
    # A merge-on-read source fed wrote: each file group a base file and log files, which a
    # merge-on-read target takes as they are (the only input that makes APPEND copies).
    source = mor_table(backend)
    WriteClient(source).upsert(trips([1, 2, 3], ["us", "de", "us"]))
    WriteClient(source).upsert(trips([1, 2], ["us", "de"], fare=50.0))
    WriteClient(source).delete(trips([3], ["us"]))
    slices = source.file_slices()
    assert all(s.base_file_name is not None and s.log_files for s in slices)
    files = [[s.base_file_name, *(name for name, _ in s.log_files)] for s in slices]
    expected_names = sorted(
        f"{s.partition_path}/{name}" for s, names in zip(slices, files, strict=True) for name in names
    )
    target = f"file://{tmp_path}/target"
    steps: list[str] = []
    batches: list[dict[str, list[str]]] = []

    def record(step: str) -> None:
        steps.append(step)
        if step == "data" and not batches:
            folder = tmp_path / "target" / P.HOODIE_FOLDER / ".temp"
            batches.append({p.name: p.read_text().splitlines() for p in folder.rglob("MARKERS-*")})

    storage = {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: f"file://{tmp_path}/storage"}
    with observe_steps(record):
        report = migrate(
            source.path,
            target,
            storage=storage,
            properties={P.TABLE_TYPE: "MERGE_ON_READ"},
            source_options=backend.storage_options,
        )
    assert (report.copied, report.rewritten) == (len(expected_names), 0)
    migrated = load_table(target)
    _, stats = latest_stats(migrated)
    # One batch marks every copy before any is copied: base files as creates, log files as appends.
    (seen,) = batches
    kinds = ["APPEND" if LOG.fullmatch(s.path.rsplit("/", 1)[-1]) else "CREATE" for s in stats]
    assert list(seen.values()) == [[f"{s.path}.marker.{kind}" for s, kind in zip(stats, kinds, strict=True)]]
    assert kinds.count("APPEND") == sum(len(s.log_files) for s in slices) > 0
    assert re.fullmatch(r"MARKERS-copies-[0-9a-f]{12}", next(iter(seen)))
    # The copies keep their names, and the target reads the source's rows, whole.
    assert sorted(s.path for s in stats) == expected_names
    assert steps == [*COMMIT_STEPS, "data", "copied", *AFTER_DATA]

    def rows(table: Table) -> Counter[tuple[object, ...]]:
        data = table.read()
        columns = sorted(data.column_names)
        return Counter(tuple(row[c] for c in columns) for row in data.to_pylist())

    assert rows(migrated) == rows(source)
    assert sum(rows(source).values()) == 2
