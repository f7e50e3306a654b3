"""fed-spark against what a Spark user does without it, on a local SparkSession (2 cores).

Each case is timed in this one run, beside its baseline, best of ``--repeats``:

- bulk insert of the rows into a new object-store-layout table (``format("fed")``, tasks
  writing file groups) against ``df.write.partitionBy("p").parquet(...)`` (a Hive-layout
  dataset) of the same generated rows;
- a full scan (an aggregate over every data column) of that table against
  ``spark.read.parquet`` of the Hive-layout copy, both ways fed scans: Spark's Parquet
  reader over the planned file list (``fed_spark.read(..., scan="native")``) and the
  Python data source (``format("fed")``, rows decoded in Python workers);
- a one-partition query on a table of 1,000 partitions against the same query on the
  Hive-layout copy, where Spark discovers the partitions by listing them (a fresh
  DataFrame each time, as a new job would);
- upserts of 1% and 10% of the rows, as rows/s: ``fed_spark.write`` (shuffled by partition,
  tasks rewriting the touched file groups) against fedcore's single-process ``WriteClient``
  (no baseline ratio: two ways of doing the same thing);
- with ``--hudi PYTHON`` (a Python with PySpark 3.5, as ``tox -e hudi`` has: Hudi's bundles
  are built for it), Apache Hudi 0.15's own Spark writer on the same rows in a process of
  its own (``benchmarks/hudi_writer.py``, its bundle fetched once with mvn): bulk insert
  and the two upserts against fed-spark's, and Hudi's bulk insert against its Spark's
  ``df.write.parquet``.

Every side writes its Parquet files in one codec (``--codec``, fed's default snappy; Hudi
0.x's own default is gzip, which alone costs its writer time fed's would not spend).

Rows: ``id`` long (record key), ``p`` (16 partitions; 1,000 in the partition case), ``ts``
long (precombine), ``v`` double, ``s`` string.

Run: ``python benchmarks/spark.py [--rows 2000000] [--plot PNG] [--hudi .tox/hudi/bin/python]``
(needs fed-spark and Java 17), or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from tqdm import tqdm

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from spark_rows import best, rows

import fed_spark
from fedcore import properties as P
from fedcore.table import load_table
from fedcore.write.client import WriteClient

HUDI_BUNDLE = "org.apache.hudi:hudi-spark3.5-bundle_2.12:0.15.0:jar"
PARTITIONS = 16

GOALS = {
    "bulk insert": 1.3,
    "bulk insert vs Apache Hudi": 0.3,
    "upsert 1% vs Apache Hudi": 0.5,
    "upsert 10% vs Apache Hudi": 0.5,
    "full scan, native": 1.2,
    "full scan, Python workers": 1.2,
    "one partition of 1,000, native": 1.0,
    "one partition of 1,000, Python workers": 1.0,
}


#: Parquet codec of every side's files (``--codec``): fed's default.
CODEC = "snappy"


def options(name: str, storage: str, operation: str = "bulk_insert") -> dict[str, str]:
    return {
        "hoodie.parquet.compression.codec": CODEC,
        "hoodie.table.name": name,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.operation": operation,
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: storage,
    }


def scan(frame: DataFrame) -> None:
    frame.agg(F.sum("v"), F.max("s"), F.max("ts"), F.count("id")).collect()


def main(n: int, repeats: int, hudi_python: str | None) -> dict[str, tuple[float, float | None, int]]:
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    fed_spark.register(spark)
    found: dict[str, tuple[float, float | None, int]] = {}
    root = tempfile.mkdtemp(prefix="fed-spark-bench-")
    with tqdm(total=6, desc="spark cases", unit="case") as progress:
        data = rows(spark, n, PARTITIONS)

        def fed_write(attempt: int) -> None:
            frame = data.write.format("fed").options(**options("bench", f"{root}/storage{attempt}"))
            frame.mode("append").save(f"{root}/fed{attempt}")

        def hive_write(attempt: int) -> None:
            frame = data.write.partitionBy("p").mode("overwrite").option("compression", CODEC)
            frame.parquet(f"{root}/hive{attempt}")

        found["bulk insert"] = (best(fed_write, repeats), best(hive_write, repeats), n)
        # Both wrote every row (checked outside the timings).
        assert load_table(f"{root}/fed0").scan().count() == n == spark.read.parquet(f"{root}/hive0").count()
        progress.update()

        def hive_scan(_: int) -> None:
            scan(spark.read.parquet(f"{root}/hive0"))

        hive = best(hive_scan, repeats)
        for way, label in (("native", "native"), ("python", "Python workers")):

            def fed_scan(_: int, way: Any = way) -> None:
                scan(fed_spark.read(spark, f"{root}/fed0", scan=way))

            found[f"full scan, {label}"] = (best(fed_scan, repeats), hive, n)
        progress.update()

        many = max(100_000, n // 10)
        wide = rows(spark, many, 1000)
        wide.write.format("fed").options(**options("wide", f"{root}/wide-storage")).mode("append").save(
            f"{root}/wide"
        )
        wide.write.partitionBy("p").parquet(f"{root}/wide-hive")

        def hive_one(_: int) -> None:
            scan(spark.read.parquet(f"{root}/wide-hive").where("p = 'p0500'"))

        listed = best(hive_one, repeats)
        for way, label in (("native", "native"), ("python", "Python workers")):

            def fed_one(_: int, way: Any = way) -> None:
                scan(fed_spark.read(spark, f"{root}/wide", "p = 'p0500'", scan=way))

            found[f"one partition of 1,000, {label}"] = (best(fed_one, repeats), listed, many // 1000)
        progress.update()

        for fraction in (0.01, 0.1):
            changed = int(n * fraction)
            updates = rows(spark, n, PARTITIONS, ts=2).sample(fraction=fraction, seed=3).limit(changed)
            updates = updates.cache()
            count = updates.count()
            upsert = {"hoodie.datasource.write.operation": "upsert"}
            start = time.perf_counter()
            result = fed_spark.write(updates, f"{root}/fed0", upsert)
            spark_time = time.perf_counter() - start
            assert result.updated == count, (result, count)
            arrow = updates.toArrow()
            client = WriteClient(load_table(f"{root}/fed0"))
            start = time.perf_counter()
            again = client.upsert(arrow)
            local_time = time.perf_counter() - start
            assert again.updated == count
            found[f"upsert {fraction:.0%}: fed_spark.write vs WriteClient"] = (spark_time, local_time, count)
            updates.unpersist()
            progress.update()
        progress.update()
    spark.stop()
    if hudi_python is not None:
        theirs = hudi_writer(hudi_python, n, repeats)
        found["bulk insert vs Apache Hudi"] = (found["bulk insert"][0], theirs["bulk insert"], n)
        found["Apache Hudi bulk insert vs its Spark's parquet"] = (
            theirs["bulk insert"],
            theirs["parquet"],
            n,
        )
        for fraction in ("1%", "10%"):
            ours = found[f"upsert {fraction}: fed_spark.write vs WriteClient"]
            found[f"upsert {fraction} vs Apache Hudi"] = (ours[0], theirs[f"upsert {fraction}"], ours[2])
    return found


def hudi_writer(python: str, n: int, repeats: int) -> dict[str, float]:
    """Apache Hudi's writer on the same rows, in a PySpark 3.5 process of its own."""
    from fed_dev.maven import artifact

    bundle = artifact(HUDI_BUNDLE, "Apache Hudi's Spark bundle, for the writer comparison")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hudi_writer.py")
    print("Apache Hudi's writer (PySpark 3.5) ...", file=sys.stderr, flush=True)
    done = subprocess.run(
        [python, script, str(bundle), str(n), str(PARTITIONS), str(repeats), CODEC],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        env={**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python},
    )
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def report(found: dict[str, tuple[float, float | None, int]]) -> None:
    print(f"\n{'':44} {'fed':>9} {'baseline':>9} {'ratio':>6} {'goal':>6} {'fed rows/s':>12}")
    for name, (ours, base, count) in found.items():
        goal = GOALS.get(name)
        ratio = f"{ours / base:>5.2f}x" if base else "     -"
        print(
            f"{name:44} {ours:>8.2f}s {base or float('nan'):>8.2f}s {ratio} "
            f"{'' if goal is None else f'{goal:.1f}x':>6} {count / ours:>12,.0f}"
        )


def plot(found: dict[str, tuple[float, float | None, int]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name, (_, base, _) in found.items() if base]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.barh(names, [found[n][0] / (found[n][1] or 1) for n in names], color="tab:blue")
    for index, name in enumerate(names):
        goal = GOALS.get(name)
        if goal is not None:
            ax.plot([goal, goal], [index - 0.4, index + 0.4], color="tab:red", linestyle="--")
    ax.set_xlabel("fed time / baseline time (red: goal)")
    ax.set_title("fed-spark vs plain Spark and Apache Hudi, local[2]")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--plot", metavar="PNG")
    parser.add_argument(
        "--codec",
        default=CODEC,
        choices=("snappy", "gzip", "zstd"),
        help="Parquet codec of every side's files (fed's default: snappy; Hudi 0.x's: gzip)",
    )
    parser.add_argument(
        "--hudi", metavar="PYTHON", help="a Python with PySpark 3.5: compare with Hudi's writer"
    )
    args = parser.parse_args()
    if args.hudi is not None and not os.path.exists(args.hudi):
        parser.error(f"--hudi {args.hudi}: no such Python (tox -e hudi makes one with PySpark 3.5)")
    CODEC = args.codec
    results = main(args.rows, args.repeats, args.hudi)
    report(results)
    if args.plot:
        plot(results, args.plot)
