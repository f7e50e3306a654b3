"""Tables written through fed-spark's write paths, for Apache Hudi's readers to read.

Run in a Python with PySpark 4 and fed-spark (``hudi_spark/conftest.py`` makes one; the
hudi env's own PySpark is 3.5, Hudi's): ``python write_with_fed_spark.py ROOT`` writes, for
each table type, a Hive-layout table of trips through

- ``fed_spark.write``: an upsert that creates the table and its partitions, an upsert that
  updates rows and inserts into an existing and a new partition, an insert into a new
  partition (tasks writing new file groups), and a delete;
- ``format("fed")``: a bulk insert, then an upsert into a new partition (staged);
- the streaming sink (``writeStream.format("fed")``): two micro-batches, the second an
  upsert into a new partition;

each at table version 6 (fed's default) and 9 (Hudi 1.1 and later, asked for with
``hoodie.write.table.version``: names ending ``_v9``), and prints one JSON line
``{name: {"path": P, "rows": [[id, country, fare], ...], "pruned": N}}``: what fedcore reads
of each (rows sorted; ``pruned``: rows with ``country = 'usa'``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

import fed_spark
from fedcore import load_table

COUNTRY = "usa"
SCHEMA = "id long, country string, ts long, fare double"


#: The table versions each path writes: fed's default, and Hudi 1.x's current one.
VERSIONS = ("6", "9")


def options(name: str, table_type: str, version: str = "6") -> dict[str, str]:
    found = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "country",
        "hoodie.datasource.write.precombine.field": "ts",
    }
    if version != "6":
        found["hoodie.write.table.version"] = version
    return found


def trips(spark: SparkSession, ids: range | list[int], countries: list[str], ts: int) -> DataFrame:
    rows = [(i, countries[n % len(countries)], ts, float(i) + ts / 10) for n, i in enumerate(ids)]
    return spark.createDataFrame(rows, SCHEMA)


def with_dataframe_write(spark: SparkSession, path: str, name: str, table_type: str, version: str) -> None:
    keys = options(name, table_type, version)
    fed_spark.write(trips(spark, range(20), [COUNTRY, "bra"], 1), path, keys)
    changes = trips(spark, [0, 2, 100, 101], [COUNTRY, COUNTRY, "ind", "bra"], 2)
    fed_spark.write(changes, path, {"hoodie.datasource.write.operation": "upsert"})
    inserted = trips(spark, [200, 201], ["chn"], 3)
    fed_spark.write(inserted, path, {"hoodie.datasource.write.operation": "insert"})
    gone = trips(spark, [1, 100], ["bra", "ind"], 4).select("id", "country")
    fed_spark.write(gone, path, {"hoodie.datasource.write.operation": "delete"})


def with_format_fed(spark: SparkSession, path: str, name: str, table_type: str, version: str) -> None:
    keys = options(name, table_type, version)
    first = trips(spark, range(10), [COUNTRY, "bra"], 1).write.format("fed").options(**keys)
    first.option("hoodie.datasource.write.operation", "bulk_insert").mode("append").save(path)
    more = trips(spark, [3, 50, 51], ["bra", "ind", "ind"], 2).write.format("fed").options(**keys)
    more.option("hoodie.datasource.write.operation", "upsert").mode("append").save(path)


def with_stream(spark: SparkSession, root: Path, path: str, name: str, table_type: str, version: str) -> None:
    source = root / f"{name}_source"
    trips(spark, range(10), [COUNTRY, "bra"], 1).coalesce(1).write.parquet(str(source / "0"))
    trips(spark, [4, 60, 61], [COUNTRY, "ind", "ind"], 2).coalesce(1).write.parquet(str(source / "1"))
    frame = spark.readStream.format("parquet").schema(SCHEMA).option("maxFilesPerTrigger", 1)
    writer = frame.load(f"{source}/*").writeStream.format("fed").options(**options(name, table_type, version))
    query = writer.option("checkpointLocation", str(root / f"{name}_checkpoint"))
    query.trigger(availableNow=True).start(path).awaitTermination()


def fedcore_reads(path: str) -> dict[str, Any]:
    table = load_table(path)
    data = table.read(columns=["id", "country", "fare"])
    rows = sorted(zip(*(data.column(c).to_pylist() for c in ("id", "country", "fare")), strict=True))
    return {
        "path": path,
        "rows": [list(r) for r in rows],
        "pruned": table.scan([("country", "=", COUNTRY)]).count(),
    }


def main(root: Path) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    fed_spark.register(spark)
    written = {}
    try:
        for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            for version in VERSIONS:
                kind = table_type.lower() + ("" if version == "6" else f"_v{version}")
                for name, write in (
                    (f"spark_write_{kind}", with_dataframe_write),
                    (f"format_fed_{kind}", with_format_fed),
                ):
                    path = f"file://{root}/{name}"
                    write(spark, path, name, table_type, version)
                    written[name] = fedcore_reads(path)
                name = f"stream_{kind}"
                path = f"file://{root}/{name}"
                with_stream(spark, root, path, name, table_type, version)
                written[name] = fedcore_reads(path)
                assert load_table(path).config.version == int(version), name
    finally:
        spark.stop()
    print(json.dumps(written))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
