"""Every fed-spark entry point, wherever Spark runs: ``local[2]``, a standalone cluster, and a
Spark Connect client (``--spark-target``; ``tox -e spark`` runs this module on all three).

Only what a Spark Connect client has is used here: the DataFrame API, SQL and the catalog.
After each step the rows Spark reads equal a model of the table, compared as multisets (a
duplicated key would show), and at the end fedcore reads the same rows.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fed_spark
from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend
from fed_spark import upsert
from fed_spark.session import is_connect
from fedcore import load_table
from fedcore import properties as P
from fedcore.exceptions import ConfigError, FedError
from fedcore.write.checkpoints import SINK_CHECKPOINT_KEY

Row = tuple[int, str, int, float]
COLUMNS = ["id", "region", "ts", "v"]


def frame(spark: Any, start: int, stop: int, ts: int) -> Any:
    """Rows ``start..stop``: region ``r{id % 4}``, version ``ts``, a value of both."""
    return spark.range(start, stop, 1, 3).selectExpr(
        "id",
        "concat('r', cast(id % 4 as string)) AS region",
        f"{ts}L AS ts",
        f"CAST(id * 10 + {ts} AS DOUBLE) AS v",
    )


def model_rows(start: int, stop: int, ts: int) -> dict[int, Row]:
    return {i: (i, f"r{i % 4}", ts, float(i * 10 + ts)) for i in range(start, stop)}


def got(df: Any) -> Counter[Row]:
    return Counter(tuple(r) for r in df.select(*COLUMNS).collect())


def expected(model: dict[int, Row]) -> Counter[Row]:
    return Counter(model.values())


def keys_of(spark: Any, ids: range) -> Any:
    return spark.range(ids.start, ids.stop).selectExpr("id", "concat('r', cast(id % 4 as string)) AS region")


def options(backend: Backend, name: str, operation: str | None = None) -> dict[str, str]:
    given = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "region",
        "hoodie.datasource.write.precombine.field": "ts",
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: f"{backend.storage_path}/{name}",
    }
    return given | ({"hoodie.datasource.write.operation": operation} if operation else {})


def latest(path: str, backend: Backend) -> str:
    return load_table(path, storage_options=backend.storage_options).timeline().completed()[-1].time


def test_batch_writes_reads_and_sql(
    spark: Any,
    spark_target: str,
    backend: Backend,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table created in Overwrite mode, distributed upserts with new keys and a delete
    (``fed_spark.write``, its key index read by the driver and by tasks), ``format("fed")``'s
    upsert, insert, delete and insert_overwrite (Append mode); snapshot, time travel,
    incremental, pruned reads (native and Python scans) and SQL over a catalog table."""
    assert is_connect(spark) == (spark_target == "connect")
    fed_spark.register(spark, storage_options=backend.storage_options)
    path = f"{backend.table_path}-pipeline"
    model: dict[int, Row] = {}

    def check() -> None:
        assert got(spark.read.format("fed").load(path)) == expected(model)

    # Overwrite mode: the table is created (insert_overwrite_table, as Hudi's Overwrite mode).
    frame(spark, 0, 600, 1).write.format("fed").options(**options(backend, "trips")).mode("overwrite").save(
        path
    )
    model |= model_rows(0, 600, 1)
    check()
    first = latest(path, backend)

    result = fed_spark.write(frame(spark, 550, 800, 2), path)  # 50 updated, 200 new
    assert (result.inserted, result.updated) == (200, 50)
    model |= model_rows(550, 800, 2)
    check()
    second = latest(path, backend)
    at_second = dict(model)

    # Keys the table holds, and keys it never held (routed nowhere), in the same partitions.
    gone = keys_of(spark, range(0, 50)).union(keys_of(spark, range(5000, 5010)))
    fed_spark.write(gone, path, {"hoodie.datasource.write.operation": "delete"})
    for i in range(0, 50):
        del model[i]
    check()

    monkeypatch.setattr(upsert, "DRIVER_INDEX_BYTES", 0)  # the key index read in Spark tasks
    fed_spark.write(frame(spark, 700, 820, 3), path)
    model |= model_rows(700, 820, 3)
    check()
    monkeypatch.undo()

    frame(spark, 790, 850, 4).write.format("fed").mode("append").save(path)  # upsert, Hudi's default
    model |= model_rows(790, 850, 4)
    check()
    frame(spark, 850, 900, 4).write.format("fed").option("hoodie.datasource.write.operation", "insert").mode(
        "append"
    ).save(path)
    model |= model_rows(850, 900, 4)
    check()
    keys_of(spark, range(100, 120)).write.format("fed").option(
        "hoodie.datasource.write.operation", "delete"
    ).mode("append").save(path)
    for i in range(100, 120):
        del model[i]
    check()
    # insert_overwrite replaces the partitions it writes (r0) and keeps the others.
    replacing = frame(spark, 1000, 1040, 5).where("region = 'r0'")
    replacing.write.format("fed").option("hoodie.datasource.write.operation", "insert_overwrite").mode(
        "append"
    ).save(path)
    model = {k: v for k, v in model.items() if v[1] != "r0"} | {
        k: v for k, v in model_rows(1000, 1040, 5).items() if v[1] == "r0"
    }
    check()

    table = load_table(path, storage_options=backend.storage_options)
    fedcore_rows = table.read(columns=COLUMNS)
    assert Counter(zip(*(fedcore_rows.column(c).to_pylist() for c in COLUMNS), strict=True)) == expected(
        model
    )

    # Time travel and an incremental query, with Hudi's options.
    as_of = spark.read.format("fed").option("as.of.instant", second).load(path)
    assert got(as_of) == expected(at_second)
    incremental = (
        spark.read.format("fed")
        .option("hoodie.datasource.query.type", "incremental")
        .option("hoodie.datasource.read.begin.instanttime", first)
        .load(path)
    )
    changed = table.changes(first, columns=COLUMNS).to_arrow()
    assert got(incremental) == Counter(zip(*(changed.column(c).to_pylist() for c in COLUMNS), strict=True))
    assert sum(got(incremental).values()) > 0

    # Pruned reads: the rows of one partition, only its files planned or fetched.
    in_r1 = Counter(r for r in model.values() if r[1] == "r1")
    native = fed_spark.read(spark, path, "region = 'r1'")
    assert got(native) == in_r1
    if backend.name == "local":  # a native scan needs a JVM filesystem: file: here, s3a with hadoop-aws
        files = native.inputFiles()
        assert files
        assert all("/region=r1/" in f for f in files)
    s3: LoopbackS3 | None = request.getfixturevalue("s3_server") if backend.name == "s3" else None
    if s3 is not None:
        s3.requests.reset()
    assert got(spark.read.format("fed").load(path).where("region = 'r1'")) == in_r1
    spark.sql(f"CREATE TABLE pipeline_trips USING fed OPTIONS (path '{path}')")
    try:
        counted = spark.sql("SELECT count(*) FROM pipeline_trips WHERE region = 'r1'").collect()[0][0]
        assert counted == sum(in_r1.values())
    finally:
        spark.sql("DROP TABLE IF EXISTS pipeline_trips")
    if s3 is not None:
        bucket = backend.storage_path.removeprefix("s3://")
        fetched = [key for key in s3.requests.gets if key.startswith(bucket)]
        # The rows came from the one partition's files, and the footer of one file (the
        # latest commit's, whose schema the driver reads before planning).
        assert [key for key in fetched if "/region=r1/" in key]
        assert len({key for key in fetched if "/region=r1/" not in key}) <= 1, fetched
        assert not [p for p in s3.requests.listed if p.startswith(bucket)]  # storage never listed


def test_an_upsert_too_large_for_a_connect_plan_is_refused_before_it_begins(
    spark: Any, spark_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over Spark Connect the routes travel in the plan: past the message size the write is
    refused with a typed error and nothing of it exists; a classic driver writes it."""
    fed_spark.register(spark)
    backend = Backend("local", f"file://{tmp_path}/tables/x", f"file://{tmp_path}/storage", None)
    path = f"{tmp_path}/tables/small"
    bulk = {**options(backend, "small"), "hoodie.datasource.write.operation": "bulk_insert"}
    fed_spark.write(frame(spark, 0, 100, 1), path, bulk)
    timeline = sorted(p.name for p in Path(path, ".hoodie").iterdir())
    monkeypatch.setattr(upsert, "CONNECT_MESSAGE_BYTES", 1000)  # 100 keys' routes take about 2 KB
    if spark_target == "connect":
        with pytest.raises(ConfigError, match="maxInboundMessageSize"):
            fed_spark.write(frame(spark, 50, 150, 2), path)
        assert sorted(p.name for p in Path(path, ".hoodie").iterdir()) == timeline
        assert got(spark.read.format("fed").load(path)) == expected(model_rows(0, 100, 1))
    else:
        fed_spark.write(frame(spark, 50, 150, 2), path)
        assert got(spark.read.format("fed").load(path)) == expected(
            model_rows(0, 100, 1) | model_rows(50, 150, 2)
        )


def test_sql_ddl_inserts_and_overwrites(spark: Any, tmp_path: Path) -> None:
    """``fed_spark.create_table`` from DDL, then SQL ``INSERT INTO``, ``INSERT OVERWRITE`` and
    ``SELECT`` through the catalog; a bad statement refused with a typed error."""
    fed_spark.register(spark)
    location = f"{tmp_path}/tables/rides"
    table = fed_spark.create_table(
        spark,
        f"""CREATE TABLE rides (id BIGINT, city STRING, ts BIGINT, fare DOUBLE) USING fed
        PARTITIONED BY (city)
        TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', type = 'mor')
        LOCATION '{location}'""",
    )
    try:
        assert table.config.table_type == "MERGE_ON_READ"
        spark.sql("INSERT INTO rides (id, city, ts, fare) VALUES (1, 'sfo', 1, 12.5), (2, 'nyc', 1, 30.0)")
        spark.sql("INSERT INTO rides (id, city, ts, fare) VALUES (3, 'sfo', 1, 7.0), (4, 'nyc', 2, 13.5)")
        rows = spark.sql("SELECT id, city, ts, fare FROM rides").collect()
        inserted = [(1, "sfo", 1, 12.5), (2, "nyc", 1, 30.0), (3, "sfo", 1, 7.0), (4, "nyc", 2, 13.5)]
        assert Counter(tuple(r) for r in rows) == Counter(inserted)
        spark.sql("INSERT OVERWRITE rides (id, city, ts, fare) VALUES (9, 'sea', 1, 1.0)")
        rows = spark.sql("SELECT id, city, ts, fare FROM rides WHERE city = 'sea'").collect()
        assert [tuple(r) for r in rows] == [(9, "sea", 1, 1.0)]
        assert spark.sql("SELECT count(*) FROM rides").collect()[0][0] == 1
        # The catalog's table, found by its qualified name: no second table, no error.
        same = (
            "CREATE TABLE IF NOT EXISTS spark_catalog.default.rides USING fed TBLPROPERTIES (primaryKey='id')"
        )
        assert fed_spark.create_table(spark, same).path == table.path
    finally:
        spark.sql("DROP TABLE IF EXISTS rides")
    with pytest.raises(FedError, match="primaryKey is needed"):
        fed_spark.create_table(spark, "CREATE TABLE b1 (k STRING) USING fed")
    assert not spark.catalog.tableExists("b1")


def test_a_stream_restarts_from_its_checkpoint(spark: Any, tmp_path: Path) -> None:
    """``readStream.format("fed")`` of one table into ``writeStream.format("fed")`` of another,
    run twice from one checkpoint: the second run takes only what was written since, and the
    sink's batches continue the first run's."""
    fed_spark.register(spark)
    source, sink = f"{tmp_path}/tables/source", f"{tmp_path}/tables/sink"
    backend = Backend("local", f"file://{tmp_path}/tables/x", f"file://{tmp_path}/storage", None)
    checkpoint = f"{tmp_path}/checkpoints/sink"
    keys = {k: v for k, v in options(backend, "sink").items() if k.startswith("hoodie.datasource")}

    def run() -> None:
        stream = spark.readStream.format("fed").load(source).select(*COLUMNS)
        writer = stream.writeStream.format("fed").options(**keys, **{"hoodie.table.name": "sink"})
        query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start(sink)
        query.awaitTermination(300)
        assert not query.isActive
        assert query.exception() is None

    frame(spark, 0, 300, 1).write.format("fed").options(**options(backend, "source", "bulk_insert")).mode(
        "append"
    ).save(source)
    run()
    model = model_rows(0, 300, 1)
    assert got(spark.read.format("fed").load(sink)) == expected(model)
    first_run = _sink_batches(sink)

    frame(spark, 250, 400, 2).write.format("fed").mode("append").save(source)
    run()
    model |= model_rows(250, 400, 2)
    assert got(spark.read.format("fed").load(sink)) == expected(model)
    second_run = _sink_batches(sink)[len(first_run) :]
    assert second_run
    assert min(second_run) > max(first_run)


def _sink_batches(path: str) -> list[int]:
    """The micro-batch ids a streaming sink committed, in order."""
    table = load_table(path)
    out = []
    for instant in table.timeline().completed(table.write_actions):
        found = table.commit_metadata(instant).extra.get(SINK_CHECKPOINT_KEY)
        if found:
            ((batch, _),) = json.loads(found).items()
            out.append(int(batch))
    return out


def test_the_docs_spark_connect_example(
    spark: Any,
    s3_server: LoopbackS3,
    s3_environment: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    docs_example: Callable[..., dict[str, Any]],
) -> None:
    """``docs/examples/spark_connect.py`` as written: S3 credentials from each process's
    environment (this one's for the commit), its buckets on the loopback S3 server."""
    for name, value in s3_environment.items():
        monkeypatch.setenv(name, value)
    client = s3_server.client()
    for bucket in ("lake-tables", "lake-storage"):
        client.create_bucket(Bucket=bucket)
    names = docs_example("spark_connect.py")
    assert (names["result"].inserted, names["result"].updated) == (1, 1)
    assert Counter(tuple(r) for r in names["sfo"].select("ride_id", "fare").collect()) == Counter(
        [(1, 25.0), (3, 22.0)]
    )
    table = load_table("s3://lake-tables/rides")
    assert sorted(table.read(columns=["ride_id"]).column(0).to_pylist()) == [1, 3, 4]
