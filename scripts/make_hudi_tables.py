"""Write the Hudi tables in ``packages/fedcore/tests/data/hudi-tables/`` with Apache Hudi itself.

The tables in ``tests/data/hudi-rs`` (hudi-rs's test data) hold no delete blocks, one
payload class and no compaction. These are written by Apache Hudi 0.15.0's Spark bundle (table version 6)
on PySpark 3.5, so the conformance test compares fedcore with Hudi's own writer and reader
as well as with hudi-rs: for each table, the zip of the table and ``<name>.spark.json``, the
rows Hudi's Spark reader returned right after writing it.

Not run by the tests (it needs a JVM, PySpark 3.5 and the bundle); to regenerate:

    python3 -m venv /tmp/spark && /tmp/spark/bin/pip install "pyspark==3.5.3"
    mvn dependency:get -Dartifact=org.apache.hudi:hudi-spark3.5-bundle_2.12:0.15.0 -Dtransitive=false
    PYSPARK_PYTHON=/tmp/spark/bin/python /tmp/spark/bin/python scripts/make_hudi_tables.py
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

OUT = Path(__file__).resolve().parents[1] / "packages" / "fedcore" / "tests" / "data" / "hudi-tables"
BUNDLE = (
    Path(os.path.expanduser("~/.m2/repository/org/apache/hudi/hudi-spark3.5-bundle_2.12/0.15.0"))
    / "hudi-spark3.5-bundle_2.12-0.15.0.jar"
)
COLUMNS = ["id", "name", "city", "ts", "fare"]
#: Upserts, an update carrying an older ordering value, deletes, and a deleted key written again.
STEPS: list[tuple[str, list[tuple[Any, ...]]]] = [
    ("upsert", [(i, f"name{i}", ["sf", "nyc"][i % 2], 10, float(i)) for i in range(8)]),
    ("upsert", [(1, "name1-new", "nyc", 20, 100.0), (2, "name2-older", "sf", 5, 200.0)]),
    ("delete", [(3, "x", "nyc", 30, 0.0), (4, "x", "sf", 30, 0.0)]),
    ("upsert", [(9, "name9", "sf", 40, 9.0), (3, "name3-back", "nyc", 40, 3.0)]),
]
#: A soft delete through the ``_hoodie_is_deleted`` column, then the key written again.
SOFT_DELETE_STEPS: list[tuple[str, list[tuple[Any, ...]]]] = [
    ("upsert", [(*row, False) for row in STEPS[0][1]]),
    ("upsert", [(5, "x", "nyc", 30, 0.0, True), (6, "x", "sf", 30, 0.0, True)]),
    ("upsert", [(6, "name6-back", "sf", 40, 6.0, False)]),
]
TABLES: dict[str, tuple[dict[str, str], list[tuple[str, list[tuple[Any, ...]]]]]] = {
    "v6_mor_deletes": ({}, STEPS),
    "v6_mor_default_payload": (
        {"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload"},
        STEPS,
    ),
    # Compaction after every two delta commits: base files rewritten by a compaction (a
    # completed "commit"), and log files written after it.
    "v6_mor_compacted": (
        {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"},
        STEPS,
    ),
    "v6_mor_soft_deletes": ({}, SOFT_DELETE_STEPS),
    # A compaction scheduled after two delta commits but never run: the writes after it log
    # onto the pending compaction's file slices, which readers merge onto the previous ones.
    "v6_mor_pending_compaction": (
        {"hoodie.compact.schedule.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"},
        STEPS,
    ),
}


def session() -> SparkSession:
    opens = " ".join(
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in (
            "java.lang",
            "java.lang.invoke",
            "java.nio",
            "java.util",
            "sun.nio.ch",
            "sun.util.calendar",
        )
    )
    return (
        SparkSession.builder.master("local[1]")
        .config("spark.jars", str(BUNDLE))
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.driver.extraJavaOptions", opens)
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )


def main() -> None:
    spark = session()
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (extra, steps) in TABLES.items():
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            options = {
                "hoodie.table.name": name,
                "hoodie.datasource.write.table.type": "MERGE_ON_READ",
                "hoodie.datasource.write.recordkey.field": "id",
                "hoodie.datasource.write.partitionpath.field": "city",
                "hoodie.datasource.write.precombine.field": "ts",
                "hoodie.datasource.write.hive_style_partitioning": "true",
                "hoodie.metadata.enable": "false",
                "hoodie.compact.inline": "false",
                "hoodie.index.type": "SIMPLE",
                **extra,
            }
            columns = COLUMNS + (["_hoodie_is_deleted"] if len(steps[0][1][0]) > len(COLUMNS) else [])
            for index, (operation, rows) in enumerate(steps):
                frame = spark.createDataFrame(rows, columns)
                writer = frame.write.format("hudi").options(**options)
                writer.option("hoodie.datasource.write.operation", operation).mode(
                    "overwrite" if index == 0 else "append"
                ).save(str(path))
            rows = spark.read.format("hudi").load(str(path)).select(*COLUMNS).orderBy("id").collect()
            (OUT / f"{name}.spark.json").write_text(json.dumps([r.asDict() for r in rows], indent=1) + "\n")
            for crc in path.rglob(".*.crc"):
                crc.unlink()
            shutil.make_archive(str(OUT / name), "zip", folder, name)
        print(f"wrote {OUT / name}.zip")
    spark.stop()


if __name__ == "__main__":
    main()
