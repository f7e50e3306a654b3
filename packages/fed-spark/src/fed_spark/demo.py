"""``python -m fed_spark demo``: the pipeline a user runs, on an embedded default.

A local SparkSession and an S3 endpoint in this process (moto on loopback, the one the
tests use): a table whose metadata lives in one bucket and whose data spreads over hashed
prefixes of another. Spark bulk-inserts generated trips (tasks writing file groups),
upserts corrections and late arrivals and deletes cancelled trips (shuffled by file group,
tasks rewriting the touched file groups), then checks every row against what Spark
computes from the inputs themselves, runs a partition-pruned SQL query and an incremental
pull, and prints the physical layout.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from fed_spark.dataframe import write
from fed_spark.session import register
from fedcore import load_table, table_layout
from fedcore import properties as P
from fedcore.exceptions import FedError, MissingDependencyError

COUNTRIES = ("usa", "bra", "deu", "ind", "jpn")


@dataclass
class DemoResult:
    rows: int
    commits: int
    partitions_read: int
    partitions_total: int
    changed_since_first: int
    seconds: float


def trips(spark: SparkSession, start: int, count: int, days: int, version: int) -> DataFrame:
    """Generated trips: the same ids and version give the same rows."""
    countries = ", ".join(f"'{c}'" for c in COUNTRIES)
    return spark.range(start, start + count).selectExpr(
        "id AS trip_id",
        f"element_at(array({countries}), CAST(id % {len(COUNTRIES)} AS INT) + 1) AS country",
        f"CAST(date_add(DATE'2026-01-01', CAST((id DIV {len(COUNTRIES)}) % {days} AS INT)) AS STRING) AS day",
        f"{version}L AS ts",
        f"concat('rider-', lpad(CAST(pmod(hash(id, {version}), 10000) AS STRING), 4, '0')) AS rider",
        f"round(3 + pmod(hash(id, {version} + 1), 7700) / 100.0, 2) AS fare",
    )


def run_demo(
    rows: int = 20_000, days: int = 7, plot: str | None = None, say: Callable[[str], None] = print
) -> DemoResult:
    try:
        from fed_dev.servers import LoopbackS3  # the dev tooling's S3 server: fed-spark[demo]
    except ImportError as exc:
        raise MissingDependencyError(
            f"the demo needs fed-dev: pip install ./packages/fed-dev ({exc})"
        ) from exc

    started = time.monotonic()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    with LoopbackS3() as server:
        tables, storage = server.create_bucket("lake-tables"), server.create_bucket("lake-storage")
        say(f"S3 endpoint on loopback: {server.endpoint_url}; buckets {tables} (metadata), {storage} (data)")
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("fed-spark demo")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.showConsoleProgress", "false")  # each step says when it is done
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark, storage_options=server.storage_options())
        path = f"{tables}/trips"
        options = {
            "hoodie.table.name": "trips",
            "hoodie.datasource.write.recordkey.field": "trip_id",
            "hoodie.datasource.write.partitionpath.field": "country,day",
            "hoodie.datasource.write.precombine.field": "ts",
            P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE,
            P.STORAGE_PATH: storage,
            str(P.MAX_FILE_SIZE): str(256 * 1024),
        }
        say(
            f"Spark {spark.version}, local[2]. Writing {rows:,} trips, "
            f"{len(COUNTRIES)} countries x {days} days:"
        )
        initial = trips(spark, 0, rows, days, 0)
        initial.write.format("fed").options(**options).option(
            "hoodie.datasource.write.operation", "bulk_insert"
        ).mode("append").save(path)
        table = load_table(path, storage_options=server.storage_options())
        first = table.timeline().completed()[-1].time
        say(
            f"  {first} bulk_insert {rows:>8,} records  initial load (format('fed'), tasks write file groups)"
        )
        corrections = trips(spark, 0, rows, days, 1).where("trip_id % 7 = 0")
        late = trips(spark, rows, rows // 10, days, 1)
        cancelled = (
            trips(spark, 0, rows, days, 0).where("trip_id % 11 = 0").select("trip_id", "country", "day")
        )
        steps = [
            ("upsert", corrections, "fare corrections"),
            ("upsert", late, "late arrivals"),
            ("delete", cancelled, "cancelled trips"),
        ]
        for operation, data, label in steps:
            result = write(data, path, {"hoodie.datasource.write.operation": operation})
            touched = result.updated + result.inserted if operation != "delete" else result.deleted
            say(
                f"  {result.instant} {operation:<11} {touched:>8,} records  {label} "
                "(fed_spark.write, shuffled by file group)"
            )

        say("\nChecking every row against what Spark computes from the inputs ...")
        written = initial.unionByName(corrections).unionByName(late)
        latest = written.groupBy("trip_id").agg({"ts": "max"}).withColumnRenamed("max(ts)", "ts")
        expected = written.join(latest, ["trip_id", "ts"]).join(
            cancelled.select("trip_id"), "trip_id", "left_anti"
        )
        # Two jobs over one read of the table (each action reads it again: most of the check's
        # time). Whole rows as multisets: each distinct row's count among the expected rows less
        # its count among the stored ones, which is 0 for every row when they are equal.
        stored = spark.read.format("fed").load(path).cache()
        got = stored.select(*expected.columns)
        signed = expected.withColumn("_n", F.lit(1)).unionByName(got.withColumn("_n", F.lit(-1)))
        off = signed.groupBy(*expected.columns).agg(F.sum("_n").alias("n"))
        missing, extra = off.agg(
            F.sum(F.greatest(F.col("n"), F.lit(0))), F.sum(F.greatest(-F.col("n"), F.lit(0)))
        ).first() or (0, 0)
        # No key twice, by its values or by Hudi's key column.
        count, keys, hudi_keys = stored.agg(
            F.count(F.lit(1)), F.count_distinct("trip_id"), F.count_distinct("_hoodie_record_key")
        ).first() or (0, 0, 0)
        twice = (count - keys) + (count - hudi_keys)
        if missing or extra or twice:
            raise FedError(
                f"demo check failed: {missing} rows missing, {extra} unexpected, {twice} rows repeat a key"
            )
        say(f"  {count:,} rows, all as expected, each key once")

        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW trips USING fed OPTIONS (path '{path}')")
        since = str(date(2026, 1, 1) + timedelta(days=days - 3))
        query = (
            "SELECT country, count(*) AS trips, round(sum(fare), 2) AS fares FROM trips "
            f"WHERE country = 'usa' AND day >= '{since}' GROUP BY country"
        )
        answer = spark.sql(query).collect()
        pruned = table.file_slices([("country", "=", "usa"), ("day", ">=", since)])
        partitions_total = len(load_table(path, storage_options=server.storage_options()).partitions())
        partitions_read = len({s.partition_path for s in pruned})
        say(
            f"\nPruned SQL query: {query}\n  -> {[tuple(r) for r in answer]}: "
            f"planned {len(pruned)} file slices of {partitions_read} of {partitions_total} partitions"
        )
        pull = {
            "hoodie.datasource.query.type": "incremental",
            "hoodie.datasource.read.begin.instanttime": first,
        }
        changed = spark.read.format("fed").options(**pull).load(path).count()
        say(f"Incremental pull since {first}: {changed:,} records written after the initial load")
        layout = table_layout(load_table(path, storage_options=server.storage_options()))
        say("\n" + layout.format())
        if plot:
            layout.plot(plot)
            say(f"Plot written to {plot}")
        return DemoResult(count, 4, partitions_read, partitions_total, changed, time.monotonic() - started)
