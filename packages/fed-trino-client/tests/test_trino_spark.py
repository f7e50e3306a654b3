"""A PySpark pipeline's write (fed-spark, Spark tasks on a local SparkSession) is what the next
Trino query sees: the commit publishes itself to the metastore (Hudi's hive_sync keys)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import fed_spark
import fed_trino
from fed_dev.metastore import HiveMetastore
from fed_dev.servers import LoopbackS3
from fed_dev.trino import TrinoServer
from fedcore import load_table
from fedcore import properties as P


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warehouse: Path = tmp_path_factory.mktemp("warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("fed-trino-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_a_trino_query_right_after_a_fed_spark_write_sees_it(
    spark: SparkSession, trino_server: TrinoServer, metastore: HiveMetastore, s3_server: LoopbackS3
) -> None:
    fed_spark.register(spark, storage_options=s3_server.storage_options())
    tables, storage = s3_server.create_bucket("spark-tables"), s3_server.create_bucket("spark-storage")
    path = f"{tables}/rides"
    options = {
        "hoodie.table.name": "rides",
        "hoodie.datasource.write.recordkey.field": "ride_id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.operation": "bulk_insert",
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: storage,
        P.HIVE_SYNC_ENABLE: "true",
        P.HIVE_SYNC_METASTORE_URIS: metastore.uri,
        P.HIVE_SYNC_DATABASE: "lake",
    }
    rides = spark.createDataFrame(
        [(i, ["sf", "ny", "la"][i % 3], 1, float(i)) for i in range(30)],
        "ride_id long, city string, ts long, fare double",
    )
    first = fed_spark.write(rides, path, options)
    assert first.warnings == ()
    trino = fed_trino.connect(port=trino_server.port, schema="lake", read_your_writes=False)
    cursor = trino.cursor()
    cursor.execute("SELECT count(*), sum(fare) FROM rides WHERE city = 'sf'")
    assert cursor.fetchall() == [[10, float(sum(range(0, 30, 3)))]]
    updates = spark.createDataFrame([(i, "sf", 2, 1000.0) for i in range(0, 30, 3)], rides.schema)
    second = fed_spark.write(updates, path, {**options, "hoodie.datasource.write.operation": "upsert"})
    assert second.warnings == ()
    cursor.execute("SELECT count(*), sum(fare) FROM rides WHERE city = 'sf'")
    assert cursor.fetchall() == [[10, 10000.0]]  # the next query sees the write
    table = load_table(path, storage_options=s3_server.storage_options())
    cursor.execute("SELECT ride_id, city, fare FROM rides")
    got = sorted(tuple(r) for r in cursor.fetchall())
    assert got == sorted(
        tuple(r.values()) for r in table.read(columns=["ride_id", "city", "fare"]).to_pylist()
    )
