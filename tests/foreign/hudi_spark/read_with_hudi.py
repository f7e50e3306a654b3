"""Read tables with Apache Hudi's own Spark reader: what a user of Hudi would get.

Run in a process of its own per Hudi version (one JVM, one bundle on its class path):
``python read_with_hudi.py BUNDLE_JAR COUNTRY`` with a JSON object ``{name: table path}`` on
stdin (or ``{name: [table path, query type]}``: ``read_optimized`` for a merge-on-read table's
base files alone); prints ``{name: {"rows": [[id, country, fare], ...], "pruned": N}}``, or
``{name: {"error": "<Java exception>: <message>"}}`` where Hudi refused the table.
Needs PySpark 3.5 (``tox -e hudi``) and Java 17.
"""

from __future__ import annotations

import json
import sys

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession
from pyspark.sql.utils import CapturedException

#: Spark 3.5 on Java 17 needs these packages opened to it.
OPENS = ("java.lang", "java.lang.invoke", "java.nio", "java.util", "sun.nio.ch", "sun.util.calendar")


def session(bundle: str) -> SparkSession:
    options = " ".join(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in OPENS)
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.jars", bundle)
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.driver.extraJavaOptions", options)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read(spark: SparkSession, table: str | list[str], country: str) -> dict[str, object]:
    path, query_type = (table, "snapshot") if isinstance(table, str) else table
    try:
        reader = spark.read.format("hudi").option("hoodie.datasource.query.type", query_type)
        frame = reader.load(path).select("id", "country", "fare")
        rows = sorted([row.id, row.country, row.fare] for row in frame.collect())
        return {"rows": rows, "pruned": frame.where(frame.country == country).count()}
    except CapturedException as exc:  # a Java exception PySpark converted: report it as Java names it
        origin = getattr(exc, "_origin", None)
        return {
            "error": str(origin.toString()) if origin is not None else f"{type(exc).__name__}: {exc.desc}"
        }
    except Py4JJavaError as exc:
        return {"error": str(exc.java_exception.toString())}


def main() -> None:
    bundle, country = sys.argv[1], sys.argv[2]
    tables: dict[str, str | list[str]] = json.load(sys.stdin)
    spark = session(bundle)
    try:
        answers = {name: read(spark, path, country) for name, path in tables.items()}
    finally:
        spark.stop()
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
