"""Trino on a fed table (its Iceberg view) against the same rows as a plain Hive-layout table
(Trino's Hive connector, which lists the partitions a query keeps), in one run.

One Trino 476, one Hive 4.0.1 metastore, one moto S3 server on loopback counting every
request at the server. For each size (1,000, 10,000 and 100,000 data files over 20
partitions):

- a fed table in the object-store layout (files over hashed prefixes), registered by
  ``fed sync``'s code path, read through Trino's Iceberg connector;
- the same rows as a Hive-layout table (``s3://hive/<table>/day=<d>/part-N.parquet``, the
  same number of files per partition), created with Trino's Hive connector as an external
  table and its partitions registered with ``system.sync_partition_metadata``, which is what
  a user of the Hive layout has.

Each query (one partition, every partition) runs once to warm Trino, then ``--repeats``
times: median seconds, and the storage requests of one warm run (both buckets, by method).
The every-partition query, which reads every file, runs 2 times after its warm run at 10,000
files, and once with no warm run of its own beyond (the one-partition runs warmed Trino); it
runs only up to ``--every-partition-up-to`` files (10,000 by default): at 100,000 files one
run takes minutes, most of them moto serving 100,000 GETs. Beside the wall time, Trino's own
account of each run (medians): its planning time (analysis, then planning: the connector's
metadata, the plan), and the time its coordinator spent enumerating splits (``getSplits``
batches: the Hive connector's listing, the Iceberg connector's manifest reads, which Trino
does while the query runs, not while it plans); for the view also the manifests it read
(Iceberg's own scan-planning time is kept too, but it lasts until the last split is taken,
so it spans the query). Both tables' answers are checked against each other and against
fedcore. For each size, the view's manifests: how many, the largest (bytes, entries) and how
many a one-partition query reads. Then the cost of publishing: a one-partition upsert's
commit, then its publish to the metastore, timed apart (median of three).

Last, the hard case for manifests (``--one-partition-files``, 100,000 by default; 0: not
run): a fed table whose files are all in one partition. Its view is published with the
partition in one manifest (the target raised out of reach: what a view with one manifest a
partition was) and registered; then, after one-row upserts, with the default target, which
splits the partition's manifest as it rewrites it, and registered under a second name. For
each: the publish of a one-row upsert (which rewrites the manifest holding the row's file
group), and a query of one ``id``, for which Iceberg prunes to one file by the manifests'
column bounds, so its time is mostly reading and decoding the partition's manifests.

Run: ``python benchmarks/trino_queries.py [--files 1000 10000 100000] [--one-partition-files N]
[--plot trino.png] [--markdown trino.md]``, or ``tox -e bench`` (needs the trino env's
packages: fed-dev, fed-trino-client; Java 25, mvn). All of it takes about 100 minutes on two
cores, most of it writing and reading 100,000 files through moto (the 100,000-file size
alone 51 minutes, the hard case 25); ``--files 1000 10000 --one-partition-files 0`` about
twelve minutes.
(Not ``trino.py``: run as a script, that name would shadow the ``trino`` client package.)
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import urllib.request
from collections import Counter
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
from fedcore.catalog import SyncTarget, sync
from fedcore.iceberg import current_view
from fedcore.iceberg import view as iceberg_view
from fedcore.iceberg.fileio import FedFileIO
from fedcore.io.filesystems import filesystem_for

PARTITIONS = 20
ROWS_PER_FILE = 50
WANTED = "d07"
ONE = "one partition"
ALL = "every partition"


def rows(files: int, partitions: int = PARTITIONS) -> pa.Table:
    """``files`` files' worth of rows: ROWS_PER_FILE each, spread evenly over the partitions."""
    n = files * ROWS_PER_FILE
    ids = pa.array(range(n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "day": pa.array([f"d{(i // ROWS_PER_FILE) % partitions:02d}" for i in range(n)]),
            "ts": pa.array([1] * n, pa.int64()),
            "fare": pa.array([float(i % 1000) for i in range(n)], pa.float64()),
        }
    )


def write_fed(
    s3: LoopbackS3, metastore: HiveMetastore | None, data: pa.Table, files: int, name: str = ""
) -> tuple[Any, float]:
    """A fed table of ``data`` in ``files`` files, and (with a metastore) its first publish's
    seconds."""
    tables, storage = s3.create_bucket("fed-tables"), s3.create_bucket("fed-storage")
    record_bytes = 64  # the size estimate that makes each bulk-inserted file ROWS_PER_FILE rows
    name = name or f"rides{files}"
    table = create_table(
        f"{tables}/{name}",
        name=name,
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
    if metastore is None:
        return table, 0.0
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


class Trino:
    """Queries on one connection, with Trino's own account of each: ``run(sql)`` answers the
    rows (sorted) and ``last`` holds its stats (milliseconds)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cursor = trino.dbapi.connect(
            host="127.0.0.1", port=port, user="bench", catalog="iceberg"
        ).cursor()
        self.last: dict[str, float] = {}

    def run(self, sql: str) -> list[Any]:
        self.cursor.execute(sql)
        got = sorted(tuple(r) for r in self.cursor.fetchall())
        stats = self.cursor.stats
        self.last = {
            "planning": float(stats["planningTimeMillis"]),
            "analysis": float(stats["analysisTimeMillis"]),
            **self._splits(str(stats["queryId"])),
        }
        return got

    def _splits(self, query_id: str) -> dict[str, float]:
        """From the query's info (``/v1/query/<id>``): the coordinator's time in ``getSplits``
        batches over all stages; for Iceberg its scan-planning time and the manifests read."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/query/{query_id}", headers={"X-Trino-User": "bench"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            info = json.load(response)
        out = {"splits": 0.0}
        stages = [info["outputStage"]] if info.get("outputStage") else []  # (none: a DDL statement)
        while stages:
            stage = stages.pop()
            stats = stage["stageStats"]
            out["splits"] += sum(d["total"] for d in stats.get("getSplitDistribution", {}).values()) / 1e6
            for metrics in stats.get("splitSourceMetrics", {}).values():
                if "scanPlanningDuration" in metrics:
                    out["scan"] = out.get("scan", 0.0) + _millis(metrics["scanPlanningDuration"]["duration"])
                    read = metrics["dataManifests"]["total"]
                    out["manifests_read"] = out.get("manifests_read", 0.0) + read
            stages += stage.get("subStages", [])
        return out


_DURATION = re.compile(r"([0-9.]+)\s*(ns|us|ms|s|m|h|d)$")
_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6, "d": 8.64e7}


def _millis(text: str) -> float:
    """A Trino duration ("74.00ms", "1.49s") in milliseconds."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ValueError(f"not a Trino duration: {text!r}")
    return float(match[1]) * _UNIT_MS[match[2]]


def timed(
    s3: LoopbackS3, client: Trino, sql: str, repeats: int, warm: bool = True
) -> tuple[float, Counter[str], list[Any], dict[str, float]]:
    """Median seconds of ``repeats`` runs (after a warm one), the requests of the first of
    them, the answer, and the medians of Trino's stats."""
    answer = client.run(sql) if warm else None  # warm: Trino's metadata caches, the JVM's code
    seconds = []
    counted: Counter[str] = Counter()
    stats: list[dict[str, float]] = []
    for n in range(repeats):
        s3.requests.reset()
        start = time.perf_counter()
        got = client.run(sql)
        seconds.append(time.perf_counter() - start)
        stats.append(client.last)
        if n == 0:
            counted = Counter(s3.requests.by_method)
        if answer is not None and got != answer:
            raise SystemExit(f"a query answered {got}, before {answer}")
        answer = got
    medians = {key: statistics.median(s[key] for s in stats) for key in stats[0]}
    return statistics.median(seconds), counted, answer or [], medians


def view_manifests(s3: LoopbackS3, table: Any, partition: str) -> dict[str, Any]:
    """The view's current manifests: how many, the largest (bytes, entries), and how many hold
    ``partition``'s files."""
    metadata = current_view(table).metadata
    snapshot = metadata.current_snapshot() if metadata is not None else None
    if snapshot is None:
        raise SystemExit(f"{table.name}: nothing published")
    io = FedFileIO(filesystem_for(table.path, s3.storage_options()))
    manifests = snapshot.manifests(io)
    largest = max(manifests, key=lambda m: m.manifest_length)
    wanted = partition.encode()
    return {
        "manifests": len(manifests),
        "largest": largest.manifest_length,
        "entries": sum(
            n or 0
            for n in (largest.added_files_count, largest.existing_files_count, largest.deleted_files_count)
        ),
        "partition": sum(1 for m in manifests if m.partitions and m.partitions[0].lower_bound == wanted),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="*", default=[1000, 10000, 100000])
    parser.add_argument("--one-partition-files", type=int, default=100000, metavar="N")
    parser.add_argument(
        "--every-partition-up-to",
        type=int,
        default=10000,
        metavar="N",
        help="run the every-partition query (which reads every file: minutes at 100,000 files on "
        "moto, and a measure of moto more than of planning) only at sizes up to N files",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--plot", metavar="PNG")
    parser.add_argument("--markdown", metavar="MD")
    args = parser.parse_args()
    began = time.perf_counter()
    results: list[dict[str, Any]] = []
    publishing: list[dict[str, Any]] = []
    layouts: list[dict[str, Any]] = []
    hard: list[dict[str, Any]] = []
    # Trino keeps the files it reads on its coordinator in memory (its Iceberg metadata cache, on
    # by default): on one node that held the view's small data files too, so warm queries of the
    # view read nothing at all. Off here: every query reads storage, as workers in a cluster do.
    cache = {"iceberg.metadata-cache.enabled": "false"}
    with (
        LoopbackS3() as s3,
        HiveMetastore(s3) as metastore,
        TrinoServer(metastore.uri, s3, hive=True, iceberg=cache) as server,
    ):
        client = Trino(server.port)
        client.run("CREATE SCHEMA IF NOT EXISTS hive.hivebench")

        for files in args.files:
            size_began = time.perf_counter()
            data = rows(files)
            fed_table, first_publish = write_fed(s3, metastore, data, files)
            hive_name = write_hive(s3, client.cursor, data, files)
            layouts.append({"files": files, **view_manifests(s3, fed_table, WANTED)})
            wanted = data.filter(pa.compute.equal(data["day"], WANTED))
            expected = {
                ONE: [(wanted.num_rows, pa.compute.sum(wanted["fare"]).as_py())],
                ALL: [(data.num_rows, pa.compute.sum(data["fare"]).as_py())],
            }
            sides = {
                "fed (Iceberg view)": f"iceberg.fedbench.{fed_table.name}",
                "Hive layout (Hive connector)": f"hive.hivebench.{hive_name}",
            }
            queries = [(ONE, f"WHERE day = '{WANTED}'")]
            if files <= args.every_partition_up_to:
                queries.append((ALL, ""))
            for label, where in queries:
                for side, table in sides.items():
                    sql = f"SELECT count(*), sum(fare) FROM {table} {where}"
                    repeats, warm = args.repeats, True
                    if label == ALL and files > 1000:
                        repeats, warm = (2, True) if files <= 10000 else (1, False)
                    seconds, requests, answer, stats = timed(s3, client, sql, repeats, warm)
                    if answer != expected[label]:
                        raise SystemExit(f"{side}, {label}: {answer}, expected {expected[label]}")
                    result = {"files": files, "query": label, "side": side, "seconds": seconds, **stats}
                    results.append({**result, "requests": requests})
                    print(
                        f"{files} files, {label}, {side}: {seconds * 1000:.0f} ms "
                        f"(planning {stats['planning']:.0f} ms, splits {stats['splits']:.0f} ms), "
                        f"{dict(requests)}",
                        flush=True,
                    )
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
            print(f"{files} files: {time.perf_counter() - size_began:.0f} s", flush=True)
        if args.one_partition_files:
            hard_began = time.perf_counter()
            hard = one_partition(s3, metastore, client, args.one_partition_files, args.repeats)
            print(f"one partition: {time.perf_counter() - hard_began:.0f} s", flush=True)
    report(results, layouts, publishing, hard, args.markdown, time.perf_counter() - began)
    if args.plot:
        plot(results, args.plot)


def one_partition(
    s3: LoopbackS3, metastore: HiveMetastore, client: Trino, files: int, repeats: int
) -> list[dict[str, Any]]:
    """The hard case for manifests: ``files`` files in one partition, its view published with
    the partition in one manifest and then split (see the module docstring); a query of one
    ``id`` on each, and the publish of a one-row upsert into each."""
    data = rows(files, partitions=1)
    name = f"onepart{files}"
    table, _ = write_fed(s3, None, data, files, name)
    target = iceberg_view.MANIFEST_TARGET_BYTES
    out = []
    key = files * ROWS_PER_FILE - 7  # in the last file written
    expected = [(1, float(key % 1000))]
    updates = iter(range(2, 100))

    def upsert() -> None:  # one row of the first file: its file group rewritten
        table.write(data.slice(0, 1).set_column(2, "ts", pa.array([next(updates)], pa.int64())), "upsert")

    def publish(registered: str, target_bytes: int) -> float:
        iceberg_view.MANIFEST_TARGET_BYTES = target_bytes
        try:
            start = time.perf_counter()
            sync(table, SyncTarget((metastore.uri,), "fedbench", registered))
            return time.perf_counter() - start
        finally:
            iceberg_view.MANIFEST_TARGET_BYTES = target

    for label, target_bytes in (("one manifest", sys.maxsize), ("split", target)):
        registered = f"{name}_{label.replace(' ', '_')}"
        # The first publish of each: the whole table (one manifest), or its one manifest split.
        if label == "split":
            upsert()
        first = publish(registered, target_bytes)
        upsert()
        again = publish(registered, target_bytes)  # a one-row upsert's, as every later one
        manifests = view_manifests(s3, table, "d00")
        sql = f"SELECT count(*), sum(fare) FROM iceberg.fedbench.{registered} WHERE id = {key}"
        seconds, requests, answer, stats = timed(s3, client, sql, repeats)
        if answer != expected:
            raise SystemExit(f"one partition, {label}: {answer}, expected {expected}")
        out.append(
            {"files": files, "view": label, "first": first, "publish": again, "seconds": seconds,
             "requests": requests, **manifests, **stats}
        )  # fmt: skip
        print(
            f"one partition of {files} files, {label}: {seconds * 1000:.0f} ms, {stats}, {manifests}, "
            f"publish {first:.1f} s, then {again:.1f} s",
            flush=True,
        )
    return out


def report(
    results: list[dict[str, Any]],
    layouts: list[dict[str, Any]],
    publishing: list[dict[str, Any]],
    hard: list[dict[str, Any]],
    markdown: str | None,
    seconds: float,
) -> None:
    lines = [
        "| files | query | table | median | vs Hive | Trino planning | split enumeration | "
        "storage requests | vs Hive | LIST |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        base = next(
            b
            for b in results
            if b["files"] == r["files"] and b["query"] == r["query"] and b["side"].startswith("Hive")
        )
        total, base_total = sum(r["requests"].values()), sum(base["requests"].values())
        scan = f" ({r['manifests_read']:.0f} manifests read)" if "manifests_read" in r else ""
        lines.append(
            f"| {r['files']:,} | {r['query']} | {r['side']} | {_seconds(r['seconds'])} | "
            f"{r['seconds'] / base['seconds']:.2f}x | {r['planning']:.0f} ms | {r['splits']:.0f} ms{scan} | "
            f"{total:,} | {total / base_total:.2f}x | {r['requests'].get('LIST', 0)} |"
        )
    lines += ["", "| files | the view's manifests | the largest: bytes | its entries | one partition's |",
              "| ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for m in layouts:
        lines.append(
            f"| {m['files']:,} | {m['manifests']} | {m['largest']:,} | {m['entries']:,} | {m['partition']} |"
        )
    lines += ["", "| files | first publish | one-partition upsert commit | its publish | publish / commit |",
              "| ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for p in publishing:
        lines.append(
            f"| {p['files']:,} | {p['first'] * 1000:.0f} ms | {p['commit'] * 1000:.0f} ms | "
            f"{p['publish'] * 1000:.0f} ms | {p['publish'] / p['commit']:.0%} |"
        )
    if hard:
        lines += ["", "| one partition of | its manifests | the largest: bytes | its entries | "
                  "first publish | a one-row upsert's publish | one-id query | Trino planning | "
                  "split enumeration | requests |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
        for h in hard:
            lines.append(
                f"| {h['files']:,} files ({h['view']}) | {h['manifests']} | {h['largest']:,} | "
                f"{h['entries']:,} | {_seconds(h['first'])} | {_seconds(h['publish'])} | "
                f"{_seconds(h['seconds'])} | {h['planning']:.0f} ms | {h['splits']:.0f} ms | "
                f"{sum(h['requests'].values())} |"
            )
    lines += ["", f"(the whole run: {seconds / 60:.0f} min)"]
    text = "\n".join(lines)
    print(text)
    if markdown:
        with open(markdown, "w") as handle:
            handle.write(text + "\n")


def _seconds(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


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
