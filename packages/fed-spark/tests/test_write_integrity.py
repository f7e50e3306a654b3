"""fedcore's write rules hold on Spark's write paths (``fed_spark.write``, shuffled by file
group, and ``format("fed")``): a key column Spark types as double is the table's integer
key, a key that would change is refused before anything is written, Hudi's ordering payload
decides updates, and an upsert with a null ordering value is refused."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession

import fed_spark
from fed_dev.testing import Backend, rows
from fedcore import properties as P
from fedcore.table import Table, create_table, load_table

KEYS = {
    "hoodie.datasource.write.recordkey.field": "trip_id",
    "hoodie.datasource.write.partitionpath.field": "country",
    "hoodie.datasource.write.precombine.field": "ts",
}


def trips_table(backend: Backend, **properties: str) -> Table:
    table = create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={
            P.STORAGE_STRATEGY_CLASS: "object_store",
            P.STORAGE_PATH: backend.storage_path,
            **properties,
        },
        storage_options=backend.storage_options,
    )
    return table


def seed(spark: SparkSession, path: str) -> None:
    first = spark.createDataFrame(
        [(i, "us", 10, 10.0 + i) for i in range(6)], "trip_id long, country string, ts long, fare double"
    )
    fed_spark.write(first, path, {"hoodie.datasource.write.operation": "bulk_insert"})


def doubles(spark: SparkSession, ids: list[float], ts: int | None, fare: float) -> DataFrame:
    rows = [(i, "us", ts, fare + i) for i in ids]
    return spark.createDataFrame(rows, "trip_id double, country string, ts long, fare double")


def test_double_keys_update_the_integer_keys_they_name(fed: SparkSession, backend: Backend) -> None:
    table = trips_table(backend)
    seed(fed, table.path)
    fed_spark.write(doubles(fed, [1.0, 2.0, 7.0], 20, 100.0), table.path)  # shuffled by file group
    doubles(fed, [3.0], 20, 300.0).write.format("fed").mode("append").save(table.path)  # staged
    fed_spark.write(
        doubles(fed, [8.0], 20, 800.0), table.path, {"hoodie.datasource.write.operation": "insert"}
    )
    got = load_table(table.path, storage_options=backend.storage_options)
    expected = {i: ("us", 10.0 + i) for i in range(6)} | {
        1: ("us", 101.0),
        2: ("us", 102.0),
        7: ("us", 107.0),
    }
    assert rows(got) == expected | {3: ("us", 303.0), 8: ("us", 808.0)}
    schema = got.schema()
    assert schema is not None
    assert str(schema.field("trip_id").type) == "int64"


def test_keys_that_would_change_and_null_ordering_values_are_refused(
    fed: SparkSession, backend: Backend
) -> None:
    table = trips_table(backend)
    seed(fed, table.path)
    with pytest.raises(Exception, match=r"SchemaMismatchError: key column 'trip_id' is int64 in the table"):
        fed_spark.write(doubles(fed, [1.5], 20, 0.0), table.path)
    with pytest.raises(Exception, match=r"SchemaMismatchError: key column 'trip_id' is int64 in the table"):
        doubles(fed, [1.5], 20, 0.0).write.format("fed").mode("append").save(table.path)
    insert = {"hoodie.datasource.write.operation": "insert"}  # new file groups, written by tasks
    with pytest.raises(Exception, match=r"SchemaMismatchError: key column 'trip_id' is int64 in the table"):
        fed_spark.write(doubles(fed, [9.0, 1.5], 20, 0.0), table.path, insert)
    with pytest.raises(Exception, match=r"InvalidRecordsError: record 0 has a null value in 'ts'"):
        fed_spark.write(doubles(fed, [1.0], None, 0.0), table.path)
    with pytest.raises(Exception, match="SchemaMismatchError") as raised:
        fed_spark.write(doubles(fed, [2.5], 20, 0.0), table.path)
    assert "Traceback (most recent call last)" not in str(raised.value), "one line from the task"
    got = load_table(table.path, storage_options=backend.storage_options)
    assert rows(got) == {i: ("us", 10.0 + i) for i in range(6)}
    assert [i.action for i in got.timeline().completed()] == ["commit"], "nothing else committed"


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_the_ordering_payload_keeps_newer_stored_records(
    fed: SparkSession, backend: Backend, table_type: str
) -> None:
    table = trips_table(backend, **{P.PAYLOAD_CLASS: P.DEFAULT_HOODIE_PAYLOAD, P.TABLE_TYPE: table_type})
    seed(fed, table.path)
    fed_spark.write(doubles(fed, [1.0], 5, 100.0), table.path)  # older than the stored record: ignored
    fed_spark.write(doubles(fed, [2.0], 10, 200.0), table.path)  # a tie: the update wins
    got = load_table(table.path, storage_options=backend.storage_options)
    assert rows(got) == {i: ("us", 10.0 + i) for i in range(6)} | {2: ("us", 202.0)}
