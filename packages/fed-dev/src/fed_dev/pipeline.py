"""The end-to-end pipeline, in one place: a PySpark job that writes one object-store table
through fed-spark (bulk insert, upsert, delete), each commit publishing its Iceberg view to
the Hive metastore (Hudi's hive_sync keys), the table registered for Hive once; and the
queries every engine must answer alike. ``tests/e2e`` runs it against in-process servers;
the ``docker/`` stack's job container runs it against the compose services
(``python -m fed_dev pipeline``). Needs fed-spark (PySpark)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fedcore import Table, load_table
from fedcore import properties as P
from fedcore.catalog import SyncTarget, sync
from fedcore.engine import StorageOptions
from fedcore.exceptions import FedError, TableNotFoundError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The metastore database the pipeline registers its table in.
DATABASE = "lake"
TABLE = "rides"
SCHEMA = "ride_id long, city string, ts long, fare double"
#: What Trino, Hive and Spark are each asked: a pruned aggregate, a point lookup on a data
#: column, a full count.
QUERIES = {
    "pruned aggregate": f"SELECT count(*), sum(fare) FROM {TABLE} WHERE city = 'sf'",
    "point lookup": f"SELECT ride_id, city, fare FROM {TABLE} WHERE ride_id = 7",
    "full count": f"SELECT count(*) FROM {TABLE}",
}
CITIES = ("sf", "ny", "la")
#: Writes in order: (operation, rows of ``SCHEMA``).
Writes = list[tuple[str, list[tuple[Any, ...]]]]


def write_options(storage_path: str, metastore: str, database: str = DATABASE) -> dict[str, str]:
    """fed-spark's options for the pipeline's writes (Hudi's keys)."""
    return {
        "hoodie.table.name": TABLE,
        "hoodie.datasource.write.recordkey.field": "ride_id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: storage_path,
        P.HIVE_SYNC_ENABLE: "true",
        P.HIVE_SYNC_METASTORE_URIS: metastore,
        P.HIVE_SYNC_DATABASE: database,
    }


def batches(rows: int = 60) -> Writes:
    """The job's writes in order: (operation, rows of ``SCHEMA``)."""
    return [
        ("bulk_insert", [(i, CITIES[i % 3], 1, float(i)) for i in range(rows)]),
        ("upsert", [(i, "sf", 2, 1000.0 + i) for i in range(0, rows, 3)]),
        ("delete", [(7, "ny", 3, 0.0), (9, "sf", 3, 0.0)]),
    ]


def again() -> Writes:
    """One more write, on a table the job wrote before: an upsert of two keys it holds and
    three new ones, all in ``sf``."""
    return [("upsert", [(i, "sf", 4, 3000.0 + i) for i in (0, 3, 60, 61, 62)])]


def run(
    spark: SparkSession,
    table_path: str,
    storage_path: str,
    metastore: str,
    *,
    storage_options: StorageOptions | None = None,
    database: str = DATABASE,
    after_write: Callable[[str, Table], None] | None = None,
    writes: Writes | None = None,
) -> tuple[Table, list[str]]:
    """Run the job: each write (``batches()`` unless ``writes`` are given) through
    ``fed_spark.write``, then ``after_write(operation, table)``; after the write that creates
    the table, it is registered for Hive (the later commits' own syncs keep that form). The
    table, and the writes' warnings (a sync that failed after its commit: the commit stands,
    the engines see it after the next sync)."""
    import fed_spark

    fed_spark.register(spark, storage_options=storage_options)
    options = write_options(storage_path, metastore, database)
    table: Table | None = None
    warnings: list[str] = []
    try:
        load_table(table_path, storage_options=storage_options)
        registers = False
    except TableNotFoundError:
        registers = True
    for n, (operation, rows) in enumerate(batches() if writes is None else writes):
        frame = spark.createDataFrame(rows, SCHEMA)
        summary = fed_spark.write(
            frame, table_path, {**options, "hoodie.datasource.write.operation": operation}
        )
        warnings += [f"{operation}: {warning}" for warning in summary.warnings]
        table = load_table(table_path, storage_options=storage_options)
        if n == 0 and registers:
            try:
                sync(table, SyncTarget((metastore,), database, TABLE, hive=True))
            except FedError as exc:  # the write stands: Hive reads the table once this is redone
                warnings.append(f"registering {database}.{TABLE} for Hive: {exc}")
        if after_write is not None:
            after_write(operation, table)
    assert table is not None
    return table, warnings


def on_spark(spark: SparkSession, table_path: str, sql: str) -> list[tuple[Any, ...]]:
    """One of the queries, through Spark: the table read with ``format("fed")`` (pruned through
    its metadata), queried as a temporary view."""
    spark.read.format("fed").load(table_path).createOrReplaceTempView(TABLE)
    return normal(tuple(row) for row in spark.sql(sql).collect())


def normal(rows: Any) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples, floats rounded (engines add floats in their own order)."""
    return sorted(tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in rows)


def expected(table: Table) -> dict[str, list[tuple[Any, ...]]]:
    """Each query's answer, from fedcore's own read of ``table``."""
    rows = table.read(columns=["ride_id", "city", "fare"]).to_pylist()
    sf = [r["fare"] for r in rows if r["city"] == "sf"]
    return {
        "pruned aggregate": normal([(len(sf), sum(sf) if sf else None)]),
        "point lookup": normal([(r["ride_id"], r["city"], r["fare"]) for r in rows if r["ride_id"] == 7]),
        "full count": [(len(rows),)],
    }


def report(spark: SparkSession, table: Table) -> list[str]:
    """Each query, Spark's answer and fedcore's, as the job prints them."""
    want = expected(table)
    lines = []
    for name, sql in QUERIES.items():
        lines += [sql, f"    spark:   {on_spark(spark, table.path, sql)}", f"    fedcore: {want[name]}"]
    return lines
