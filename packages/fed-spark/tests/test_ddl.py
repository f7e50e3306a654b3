"""How ``fed_spark.create_table`` reads a ``CREATE TABLE`` statement (no session needed: the
clauses are read in Python, so a Spark Connect client reads them as a classic session does;
the column list goes to Spark's DDL parser, tested with a session in test_write and
test_pipeline)."""

from __future__ import annotations

import pytest

from fed_spark.ddl import _Ddl, _Statement
from fedcore.exceptions import ConfigError


def ddl(statement: str) -> _Ddl:
    return _Ddl(_Statement.parse(statement))


def test_every_clause_in_any_order_with_quoting_comments_and_escapes() -> None:
    found = ddl(
        """-- a comment
        create table if not exists `my db`.`odd``name` (
            id BIGINT NOT NULL COMMENT 'the key, (unique)', city STRING, amount DECIMAL(10, 2)
        ) USING fed
        LOCATION 's3://bucket/tables/it\\'s'
        TBLPROPERTIES ('primaryKey' = 'id', preCombineField 'ts', hoodie.storage.path = 's3://b/s',
                       'hoodie.parquet.max.file.size' = 1048576)
        /* between clauses */ PARTITIONED BY (city)
        OPTIONS (fed.storage.endpoint_url 'http://127.0.0.1:9000')
        COMMENT 'rides';"""
    )
    assert found.if_not_exists
    assert (found.database, found.table, found.name) == ("my db", "odd`name", "`my db`.`odd``name`")
    assert found.columns == (
        "id BIGINT NOT NULL COMMENT 'the key, (unique)', city STRING, amount DECIMAL(10, 2)"
    )
    assert found._location == "s3://bucket/tables/it's"
    assert (found.record_key_fields, found.precombine_field, found.partition_fields) == (
        ["id"],
        "ts",
        ["city"],
    )
    assert found.table_type == "COPY_ON_WRITE"
    assert found.hoodie == {"hoodie.storage.path": "s3://b/s", "hoodie.parquet.max.file.size": "1048576"}
    assert found.storage == {"endpoint_url": "http://127.0.0.1:9000"}


def test_a_path_option_is_the_location_and_external_tables_are_taken() -> None:
    assert (
        ddl(
            "CREATE TABLE t (k STRING) USING fed OPTIONS (PATH '/a/t') TBLPROPERTIES (primaryKey='k')"
        )._location
        == "/a/t"
    )
    external = "CREATE EXTERNAL TABLE t (k STRING) USING fed LOCATION '/b/t' TBLPROPERTIES (primaryKey='k')"
    assert ddl(external)._location == "/b/t"


def test_the_session_catalog_may_be_named() -> None:
    found = ddl("CREATE TABLE spark_catalog.sales.rides (k STRING) USING fed TBLPROPERTIES (primaryKey='k')")
    assert (found.database, found.table) == ("sales", "rides")


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("CREATE OR REPLACE TABLE t (k STRING) USING fed", "not CREATE TABLE"),
        ("CREATE TABLE t USING fed AS SELECT 1 AS k", "is CREATE TABLE AS SELECT"),
        ("CREATE TABLE t (k STRING) USING fed PARTITIONED BY (bucket(4, k))", "column values only"),
        ("CREATE TABLE t (k STRING) USING fed CLUSTERED BY (k) INTO 4 BUCKETS", "CLUSTERED: is not a clause"),
        ("CREATE TABLE t (k STRING) USING fed LOCATION '/a' LOCATION '/b'", "LOCATION: is given twice"),
        ("CREATE TABLE t (k STRING) USING fed LOCATION here", "takes a string"),
        ("CREATE TABLE t (k STRING) USING fed TBLPROPERTIES (primaryKey='k'", "ends where"),
        ("CREATE TABLE t (k STRING) USING fed TBLPROPERTIES (primaryKey='k') § ", "cannot be read at '§"),
        ("CREATE TABLE a.b.c.d (k STRING) USING fed", "live in the session catalog"),
        ("CREATE TABLE t (k STRING) USING delta TBLPROPERTIES (primaryKey='k')", "creates tables USING fed"),
        ("CREATE TABLE t (k STRING) USING fed OPTIONS (path '/a') LOCATION '/b'", "both name a location"),
        ("CREATE EXTERNAL TABLE t (k STRING) USING fed TBLPROPERTIES (primaryKey='k')", "needs a LOCATION"),
    ],
)
def test_statements_fed_does_not_take_are_refused_saying_why(statement: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ddl(statement)
