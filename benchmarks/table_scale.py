"""Pruned planning and commit cost as an object-store-layout table grows to 1,000,000 files.

Two claims of the table engine, measured on one table, on S3 on loopback (a moto
server in this process, reached over HTTP through s3fs, as a cloud bucket is):

1. Planning a partition-pruned read through the metadata table beats listing the
   storage, and the gap grows with the table: in the object-store layout a
   partition's files are spread over hashed prefixes, so without the metadata
   table the only way to find them is to list the whole storage bucket (here the
   cheapest listing there is: one flat, paged LIST, 1,000 keys a page). Target
   at the largest size listed (100,000 files in 10,000 partitions): >= 10x
   faster, and a constant number of requests per pruned partition.
2. A commit costs the same whatever the table holds (10 -> 100,000 files): the
   writer reads only the partitions it writes, the metadata-table delta holds
   only its files, and the clean after it looks only where the instants leaving
   retention wrote.

Also reported, each with its goal met or not (they do not set the exit status) for a table of
up to 1,000,000 files in 10,000 partitions: a one-partition commit at most 1.5x its cost at
the smallest size (time and requests); a fresh handle's one-partition plan (``load_table``
then ``ScanPlanner.open(...).plan``) within 100 ms, with the size of the metadata table's
manifest it fetches; the metadata table's bytes per file; the requests of a publish of the
Iceberg view after a one-partition upsert, the same at 1,000 and at the largest size (the
view is published from scratch first at each size, timed apart: the fill's instants each
touch thousands of partitions, which an incremental publish would replay); and the
process's resident memory and the long-lived handle's caches after each size, to show
whether they stay bounded (the moto store is in the process too, and grows with the objects
stored: about 6 KB an object).

How the table grows: a real writer upserts into four "live" partitions, with real
Parquet files; the other files come from fill commits that go through the real
commit protocol (requested, inflight, metadata-table delta, decision, completed,
with Hudi commit metadata listing every file) and then the table services a
writer runs (clean, metadata-table compaction, archival). Their data objects go
straight into the moto server's store (HTTP PUTs on loopback run ~100/s, which
would make a 100,000-file fill take 15 minutes). Each fill object is a copy of a
small real Parquet file (the first row of a real base file, with its schema, set in the fill
partition), so a million of them fit in the server's memory; the commit records its column
statistics, as a writer does. A fill commit adds 1% of the size being filled to (1,000
to 10,000 files). Requests are counted at the server, so every request any layer sends is in.
Costs of the server itself are in the timings of both sides: the time moto spent serving the
one-partition commits is reported beside them, and ``--profile DIR`` samples those commits
(py-spy, every thread) to show where time grew between the smallest and the largest size.
Above 100,000 files the listing comparison is skipped (moto lists about 1 ms per key).

Run: ``python benchmarks/table_scale.py [--plot table_scale.png]`` (needs
``fedcore[test]``), or ``tox -e bench``: the default sizes stop at 100,000 files; the
million-file run is ``--stages 10,1000,100000,1000000``: about half an hour on two cores, 12
minutes of it the fill from 100,000 to 1,000,000 files (about 1,200 files/s; each size's
fill rate, and where its time went, is printed). The fill slows as the table grows: the clean
after each fill commit reads the files of every partition the commit before it wrote (all
10,000), and counting the table's files (the fill's own stop test) reads the whole index.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from fed_dev.servers import LoopbackS3
from fedcore import properties as P
from fedcore.commit.file_writer import stats_columns
from fedcore.commit.transaction import Transaction
from fedcore.files.filenames import base_file_name
from fedcore.iceberg import publish
from fedcore.io.filesystems import filesystem_for
from fedcore.io.parquet import file_stats
from fedcore.metadata.format import ADD, Op
from fedcore.read.planner import ScanPlanner
from fedcore.schema.avro import to_avro_json
from fedcore.services.after_commit import run_table_services
from fedcore.storage.base import table_folder
from fedcore.table import Table, create_table, load_table
from fedcore.timeline import COMMIT
from fedcore.timeline.commit_metadata import CommitMetadata, WriteStat
from fedcore.timeline.layout import V6
from fedcore.timeline.retention import archived_through
from fedcore.write.client import WriteClient

STAGES = (10, 100, 1_000, 10_000, 100_000)
FILL_PARTITIONS = 10_000
LIVE_PARTITIONS = ("live0", "live1", "live2", "live3")
PLANNING_TARGET = 10.0
COMMIT_FLATNESS_TARGET = 1.5  # commit at the largest size / commit at the smallest
LIST_UP_TO = 100_000  # moto lists about 1 ms per key: no listing of larger tables
# Goals reported, not enforced (the exit status is the targets above).
FRESH_PLAN_GOAL = 0.100  # seconds: a fresh handle's one-partition plan
PUBLISH_FROM = 1_000  # publish requests at this size and at the largest must match


def files_per_fill_commit(target: int) -> int:
    """1% of the size being filled to, 1,000 to 10,000 files: a fill stays in minutes."""
    return max(1_000, min(10_000, target // 100))


SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])


def fill_partition(k: int) -> str:
    return f"f{k % FILL_PARTITIONS:04d}"


@dataclass
class Stage:
    files: int
    commit_seconds: list[float] = field(default_factory=list)
    commit_requests: list[int] = field(default_factory=list)
    one_seconds: list[float] = field(default_factory=list)  # one-partition commits
    one_serving: list[float] = field(default_factory=list)  # of which moto's serving time
    one_requests: list[int] = field(default_factory=list)
    active_instants: list[int] = field(default_factory=list)
    first_commit_seconds: float = 0.0
    plan_seconds: float = 0.0
    plan_requests: int = 0
    list_seconds: float | None = None  # None: not listed (too large for moto)
    list_requests: int = 0
    fresh_plan_seconds: float = 0.0
    fresh_plan_requests: int = 0
    metadata_bytes: int = 0
    metadata_objects: int = 0
    manifest_bytes: int = 0  # the newest metadata-table manifest (what a fresh plan fetches)
    first_publish_seconds: float = 0.0
    first_publish_requests: int = 0
    publish_seconds: float = 0.0
    publish_requests: int = 0
    rss_mib: float = 0.0
    max_rss_mib: float = 0.0
    cache_entries: dict[str, int] = field(default_factory=dict)
    cache_mib: float = 0.0
    cache_mib_by: dict[str, float] = field(default_factory=dict)  # MiB per cache
    fill_seconds: float = 0.0
    fill_files: int = 0
    fill_parts: dict[str, float] = field(default_factory=dict)


class Bench:
    def __init__(self, server: LoopbackS3) -> None:
        self.server = server
        tables, self.storage = server.create_bucket("tables"), server.create_bucket("storage")
        self.table: Table = create_table(
            f"{tables}/bench",
            name="bench",
            record_key_fields=["id"],
            partition_fields=["p"],
            precombine_field="ts",
            properties={
                P.STORAGE_STRATEGY_CLASS: "object_store",
                P.STORAGE_PATH: self.storage,
                # One retained commit keeps the live partitions small (a 10-file table is
                # possible) while every commit, from the first measured one, cleans.
                P.CLEANER_COMMITS_RETAINED: "1",
            },
            storage_options=server.storage_options(),
        )
        self.storage_fs = filesystem_for(self.storage, server.storage_options())
        self.metadata_fs = filesystem_for(self.table.path, server.storage_options())
        self.filled = 0
        self.fill_parts: dict[str, float] = {}
        self.next_id = 0
        self.commits = 0
        self.live = self._insert_live(2_000)
        self.blob = self._real_base_file()
        self.blobs: dict[str, tuple[bytes, str | None]] = {}
        # Into the steady state before measuring: every commit cleans, compactions run, and
        # archival has cut the active timeline (which every commit lists) to its usual length.
        with tqdm(desc="commits until the first archival", unit="commit", leave=False) as bar:
            while archived_through(self.table.fs.table_fs, self.table.path) is None:
                self.commit()
                bar.update()

    # --- growing the table -------------------------------------------------------------------

    def _batch(self, updates: int, inserts: int, one_partition: bool = False) -> pa.Table:
        """Rows of the live partitions (one_partition: of the first alone, whose updated ids
        the first rows' i % 4 == 0 put there)."""
        live = len(LIVE_PARTITIONS)
        updated = range(0, live * updates, live) if one_partition else range(updates)
        ids = list(updated) + list(range(self.next_id, self.next_id + inserts))
        self.next_id += inserts
        self.commits += 1
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "p": [LIVE_PARTITIONS[0 if one_partition else i % live] for i in ids],
                "ts": pa.array([self.commits] * len(ids), pa.int64()),
                "v": pa.array([float(self.commits)] * len(ids), pa.float64()),
            },
            schema=SCHEMA,
        )

    def _insert_live(self, rows: int) -> int:
        WriteClient(self.table).upsert(self._batch(0, rows))
        return rows

    def _real_base_file(self) -> pa.Table:
        """The first row of a real base file, with its schema (Hudi's meta columns too): each
        fill partition's objects are that row in the partition, a few KB of Parquet, so a
        million of them fit in the server's memory."""
        some = self.table.file_slices()[0]
        return pq.read_table(io.BytesIO(bytes(self.table.fs.cat_file(some.path)))).slice(0, 1)

    def _fill_object(self, partition: str) -> tuple[bytes, str | None]:
        """A fill partition's object and its column statistics (as a writer records them)."""
        made = self.blobs.get(partition)
        if made is None:
            value = partition.partition("=")[2]
            row = self.blob
            for column in ("p", "_hoodie_partition_path"):
                if column in row.column_names:
                    at = row.column_names.index(column)
                    text = value if column == "p" else partition
                    row = row.set_column(at, column, pa.array([text], row.schema.field(column).type))
            sink = io.BytesIO()
            pq.write_table(row, sink)
            data = sink.getvalue()
            footer = pq.read_metadata(io.BytesIO(data))
            columns = stats_columns(self.table.options, row.column_names)
            made = self.blobs[partition] = (data, file_stats(footer, columns))
        return made

    def file_count(self) -> int:
        return sum(len(f.files) for f in self.table.handle.file_index.files().values())

    def _timed(self, part: str, work: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        result = work()
        self.fill_parts[part] = self.fill_parts.get(part, 0.0) + time.perf_counter() - start
        return result

    def fill_to(self, files: int) -> None:
        # Counted again after each commit: the clean after it may delete old live slices.
        per_commit = files_per_fill_commit(files)
        with tqdm(total=files, desc=f"fill to {files:,} files", unit="file", leave=False) as bar:
            while (wanted := files - self._timed("count files", self.file_count)) > 0:
                self._fill_commit(min(wanted, per_commit))
                # as a writer does after each commit
                self._timed("table services", lambda: run_table_services(self.table.handle))
                bar.update(files - wanted - bar.n)

    def _fill_commit(self, count: int) -> None:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        store = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        transaction = Transaction(self.table.handle, COMMIT)
        transaction.begin()
        transaction.inflight(b"")
        stats, ops = [], []
        start = time.perf_counter()
        for k in range(self.filled, self.filled + count):
            partition = f"p={fill_partition(k)}"
            file_id = f"{uuid.uuid4()}-0"
            name = base_file_name(file_id, "0-1-0", transaction.time)
            bucket, _, key = self.table.fs.to_physical(f"{partition}/{name}")[len("s3://") :].partition("/")
            blob, column_stats = self._fill_object(partition)
            store.put_object(bucket, key, blob)
            size = len(blob)
            path = f"{partition}/{name}"
            stats.append(
                WriteStat(
                    file_id,
                    path,
                    partition,
                    num_writes=1,
                    num_inserts=1,
                    file_size=size,
                    column_stats=column_stats,
                )
            )
            ops.append(Op(partition, name, size, ADD, column_stats))
        self.fill_parts["objects"] = self.fill_parts.get("objects", 0.0) + time.perf_counter() - start
        self.filled += count
        body = self._timed(
            "commit metadata",
            lambda: V6.commits.encode(
                CommitMetadata("BULK_INSERT", stats, to_avro_json(SCHEMA, self.table.name))
            ),
        )
        self._timed("commit protocol", lambda: transaction.commit(body, ops))

    # --- measuring ----------------------------------------------------------------------------

    def counted(self, work: Callable[[], Any]) -> tuple[float, int, Any]:
        self.server.requests.reset()
        start = time.perf_counter()
        result = work()
        return time.perf_counter() - start, self.server.requests.total, result

    def commit(self, one_partition: bool = False) -> tuple[float, int]:
        batch = self._batch(updates=100, inserts=100, one_partition=one_partition)
        seconds, requests, _ = self.counted(lambda: WriteClient(self.table).upsert(batch))
        return seconds, requests

    def plan(self, filters: Sequence[Any]) -> tuple[float, int, set[str]]:
        seconds, requests, plan = self.counted(lambda: ScanPlanner.open(self.table.handle).plan(filters))
        physical = {self.table.fs.to_physical(s.path).split("://", 1)[1] for s in plan.slices}
        return seconds, requests, physical

    def list_storage(self, partition: str) -> tuple[float, int, set[str]]:
        """What a reader without the metadata table must do: list every prefix, keep one partition."""

        def listing() -> set[str]:
            self.storage_fs.invalidate_cache()
            # the table's own folder under each prefix (``<name>-<table id>``), as the strategy names it
            segment = f"/{table_folder(self.table.handle.options)}/p={partition}/"
            return {p for p in self.storage_fs.find(self.storage, detail=False) if segment in p}

        return self.counted(listing)

    def fresh_plan(self, filters: Sequence[Any]) -> tuple[float, int, set[str]]:
        """A reader's first plan: a new handle (its config, timeline, metadata table) and one plan."""

        def planning() -> Any:
            table = load_table(self.table.path, storage_options=self.server.storage_options())
            return table, ScanPlanner.open(table.handle).plan(filters)

        seconds, requests, (table, plan) = self.counted(planning)
        physical = {table.fs.to_physical(s.path).split("://", 1)[1] for s in plan.slices}
        return seconds, requests, physical

    def metadata_size(self) -> tuple[int, int, int]:
        """Bytes and objects under the metadata table's folder, as the store reports them, and
        the bytes of its newest manifest."""
        folder = f"{self.table.path}/{self.table.handle.metadata_folder}"
        self.metadata_fs.invalidate_cache()
        sizes = self.metadata_fs.find(folder, detail=True)
        manifests = sorted(path for path in sizes if "/manifests/" in path)
        newest = int(sizes[manifests[-1]]["size"]) if manifests else 0
        return sum(int(info["size"]) for info in sizes.values()), len(sizes), newest

    def publish_from_scratch(self) -> tuple[float, int]:
        """The view published anew (none is there: each size drops it after its publishes):
        one full snapshot of the table."""
        seconds, requests, _ = self.counted(lambda: publish(self.table))
        return seconds, requests

    def drop_view(self) -> None:
        """The view's files removed. Left in place after a size's publishes (at 100,000 files,
        10,000 manifests, one a partition), they would be in the bucket the next size's
        commits list ``.hoodie/`` in: moto scans every key of a bucket for each LIST where S3
        looks up the prefix, and 11,000 objects there made a one-partition commit 90-110 ms
        slower (``serving_seconds``, measured apart) at any table size."""
        folder = f"{self.table.path}/.hoodie/iceberg"
        if self.metadata_fs.exists(folder):
            self.metadata_fs.rm(folder, recursive=True)
        self.metadata_fs.invalidate_cache()

    def publish(self) -> tuple[float, int]:
        seconds, requests, result = self.counted(lambda: publish(self.table))
        if result.snapshots != 1:
            raise SystemExit(f"a publish after one upsert added {result.snapshots} snapshots")
        return seconds, requests

    def caches(self) -> tuple[dict[str, int], float, dict[str, float]]:
        """Entries in the long-lived handle's caches, and their size in MiB (objects reached:
        all together, and each cache alone)."""
        handle = self.table.handle
        cache = handle.index_cache
        held: dict[str, Any] = {
            "commit metadata": handle.__dict__.get("_commits", {}),
            "manifests": cache.manifests,
            "footers": cache.footers,
            "deltas": cache.deltas,
            "partition rows": cache.partition_rows,
            "partition lists": cache.partition_lists,
        }
        each = {name: deep_size(value) / 2**20 for name, value in held.items()}
        return (
            {name: len(value) for name, value in held.items()},
            deep_size(list(held.values())) / 2**20,
            each,
        )


def deep_size(root: object) -> int:
    """Bytes of the objects reachable from root (classes, modules and functions excluded;
    Arrow's tables and arrays with their buffers, as ``sys.getsizeof`` counts them; a Parquet
    footer, held by arrow, by its serialized size: a lower bound)."""
    skip = (type, type(sys), type(deep_size))
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, pq.FileMetaData):
            total += obj.serialized_size
        elif isinstance(obj, (pa.Table, pa.RecordBatch, pa.Array, pa.ChunkedArray)):
            continue  # (its buffers are in its size)
        stack.extend(gc.get_referents(obj))
    return total


def memory_mib() -> tuple[float, float]:
    """The process's resident memory now and at its peak, MiB."""
    now = 0.0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) / 1024
    return now, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def median_of(runs: int, work: Callable[[], tuple[float, int, Any]]) -> tuple[float, int, Any]:
    results = [work() for _ in range(runs)]
    seconds = statistics.median(r[0] for r in results)
    return seconds, results[-1][1], results[-1][2]


def run(
    stages: Sequence[int], commits: int, plan_runs: int, profile_dir: str | None = None
) -> tuple[list[Stage], dict[int, int]]:
    bench_server = LoopbackS3().start()
    try:
        bench = Bench(bench_server)
        results = []
        per_partition: dict[int, int] = {}
        for files in stages:
            filled_before, bench.fill_parts = bench.filled, {}
            start = time.perf_counter()
            bench.fill_to(files)
            fill_seconds = time.perf_counter() - start
            stage = Stage(bench.file_count())
            stage.fill_seconds, stage.fill_files = fill_seconds, bench.filled - filled_before
            stage.fill_parts = dict(bench.fill_parts)
            rate = stage.fill_files / fill_seconds if stage.fill_files else 0.0
            parts = ", ".join(f"{k} {v:.0f} s" for k, v in stage.fill_parts.items())
            print(
                f"-- {stage.files:,} files (filled {stage.fill_files:,} in {fill_seconds:.0f} s, "
                f"{rate:,.0f} files/s: {parts})",
                flush=True,
            )
            # The first commit after a fill also cleans behind it and may compact: reported alone.
            stage.first_commit_seconds = bench.commit()[0]
            for _ in tqdm(range(commits), desc="commits", leave=False):
                seconds, requests = bench.commit()
                stage.commit_seconds.append(seconds)
                stage.commit_requests.append(requests)
                seconds, requests = bench.commit(one_partition=True)
                stage.one_seconds.append(seconds)
                stage.one_requests.append(requests)
                stage.one_serving.append(bench.server.requests.serving_seconds)
                stage.active_instants.append(len(bench.table.timeline()))
            if profile_dir is not None:
                # apart from the timed commits: the profiler slows what it watches
                with sampled(profile_file(profile_dir, stage.files)):
                    for _ in range(commits):
                        bench.commit(one_partition=True)
            target = fill_partition(0)
            stage.plan_seconds, stage.plan_requests, planned = median_of(
                plan_runs, partial(bench.plan, [("p", "=", target)])
            )
            stage.fresh_plan_seconds, stage.fresh_plan_requests, fresh = median_of(
                plan_runs, partial(bench.fresh_plan, [("p", "=", target)])
            )
            if fresh != planned:
                raise SystemExit(f"a fresh and a long-lived handle disagree on p={target}: {fresh ^ planned}")
            if stage.files <= LIST_UP_TO:
                list_runs = plan_runs if stage.files <= 10_000 else 1
                stage.list_seconds, stage.list_requests, listed = median_of(
                    list_runs, partial(bench.list_storage, target)
                )
                if planned != listed:
                    raise SystemExit(f"metadata plan and listing disagree on p={target}: {planned ^ listed}")
            else:
                print(f"   listing the storage skipped above {LIST_UP_TO:,} files (moto lists ~1 ms per key)")
            stage.metadata_bytes, stage.metadata_objects, stage.manifest_bytes = bench.metadata_size()
            stage.first_publish_seconds, stage.first_publish_requests = bench.publish_from_scratch()
            bench.commit(one_partition=True)  # then the publish of that upsert alone
            stage.publish_seconds, stage.publish_requests = bench.publish()
            bench.drop_view()  # out of moto's listings of the next size's commits
            gc.collect()
            stage.rss_mib, stage.max_rss_mib = memory_mib()
            stage.cache_entries, stage.cache_mib, stage.cache_mib_by = bench.caches()
            print(
                f"   fresh plan {stage.fresh_plan_seconds * 1e3:.0f} ms / "
                f"{stage.fresh_plan_requests} requests; "
                f"metadata table {stage.metadata_bytes / 2**20:.1f} MiB in {stage.metadata_objects} objects "
                f"(manifest {stage.manifest_bytes / 1e3:.1f} KB); "
                f"publish {stage.first_publish_seconds:.1f} s from scratch, "
                f"{stage.publish_requests} requests after an upsert; RSS {stage.rss_mib:.0f} MiB, "
                f"handle caches {stage.cache_mib:.1f} MiB",
                flush=True,
            )
            results.append(stage)
        if bench.filled >= 100 * FILL_PARTITIONS // 10:
            for k in (1, 10, 100):
                partitions = [fill_partition(i) for i in range(k)]
                per_partition[k] = bench.plan([("p", "IN", partitions)])[1]
        return results, per_partition
    finally:
        bench_server.stop()


def report(stages: list[Stage], per_partition: dict[int, int]) -> bool:
    print(
        f"\n{'files':>9} {'plan (metadata)':>16} {'list storage':>13} {'speed-up':>9} {'requests':>15} "
        f"{'fresh handle':>13} {'requests':>9} {'manifest':>11}"
    )
    for s in stages:
        if s.list_seconds is None:
            listing, speed, requests = f"{'skipped':>13}", f"{'-':>9}", f"{s.plan_requests:>6} vs {'-':<6}"
        else:
            listing = f"{s.list_seconds * 1e3:>10.1f} ms"
            speed = f"{s.list_seconds / s.plan_seconds:>8.1f}x"
            requests = f"{s.plan_requests:>6} vs {s.list_requests:<6}"
        print(
            f"{s.files:>9,} {s.plan_seconds * 1e3:>13.1f} ms {listing} {speed} {requests} "
            f"{s.fresh_plan_seconds * 1e3:>10.1f} ms {s.fresh_plan_requests:>9} "
            f"{s.manifest_bytes / 1e3:>8.1f} KB"
        )
    if any(s.list_seconds is None for s in stages):
        print(f"(listing the storage skipped above {LIST_UP_TO:,} files: moto lists about 1 ms per key)")
    if per_partition:
        base = per_partition[1]
        steps = ", ".join(f"{k} -> {n}" for k, n in per_partition.items())
        slope = (per_partition[max(per_partition)] - base) / (max(per_partition) - 1)
        print(f"\nrequests to plan k pruned partitions at {stages[-1].files:,} files: {steps}")
        print(f"  {slope:.2f} more requests per extra partition")

    print(
        f"\n{'files':>9} {'commit median':>14} {'min':>8} {'max':>8} {'requests':>9} "
        f"{'instants':>9} {'first after fill':>17} {'1-partition':>12} {'requests':>9} {'in moto':>9}"
    )
    for s in stages:
        print(
            f"{s.files:>9,} {statistics.median(s.commit_seconds) * 1e3:>11.0f} ms "
            f"{min(s.commit_seconds) * 1e3:>5.0f} ms {max(s.commit_seconds) * 1e3:>5.0f} ms "
            f"{statistics.median(s.commit_requests):>9.0f} {statistics.median(s.active_instants):>9.0f} "
            f"{s.first_commit_seconds * 1e3:>14.0f} ms {statistics.median(s.one_seconds) * 1e3:>9.0f} ms "
            f"{statistics.median(s.one_requests):>9.0f} {statistics.median(s.one_serving) * 1e3:>6.0f} ms"
        )

    print(
        f"\n{'files':>9} {'metadata table':>15} {'per file':>9} {'publish anew':>13} {'requests':>9} "
        f"{'publish 1 upsert':>17} {'requests':>9} {'RSS':>9} {'peak RSS':>9} {'handle caches':>14}"
    )
    for s in stages:
        print(
            f"{s.files:>9,} {s.metadata_bytes / 2**20:>11.2f} MiB {s.metadata_bytes / s.files:>7.0f} B "
            f"{s.first_publish_seconds:>11.2f} s {s.first_publish_requests:>9} "
            f"{s.publish_seconds * 1e3:>14.0f} ms {s.publish_requests:>9} {s.rss_mib:>5.0f} MiB "
            f"{s.max_rss_mib:>5.0f} MiB {s.cache_mib:>10.1f} MiB"
        )
    print("handle cache entries: " + "; ".join(f"{s.files:,}: {s.cache_entries}" for s in stages))
    print(
        "handle cache MiB: "
        + "; ".join(
            f"{s.files:,}: {{{', '.join(f'{k}: {v:.1f}' for k, v in s.cache_mib_by.items())}}}"
            for s in stages
        )
    )

    print(f"\n{'files':>9} {'filled':>10} {'fill time':>10} {'files/s':>8}  where the fill's time went")
    for s in stages:
        rate = s.fill_files / s.fill_seconds if s.fill_files and s.fill_seconds else 0.0
        parts = ", ".join(f"{k} {v:.0f} s" for k, v in s.fill_parts.items())
        print(f"{s.files:>9,} {s.fill_files:>10,} {s.fill_seconds:>8.0f} s {rate:>8,.0f}  {parts}")

    small, large = stages[0], stages[-1]
    listed = [s for s in stages if s.list_seconds is not None]
    ok = True
    print()
    if listed:
        widest = listed[-1]
        assert widest.list_seconds is not None
        print(
            f"at {widest.files:,} files a pruned plan makes {widest.plan_requests} requests, a listing "
            f"{widest.list_requests} ({widest.list_requests / widest.plan_requests:.0f}x): the portable "
            "ratio, since moto renders listings slower than S3 does"
        )
        speed_up = widest.list_seconds / widest.plan_seconds
        met = speed_up >= PLANNING_TARGET
        ok &= met
        label = f"pruned planning vs listing at {widest.files:,} files"
        print(
            f"{label:62} {speed_up:8.2f}x  target {f'>= {PLANNING_TARGET:.0f}x':>8} -> "
            f"{'met' if met else 'MISSED'}"
        )
    flat_time = statistics.median(large.commit_seconds) / statistics.median(small.commit_seconds)
    flat_requests = statistics.median(large.commit_requests) / statistics.median(small.commit_requests)
    plan_requests_grow = large.plan_requests / small.plan_requests
    for label, value, target, met in (
        (
            "requests to plan one partition, largest / smallest table",
            plan_requests_grow,
            "<= 1.5x",
            plan_requests_grow <= 1.5,
        ),
        (
            "commit time, largest / smallest table",
            flat_time,
            f"<= {COMMIT_FLATNESS_TARGET}x",
            flat_time <= COMMIT_FLATNESS_TARGET,
        ),
        (
            "commit requests, largest / smallest table",
            flat_requests,
            f"<= {COMMIT_FLATNESS_TARGET}x",
            flat_requests <= COMMIT_FLATNESS_TARGET,
        ),
    ):
        ok &= met
        print(f"{label:62} {value:8.2f}x  target {target:>8} -> {'met' if met else 'MISSED'}")

    print(f"\ngoals at {large.files:,} files (reported; the exit status is the targets above):")
    one_time = statistics.median(large.one_seconds) / statistics.median(small.one_seconds)
    one_requests = statistics.median(large.one_requests) / statistics.median(small.one_requests)
    goal(
        f"one-partition commit time vs {small.files:,} files",
        f"{one_time:.2f}x ({statistics.median(large.one_seconds) * 1e3:.0f} vs "
        f"{statistics.median(small.one_seconds) * 1e3:.0f} ms)",
        "<= 1.5x",
        one_time <= COMMIT_FLATNESS_TARGET,
    )
    rest = [
        statistics.median(t - m for t, m in zip(s.one_seconds, s.one_serving, strict=True))
        for s in (small, large)
    ]
    goal(
        "  of it outside moto's serving (the client's side)",
        f"{rest[1] / rest[0]:.2f}x ({rest[1] * 1e3:.0f} vs {rest[0] * 1e3:.0f} ms; moto serving "
        f"{statistics.median(large.one_serving) * 1e3:.0f} vs "
        f"{statistics.median(small.one_serving) * 1e3:.0f} ms)",
        "reported",
        None,
    )
    goal(
        f"one-partition commit requests vs {small.files:,} files",
        f"{one_requests:.2f}x ({statistics.median(large.one_requests):.0f} vs "
        f"{statistics.median(small.one_requests):.0f})",
        "<= 1.5x",
        one_requests <= COMMIT_FLATNESS_TARGET,
    )
    slowest = max(stages, key=lambda s: s.fresh_plan_seconds)
    goal(
        "fresh handle's one-partition plan (slowest size)",
        f"{slowest.fresh_plan_seconds * 1e3:.0f} ms at {slowest.files:,} files, "
        f"{large.fresh_plan_seconds * 1e3:.0f} ms / {large.fresh_plan_requests} requests at the largest",
        f"<= {FRESH_PLAN_GOAL * 1e3:.0f} ms",
        slowest.fresh_plan_seconds <= FRESH_PLAN_GOAL,
    )
    goal(
        "metadata-table bytes per file",
        ", ".join(f"{s.metadata_bytes / s.files:.0f} B at {s.files:,}" for s in stages if s.files >= 1_000),
        "reported",
        None,
    )
    reference = next((s for s in stages if s.files >= PUBLISH_FROM), None)
    if reference is not None and reference is not large:
        goal(
            f"publish after a one-partition upsert, {reference.files:,} vs {large.files:,} files",
            f"{reference.publish_requests} vs {large.publish_requests} requests "
            f"({reference.publish_seconds * 1e3:.0f} vs {large.publish_seconds * 1e3:.0f} ms)",
            "same",
            reference.publish_requests == large.publish_requests,
        )
    else:
        goal("publish after a one-partition upsert", "needs two sizes from 1,000 files", "same", None)
    rss = ", ".join(f"{s.rss_mib:.0f}" for s in stages)
    caches = ", ".join(f"{s.cache_mib:.1f}" for s in stages)
    # Bounded: the caches grow less than 1.5x over the last step of sizes (10x more files).
    last = stages[-2:] if len(stages) >= 2 and stages[-2].files >= PUBLISH_FROM else []
    goal(
        "long-lived handle's caches (MiB, per size)",
        f"{caches} (process RSS {rss} MiB, moto's store of every object included)",
        "bounded",
        last[1].cache_mib <= 1.5 * last[0].cache_mib if last else None,
    )
    return ok


PROFILE_RATE = 250  # samples a second


def profile_file(profile_dir: str, files: int) -> str:
    """Where ``--profile`` keeps the samples of the one-partition commits at a size."""
    return os.path.join(profile_dir, f"one-partition-commit-{files}.txt")


@contextlib.contextmanager
def sampled(path: str) -> Iterator[None]:
    """py-spy samples the thread holding the GIL, whichever it is, inside the block into
    ``path`` (collapsed stacks): the commit's own work runs in s3fs's event-loop thread and
    pool threads, and moto answers in threads of this process too, which a profiler of the
    calling thread alone (cProfile) would not see. Threads waiting (on the GIL, a socket, a
    lock) are not sampled, so the samples add up to at most the wall time; work outside the
    GIL (Arrow's, zlib's) is missed."""
    spy = subprocess.Popen(
        [
            *("py-spy", "record", "--pid", str(os.getpid()), "--rate", str(PROFILE_RATE)),
            *("--gil", "--format", "raw", "--output", path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # attached
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled and exits
        spy.wait(timeout=60)


#: Where a sample's time goes, by the first of these found in its stack (else "other"):
#: moto's serving threads, then fedcore, then the S3 client stack.
SIDES = (
    ("moto serving", ("werkzeug/", "moto/")),
    ("fedcore", ("fedcore/",)),
    ("S3 client", ("s3fs/", "aiobotocore/", "botocore/", "aiohttp/", "fsspec/", "asyncio/")),
)


def side_of(stack: str) -> str:
    return next((side for side, marks in SIDES if any(mark in stack for mark in marks)), "other")


def samples(path: str) -> tuple[Counter[str], Counter[str]]:
    """Seconds sampled by side and by innermost function, from py-spy's collapsed stacks."""
    sides: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    with open(path) as lines:
        for line in lines:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            seconds = int(count) / PROFILE_RATE
            sides[side_of(stack)] += seconds
            leaves[stack.rsplit(";", 1)[-1]] += seconds
    return sides, leaves


def grown(profile_dir: str, small: int, large: int, commits: int, top: int = 12) -> None:
    """Where the sampled one-partition commits spent their time at the smallest and the
    largest size, per commit, and the functions whose time grew most."""
    at = {files: samples(profile_file(profile_dir, files)) for files in (small, large)}
    print("\nsampled one-partition commits (py-spy, the thread holding the GIL), seconds per commit:")
    print(f"{'':>16} {small:>10,} files {large:>10,} files")
    for side in [*(name for name, _ in SIDES), "other"]:
        print(f"{side:>16} {at[small][0][side] / commits:>16.3f} {at[large][0][side] / commits:>16.3f}")
    print("grown most, by innermost function:")
    small_leaves, large_leaves = at[small][1], at[large][1]
    growth = sorted(large_leaves, key=lambda name: small_leaves[name] - large_leaves[name])
    for name in growth[:top]:
        print(f"  {(large_leaves[name] - small_leaves[name]) / commits:+8.3f} s  {name}")


def goal(label: str, numbers: str, target: str, met: bool | None) -> None:
    verdict = "-" if met is None else "met" if met else "not met"
    print(f"  {label:62} {target:>10} -> {verdict}: {numbers}")


def plot(stages: list[Stage], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = [s.files for s in stages]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.loglog(files, [s.plan_seconds * 1e3 for s in stages], "o-", label="metadata table")
    left.loglog(
        files, [s.fresh_plan_seconds * 1e3 for s in stages], "^-", label="metadata table, fresh handle"
    )
    listed = [s for s in stages if s.list_seconds is not None]
    left.loglog(
        [s.files for s in listed],
        [(s.list_seconds or 0.0) * 1e3 for s in listed],
        "s-",
        label="list the storage",
    )
    left.set(
        xlabel="files in the table",
        ylabel="ms to plan a one-partition read",
        title="Pruned planning (S3 on loopback)",
    )
    left.legend()
    medians = [statistics.median(s.commit_seconds) * 1e3 for s in stages]
    low = [m - min(s.commit_seconds) * 1e3 for m, s in zip(medians, stages, strict=True)]
    high = [max(s.commit_seconds) * 1e3 - m for m, s in zip(medians, stages, strict=True)]
    right.errorbar(files, medians, yerr=[low, high], fmt="o-", capsize=3, label="upsert of 200 rows")
    right.plot(
        files,
        [statistics.median(s.one_seconds) * 1e3 for s in stages],
        "^-",
        label="the same into one partition",
    )
    right.set_xscale("log")
    right.set_ylim(bottom=0)
    right.set(
        xlabel="files already in the table",
        ylabel="ms per commit (median, min-max)",
        title="Commit cost vs table size",
    )
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--stages",
        type=lambda s: [int(x) for x in s.split(",")],
        default=list(STAGES),
        help="table sizes in files, comma-separated (default: %(default)s)",
    )
    parser.add_argument("--commits", type=int, default=5, help="commits measured per size")
    parser.add_argument("--plan-runs", type=int, default=5, help="median of this many plans per size")
    parser.add_argument("--plot", metavar="PNG", help="also draw both curves into this file")
    parser.add_argument("--json", metavar="FILE", help="also write the measurements into this file")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="also sample --commits one-partition commits per size with py-spy (every thread, moto's "
        "too; apart from the timed ones) into DIR, and print where their time grew",
    )
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}; object-store layout on S3 on loopback; sizes {args.stages}")
    if args.profile:
        if shutil.which("py-spy") is None:
            parser.error("--profile needs py-spy (pip install py-spy; tox -e bench has it)")
        os.makedirs(args.profile, exist_ok=True)
    stages, per_partition = run(args.stages, args.commits, args.plan_runs, args.profile)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"stages": [asdict(s) for s in stages], "per_partition": per_partition}, out, indent=1)
    ok = report(stages, per_partition)
    if args.profile:
        grown(args.profile, stages[0].files, stages[-1].files, args.commits)
    if args.plot:
        plot(stages, args.plot)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
