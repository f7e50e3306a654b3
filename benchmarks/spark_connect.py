"""fed_spark.write's distributed upsert from a Spark Connect client against the same upsert
from a classic session, both on one standalone cluster (a master and a worker on loopback,
two one-core executors per application, started from the installed PySpark).

Each side runs in a process of its own (a process holds either kind of session, not both):
it bulk-inserts ``--rows`` rows into a new table (16 partitions, local files), then upserts
``--upsert`` rows ``--repeats`` times, half of them updates and half new keys, and reports
each upsert's seconds. The sides take turns (classic, Connect, classic, Connect), so drift
on the machine reaches both; each side's best time is compared. The Connect client sends
what the classic driver keeps in its JVM (the routing of keys to file groups travels in the
plan); the goal is at most 1.2x.

Run: ``python benchmarks/spark_connect.py [--rows 1000000] [--upsert 100000] [--plot PNG]``
(needs fed-spark with ``pyspark[connect]``, fed-dev, Java 17).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

GOAL = 1.2
PARTITIONS = 16


def side(args: argparse.Namespace) -> None:
    """One side's run: the table, then the timed upserts; JSON on stdout's last line."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from spark_rows import rows

    import fed_spark

    if args.side == "connect":
        spark = SparkSession.builder.remote(args.remote).getOrCreate()
    else:
        spark = (
            SparkSession.builder.appName("fed-bench-classic").config(map=json.loads(args.conf)).getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
    fed_spark.register(spark)
    path = f"{args.folder}/{args.side}-{args.turn}/tables/bench"
    options = {
        "hoodie.table.name": "bench",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.storage.strategy.class": "object_store",
        "hoodie.storage.path": f"{args.folder}/{args.side}-{args.turn}/storage",
    }
    fed_spark.write(
        rows(spark, args.rows, PARTITIONS),
        path,
        {**options, "hoodie.datasource.write.operation": "bulk_insert"},
    )
    times = []
    for attempt in range(args.repeats):
        # Half updates of existing keys, half new ones, a new version each time.
        start = args.rows - args.upsert // 2 + attempt * args.upsert
        data = rows(spark, args.upsert, PARTITIONS, ts=2 + attempt, start=start)
        began = time.perf_counter()
        result = fed_spark.write(data, path)
        times.append(time.perf_counter() - began)
        assert result.rows_written >= args.upsert, result
    spark.stop()
    print(json.dumps({"side": args.side, "times": times}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--upsert", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--turns", type=int, default=2, help="runs of each side, taking turns")
    parser.add_argument("--plot", help="write a bar chart of each side's best upsert here (PNG)")
    parser.add_argument("--side", choices=["classic", "connect"], help=argparse.SUPPRESS)
    parser.add_argument("--remote", help=argparse.SUPPRESS)
    parser.add_argument("--conf", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--turn", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side(args)
        return

    from fed_dev.spark_cluster import ConnectServer, SparkCluster

    best: dict[str, list[float]] = {"classic": [], "connect": []}
    with (
        tempfile.TemporaryDirectory(prefix="fed-bench-connect-") as folder,
        SparkCluster() as cluster,
        ConnectServer(cluster) as server,
    ):
        runs = [(s, turn) for turn in range(args.turns) for s in ("classic", "connect")]
        for name, turn in tqdm(runs, desc="sides", unit="run"):
            command = [
                sys.executable,
                __file__,
                *("--side", name, "--folder", folder, "--turn", str(turn)),
                *("--rows", str(args.rows), "--upsert", str(args.upsert), "--repeats", str(args.repeats)),
                *(("--remote", server.url) if name == "connect" else ("--conf", json.dumps(cluster.conf()))),
            ]
            env = {
                k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
            }
            done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=Path(__file__).parent)
            if done.returncode:
                sys.exit(f"the {name} side failed:\n{done.stderr[-3000:]}")
            best[name].extend(json.loads(done.stdout.strip().splitlines()[-1])["times"])
    classic, connect = min(best["classic"]), min(best["connect"])
    ratio = connect / classic
    count = len(best["classic"])
    print(f"\nupsert of {args.upsert:,} rows ({args.upsert // 2:,} new) into {args.rows:,}, best of {count}:")
    for name, label in (("classic", "classic session"), ("connect", "Spark Connect")):
        fastest, middle = min(best[name]), statistics.median(best[name])
        print(
            f"  {label:<16}  {fastest:7.2f} s  {args.upsert / fastest:10,.0f} rows/s  (median {middle:.2f} s)"
        )
    print(f"  Connect/classic   {ratio:7.2f}x  (goal <= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'})")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(5, 3))
        axes.bar(["classic session", "Spark Connect"], [classic, connect], color=["#4c72b0", "#dd8452"])
        axes.set_ylabel("seconds (best)")
        axes.set_title(f"fed_spark.write upsert of {args.upsert:,} rows: {ratio:.2f}x")
        figure.tight_layout()
        figure.savefig(args.plot, dpi=120)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
