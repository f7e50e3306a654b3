"""``df.write.format("fed")`` and SQL INSERT: tasks write, the driver commits exactly once."""

from __future__ import annotations

import datetime as dt
import decimal
import re
import sys
import time
from pathlib import Path
from typing import Any

import hudi
import pyarrow as pa
import pytest
from pyspark import TaskContext, cloudpickle
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import fed_spark
from fed_dev.testing import Backend
from fed_spark.write import FedWriter
from fedcore import ObjectStoreStorageStrategy
from fedcore import properties as P
from fedcore.exceptions import FedError
from fedcore.schema.meta import META_COLUMNS
from fedcore.table import Table, load_table

# Spark pickles the fault-injecting sources below to its Python workers by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def frame(spark: SparkSession, start: int, stop: int, ts: int = 1, parts: int = 3) -> DataFrame:
    return (
        spark.range(start, stop)
        .selectExpr(
            "id",
            "concat('r', cast(id % 4 as string)) AS region",
            f"{ts}L AS ts",
            "CAST(id AS DOUBLE) / 10 AS v",
        )
        .repartition(parts)
    )


def hudi_options(backend: Backend, operation: str = "bulk_insert") -> dict[str, str]:
    return {
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "region",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.operation": operation,
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: backend.storage_path,
    }


def ids(table: Table) -> list[int]:
    return sorted(table.read(columns=["id"]).column("id").to_pylist())


def referenced(table: Table) -> set[str]:
    """The data files of every file slice the metadata table knows (all versions)."""
    index = load_table(table.path, storage_options=table.storage_options).handle.file_index
    return {name for files in index.files(None).values() for name in files.files}


def test_a_pipeline_bulk_inserts_upserts_deletes_and_reads(fed: SparkSession, backend: Backend) -> None:
    path = f"{backend.table_path}-pipeline"
    frame(fed, 0, 1000).write.format("fed").options(**hudi_options(backend)).mode("append").save(path)
    table = load_table(path, storage_options=backend.storage_options)
    assert ids(table) == list(range(1000))
    assert isinstance(table.strategy, ObjectStoreStorageStrategy)
    # Upsert (Hudi's default operation): 100 updated, 50 new.
    frame(fed, 950, 1100, ts=2).write.format("fed").mode("append").save(path)
    assert ids(table) == list(range(1100))
    assert table.scan([("ts", "=", 2)]).count() == 150
    deleted = fed.range(0, 10).selectExpr("id", "concat('r', cast(id % 4 as string)) AS region")
    deleted.write.format("fed").option("hoodie.datasource.write.operation", "delete").mode("append").save(
        path
    )
    assert ids(table) == list(range(10, 1100))
    operations = [table.commit_metadata(i).operation for i in table.timeline().completed()]
    assert operations == ["BULK_INSERT", "UPSERT", "DELETE"]
    back = fed.read.format("fed").load(path)
    assert back.count() == 1090
    assert back.where("region = 'r1' AND ts = 2").count() == len([i for i in range(950, 1100) if i % 4 == 1])
    assert backend.data_files() >= referenced(table)


def test_insert_overwrite_and_overwrite_mode(local_fed: SparkSession, tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    path = backend.table_path
    frame(local_fed, 0, 100).write.format("fed").options(**hudi_options(backend)).mode("append").save(path)
    # insert_overwrite: the partitions written are replaced, the others stay.
    only_r1 = frame(local_fed, 1000, 1004, parts=1).where("region = 'r1'")
    only_r1.write.format("fed").option("hoodie.datasource.write.operation", "insert_overwrite").mode(
        "append"
    ).save(path)
    table = load_table(path)
    assert ids(table) == sorted([i for i in range(100) if i % 4 != 1] + [1001])
    # Overwrite mode: the whole table replaced (Hudi's insert_overwrite_table), history kept.
    frame(local_fed, 500, 510).write.format("fed").mode("overwrite").save(path)
    assert ids(table) == list(range(500, 510))
    first = table.timeline().completed()[0].time
    assert len(table.read(as_of=first)) == 100


def test_sql_insert_into_and_overwrite_a_fed_table(local_fed: SparkSession, tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    frame(local_fed, 0, 20).write.format("fed").options(**hudi_options(backend)).mode("append").save(
        backend.table_path
    )
    local_fed.sql(f"CREATE TABLE fed_sql USING fed OPTIONS (path '{backend.table_path}')")
    try:
        local_fed.sql(
            "INSERT INTO fed_sql (id, region, ts, v) VALUES (100, 'r9', 1, 0.5), (101, 'r9', 1, 0.5)"
        )
        local_fed.sql("INSERT INTO fed_sql BY NAME SELECT 102 AS id, 'r9' AS region, 1L AS ts, 0.5 AS v")
        table = load_table(backend.table_path)
        assert ids(table) == [*range(20), 100, 101, 102]
        assert table.commit_metadata(table.timeline().completed()[-1]).operation == "INSERT"
        local_fed.sql("INSERT OVERWRITE fed_sql (id, region, ts, v) VALUES (7, 'r3', 1, 0.7)")
        assert ids(table) == [7]
        assert local_fed.sql("SELECT id, v FROM fed_sql").collect() == [(7, 0.7)]
    finally:
        local_fed.sql("DROP TABLE IF EXISTS fed_sql")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({P.STORAGE_STRATEGY_CLASS: "hive"}, "StorageStrategyMismatchError"),
        ({"hoodie.datasource.write.recordkey.field": "region"}, "but table trips has ('id',)"),
        ({"hoodie.datasource.write.operation": "merge"}, "unknown operation 'merge'"),
        ({"hoodie.parquet.max.file.sizes": "1"}, "hoodie.parquet.max.file.sizes"),
        ({"compression": "zstd"}, "compression: is not an option of a fed write"),
        ({"path": "{path}/*"}, "is a glob; pass the table path"),
    ],
)
def test_bad_writes_say_why_and_change_nothing(
    local_fed: SparkSession, tmp_path: Path, change: dict[str, str], message: str
) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    frame(local_fed, 0, 10).write.format("fed").options(**hudi_options(backend)).mode("append").save(
        backend.table_path
    )
    options = {k: v.format(path=backend.table_path) for k, v in change.items()}
    with pytest.raises(AnalysisException, match=re.escape(message)):
        frame(local_fed, 10, 20).write.format("fed").option("path", backend.table_path).options(
            **options
        ).mode("append").save()
    table = load_table(backend.table_path)
    assert ids(table) == list(range(10))
    assert len(table.timeline().completed()) == 1


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("hoodie.storage.prefixcount", P.STORAGE_PREFIX_COUNT),
        ("hoodie.parquet.max.file.sizes", P.MAX_FILE_SIZE),
    ],
)
def test_a_misspelt_key_creates_no_table(
    local_fed: SparkSession, tmp_path: Path, key: str, meant: str
) -> None:
    """Refused before the table exists: a misspelt storage key would otherwise leave a table in
    the default layout for its whole life."""
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    with pytest.raises(AnalysisException, match=re.escape(f"{key}: ") + f".*did you mean {re.escape(meant)}"):
        frame(local_fed, 0, 10).write.format("fed").options(**hudi_options(backend), **{key: "16"}).mode(
            "append"
        ).save(backend.table_path)
    assert not (tmp_path / "tables" / "t").exists()


def test_spark_refuses_save_modes_hudi_does_not_take(local_fed: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(AnalysisException, match=r"Append.*Overwrite"):
        frame(local_fed, 0, 10).write.format("fed").save(f"{tmp_path}/t")  # ErrorIfExists, Spark's default


def test_every_type_round_trips(local_fed: SparkSession, tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    rows = [
        (
            1,
            "a",
            1,
            300,
            70000,
            1.5,
            2.5,
            decimal.Decimal("12.34"),
            "é",
            b"\x00\x01",
            True,
            dt.date(2026, 1, 1),
            dt.datetime(2026, 1, 1, 12, 30, 1, 5),
            dt.datetime(2026, 1, 1, 12, 30),
            [1, 2],
            {"k": 1},
            (1, "p"),
        ),
        (2, "b", *([None] * 15)),
    ]
    schema = (
        "id long, part string, i8 tinyint, i16 smallint, i32 int, f32 float, f64 double, "
        "dec decimal(10,2), text string, raw binary, flag boolean, day date, at timestamp, "
        "local_at timestamp_ntz, nums array<long>, tags map<string,long>, point struct<x:int,label:string>"
    )
    written = local_fed.createDataFrame(rows, schema)
    options = hudi_options(backend) | {"hoodie.datasource.write.partitionpath.field": "part"}
    options.pop("hoodie.datasource.write.precombine.field")
    written.write.format("fed").options(**options).mode("append").save(backend.table_path)
    back = local_fed.read.format("fed").load(backend.table_path).drop(*META_COLUMNS)
    assert back.schema.simpleString() == written.schema.simpleString()
    assert sorted(back.collect()) == sorted(written.collect())


def test_a_task_that_fails_once_commits_its_rows_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)

    class FailingOnce(FedWriter):
        def write(self, iterator: Any) -> Any:
            message = super().write(iterator)  # its files are written, markers first
            context = TaskContext.get()
            if context is not None and context.partitionId() == 1 and context.attemptNumber() == 0:
                raise RuntimeError("task attempt lost after writing its files")
            return message

    source = _source_with_writer(spark, "fed_failing_once", FailingOnce)
    frame(spark, 0, 300).write.format(source).options(**hudi_options(backend)).mode("append").save(
        backend.table_path
    )
    table = load_table(backend.table_path)
    assert ids(table) == list(range(300))  # every row once: attempt 0's files are not referenced
    assert backend.data_files() == referenced(table)  # and were deleted before the commit


@pytest.mark.parametrize(("operation", "undone"), [("bulk_insert", ["rollback"]), ("upsert", [])])
def test_a_failed_job_leaves_nothing_visible_or_behind(
    local_fed: SparkSession, tmp_path: Path, operation: str, undone: list[str]
) -> None:
    """A distributed write is rolled back; a staged one (upsert) never began an instant."""
    spark = local_fed
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    frame(spark, 0, 10).write.format("fed").options(**hudi_options(backend)).mode("append").save(
        backend.table_path
    )

    class AlwaysFailing(FedWriter):
        def write(self, iterator: Any) -> Any:
            message = super().write(iterator)
            context = TaskContext.get()
            if context is not None and context.partitionId() == 0:
                raise RuntimeError("this task always fails after writing")
            return message

    source = _source_with_writer(spark, "fed_failing", AlwaysFailing)
    writing = frame(spark, 10, 300).write.format(source).mode("append")
    with pytest.raises(Exception, match="this task always fails"):
        writing.option("hoodie.datasource.write.operation", operation).save(backend.table_path)
    table = load_table(backend.table_path)
    assert ids(table) == list(range(10))
    wait_for_tasks(spark)  # Spark fails the job while its other tasks still run
    assert backend.data_files() == referenced(table)  # the job's files were rolled back
    assert [i.action for i in table.timeline().completed()] == ["commit", *undone]
    staging = Path(tmp_path, "tables", "t", ".hoodie", ".fed", "staging")
    assert not staging.exists() or not any(staging.iterdir())


def test_a_task_that_writes_after_the_rollback_deletes_its_own_files(
    local_fed: SparkSession, tmp_path: Path
) -> None:
    """Spark fails a job when one task fails and lets the others run on: a task that marks
    its files after the driver's rollback listed the markers deletes them itself."""
    spark = local_fed
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    frame(spark, 0, 10).write.format("fed").options(**hudi_options(backend)).mode("append").save(
        backend.table_path
    )

    class LateWriter(FedWriter):
        def write(self, iterator: Any) -> Any:
            context = TaskContext.get()
            assert context is not None
            assert self.job is not None
            if context.partitionId() == 0:
                raise RuntimeError("this task fails before writing")
            # The others write only once the driver has rolled the instant back (its
            # outcome is decided before its markers are listed), as a slow task would.
            outcome = self.job.table.outcome_path(self.job.instant)
            waited = 0.0
            while not self.job.table.fs.table_fs.exists(outcome) and waited < 60:
                time.sleep(0.05)
                waited += 0.05
            return super().write(iterator)

    source = _source_with_writer(spark, "fed_late", LateWriter)
    with pytest.raises(Exception, match="this task fails before writing"):
        # Two tasks on local[2,2]'s two slots: the first fails twice (the job fails) while the
        # second waits for the rollback.
        frame(spark, 10, 300, parts=2).write.format(source).mode("append").option(
            "hoodie.datasource.write.operation", "bulk_insert"
        ).save(backend.table_path)
    wait_for_tasks(spark)
    table = load_table(backend.table_path)
    assert ids(table) == list(range(10))
    assert backend.data_files() == referenced(table)  # the late tasks deleted what they wrote
    assert [i.action for i in table.timeline().completed()] == ["commit", "rollback"]
    late = Path(tmp_path, "tables", "t", ".hoodie", ".temp")
    assert not late.exists() or not any(late.rglob("MARKERS-*"))  # and their marker batches


def wait_for_tasks(spark: SparkSession, timeout: float = 120) -> None:
    """Until no stage of Spark's runs: a failed job's other tasks end after it has failed."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout
    while tracker.getActiveStageIds():
        assert time.monotonic() < deadline, "Spark's tasks still run"
        time.sleep(0.1)


def _source_with_writer(spark: SparkSession, name: str, writer: type[FedWriter]) -> str:
    """A fed source whose writer injects a fault, registered as ``name``."""
    base = fed_spark.register(spark)

    class Faulty(base):  # type: ignore[misc, valid-type]
        @classmethod
        def name(cls) -> str:
            return name

        def writer(self, schema: Any, overwrite: bool) -> Any:
            made = super().writer(schema, overwrite)
            made.__class__ = writer
            return made

    spark.dataSource.register(Faulty)
    return name


def test_hudi_rs_reads_a_hive_layout_table_spark_wrote(local_fed: SparkSession, tmp_path: Path) -> None:
    path = f"file://{tmp_path}/tables/hive-trips"
    options = {
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "region",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.operation": "bulk_insert",
    }  # no storage keys: Hudi's own (Hive) layout, data under the table path
    frame(local_fed, 0, 300).write.format("fed").options(**options).mode("append").save(path)
    frame(local_fed, 250, 320, ts=2).write.format("fed").mode("append").save(path)  # upsert
    table = load_table(path)
    theirs = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(path).build().read())
    columns = ["_hoodie_record_key", "_hoodie_commit_time", "_hoodie_file_name", "id", "region", "ts", "v"]
    ours = table.read(columns=columns)
    assert theirs.num_rows == ours.num_rows == 320

    def rows(data: pa.Table) -> list[tuple[Any, ...]]:
        return sorted(zip(*(data.column(c).to_pylist() for c in columns), strict=True), key=repr)

    assert rows(theirs) == rows(ours)


def test_hudi_rs_reads_a_hive_layout_merge_on_read_table_spark_wrote(
    local_fed: SparkSession, tmp_path: Path
) -> None:
    """fed-spark's distributed upserts and deletes append log files (and an inline compaction
    folds them) that hudi-rs merges exactly as fedcore does."""
    path = f"file://{tmp_path}/tables/mor-trips"
    options = {
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "region",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.operation": "bulk_insert",
    }
    fed_spark.write(frame(local_fed, 0, 300), path, options)
    upsert = {"hoodie.datasource.write.operation": "upsert"}
    fed_spark.write(frame(local_fed, 250, 320, ts=2), path, upsert)  # updates in log files, inserts
    gone = local_fed.range(0, 10).selectExpr("id", "concat('r', cast(id % 4 as string)) AS region")
    fed_spark.write(gone, path, {"hoodie.datasource.write.operation": "delete"})
    compact = {**upsert, "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "4"}
    fed_spark.write(frame(local_fed, 5, 15, ts=3), path, compact)  # a deleted key written again; compacted
    fed_spark.write(frame(local_fed, 100, 110, ts=4), path, upsert)  # a delta commit after it
    table = load_table(path)
    assert [i.action for i in table.timeline()].count("commit") == 1
    assert any(s.log_files for s in table.file_slices())
    columns = ["_hoodie_record_key", "id", "region", "ts", "v"]
    theirs = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(path).build().read())
    ours = table.read(columns=columns)
    assert sorted(ours.column("id").to_pylist()) == [*range(5, 320)]

    def rows(data: pa.Table) -> list[tuple[Any, ...]]:
        return sorted(zip(*(data.column(c).to_pylist() for c in columns), strict=True), key=repr)

    assert rows(theirs) == rows(ours)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_empty_input_is_a_normal_write(local_fed: SparkSession, tmp_path: Path, table_type: str) -> None:
    """Streaming sends empty micro-batches all the time: each operation of an empty input
    commits an empty instant (as Hudi does by default) and changes no row, through
    ``format("fed")`` and ``fed_spark.write``."""
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    options = hudi_options(backend) | {"hoodie.datasource.write.table.type": table_type}
    path = backend.table_path
    fed_spark.write(frame(local_fed, 0, 40), path, options)
    empty = frame(local_fed, 0, 0)
    keys = local_fed.range(0, 0).selectExpr("id", "concat('r', cast(id % 4 as string)) AS region")
    before = len(load_table(path).timeline())
    for operation in ("upsert", "insert", "bulk_insert", "delete"):
        data = keys if operation == "delete" else empty
        chosen = {"hoodie.datasource.write.operation": operation}
        result = fed_spark.write(data, path, chosen)
        assert (result.files_written, result.rows_written) == (0, 0), operation
        data.write.format("fed").options(**chosen).mode("append").save(path)
    table = load_table(path)
    assert ids(table) == list(range(40))
    assert len(table.timeline()) == before + 8, "an empty instant for each"


@pytest.mark.parametrize("how", ["format", "fed_spark.write", "bulk_insert"])
def test_a_write_with_a_new_column_evolves_the_table(
    local_fed: SparkSession, tmp_path: Path, how: str
) -> None:
    """A new nullable column and a widened type (int -> long), through each Spark write path:
    staged (format("fed") upsert), distributed (fed_spark.write), and distributed new file
    groups (bulk_insert); Spark reads the evolved schema, older rows null in the new column."""
    spark = local_fed
    path = f"{tmp_path}/t"
    first = frame(spark, 0, 40).withColumn("seats", F.lit(2).cast("int"))
    options = hudi_options(Backend("local", path, f"{tmp_path}/s", None))
    first.write.format("fed").options(**options).mode("append").save(path)
    later = (
        frame(spark, 30, 50, ts=2).withColumn("seats", F.lit(4).cast("long")).withColumn("tip", F.lit(1.5))
    )
    operation = "bulk_insert" if how == "bulk_insert" else "upsert"
    if how == "fed_spark.write":
        fed_spark.write(later, path, {"hoodie.datasource.write.operation": operation})
    else:
        later.write.format("fed").option("hoodie.datasource.write.operation", operation).mode("append").save(
            path
        )
    read = spark.read.format("fed").load(path)
    assert dict(read.dtypes)["seats"] == "bigint"
    assert dict(read.dtypes)["tip"] == "double"
    got = {(r.id, r.seats, r.tip) for r in read.select("id", "seats", "tip").collect()}
    if how == "bulk_insert":  # no key lookup: ids 30..39 twice, as in Hudi
        expected = {(i, 2, None) for i in range(40)} | {(i, 4, 1.5) for i in range(30, 50)}
    else:
        expected = {(i, 2, None) for i in range(30)} | {(i, 4, 1.5) for i in range(30, 50)}
    assert got == expected
    native = fed_spark.read(spark, path, scan="native")  # Spark's Parquet reader: nulls, widening
    assert {(r.id, r.seats, r.tip) for r in native.select("id", "seats", "tip").collect()} == expected
    narrowed = frame(spark, 60, 61).withColumn("seats", F.lit(1).cast("int"))  # no tip: refused
    with pytest.raises(Exception, match="SchemaMismatchError: the input has no column 'tip'"):
        narrowed.write.format("fed").mode("append").save(path)


def test_inserts_top_up_small_file_groups(local_fed: SparkSession, tmp_path: Path) -> None:
    """``format("fed")`` and SQL inserts route rows to the partition's small file groups first,
    as WriteClient's and Hudi's do: a stream of small inserts adds no file group; a bulk
    insert always writes new ones."""
    spark = local_fed
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    frame(spark, 0, 40).write.format("fed").options(**hudi_options(backend, "insert")).mode("append").save(
        backend.table_path
    )
    groups = {s.file_id for s in load_table(backend.table_path).file_slices()}
    assert len(groups) == 4  # one per region
    for start in (40, 50):
        more = (
            frame(spark, start, start + 10)
            .write.format("fed")
            .option("hoodie.datasource.write.operation", "insert")
        )
        more.mode("append").save(backend.table_path)
    spark.sql(f"CREATE TABLE topped USING fed OPTIONS (path '{backend.table_path}')")
    try:
        spark.sql("INSERT INTO topped (id, region, ts, v) VALUES (60, 'r0', 1, 6.0)")
    finally:
        spark.sql("DROP TABLE topped")
    table = load_table(backend.table_path)
    assert {s.file_id for s in table.file_slices()} == groups
    assert ids(table) == list(range(61))
    frame(spark, 100, 110).write.format("fed").option(
        "hoodie.datasource.write.operation", "bulk_insert"
    ).mode("append").save(backend.table_path)
    assert len({s.file_id for s in load_table(backend.table_path).file_slices()}) > len(groups)


def test_create_table_from_sql_ddl_as_hudi_does(local_fed: SparkSession, tmp_path: Path) -> None:
    """``CREATE TABLE ... USING fed`` with Hudi's table properties, partitioning and location
    creates the table (empty, with its columns); SQL inserts and reads it; a managed table goes
    to the warehouse; bad statements are refused before anything is created."""
    spark = local_fed
    location = f"{tmp_path}/tables/rides"
    table = fed_spark.create_table(
        spark,
        f"""CREATE TABLE rides (id BIGINT, city STRING, ts BIGINT, fare DOUBLE) USING fed
        PARTITIONED BY (city)
        TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', type = 'mor',
                       'hoodie.storage.strategy.class' = 'object_store',
                       'hoodie.storage.path' = '{tmp_path}/storage')
        LOCATION '{location}'""",
    )
    try:
        assert table.config.table_type == "MERGE_ON_READ"
        assert (table.config.record_key_fields, table.config.partition_fields) == (("id",), ("city",))
        assert table.config.precombine_field == "ts"
        assert spark.table("rides").count() == 0
        assert [f.name for f in spark.table("rides").schema.fields][-4:] == ["id", "city", "ts", "fare"]
        spark.sql("INSERT INTO rides (id, city, ts, fare) VALUES (1, 'sfo', 1, 12.5), (2, 'nyc', 1, 30.0)")
        spark.sql("INSERT INTO rides (id, city, ts, fare) VALUES (3, 'sfo', 1, 7.0)")
        got = spark.sql("SELECT id, fare FROM rides WHERE city = 'sfo' ORDER BY id").collect()
        assert [(r.id, r.fare) for r in got] == [(1, 12.5), (3, 7.0)]
        assert ids(load_table(location)) == [1, 2, 3]
        again = fed_spark.create_table(
            spark,
            "CREATE TABLE IF NOT EXISTS rides (id BIGINT, city STRING, ts BIGINT, fare DOUBLE) USING fed "
            "TBLPROPERTIES (primaryKey = 'id')",
        )
        assert again.path == table.path
    finally:
        spark.sql("DROP TABLE IF EXISTS rides")

    managed = fed_spark.create_table(
        spark, "CREATE TABLE plain (k STRING, v INT) USING fed TBLPROPERTIES (primaryKey='k')"
    )
    try:
        warehouse = str(spark.conf.get("spark.sql.warehouse.dir")).removeprefix("file:")
        assert managed.path.endswith(f"{warehouse.rstrip('/')}/plain")
        spark.sql("INSERT INTO plain (k, v) VALUES ('a', 1)")
        assert [tuple(r) for r in spark.sql("SELECT k, v FROM plain").collect()] == [("a", 1)]
    finally:
        spark.sql("DROP TABLE IF EXISTS plain")

    bad = {
        "CREATE TABLE b1 (k STRING) USING fed": "primaryKey is needed",
        "CREATE TABLE b2 (k STRING) USING fed TBLPROPERTIES (primaryKey='k', primary_key='k')": (
            "primary_key: is not a table property"
        ),
        "CREATE TABLE b3 (k STRING) USING fed TBLPROPERTIES (primaryKey='k', type='merge')": (
            "type='merge' is not cow or mor"
        ),
        "CREATE TABLE b4 (k STRING) USING parquet": "creates tables USING fed",
        "CREATE TABLE b5 USING fed AS SELECT 1 AS k": "not CREATE TABLE",
        "CREATE TABLE b6 (k STRING) USING fed TBLPROPERTIES (primaryKey='id')": "has no column 'id'",
    }
    for statement, message in bad.items():
        with pytest.raises(FedError, match=message):
            fed_spark.create_table(spark, statement)
    assert not any(spark.catalog.tableExists(f"b{i}") for i in range(1, 7))
