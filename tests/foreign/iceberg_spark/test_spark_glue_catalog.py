"""Spark 3.5 with Apache Iceberg's Glue catalog (``org.apache.iceberg.aws.glue.GlueCatalog``,
S3FileIO) reads a view ``fed sync --glue`` registered, on moto's Glue and S3 on loopback:
exactly fedcore's rows, a partition filter, and the next sync's rows."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from fed_dev.glue import check_table_versions, loopback_target
from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY, LoopbackS3
from fed_dev.testing import trips, trips_rows, trips_table
from fedcore.catalog import sync


@pytest.fixture(scope="module")
def glue_catalog(spark: SparkSession, s3_server: LoopbackS3) -> str:
    """Spark's catalog ``glue``, as Iceberg documents a Glue catalog, on the loopback server."""
    check_table_versions()
    for key, value in {
        "": "org.apache.iceberg.spark.SparkCatalog",
        ".catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog",
        ".io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        ".glue.endpoint": s3_server.endpoint_url,
        ".client.region": REGION,
        ".s3.endpoint": s3_server.endpoint_url,
        ".s3.path-style-access": "true",
        ".s3.access-key-id": ACCESS_KEY,
        ".s3.secret-access-key": SECRET_KEY,
        ".cache-enabled": "false",
    }.items():
        spark.conf.set(f"spark.sql.catalog.glue{key}", value)
    return "glue"


def rows(spark: SparkSession, sql: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in spark.sql(sql).collect())


def test_spark_reads_a_view_fed_registered_in_glue(
    spark: SparkSession, glue_catalog: str, s3_server: LoopbackS3
) -> None:
    table, _ = trips_table(s3_server, "object_store", "spark-glue")
    table.write(trips(range(12), ["us", "de", "fr"] * 4), "bulk_insert")
    target = loopback_target(s3_server, "spark_lake", "trips")
    sync(table, target)
    query = "SELECT trip_id, country, ts, fare FROM glue.spark_lake.trips"
    assert rows(spark, query) == trips_rows(table)
    table.write(trips([1, 2, 40], ["de", "fr", "us"], ts=2, fare=77.0), "upsert")
    sync(table, target)
    assert rows(spark, query) == trips_rows(table)
    assert rows(spark, f"{query} WHERE country = 'us'") == trips_rows(table, filters=[("country", "=", "us")])
    assert len(trips_rows(table)) == 13
