"""Structured Streaming: the ``fed`` sink commits each micro-batch exactly once, the ``fed``
source streams what each instant wrote; a real local SparkSession, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from fedcore import Table, load_table
from fedcore.write.checkpoints import SINK_CHECKPOINT_KEY
from fedcore.write.job import WriteJob

SCHEMA = "id long, region string, ts long, v double"
KEYS = {
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "region",
    "hoodie.datasource.write.precombine.field": "ts",
}


def drop_file(folder: Path, name: str, start: int, stop: int, ts: int = 1) -> None:
    """One input file of rows ``start..stop`` (a streaming file source's new file)."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = list(range(start, stop))
    rows = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": [f"r{i % 3}" for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "v": pa.array([float(i * ts) for i in ids], pa.float64()),
        }
    )
    pq.write_table(rows, folder / f"{name}.parquet")
    # A file source takes files oldest first: each new file is a second newer than the last.
    newest = max((f.stat().st_mtime for f in folder.iterdir()), default=0.0)
    os.utime(folder / f"{name}.parquet", (newest + 1, newest + 1))


def sink(
    spark: SparkSession, source: Path, table: str, checkpoint: Path, options: dict[str, str]
) -> StreamingQuery:
    """A query that writes every input file (one a micro-batch) into ``table``, then stops."""
    reader = spark.readStream.format("parquet").schema(SCHEMA).option("maxFilesPerTrigger", 1)
    writer = reader.load(str(source)).writeStream.format("fed").options(**KEYS, **options)
    return writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(table)


def run(query: StreamingQuery) -> None:
    query.awaitTermination(timeout=300)
    assert not query.isActive


def batches(table: Table) -> list[tuple[int, str]]:
    """(batch id, writer) of every completed instant a streaming sink wrote, in order."""
    out = []
    for instant in table.timeline().completed(table.write_actions):
        found = table.commit_metadata(instant).extra.get(SINK_CHECKPOINT_KEY)
        if found:
            ((batch, writer),) = json.loads(found).items()
            out.append((int(batch), writer))
    return out


def rows(table: Table) -> list[tuple[Any, ...]]:
    data = table.read(columns=["id", "ts", "v"]).sort_by("id")
    return list(zip(*(data.column(c).to_pylist() for c in data.column_names), strict=True))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_each_micro_batch_commits_one_instant_with_its_batch_id(
    local_fed: SparkSession, tmp_path: Path, table_type: str
) -> None:
    """Upserts from a stream (new keys and updates across batches), an empty batch, and, on
    merge-on-read, an inline compaction run between batches; a restart with no new input
    commits nothing."""
    spark = local_fed
    source, path, checkpoint = tmp_path / "in", f"{tmp_path}/t", tmp_path / "cp"
    drop_file(source, "a", 0, 30)
    drop_file(source, "b", 20, 40, ts=2)  # 20..29 updated, 30..39 new
    drop_file(source, "c", 0, 0)  # no rows: an empty batch is a normal write
    drop_file(source, "d", 0, 5, ts=3)
    options = {"hoodie.datasource.write.table.type": table_type, "hoodie.compact.inline": "true"}
    options["hoodie.compact.inline.max.delta.commits"] = "2"
    query = sink(spark, source, path, checkpoint, options)
    run(query)

    table = load_table(path)
    ts = [3 if i < 5 else 2 if i >= 20 else 1 for i in range(40)]
    expected = [(i, ts[i], float(i * ts[i])) for i in range(40)]
    assert rows(table) == expected
    assert batches(table) == [(b, str(query.id)) for b in range(4)]
    actions = [i.action for i in table.timeline().completed(table.write_actions)]
    if table_type == "MERGE_ON_READ":
        # Batch 1 rewrites the small groups of batch 0 (Hudi's small-file handling), batch 3
        # appends log files; its commit's inline compaction folds them in.
        assert actions == ["deltacommit"] * 4 + ["commit"]
        assert not any(s.log_files for s in table.file_slices())
    else:
        assert actions == ["commit"] * 4
    staging = Path(path) / ".hoodie" / ".fed" / "staging"
    assert not staging.exists() or not any(staging.rglob("*.parquet")), "staged rows are cleared"

    again = sink(spark, source, path, checkpoint, options)
    run(again)
    assert again.id == query.id  # the same query, restarted from its checkpoint
    assert batches(load_table(path)) == batches(table)


def test_a_new_query_on_the_same_table_is_a_writer_of_its_own(
    local_fed: SparkSession, tmp_path: Path
) -> None:
    """Batch ids restart at 0 for a new checkpoint: its batches are not taken for the old
    query's (Hudi's sink, keyed by batch id alone, would skip them)."""
    spark = local_fed
    path = f"{tmp_path}/t"
    drop_file(tmp_path / "one", "a", 0, 10)
    drop_file(tmp_path / "two", "a", 10, 20)
    run(
        sink(spark, tmp_path / "one", path, tmp_path / "cp1", {"hoodie.datasource.write.operation": "insert"})
    )
    run(
        sink(spark, tmp_path / "two", path, tmp_path / "cp2", {"hoodie.datasource.write.operation": "insert"})
    )
    table = load_table(path)
    assert [r[0] for r in rows(table)] == list(range(20))
    assert [b for b, _ in batches(table)] == [0, 0]
    assert len({w for _, w in batches(table)}) == 2


def test_a_streaming_write_needs_its_checkpoint_or_an_identifier(
    local_fed: SparkSession, tmp_path: Path
) -> None:
    """With the session's checkpoint root instead of the query's option, Spark tells the sink
    nothing of the query: it refuses to start (nothing written), unless the writer is named."""
    spark = local_fed
    drop_file(tmp_path / "in", "a", 0, 10)
    frame = spark.readStream.format("parquet").schema(SCHEMA).load(str(tmp_path / "in"))
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path / "checkpoints"))
    try:
        query = (
            frame.writeStream.format("fed").options(**KEYS).trigger(availableNow=True).start(f"{tmp_path}/t")
        )
        with pytest.raises(
            StreamingQueryException, match="checkpointLocation: is needed by a fed streaming write"
        ):
            query.awaitTermination(timeout=300)
        assert not Path(f"{tmp_path}/t").exists()
        named = frame.writeStream.format("fed").options(**KEYS)
        named = named.option("hoodie.datasource.write.streaming.checkpoint.identifier", "ingest-1")
        run(named.trigger(availableNow=True).start(f"{tmp_path}/t"))
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
    assert batches(load_table(f"{tmp_path}/t")) == [(0, "ingest-1")]


KILLED_QUERY = """
import os, signal, sys
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import fed_spark
from fed_spark.stream import FedStreamWriter
from fedcore.steps import observe_steps

source_dir, path, checkpoint, table_type, point = sys.argv[1:6]
DRIVER_GROUP = os.getpgid(0)  # the driver and its JVM (this script runs in a session of its own)


def crash() -> None:
    os.killpg(DRIVER_GROUP, signal.SIGKILL)  # the driver dies, with every executor thread
    os._exit(9)


class Dying(FedStreamWriter):
    def commit(self, messages, batchId):
        if batchId == 1 and point == "staged":  # its tasks staged their rows; nothing committed
            crash()
        if batchId == 1 and point == "outcome":  # the commit decided, not yet completed
            with observe_steps(lambda step: crash() if step == "outcome" else None):
                super().commit(messages, batchId)
        else:
            super().commit(messages, batchId)
        if batchId == 1 and point == "committed":  # committed; Spark's checkpoint does not know
            crash()


spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
registered = fed_spark.register(spark)


class DyingSource(registered):
    def streamWriter(self, schema, overwrite):
        writer = super().streamWriter(schema, overwrite)
        writer.__class__ = Dying
        return writer


spark.dataSource.register(DyingSource)
frame = spark.readStream.format("parquet").schema("id long, region string, ts long, v double")
query = (
    frame.option("maxFilesPerTrigger", 1).load(source_dir).writeStream.format("fed")
    .option("hoodie.datasource.write.recordkey.field", "id")
    .option("hoodie.datasource.write.partitionpath.field", "region")
    .option("hoodie.datasource.write.precombine.field", "ts")
    .option("hoodie.datasource.write.operation", "insert")
    .option("hoodie.datasource.write.table.type", table_type)
    .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(path)
)
query.awaitTermination()
"""


@pytest.mark.parametrize(
    ("point", "table_type"),
    [("staged", "COPY_ON_WRITE"), ("outcome", "MERGE_ON_READ"), ("committed", "COPY_ON_WRITE")],
)
def test_a_query_killed_in_a_batch_and_restarted_writes_every_row_exactly_once(
    local_fed: SparkSession, tmp_path: Path, point: str, table_type: str
) -> None:
    """Inserts (a replayed batch would add its rows twice). The driver is killed at batch 1:
    after its tasks staged their rows; inside its commit, decided but not completed; after
    its commit, before Spark's checkpoint records it. The restarted query replays batch 1."""
    source, path, checkpoint = tmp_path / "in", f"{tmp_path}/t", tmp_path / "cp"
    for n, name in enumerate("abc"):
        drop_file(source, name, n * 10, n * 10 + 10)
    died = subprocess.run(
        [sys.executable, "-c", KILLED_QUERY, str(source), path, str(checkpoint), table_type, point],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        start_new_session=True,
    )
    assert died.returncode == -9, died.stderr[-3000:]
    table = load_table(path)
    committed = {"staged": [0], "outcome": [0], "committed": [0, 1]}[point]
    assert [b for b, _ in batches(table)] == committed
    assert len(table.timeline().pending()) == (1 if point == "outcome" else 0)

    options = {
        "hoodie.datasource.write.operation": "insert",
        "hoodie.datasource.write.table.type": table_type,
    }
    restarted = sink(local_fed, source, path, checkpoint, options)
    run(restarted)
    table = load_table(path)
    assert [r[0] for r in rows(table)] == list(range(30)), "every row once"
    assert [b for b, _ in batches(table)] == [0, 1, 2]
    assert len({w for _, w in batches(table)}) == 1
    assert table.timeline().pending() == []
    if point == "outcome":  # the dead run's decided commit was rolled forward, not redone
        assert not any(i.action == "rollback" for i in table.timeline())


def silver(spark: SparkSession, bronze: str, path: str, checkpoint: Path, **read: str) -> StreamingQuery:
    """bronze -> silver: a stream of what each bronze instant wrote, upserted into silver."""
    changes = spark.readStream.format("fed").options(**read).load(bronze).drop(*META)
    writer = changes.writeStream.format("fed").options(**KEYS).option("checkpointLocation", str(checkpoint))
    return writer.trigger(availableNow=True).start(path)


META = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_stream_from_one_fed_table_into_another_equals_the_batch_result(
    local_fed: SparkSession, tmp_path: Path, table_type: str
) -> None:
    """Bronze gets upserts and a delete between runs of the silver stream; each silver run
    reads the instants since its last offset (the latest version of each record written);
    silver ends equal to bronze, less the deleted key (an incremental read returns no
    deletes, as in Hudi)."""
    spark = local_fed
    bronze, path, checkpoint = f"{tmp_path}/bronze", f"{tmp_path}/silver", tmp_path / "cp"
    options = {"hoodie.datasource.write.table.type": table_type}
    drop_file(tmp_path / "in", "a", 0, 30)
    run(sink(spark, tmp_path / "in", bronze, tmp_path / "bronze-cp", options))
    run(silver(spark, bronze, path, checkpoint))
    assert rows(load_table(path)) == rows(load_table(bronze))

    drop_file(tmp_path / "in", "b", 20, 40, ts=2)
    drop_file(tmp_path / "in", "c", 35, 45, ts=3)
    run(sink(spark, tmp_path / "in", bronze, tmp_path / "bronze-cp", options))
    run(silver(spark, bronze, path, checkpoint))
    assert rows(load_table(path)) == rows(load_table(bronze))
    assert len(rows(load_table(path))) == 45
    # The second silver run read only the records bronze's two new instants wrote: 20..44.
    table = load_table(path)
    last = table.commit_metadata(table.timeline().completed(table.write_actions)[-1])
    assert sum(s.num_inserts + s.num_update_writes for s in last.stats) == 25

    load_table(bronze).delete(pa.table({"id": pa.array([0], pa.int64()), "region": ["r0"]}))
    drop_file(tmp_path / "in", "d", 50, 55, ts=4)
    run(sink(spark, tmp_path / "in", bronze, tmp_path / "bronze-cp", options))
    run(silver(spark, bronze, path, checkpoint))
    assert rows(load_table(path)) == [(0, 1, 0.0), *rows(load_table(bronze))]
    batch = spark.read.format("fed").load(bronze).drop(*META).where("id > 0")
    streamed = spark.read.format("fed").load(path).drop(*META).where("id > 0")
    assert batch.exceptAll(streamed).count() == streamed.exceptAll(batch).count() == 0


def test_a_stream_starts_where_asked(local_fed: SparkSession, tmp_path: Path) -> None:
    """``latest``: only what is written after the stream starts; an instant: from that
    instant on (inclusive, as Hudi's startOffset)."""
    spark = local_fed
    bronze = f"{tmp_path}/bronze"
    drop_file(tmp_path / "in", "a", 0, 10)
    drop_file(tmp_path / "in", "b", 10, 20)
    run(
        sink(
            spark,
            tmp_path / "in",
            bronze,
            tmp_path / "bronze-cp",
            {"hoodie.datasource.write.operation": "insert"},
        )
    )
    first, second = (i.time for i in load_table(bronze).timeline().completed())

    start = "hoodie.datasource.streaming.startOffset"
    run(silver(spark, bronze, f"{tmp_path}/from_second", tmp_path / "cp1", **{start: second}))
    assert [r[0] for r in rows(load_table(f"{tmp_path}/from_second"))] == list(range(10, 20))

    latest = silver(spark, bronze, f"{tmp_path}/latest", tmp_path / "cp2", **{start: "latest"})
    run(latest)
    assert rows(load_table(f"{tmp_path}/latest")) == [], "nothing new: no batch ran"
    drop_file(tmp_path / "in", "c", 20, 25)
    run(
        sink(
            spark,
            tmp_path / "in",
            bronze,
            tmp_path / "bronze-cp",
            {"hoodie.datasource.write.operation": "insert"},
        )
    )
    run(silver(spark, bronze, f"{tmp_path}/latest", tmp_path / "cp2", **{start: "latest"}))
    assert [r[0] for r in rows(load_table(f"{tmp_path}/latest"))] == list(range(20, 25))
    assert first < second


def test_a_stream_never_passes_a_pending_write(local_fed: SparkSession, tmp_path: Path) -> None:
    """An instant still being written holds the stream's offset before it: the instants that
    complete after it are read once it completes, never skipped."""
    spark = local_fed
    bronze = f"{tmp_path}/bronze"
    drop_file(tmp_path / "in", "a", 0, 10)
    run(sink(spark, tmp_path / "in", bronze, tmp_path / "bronze-cp", {}))
    table = load_table(bronze)
    job = WriteJob.open(table, "insert", table.schema())
    job.begin()  # pending, beating: a slow writer
    try:
        table.insert(
            pa.table(
                {
                    "id": pa.array([100], pa.int64()),
                    "region": ["r1"],
                    "ts": pa.array([1], pa.int64()),
                    "v": [1.0],
                }
            )
        )
        run(silver(spark, bronze, f"{tmp_path}/silver", tmp_path / "cp"))
        assert [r[0] for r in rows(load_table(f"{tmp_path}/silver"))] == list(range(10)), (
            "held before the pending write"
        )
        job.commit(
            job.write_new(
                pa.table(
                    {
                        "id": pa.array([50], pa.int64()),
                        "region": ["r2"],
                        "ts": pa.array([1], pa.int64()),
                        "v": [5.0],
                    }
                ),
                0,
            )
        )
    except BaseException:
        job.abort()
        raise
    run(silver(spark, bronze, f"{tmp_path}/silver", tmp_path / "cp"))
    assert [r[0] for r in rows(load_table(f"{tmp_path}/silver"))] == [*range(10), 50, 100]


def test_a_streaming_read_refuses_options_it_would_ignore(local_fed: SparkSession, tmp_path: Path) -> None:
    drop_file(tmp_path / "in", "a", 0, 10)
    run(sink(local_fed, tmp_path / "in", f"{tmp_path}/t", tmp_path / "cp", {}))
    reader = local_fed.readStream.format("fed").option("maxFilesPerTrigger", "1")
    with pytest.raises(AnalysisException, match="maxfilespertrigger: is not an option of a fed read"):
        reader.load(f"{tmp_path}/t")
    late = local_fed.readStream.format("fed").option("hoodie.datasource.streaming.startOffset", "yesterday")
    query = late.load(f"{tmp_path}/t").writeStream.format("console").trigger(availableNow=True).start()
    with pytest.raises(
        StreamingQueryException,
        match=r"hoodie\.datasource\.streaming\.startOffset: 'yesterday' is not an instant",
    ):
        query.awaitTermination(timeout=300)


def test_fedcore_errors_reach_the_user_as_one_line(local_fed: SparkSession, tmp_path: Path) -> None:
    """A fedcore error inside a Spark task (a batch write's) or a streaming batch's commit is
    reported as its type and message, without the Python traceback above it."""
    spark = local_fed
    nulls = spark.createDataFrame([(1, "r0", 1, 1.0), (None, "r0", 1, 2.0)], SCHEMA)
    write = (
        nulls.write.format("fed").options(**KEYS).option("hoodie.datasource.write.operation", "bulk_insert")
    )
    with pytest.raises(Exception, match="InvalidRecordsError") as batch_error:
        write.mode("append").save(f"{tmp_path}/batch")
    report = str(batch_error.value)
    assert "fedcore.exceptions.InvalidRecordsError: " in report, report[:2000]
    assert "record key" in report.split("fedcore.exceptions.InvalidRecordsError: ")[1].splitlines()[0]
    assert "Traceback (most recent call last)" not in report

    drop_file(tmp_path / "in", "a", 0, 10)
    run(sink(spark, tmp_path / "in", f"{tmp_path}/t", tmp_path / "cp", {}))
    (tmp_path / "in2").mkdir()
    pq.write_table(
        pa.table({"id": ["x"], "region": ["r0"], "ts": [1], "v": [1.0]}), tmp_path / "in2" / "a.parquet"
    )
    frame = spark.readStream.format("parquet").schema("id string, region string, ts long, v double")
    query = frame.load(str(tmp_path / "in2")).writeStream.format("fed").options(**KEYS)
    query = (
        query.option("checkpointLocation", str(tmp_path / "cp2"))
        .trigger(availableNow=True)
        .start(f"{tmp_path}/t")
    )
    with pytest.raises(StreamingQueryException) as stream_error:
        query.awaitTermination(timeout=300)
    report = str(stream_error.value)
    assert "fedcore.exceptions.SchemaMismatchError: " in report, report[:2000]
    assert "Traceback (most recent call last)" not in report
    assert [r[0] for r in rows(load_table(f"{tmp_path}/t"))] == list(range(10)), (
        "nothing of the batch written"
    )


def test_bulk_insert_and_delete_streams(local_fed: SparkSession, tmp_path: Path) -> None:
    """Every operation a batch write takes: a bulk-insert stream fills the table, a delete
    stream of keys (record key and partition columns only) removes them, exactly once each."""
    spark = local_fed
    path = f"{tmp_path}/t"
    drop_file(tmp_path / "in", "a", 0, 20)
    drop_file(tmp_path / "in", "b", 20, 30)
    run(
        sink(
            spark,
            tmp_path / "in",
            path,
            tmp_path / "cp",
            {"hoodie.datasource.write.operation": "bulk_insert"},
        )
    )
    (tmp_path / "gone").mkdir()
    keys = pa.table({"id": pa.array([3, 4, 25], pa.int64()), "region": ["r0", "r1", "r1"]})
    pq.write_table(keys, tmp_path / "gone" / "a.parquet")
    deletes = spark.readStream.format("parquet").schema("id long, region string").load(str(tmp_path / "gone"))
    writer = deletes.writeStream.format("fed").option("hoodie.datasource.write.operation", "delete")
    run(writer.option("checkpointLocation", str(tmp_path / "cp-gone")).trigger(availableNow=True).start(path))
    table = load_table(path)
    assert [r[0] for r in rows(table)] == [i for i in range(30) if i not in (3, 4, 25)]
    operations = [table.commit_metadata(i).operation for i in table.timeline().completed()]
    assert operations == ["BULK_INSERT", "BULK_INSERT", "DELETE"]


def test_complete_output_mode_replaces_the_table_every_batch(local_fed: SparkSession, tmp_path: Path) -> None:
    """A streaming aggregation in Complete mode: each batch's result replaces the table (an
    insert_overwrite_table instant), so the table holds the latest counts only."""
    spark = local_fed
    path = f"{tmp_path}/counts"
    drop_file(tmp_path / "in", "a", 0, 30)
    drop_file(tmp_path / "in", "b", 30, 36)
    counts = (
        spark.readStream.format("parquet")
        .schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .load(str(tmp_path / "in"))
        .groupBy("region")
        .count()
    )
    writer = counts.writeStream.format("fed").outputMode("complete")
    writer = writer.option("hoodie.datasource.write.recordkey.field", "region")
    run(writer.option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start(path))
    table = load_table(path)
    assert sorted(table.read(columns=["region", "count"]).to_pylist(), key=str) == [
        {"region": "r0", "count": 12},
        {"region": "r1", "count": 12},
        {"region": "r2", "count": 12},
    ]
    operations = [table.commit_metadata(i).operation for i in table.timeline().completed(table.write_actions)]
    assert operations == ["INSERT_OVERWRITE_TABLE", "INSERT_OVERWRITE_TABLE"]
