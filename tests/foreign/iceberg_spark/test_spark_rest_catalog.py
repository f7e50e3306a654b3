"""Apache Iceberg's own Spark runtime (``iceberg-spark-runtime`` on PySpark 3.5) reads fed
tables through ``fed serve``, the Iceberg REST catalog, exactly as fedcore reads them: every
layout, a merge-on-read table (its read-optimized view), a partition filter, and a write
seen on the next query with no sync step between. Writes through the catalog are refused.
Runs in ``tox -e iceberg`` (the session: ``conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from foreign.layouts import COUNTRY, LAYOUTS, Written, fedcore_reads, write_sample
from pyspark.sql import SparkSession

from fed_dev.catalog import ServedCatalog
from fedcore.catalog.rest import Access, ServedTable
from fedcore.table import load_table

TOKEN = "spark-reads-fed"
#: Served tables by name: every layout's, and the merge-on-read ones'.
SERVED = [*LAYOUTS, "hive_mor", "hive_mor_avro"]


@pytest.fixture(scope="module")
def catalog(layout_tables: dict[str, Written]) -> Iterator[ServedCatalog]:
    tables = [ServedTable(("lake",), name, load_table(layout_tables[name].path)) for name in SERVED]
    with ServedCatalog(tables, Access(token=TOKEN)) as served:
        yield served


@pytest.fixture(scope="module")
def fed_catalog(spark: SparkSession, catalog: ServedCatalog) -> str:
    """Spark's catalog ``fed`` on the served catalog (catalogs are made on first use, so it
    is configured here, on the running session)."""
    for key, value in {
        "": "org.apache.iceberg.spark.SparkCatalog",
        ".type": "rest",
        ".uri": catalog.uri,
        ".token": TOKEN,
        # Each query loads the table from the catalog: a write must show on the next query.
        ".cache-enabled": "false",
    }.items():
        spark.conf.set(f"spark.sql.catalog.fed{key}", value)
    return "fed"


def rows(spark: SparkSession, sql: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in spark.sql(sql).collect())


@pytest.mark.parametrize("name", SERVED)
def test_spark_reads_every_served_table_exactly(
    spark: SparkSession, fed_catalog: str, layout_tables: dict[str, Written], name: str
) -> None:
    written = layout_tables[name]
    expected = written.read_optimized if written.read_optimized is not None else written.rows
    assert rows(spark, f"SELECT id, country, fare FROM fed.lake.{name}") == expected
    pruned = rows(spark, f"SELECT id, country, fare FROM fed.lake.{name} WHERE country = '{COUNTRY}'")
    assert pruned == [row for row in expected if row[1] == COUNTRY]
    if written.read_optimized is None:
        assert len(pruned) == written.pruned > 0


def test_spark_lists_the_served_tables(spark: SparkSession, fed_catalog: str) -> None:
    assert rows(spark, "SHOW NAMESPACES IN fed") == [("lake",)]
    listed = rows(spark, "SHOW TABLES IN fed.lake")
    assert sorted(name for _, name, _ in listed) == sorted(SERVED)


def test_a_write_shows_on_the_next_query_with_no_sync(spark: SparkSession, tmp_path: Path) -> None:
    table = write_sample(f"file://{tmp_path}/moving", "object_store", tmp_path / "storage")
    with ServedCatalog([ServedTable(("lake",), "moving", table)], Access(token=TOKEN)) as served:
        spark.conf.set("spark.sql.catalog.moving", "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set("spark.sql.catalog.moving.type", "rest")
        spark.conf.set("spark.sql.catalog.moving.uri", served.uri)
        spark.conf.set("spark.sql.catalog.moving.token", TOKEN)
        spark.conf.set("spark.sql.catalog.moving.cache-enabled", "false")
        query = "SELECT id, country, fare FROM moving.lake.moving"
        assert rows(spark, query) == fedcore_reads(table).rows
        before = fedcore_reads(table).rows
        table.upsert(
            pa.table({"id": [0, 200], "country": [COUNTRY, "bra"], "ts": [9, 9], "fare": [77.0, 200.0]})
        )
        after = fedcore_reads(table).rows
        assert after != before
        assert rows(spark, query) == after


def test_writes_through_the_catalog_are_refused(
    spark: SparkSession, layout_tables: dict[str, Written]
) -> None:
    before = rows(spark, "SELECT id, country, fare FROM fed.lake.hive")
    # The catalog's config lists only reads, so Iceberg's client refuses a change before it is
    # sent; one sent anyway is refused by the catalog (packages/fedcore/tests/catalog/test_rest_catalog.py).
    refused = "does not support endpoint: POST"
    with pytest.raises(Exception, match=refused):
        spark.sql("CREATE TABLE fed.lake.made_by_spark (id BIGINT) USING iceberg").collect()
    with pytest.raises(Exception, match=refused):
        spark.sql("INSERT INTO fed.lake.hive SELECT * FROM fed.lake.hive LIMIT 1").collect()
    assert rows(spark, "SELECT id, country, fare FROM fed.lake.hive") == before
    assert rows(spark, "SELECT id, country, fare FROM fed.lake.hive") == layout_tables["hive"].rows
