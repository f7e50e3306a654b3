"""Trino on a fed table (its Iceberg view) against the same rows as a plain Hive-layout table
(Trino's Hive connector, which lists the partitions a query keeps), in one run.

One Trino 476, one Hive 4.0.1 metastore, one moto S3 server on loopback counting every
request at the server. For each size (1,000 and 10,000 data files over 20 partitions):

- a fed table in the object-store layout (files over hashed prefixes), registered by
  ``fed sync``'s code path, read through Trino's Iceberg connector;
- the same rows as a Hive-layout table (``s3://hive/<table>/day=<d>/part-N.parquet``, the
  same number of files per partition), created with Trino's Hive connector as an external
  table and its partitions registered with ``system.sync_partition_metadata``, which is what
  a user of the Hive layout has.

Each query (one partition, every partition) runs once to warm Trino, then ``--repeats``
times: median seconds, and the storage requests of one warm run (both buckets, by method).
Both tables' answers are checked against each other and against fedcore. Last, the cost of
publishing: a one-partition upsert's commit, then its publish to the metastore, timed apart
(median of three).

Run: ``python benchmarks/trino_queries.py [--files 1000 10000] [--plot trino.png] [--markdown trino.md]``,
or ``tox -e bench`` (needs the trino env's packages: fed-dev, fed-trino-client; Java 25, mvn).
(Not ``trino.py``: run as a script, that name would shadow the ``trino`` client package.)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import trino.dbapi
from tqdm import tqdm

from fed_dev.metastore import HiveMetastore
from fed_dev.servers import LoopbackS3
from fed_dev.trino import TrinoServer
from fedcore import create_table
from fedcore import properties as P
from fedcore.iceberg import SyncTarget, sync
from fedcore.io.filesystems import filesystem_for

PARTITIONS = 20
ROWS_PER_FILE = 50
WANTED = "d07"
ONE = "one partition"
ALL = "every partition"


def rows(files: int) -> pa.Table:
    """``files`` files' worth of rows: ROWS_PER_FILE each, spread evenly over the partitions."""
    n = files * ROWS_PER_FILE
    ids = pa.array(range(n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "day": pa.array([f"d{(i // ROWS_PER_FILE) % PARTITIONS:02d}" for i in range(n)]),
            "ts": pa.array([1] * n, pa.int64()),
            "fare": pa.array([float(i % 1000) for i in range(n)], pa.float64()),
        }
    )


def write_fed(s3: LoopbackS3, metastore: HiveMetastore, data: pa.Table, files: int) -> tuple[Any, float]:
    tables, storage = s3.create_bucket("fed-tables"), s3.create_bucket("fed-storage")
    record_bytes = 64  # the size estimate that makes each bulk-inserted file ROWS_PER_FILE rows
    table = create_table(
        f"{tables}/rides{files}",
        name=f"rides{files}",
        record_key_fields=["id"],
        partition_fields=["day"],
        precombine_field="ts",
        properties={
            P.STORAGE_STRATEGY_CLASS: "object_store",
            P.STORAGE_PATH: storage,
            P.RECORD_SIZE_ESTIMATE: str(record_bytes),
            P.MAX_FILE_SIZE: str(record_bytes * ROWS_PER_FILE),
            P.SMALL_FILE_LIMIT: "0",
        },
        storage_options=s3.storage_options(),
    )
    table.write(data, "bulk_insert")
    written = sum(1 for _ in table.scan().plan_files())
    if written != files:
        raise SystemExit(f"the fed table has {written} files, not {files}")
    start = time.perf_counter()
    sync(table, SyncTarget((metastore.uri,), "fedbench", table.name))
    return table, time.perf_counter() - start


def write_hive(s3: LoopbackS3, cursor: Any, data: pa.Table, files: int) -> str:
    root = f"{s3.create_bucket('hive')}/rides{files}"
    fs = filesystem_for(root, s3.storage_options())
    jobs = []
    for day_index in range(PARTITIONS):
        day = f"d{day_index:02d}"
        part = data.filter(pa.compute.equal(data["day"], day)).drop_columns(["day"])
        for n in range(0, part.num_rows, ROWS_PER_FILE):
            key = f"{root}/day={day}/part-{n // ROWS_PER_FILE:05d}.parquet"
            jobs.append((key, part.slice(n, ROWS_PER_FILE)))

    def put(job: tuple[str, pa.Table]) -> None:
        with fs.open(job[0], "wb") as handle:
            pq.write_table(job[1], handle)

    with ThreadPoolExecutor(16) as pool:
        list(tqdm(pool.map(put, jobs), total=len(jobs), desc=f"Hive layout, {files} files", unit="file"))
    name = f"rides{files}"
    cursor.execute(
        f"CREATE TABLE hive.hivebench.{name} (id bigint, ts bigint, fare double, day varchar) "
        f"WITH (external_location = '{root}', format = 'PARQUET', partitioned_by = ARRAY['day'])"
    )
    cursor.fetchall()
    cursor.execute(f"CALL hive.system.sync_partition_metadata('hivebench', '{name}', 'ADD')")
    cursor.fetchall()
    return name


def timed(
    s3: LoopbackS3, run: Callable[[], list[Any]], repeats: int
) -> tuple[float, Counter[str], list[Any]]:
    """Median seconds of ``repeats`` warm runs, and the requests of the first of them."""
    answer = run()  # warm: Trino's metadata caches, the JVM's code
    seconds = []
    counted: Counter[str] = Counter()
    for n in range(repeats):
        s3.requests.reset()
        start = time.perf_counter()
        got = run()
        seconds.append(time.perf_counter() - start)
        if n == 0:
            counted = Counter(s3.requests.by_method)
        if got != answer:
            raise SystemExit(f"a query answered {got}, before {answer}")
    return statistics.median(seconds), counted, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--plot", metavar="PNG")
    parser.add_argument("--markdown", metavar="MD")
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    publishing: list[dict[str, Any]] = []
    # Trino keeps the files it reads on its coordinator in memory (its Iceberg metadata cache, on
    # by default): on one node that held the view's small data files too, so warm queries of the
    # view read nothing at all. Off here: every query reads storage, as workers in a cluster do.
    cache = {"iceberg.metadata-cache.enabled": "false"}
    with (
        LoopbackS3() as s3,
        HiveMetastore(s3) as metastore,
        TrinoServer(metastore.uri, s3, hive=True, iceberg=cache) as server,
    ):
        connection = trino.dbapi.connect(host="127.0.0.1", port=server.port, user="bench", catalog="iceberg")
        cursor = connection.cursor()
        cursor.execute("CREATE SCHEMA IF NOT EXISTS hive.hivebench")
        cursor.fetchall()

        def query(sql: str) -> Callable[[], list[Any]]:
            def run() -> list[Any]:
                cursor.execute(sql)
                return sorted(tuple(r) for r in cursor.fetchall())

            return run

        for files in args.files:
            data = rows(files)
            fed_table, first_publish = write_fed(s3, metastore, data, files)
            hive_name = write_hive(s3, cursor, data, files)
            wanted = data.filter(pa.compute.equal(data["day"], WANTED))
            expected = {
                ONE: [(wanted.num_rows, pa.compute.sum(wanted["fare"]).as_py())],
                ALL: [(data.num_rows, pa.compute.sum(data["fare"]).as_py())],
            }
            sides = {
                "fed (Iceberg view)": f"iceberg.fedbench.{fed_table.name}",
                "Hive layout (Hive connector)": f"hive.hivebench.{hive_name}",
            }
            for label, where in ((ONE, f"WHERE day = '{WANTED}'"), (ALL, "")):
                for side, table in sides.items():
                    sql = f"SELECT count(*), sum(fare) FROM {table} {where}"
                    big = label == ALL and files > 1000
                    repeats = max(2, args.repeats // 2) if big else args.repeats
                    seconds, requests, answer = timed(s3, query(sql), repeats)
                    if answer != expected[label]:
                        raise SystemExit(f"{side}, {label}: {answer}, expected {expected[label]}")
                    result = {"files": files, "query": label, "side": side, "seconds": seconds}
                    results.append({**result, "requests": requests})
                    print(f"{files} files, {label}, {side}: {seconds * 1000:.0f} ms, {dict(requests)}")
            commits, publishes = [], []
            for n in range(3):
                update = wanted.slice(0, 10).set_column(2, "ts", pa.array([n + 2] * 10, pa.int64()))
                start = time.perf_counter()
                fed_table.write(update, "upsert")
                commits.append(time.perf_counter() - start)
                start = time.perf_counter()
                sync(fed_table, SyncTarget((metastore.uri,), "fedbench", fed_table.name))
                publishes.append(time.perf_counter() - start)
            publishing.append(
                {
                    "files": files,
                    "first": first_publish,
                    "commit": statistics.median(commits),
                    "publish": statistics.median(publishes),
                }
            )
    report(results, publishing, args.markdown)
    if args.plot:
        plot(results, args.plot)


def report(results: list[dict[str, Any]], publishing: list[dict[str, Any]], markdown: str | None) -> None:
    lines = [
        "| files | query | table | median | vs Hive | storage requests | vs Hive | LIST |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        base = next(
            b
            for b in results
            if b["files"] == r["files"] and b["query"] == r["query"] and b["side"].startswith("Hive")
        )
        total, base_total = sum(r["requests"].values()), sum(base["requests"].values())
        lines.append(
            f"| {r['files']:,} | {r['query']} | {r['side']} | {r['seconds'] * 1000:.0f} ms | "
            f"{r['seconds'] / base['seconds']:.2f}x | {total:,} | {total / base_total:.2f}x | "
            f"{r['requests'].get('LIST', 0)} |"
        )
    lines += ["", "| files | first publish | one-partition upsert commit | its publish | publish / commit |",
              "| ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for p in publishing:
        lines.append(
            f"| {p['files']:,} | {p['first'] * 1000:.0f} ms | {p['commit'] * 1000:.0f} ms | "
            f"{p['publish'] * 1000:.0f} ms | {p['publish'] / p['commit']:.0%} |"
        )
    text = "\n".join(lines)
    print(text)
    if markdown:
        with open(markdown, "w") as handle:
            handle.write(text + "\n")


def plot(results: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = sorted({(r["files"], r["query"]) for r in results})
    sides = sorted({r["side"] for r in results})
    width = 0.8 / len(sides)
    for i, side in enumerate(sides):
        picked = [
            next(r for r in results if (r["files"], r["query"]) == key and r["side"] == side)
            for key in labels
        ]
        xs = [x + i * width for x in range(len(labels))]
        axes[0].bar(xs, [r["seconds"] * 1000 for r in picked], width, label=side)
        axes[1].bar(xs, [sum(r["requests"].values()) for r in picked], width, label=side)
    for ax, title in zip(axes, ("median query time (ms)", "storage requests per query"), strict=True):
        ax.set_xticks([x + width / 2 for x in range(len(labels))], [f"{f:,} files\n{q}" for f, q in labels])
        ax.set_title(title)
        ax.set_yscale("log")
        ax.legend()
    fig.suptitle("Trino 476: fed's Iceberg view vs a Hive-layout table (moto S3 on loopback)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
