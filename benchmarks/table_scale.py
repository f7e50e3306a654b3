"""Pruned planning and commit cost as an object-store-layout table grows to 100,000 files.

Two claims of the table engine, measured on one table, on S3 on loopback (a moto
server in this process, reached over HTTP through s3fs, as a cloud bucket is):

1. Planning a partition-pruned read through the metadata table beats listing the
   storage, and the gap grows with the table: in the object-store layout a
   partition's files are spread over hashed prefixes, so without the metadata
   table the only way to find them is to list the whole storage bucket (here the
   cheapest listing there is: one flat, paged LIST, 1,000 keys a page). Target
   at 100,000 files in 1,000 partitions: >= 10x faster, and a constant number of
   requests per pruned partition.
2. A commit costs the same whatever the table holds (10 -> 100,000 files): the
   writer reads only the partitions it writes, the metadata-table delta holds
   only its files, and the clean after it looks only where the instants leaving
   retention wrote.

How the table grows: a real writer upserts into four "live" partitions, with real
Parquet files; the other files come from fill commits that go through the real
commit protocol (requested, inflight, metadata-table delta, decision, completed,
with Hudi commit metadata listing every file) and then the table services a
writer runs (clean, metadata-table compaction, archival). Their data objects go
straight into the moto server's store (HTTP PUTs on loopback run ~100/s, which
would make a 100,000-file fill take 15 minutes). Each fill object is a copy of a
real base file. Requests are counted at the server, so every request any layer
sends is in. Costs of the server itself are in the timings of both sides.

Run: ``python benchmarks/table_scale.py [--plot table_scale.png]`` (needs
``fedcore[test]``), or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from fed_dev.servers import LoopbackS3
from fedcore import properties as P
from fedcore.avro_schema import to_avro_json
from fedcore.commit.transaction import Transaction
from fedcore.files.filenames import base_file_name
from fedcore.io.filesystems import filesystem_for
from fedcore.metadata.format import ADD, Op
from fedcore.read.planner import ScanPlanner
from fedcore.services.after_commit import run_table_services
from fedcore.table import Table, create_table
from fedcore.timeline import COMMIT
from fedcore.timeline.commit_metadata import CommitMetadata, WriteStat
from fedcore.timeline.retention import archived_through
from fedcore.write.client import WriteClient

STAGES = (10, 100, 1_000, 10_000, 100_000)
FILL_PARTITIONS = 1_000
FILES_PER_FILL_COMMIT = 1_000
LIVE_PARTITIONS = ("live0", "live1", "live2", "live3")
PLANNING_TARGET = 10.0
COMMIT_FLATNESS_TARGET = 1.5  # commit at the largest size / commit at the smallest
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])


def fill_partition(k: int) -> str:
    return f"f{k % FILL_PARTITIONS:04d}"


@dataclass
class Stage:
    files: int
    commit_seconds: list[float] = field(default_factory=list)
    commit_requests: list[int] = field(default_factory=list)
    active_instants: list[int] = field(default_factory=list)
    first_commit_seconds: float = 0.0
    plan_seconds: float = 0.0
    plan_requests: int = 0
    list_seconds: float = 0.0
    list_requests: int = 0


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
        self.filled = 0
        self.next_id = 0
        self.commits = 0
        self.live = self._insert_live(2_000)
        self.blob = self._real_base_file()
        # Into the steady state before measuring: every commit cleans, compactions run, and
        # archival has cut the active timeline (which every commit lists) to its usual length.
        with tqdm(desc="commits until the first archival", unit="commit", leave=False) as bar:
            while archived_through(self.table.fs.table_fs, self.table.path) is None:
                self.commit()
                bar.update()

    # --- growing the table -------------------------------------------------------------------

    def _batch(self, updates: int, inserts: int) -> pa.Table:
        ids = list(range(updates)) + list(range(self.next_id, self.next_id + inserts))
        self.next_id += inserts
        self.commits += 1
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "p": [LIVE_PARTITIONS[i % len(LIVE_PARTITIONS)] for i in ids],
                "ts": pa.array([self.commits] * len(ids), pa.int64()),
                "v": pa.array([float(self.commits)] * len(ids), pa.float64()),
            },
            schema=SCHEMA,
        )

    def _insert_live(self, rows: int) -> int:
        WriteClient(self.table).upsert(self._batch(0, rows))
        return rows

    def _real_base_file(self) -> bytes:
        some = self.table.file_slices()[0]
        return bytes(self.table.fs.cat_file(some.path))

    def file_count(self) -> int:
        return sum(len(f.files) for f in self.table.handle.file_index.files().values())

    def fill_to(self, files: int) -> None:
        # Counted again after each commit: the clean after it may delete old live slices.
        with tqdm(total=files, desc=f"fill to {files:,} files", unit="file", leave=False) as bar:
            while (wanted := files - self.file_count()) > 0:
                self._fill_commit(min(wanted, FILES_PER_FILL_COMMIT))
                run_table_services(self.table)  # as a writer does after each commit
                bar.update(files - wanted - bar.n)

    def _fill_commit(self, count: int) -> None:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        store = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        transaction = Transaction(self.table, COMMIT)
        transaction.begin()
        transaction.inflight(b"")
        stats, ops = [], []
        for k in range(self.filled, self.filled + count):
            partition = f"p={fill_partition(k)}"
            file_id = f"{uuid.uuid4()}-0"
            name = base_file_name(file_id, "0-1-0", transaction.time)
            bucket, _, key = self.table.fs.to_physical(f"{partition}/{name}")[len("s3://") :].partition("/")
            store.put_object(bucket, key, self.blob)
            size = len(self.blob)
            path = f"{partition}/{name}"
            stats.append(WriteStat(file_id, path, partition, num_writes=1, num_inserts=1, file_size=size))
            ops.append(Op(partition, name, size, ADD))
        self.filled += count
        body = CommitMetadata("BULK_INSERT", stats, to_avro_json(SCHEMA, self.table.name)).to_bytes()
        transaction.commit(body, ops)

    # --- measuring ----------------------------------------------------------------------------

    def counted(self, work: Callable[[], Any]) -> tuple[float, int, Any]:
        self.server.requests.reset()
        start = time.perf_counter()
        result = work()
        return time.perf_counter() - start, self.server.requests.total, result

    def commit(self) -> tuple[float, int]:
        batch = self._batch(updates=100, inserts=100)
        seconds, requests, _ = self.counted(lambda: WriteClient(self.table).upsert(batch))
        return seconds, requests

    def plan(self, filters: Sequence[Any]) -> tuple[float, int, set[str]]:
        seconds, requests, plan = self.counted(lambda: ScanPlanner.open(self.table).plan(filters))
        physical = {self.table.fs.to_physical(s.path).split("://", 1)[1] for s in plan.slices}
        return seconds, requests, physical

    def list_storage(self, partition: str) -> tuple[float, int, set[str]]:
        """What a reader without the metadata table must do: list every prefix, keep one partition."""

        def listing() -> set[str]:
            self.storage_fs.invalidate_cache()
            segment = f"/{self.table.name}/p={partition}/"
            return {p for p in self.storage_fs.find(self.storage, detail=False) if segment in p}

        return self.counted(listing)


def median_of(runs: int, work: Callable[[], tuple[float, int, Any]]) -> tuple[float, int, Any]:
    results = [work() for _ in range(runs)]
    seconds = statistics.median(r[0] for r in results)
    return seconds, results[-1][1], results[-1][2]


def run(stages: Sequence[int], commits: int, plan_runs: int) -> tuple[list[Stage], dict[int, int]]:
    bench_server = LoopbackS3().start()
    try:
        bench = Bench(bench_server)
        results = []
        per_partition: dict[int, int] = {}
        for files in stages:
            bench.fill_to(files)
            stage = Stage(bench.file_count())
            print(f"-- {stage.files:,} files", flush=True)
            # The first commit after a fill also cleans behind it and may compact: reported alone.
            stage.first_commit_seconds = bench.commit()[0]
            for _ in tqdm(range(commits), desc="commits", leave=False):
                seconds, requests = bench.commit()
                stage.commit_seconds.append(seconds)
                stage.commit_requests.append(requests)
                stage.active_instants.append(len(bench.table.timeline()))
            target = fill_partition(0)
            stage.plan_seconds, stage.plan_requests, planned = median_of(
                plan_runs, lambda target=target: bench.plan([("p", "=", target)])
            )
            list_runs = plan_runs if stage.files <= 10_000 else 1
            stage.list_seconds, stage.list_requests, listed = median_of(
                list_runs, lambda target=target: bench.list_storage(target)
            )
            if planned != listed:
                raise SystemExit(f"metadata plan and listing disagree on p={target}: {planned ^ listed}")
            results.append(stage)
        if bench.filled >= 100 * FILL_PARTITIONS // 10:
            for k in (1, 10, 100):
                partitions = [fill_partition(i) for i in range(k)]
                per_partition[k] = bench.plan([("p", "IN", partitions)])[1]
        return results, per_partition
    finally:
        bench_server.stop()


def report(stages: list[Stage], per_partition: dict[int, int]) -> bool:
    print(f"\n{'files':>8} {'plan (metadata)':>16} {'list storage':>13} {'speed-up':>9} {'requests':>15}")
    for s in stages:
        print(
            f"{s.files:>8,} {s.plan_seconds * 1e3:>13.1f} ms {s.list_seconds * 1e3:>10.1f} ms "
            f"{s.list_seconds / s.plan_seconds:>8.1f}x {s.plan_requests:>6} vs {s.list_requests:<6}"
        )
    if per_partition:
        base = per_partition[1]
        steps = ", ".join(f"{k} -> {n}" for k, n in per_partition.items())
        slope = (per_partition[max(per_partition)] - base) / (max(per_partition) - 1)
        print(f"\nrequests to plan k pruned partitions at {stages[-1].files:,} files: {steps}")
        print(f"  {slope:.2f} more requests per extra partition")

    print(
        f"\n{'files':>8} {'commit median':>14} {'min':>8} {'max':>8} {'requests':>9} "
        f"{'instants':>9} {'first after fill':>17}"
    )
    for s in stages:
        print(
            f"{s.files:>8,} {statistics.median(s.commit_seconds) * 1e3:>11.0f} ms "
            f"{min(s.commit_seconds) * 1e3:>5.0f} ms {max(s.commit_seconds) * 1e3:>5.0f} ms "
            f"{statistics.median(s.commit_requests):>9.0f} {statistics.median(s.active_instants):>9.0f} "
            f"{s.first_commit_seconds * 1e3:>14.0f} ms"
        )

    small, large = stages[0], stages[-1]
    speed_up = large.list_seconds / large.plan_seconds
    flat_time = statistics.median(large.commit_seconds) / statistics.median(small.commit_seconds)
    flat_requests = statistics.median(large.commit_requests) / statistics.median(small.commit_requests)
    plan_requests_grow = large.plan_requests / small.plan_requests
    print(
        f"\nat {large.files:,} files a pruned plan makes {large.plan_requests} requests, a listing "
        f"{large.list_requests} ({large.list_requests / large.plan_requests:.0f}x): the portable ratio, "
        "since moto renders listings slower than S3 does"
    )
    print()
    ok = True
    for label, value, target, met in (
        (
            f"pruned planning vs listing at {large.files:,} files",
            speed_up,
            f">= {PLANNING_TARGET:.0f}x",
            speed_up >= PLANNING_TARGET,
        ),
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
        print(f"{label:58} {value:8.2f}x  target {target:>8} -> {'met' if met else 'MISSED'}")
    return ok


def plot(stages: list[Stage], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = [s.files for s in stages]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.loglog(files, [s.plan_seconds * 1e3 for s in stages], "o-", label="metadata table")
    left.loglog(files, [s.list_seconds * 1e3 for s in stages], "s-", label="list the storage")
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
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}; object-store layout on S3 on loopback; sizes {args.stages}")
    stages, per_partition = run(args.stages, args.commits, args.plan_runs)
    ok = report(stages, per_partition)
    if args.plot:
        plot(stages, args.plot)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
