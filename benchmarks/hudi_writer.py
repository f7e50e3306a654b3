"""Apache Hudi's own Spark writer on the rows ``benchmarks/spark.py`` writes with fed-spark.

Run by ``benchmarks/spark.py --hudi PYTHON`` in a Python with PySpark 3.5 (Hudi's Spark
bundles are built for it; ``tox -e hudi`` has one), so both sides are timed in one run:
``python hudi_writer.py BUNDLE_JAR ROWS PARTITIONS REPEATS CODEC`` prints one JSON object of
seconds (best of REPEATS): ``parquet`` (this Spark's ``df.write.partitionBy("p").parquet``),
``bulk insert`` (a new copy-on-write table), ``upsert 1%`` and ``upsert 10%`` (into it, the
same sampled rows as fed's), and the rows each upsert changed.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

from pyspark.sql import SparkSession
from spark_rows import best, rows

#: Spark 3.5 on Java 17 needs these packages opened to it.
OPENS = ("java.lang", "java.lang.invoke", "java.nio", "java.util", "sun.nio.ch", "sun.util.calendar")


def hudi(operation: str, codec: str) -> dict[str, str]:
    """Hudi's options as its quick start gives them, with the metadata table (fed always has
    one) and Hudi's default index; the shuffle parallelism left to Hudi's defaults; base files
    in ``codec``, as fed's (Hudi 0.x's default is gzip, fed's snappy: the codec alone would
    make a difference neither writer's work does)."""
    return {
        "hoodie.parquet.compression.codec": codec,
        "hoodie.table.name": "bench",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.operation": operation,
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.metadata.enable": "true",
    }


def main(bundle: str, n: int, partitions: int, repeats: int, codec: str) -> dict[str, float]:
    options = " ".join(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in OPENS)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", bundle)
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.driver.extraJavaOptions", options)
        .config("spark.driver.memory", "4g")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    root = tempfile.mkdtemp(prefix="hudi-writer-bench-")
    data = rows(spark, n, partitions)
    found: dict[str, float] = {}

    def parquet(attempt: int) -> None:
        frame = data.write.partitionBy("p").mode("overwrite").option("compression", codec)
        frame.parquet(f"{root}/parquet{attempt}")

    def bulk(attempt: int) -> None:
        data.write.format("hudi").options(**hudi("bulk_insert", codec)).mode("overwrite").save(
            f"{root}/hudi{attempt}"
        )

    found["parquet"] = best(parquet, repeats)
    print("hudi: parquet done", file=sys.stderr, flush=True)
    found["bulk insert"] = best(bulk, repeats)
    print("hudi: bulk insert done", file=sys.stderr, flush=True)
    assert spark.read.format("hudi").load(f"{root}/hudi0").count() == n
    for fraction in (0.01, 0.1):
        changed = int(n * fraction)
        updates = rows(spark, n, partitions, ts=2).sample(fraction=fraction, seed=3).limit(changed).cache()
        count = updates.count()
        start = time.perf_counter()
        updates.write.format("hudi").options(**hudi("upsert", codec)).mode("append").save(f"{root}/hudi0")
        found[f"upsert {fraction:.0%}"] = time.perf_counter() - start
        found[f"upsert {fraction:.0%} rows"] = count
        updates.unpersist()
        print(f"hudi: upsert {fraction:.0%} done", file=sys.stderr, flush=True)
    # Both upserts landed (each updated rows of the table; the second's include the first's).
    assert spark.read.format("hudi").load(f"{root}/hudi0").where("ts = 2").count() >= found["upsert 10% rows"]
    spark.stop()
    return found


if __name__ == "__main__":
    jar, total, parts, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(main(jar, total, parts, repeats, sys.argv[5])))
