"""The write path against what pyarrow alone does with the same rows.

Rows: ``id`` int64 (the record key), ``p`` (8 partitions), ``ts`` int64 (precombine),
``v`` double, ``s`` string. Each case is timed in this one run, beside its baseline:

- bulk insert into a new object-store-layout table, against
  ``pyarrow.parquet.write_to_dataset(partition_cols=["p"])`` of the same rows with the
  same codec (what a user writing a Hive-layout table does);
- upsert of 1% and of 10% of the rows (updates spread over every file group), against
  the floor of copy-on-write: pyarrow reading every touched base file and writing it
  back, with the same threads;
- insert of new keys into file groups still below the small-file limit, against pyarrow
  reading those files and writing them back with the new rows added.

Merge-on-read against copy-on-write, same rows, same updates (``--sections merge_on_read``):
upserts of 1% and 10% (time and bytes written: a log file per touched group against its
rewrite), a snapshot read of the merge-on-read table with those logs pending against the
same table compacted, and the compaction against the copy-on-write upsert that rewrites the
same file groups.

Virtual keys against meta fields, same rows, same updates (``--sections virtual_keys``): a
copy-on-write table written with ``hoodie.populate.meta.fields=false`` (its files hold no
meta values; reads compute keys from the key fields) against one with Hudi's meta columns:
bulk insert and upserts of 1% and 10%, time and bytes written.

Table version 9 (Hudi 1.x) against version 6, same rows, same updates (``--sections
table_versions``): tables of both types created at each version (``hoodie.write.table.version``;
version 9 names completed instants by completion time, which a commit lists the timeline to
choose, writes Avro commit metadata and, merge-on-read, a log file per delta commit placed by
its completion time): bulk insert, upserts of 1% and 10%, a one-row upsert (a commit's fixed
cost), a snapshot read (merge-on-read: merging the log files) and time travel to the first
write; goal 1.1x.

Local files and S3 on loopback (moto, fewer rows: moto stores at a few hundred MB/s). The
peak memory of a bulk insert and of ``write_to_dataset`` is measured in a process of its
own (Arrow's allocator peak and the process's peak RSS).

Run: ``python benchmarks/write_path.py [--rows 4000000] [--s3-rows 1000000] [--sections ...] [--plot PNG]``
(needs ``fedcore[test]``), or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import io
import math
import multiprocessing
import resource
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from tqdm import tqdm

from fed_dev.servers import LoopbackS3
from fedcore import properties as P
from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.table import Table, create_table

PARTITIONS = 8
CODEC = "snappy"  # fedcore's default hoodie.parquet.compression.codec
THREADS = 8
REPEATS = 3


def rows_of(n: int, start: int = 0, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    names = pa.array([f"name-{i}" for i in range(1000)], pa.string())
    return pa.table(
        {
            "id": ids,
            "p": pc.binary_join_element_wise("p", pc.cast(pa.array(ids % PARTITIONS), pa.string()), ""),
            "ts": np.ones(n, np.int64),
            "v": rng.random(n),
            "s": names.take(pa.array(ids % 1000)),
        }
    )


def updates_of(n_table: int, fraction: float, seed: int = 11) -> pa.Table:
    """``fraction`` of the keys, chosen uniformly (so every file group is touched), newer ts."""
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(n_table, int(n_table * fraction), replace=False))
    batch = rows_of(n_table).take(pa.array(chosen))
    return batch.set_column(2, "ts", pa.array(np.full(len(chosen), 2, np.int64)))


def with_meta_columns(data: pa.Table, instant: str = "20260101000000000") -> pa.Table:
    """The rows with Hudi's five meta columns, computed by pyarrow: what a Hudi file holds
    beyond the data, whoever writes it (the format's own cost, for a second baseline)."""
    n = data.num_rows
    sequence = pc.binary_join_element_wise(f"{instant}_0_", pc.cast(pa.array(np.arange(n)), pa.string()), "")
    meta = {
        "_hoodie_commit_time": pa.repeat(pa.scalar(instant), n),
        "_hoodie_commit_seqno": sequence,
        "_hoodie_record_key": pc.cast(data.column("id"), pa.string()),
        "_hoodie_partition_path": pc.binary_join_element_wise("p=", data.column("p"), ""),
        "_hoodie_file_name": pa.repeat(pa.scalar("00000000-0000-0000-0000-000000000000-0_0-1-0.parquet"), n),
    }
    return pa.table({**meta, **{name: data.column(name) for name in data.column_names}})


@dataclass
class Place:
    """Where a run writes: a local folder or buckets on loopback S3."""

    root: str
    options: StorageOptions | None

    def table(self, name: str, **properties: str) -> Table:
        return create_table(
            f"{self.root}/tables/{name}",
            name=name,
            record_key_fields=["id"],
            partition_fields=["p"],
            precombine_field="ts",
            properties={
                P.STORAGE_STRATEGY_CLASS: "object_store",
                P.STORAGE_PATH: f"{self.root}/storage",
                **properties,
            },
            storage_options=self.options,
        )


def timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def same_settings(names: list[str]) -> dict[str, Any]:
    """The Parquet settings of fedcore's writer, so a floor does no more work than it must:
    no dictionary for the unique key and sequence-number columns, no statistics for the latter."""
    return {
        "compression": CODEC,
        "use_dictionary": [c for c in names if c not in ("_hoodie_commit_seqno", "_hoodie_record_key")],
        "write_statistics": [c for c in names if c != "_hoodie_commit_seqno"],
    }


def rewrite_floor(table: Table, place: Place, extra: pa.Table | None = None) -> float:
    """pyarrow alone: read each latest base file whole and write it back (with ``extra``:
    only the smallest of each partition, with ``extra``'s rows of that partition added),
    with as many threads as the writer uses."""
    fs = filesystem_for(place.root, place.options)
    by_partition: dict[str, list[Any]] = {}
    for piece in table.file_slices():
        by_partition.setdefault(piece.partition_path, []).append(piece)
    added: dict[str, pa.Table] = {}
    if extra is not None:
        for partition in by_partition:
            rows = extra.filter(pc.equal(extra.column("p"), partition.split("=")[-1]))
            added[partition] = with_meta_columns(rows)  # a Hudi file's new rows carry them too

    def one(piece: Any, more: pa.Table | None) -> None:
        data = pq.read_table(pa.BufferReader(table.fs.cat_file(piece.path)))
        if more is not None:
            data = pa.concat_tables([data, more.select(data.column_names).cast(data.schema)])
        sink = io.BytesIO()
        pq.write_table(data, sink, **same_settings(data.column_names))
        fs.pipe_file(f"{place.root}/floor/{piece.file_id}.parquet", sink.getvalue())

    def run() -> None:
        with ThreadPoolExecutor(THREADS) as pool:
            jobs = []
            for partition, pieces in by_partition.items():
                for index, piece in enumerate(sorted(pieces, key=lambda s: s.size)):
                    if extra is None:
                        jobs.append(pool.submit(one, piece, None))
                    elif index == 0:  # inserts rewrite only the file groups they go to
                        jobs.append(pool.submit(one, piece, added[partition]))
            for job in jobs:
                job.result()

    return timed(run)


def best(action: Callable[[int], Any], repeats: int = REPEATS) -> float:
    """The fastest of ``repeats`` runs of ``action(attempt)`` (timing here swings by tens of %)."""
    return min(timed(partial(action, attempt)) for attempt in range(repeats))


def cases(place: Place, n: int, progress: tqdm) -> dict[str, tuple[float, float, int]]:
    """case -> (fedcore seconds, baseline seconds, rows written by the operation); each side
    the best of ``REPEATS`` runs on fresh tables or fresh batches."""
    results: dict[str, tuple[float, float, int]] = {}
    data = rows_of(n)
    fs = filesystem_for(place.root, place.options)

    def dataset(rows: pa.Table, name: str) -> None:
        root = fs._strip_protocol(f"{place.root}/{name}")
        pq.write_to_dataset(rows, root, partition_cols=["p"], filesystem=fs, compression=CODEC)

    tables = [place.table(f"bulk{attempt}") for attempt in range(REPEATS)]
    ours = best(lambda attempt: tables[attempt].bulk_insert(data))
    results["bulk insert vs write_to_dataset"] = (ours, best(lambda a: dataset(data, f"hive{a}")), n)
    meta = best(lambda a: dataset(with_meta_columns(data), f"hive-meta{a}"))
    results["bulk insert vs write_to_dataset + meta columns"] = (ours, meta, n)
    progress.update()
    table = tables[0]
    for fraction in (0.01, 0.10):
        batches = [updates_of(n, fraction, seed=attempt) for attempt in range(REPEATS)]
        floor = best(lambda attempt: rewrite_floor(table, place))
        ours = best(partial(_upsert, table, batches))
        results[f"upsert {fraction:.0%} vs read+rewrite"] = (ours, floor, len(batches[0]))
        progress.update()

    smalls = [place.table(f"small{attempt}") for attempt in range(REPEATS)]
    for small in smalls:
        small.bulk_insert(rows_of(n // 4))  # one file group per partition, below the small-file limit
    extra = rows_of(n // 4, start=n)
    floor = best(lambda attempt: rewrite_floor(smalls[attempt], place, extra))
    ours = best(lambda attempt: smalls[attempt].insert(extra))
    results["insert into small file groups vs read+rewrite"] = (ours, floor, len(extra))
    absent = rows_of(1, start=10 * n)
    # What every commit costs whatever its size (timeline, metadata-table delta, commit,
    # table services): a delete of a key the table lacks changes no file. No baseline.
    results["(fixed cost: a commit changing no file)"] = (
        best(lambda attempt: table.delete(absent)),
        math.nan,
        0,
    )
    progress.update()
    return results


#: A merge-on-read case's goal: the ratio merge-on-read / copy-on-write must not exceed it.
MOR_GOALS = {
    "upsert 1%: time": 0.3,
    "upsert 1%: bytes written": 0.1,
    "snapshot read: logs pending vs compacted": 1.5,
}


def merge_on_read_cases(place: Place, n: int, progress: tqdm) -> dict[str, tuple[float, float, str]]:
    """case -> (merge-on-read, copy-on-write or baseline, unit): the same rows bulk inserted
    into a table of each type, then the same updates upserted into both."""
    data = rows_of(n)
    cow = place.table("cow")
    mor = place.table("mor", **{P.TABLE_TYPE: P.TABLE_TYPE_MOR})
    cow.bulk_insert(data)
    mor.bulk_insert(data)
    results: dict[str, tuple[float, float, str]] = {}
    cow_rewrite = math.nan
    for fraction in (0.01, 0.10):
        batches = [updates_of(n, fraction, seed=100 + attempt) for attempt in range(REPEATS)]
        times: dict[str, list[float]] = {"mor": [], "cow": []}
        written: dict[str, int] = {}
        for batch in batches:  # alternately, so both see the machine alike
            for name, table in (("mor", mor), ("cow", cow)):
                start = time.perf_counter()
                result = table.upsert(batch)
                times[name].append(time.perf_counter() - start)
                written.setdefault(name, result.bytes_written)
        label = f"upsert {fraction:.0%}"
        results[f"{label}: time"] = (min(times["mor"]), min(times["cow"]), "s")
        results[f"{label}: bytes written"] = (written["mor"], written["cow"], "B")
        cow_rewrite = min(times["cow"])  # 10% touches every group: the rewrite compaction replaces
        progress.update()
    # A table as an inline compaction every few writes leaves it: the first 1% and 10%
    # upserts pending in log files (11% of the rows), against the same table compacted.
    read = place.table("read", **{P.TABLE_TYPE: P.TABLE_TYPE_MOR})
    read.bulk_insert(data)
    for fraction in (0.01, 0.10):
        read.upsert(updates_of(n, fraction, seed=100))
    pending = best(lambda attempt: read.read())
    read.compact()
    compacted = best(lambda attempt: read.read())
    compaction = timed(mor.compact)
    results["snapshot read: logs pending vs compacted"] = (pending, compacted, "s")
    # The first table: three 1% and three 10% upserts in its log files.
    results["compaction vs copy-on-write upsert of the same groups"] = (compaction, cow_rewrite, "s")
    progress.update()
    return results


#: The goal of a virtual-keys case: virtual keys / meta fields at most this.
VIRTUAL_KEY_GOALS = {"bulk insert: time": 1.0, "upsert 1%: time": 1.0, "bulk insert: bytes written": 1.0}


def virtual_key_cases(place: Place, n: int, progress: tqdm) -> dict[str, tuple[float, float, str]]:
    """case -> (virtual keys, meta fields, unit): the same rows bulk inserted into a table of
    each kind (fresh tables, alternately, best of ``REPEATS``), then the same updates upserted
    into both."""
    data = rows_of(n)
    virtual = {str(P.POPULATE_META_FIELDS): "false"}
    times: dict[str, list[float]] = {"virtual": [], "meta": []}
    written: dict[str, int] = {}
    tables: dict[str, Table] = {}
    for attempt in range(REPEATS):
        for name, properties in (("virtual", virtual), ("meta", {})):
            table = place.table(f"{name}{attempt}", **properties)
            start = time.perf_counter()
            result = table.bulk_insert(data)
            times[name].append(time.perf_counter() - start)
            written.setdefault(name, result.bytes_written)
            tables[name] = table
    results: dict[str, tuple[float, float, str]] = {
        "bulk insert: time": (min(times["virtual"]), min(times["meta"]), "s"),
        "bulk insert: bytes written": (written["virtual"], written["meta"], "B"),
    }
    progress.update()
    for fraction in (0.01, 0.10):
        batches = [updates_of(n, fraction, seed=200 + attempt) for attempt in range(REPEATS)]
        upserts: dict[str, list[float]] = {"virtual": [], "meta": []}
        for batch in batches:
            for name, table in tables.items():
                start = time.perf_counter()
                table.upsert(batch)
                upserts[name].append(time.perf_counter() - start)
        results[f"upsert {fraction:.0%}: time"] = (min(upserts["virtual"]), min(upserts["meta"]), "s")
    for name in tables:  # both read the same rows back
        assert tables[name].scan().count() == n
    progress.update()
    return results


#: The goal of every table-version case: version 9 / version 6 at most this.
VERSION_GOAL = 1.1


def table_version_cases(place: Place, n: int, progress: tqdm) -> dict[str, tuple[float, float, str]]:
    """case -> (version 9, version 6, unit), copy-on-write then merge-on-read
    (``version_cases``)."""
    found = version_cases(place, n, progress, P.TABLE_TYPE_COW)
    mor = version_cases(place, n, progress, P.TABLE_TYPE_MOR)
    return found | {f"merge-on-read: {case}": times for case, times in mor.items()}


def version_cases(
    place: Place, n: int, progress: tqdm, table_type: str
) -> dict[str, tuple[float, float, str]]:
    """case -> (version 9, version 6, unit): each step on a table of each version in turn,
    best of ``REPEATS`` (fresh tables for the bulk inserts, then the same updates into both)."""
    data = rows_of(n)
    versions = ("9", "6")
    times: dict[str, dict[str, list[float]]] = {}
    tables: dict[str, Table] = {}

    def run(case: str, action: Callable[[Table], Any]) -> None:
        # Each version goes first every other time: neither gets the warmer caches each time.
        done = len(times.get(case, {}).get(versions[0], []))
        for version in versions if done % 2 == 0 else versions[::-1]:
            table = tables[version]
            times.setdefault(case, {}).setdefault(version, []).append(timed(partial(action, table)))

    for attempt in range(REPEATS):
        for version in versions:
            name = f"v{version}_{table_type.lower()}_{attempt}"
            tables[version] = place.table(name, **{P.WRITE_TABLE_VERSION: version, P.TABLE_TYPE: table_type})
        run("bulk insert", lambda table: table.bulk_insert(data))
    progress.update()
    first = {version: table.timeline().completed()[0].time for version, table in tables.items()}
    for fraction in (0.01, 0.10):
        for attempt in range(REPEATS):
            batch = updates_of(n, fraction, seed=300 + attempt)
            run(f"upsert {fraction:.0%}", lambda table, batch=batch: table.upsert(batch))
    for attempt in range(REPEATS):
        one = rows_of(1, start=attempt).set_column(2, "ts", pa.array([3 + attempt], pa.int64()))
        run("upsert of one row (a commit's fixed cost)", lambda table, one=one: table.upsert(one))
    progress.update()
    for _ in range(REPEATS):
        run("snapshot read", lambda table: table.read())
        run(
            "time travel to the first write",
            lambda table: table.read(as_of=first[table.config.get(P.TABLE_VERSION)]),
        )
    for table in tables.values():  # both hold the same rows
        assert table.scan().count() == n
    progress.update()
    return {case: (min(by["9"]), min(by["6"]), "s") for case, by in times.items()}


def _upsert(table: Table, batches: list[pa.Table], attempt: int) -> None:
    table.upsert(batches[attempt])


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


STREAM_BATCH = 100_000


def stream_of(n: int) -> pa.RecordBatchReader:
    """The same rows as ``rows_of(n)``, made a batch at a time as they are read."""
    schema = rows_of(1).schema
    batches = (
        batch
        for start in range(0, n, STREAM_BATCH)
        for batch in rows_of(min(STREAM_BATCH, n - start), start).to_batches()
    )
    return pa.RecordBatchReader.from_batches(schema, batches)


def _peak(kind: str, n: int, root: str, queue: Any) -> None:
    streamed = kind.endswith("stream")
    data: Any = stream_of(n) if streamed else rows_of(n)
    place = Place(root, None)
    before, peak, running = _rss(), [0], [True]

    def sample() -> None:  # the process's resident memory, every 5 ms
        while running[0]:
            peak[0] = max(peak[0], _rss())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    if kind.startswith("fedcore"):
        place.table("peak").bulk_insert(data)
    else:
        ds.write_dataset(
            data, f"{root}/peak-hive", format="parquet", partitioning=["p"], partitioning_flavor="hive",
            file_options=ds.ParquetFileFormat().make_write_options(compression=CODEC),
        )  # fmt: skip
    running[0] = False
    sampler.join()
    queue.put((pa.default_memory_pool().max_memory(), max(peak[0], _rss()) - before))


def peak_memory(kind: str, n: int) -> tuple[int, int]:
    """(Arrow allocator peak, growth of resident memory) in bytes while one bulk write of
    ``n`` rows runs in a fresh process: rows already in memory, or (``*-stream``) made a
    batch at a time as the writer reads them."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    with tempfile.TemporaryDirectory() as root:
        process = context.Process(target=_peak, args=(kind, n, root, queue))
        process.start()
        arrow, rss = queue.get()
        process.join()
    return arrow, rss


Pairs = dict[str, dict[str, tuple[float, float, str]]]


def main(
    n: int, s3_n: int, sections: set[str]
) -> tuple[dict[str, dict[str, tuple[float, float, int]]], Pairs, Pairs, Pairs]:
    found: dict[str, dict[str, tuple[float, float, int]]] = {}
    merge_on_read: Pairs = {}
    virtual_keys: Pairs = {}
    table_versions: Pairs = {}
    places = 2 if s3_n else 1
    total = places * (
        (4 if "write" in sections else 0)
        + (3 if "merge_on_read" in sections else 0)
        + (2 if "virtual_keys" in sections else 0)
        + (6 if "table_versions" in sections else 0)
    )
    with tqdm(total=total, desc="write path cases", unit="case") as progress:
        with tempfile.TemporaryDirectory() as root:
            if "write" in sections:
                found[f"local files, {n:,} rows"] = cases(Place(root, None), n, progress)
            if "merge_on_read" in sections:
                merge_on_read[f"local files, {n:,} rows"] = merge_on_read_cases(
                    Place(f"{root}/mor", None), n, progress
                )
            if "virtual_keys" in sections:
                virtual_keys[f"local files, {n:,} rows"] = virtual_key_cases(
                    Place(f"{root}/virtual", None), n, progress
                )
            if "table_versions" in sections:
                table_versions[f"local files, {n:,} rows"] = table_version_cases(
                    Place(f"{root}/versions", None), n, progress
                )
        if s3_n:
            with LoopbackS3() as server:
                place = Place(server.create_bucket("write"), server.storage_options())
                if "write" in sections:
                    found[f"S3 (moto), {s3_n:,} rows"] = cases(place, s3_n, progress)
                if "merge_on_read" in sections:
                    mor_place = Place(server.create_bucket("mor"), server.storage_options())
                    merge_on_read[f"S3 (moto), {s3_n:,} rows"] = merge_on_read_cases(
                        mor_place, s3_n, progress
                    )
                if "virtual_keys" in sections:
                    virtual_place = Place(server.create_bucket("virtual"), server.storage_options())
                    virtual_keys[f"S3 (moto), {s3_n:,} rows"] = virtual_key_cases(
                        virtual_place, s3_n, progress
                    )
                if "table_versions" in sections:
                    versions_place = Place(server.create_bucket("versions"), server.storage_options())
                    table_versions[f"S3 (moto), {s3_n:,} rows"] = table_version_cases(
                        versions_place, s3_n, progress
                    )
    return found, merge_on_read, virtual_keys, table_versions


def report(found: dict[str, dict[str, tuple[float, float, int]]], memory: dict[str, tuple[int, int]]) -> None:
    for place, results in found.items():
        print(f"\n{place}")
        print(f"{'':48} {'fedcore':>9} {'baseline':>9} {'ratio':>6} {'fedcore rows/s':>15}")
        for name, (ours, base, rows) in results.items():
            if math.isnan(base):
                print(f"{name:48} {ours:>8.2f}s {'-':>9} {'-':>6}")
            else:
                print(f"{name:48} {ours:>8.2f}s {base:>8.2f}s {ours / base:>5.2f}x {rows / ours:>15,.0f}")
    if memory:
        print("\nmemory of one bulk write (fresh process; a table: rows in memory before it starts)")
        for name, (arrow, rss) in memory.items():
            print(
                f"{name:48} Arrow peak {arrow / 2**20:>6,.0f} MiB   resident growth {rss / 2**20:>6,.0f} MiB"
            )


def report_pairs(found: Pairs, title: str, heads: tuple[str, str], goals: dict[str, float]) -> None:
    """Each case's two sides, their ratio and its goal (``title``: what is held against what)."""
    for place, results in found.items():
        print(f"\n{title}, {place}")
        print(f"{'':56} {heads[0]:>12} {heads[1]:>12} {'ratio':>6} {'goal':>6}")
        for name, (mor, cow, unit) in results.items():
            goal = goals.get(name)
            shown = (lambda v: f"{v:>11.2f}s") if unit == "s" else (lambda v: f"{v / 2**20:>9.2f}MiB")
            mark = "" if goal is None else f"{'<=' if mor / cow <= goal else '> '}{goal}"
            print(f"{name:56} {shown(mor)} {shown(cow)} {mor / cow:>5.2f}x {mark:>6}")


def plot_pairs(found: Pairs, path: str, label: str, goals: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(found), figsize=(7 * len(found), 3.6), sharey=True, squeeze=False)
    for ax, (place, results) in zip(axes[0], found.items(), strict=True):
        names = list(results)
        ratios = [results[n][0] / results[n][1] for n in names]
        colors = [
            "tab:green" if n in goals and r <= goals[n] else "tab:blue"
            for n, r in zip(names, ratios, strict=True)
        ]
        ax.barh(names, ratios, color=colors)
        for y, name in enumerate(names):
            if name in goals:
                ax.plot([goals[name]] * 2, [y - 0.4, y + 0.4], color="tab:red")
        ax.axvline(1.0, color="grey", linewidth=0.5)
        ax.set_xlabel(f"{label} (red: goal)")
        ax.set_title(place)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def plot(found: dict[str, dict[str, tuple[float, float, int]]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(found), figsize=(7 * len(found), 3.6), sharey=True, squeeze=False)
    for ax, (place, results) in zip(axes[0], found.items(), strict=True):
        names = [name for name in results if not math.isnan(results[name][1])]
        ax.barh(names, [results[n][0] / results[n][1] for n in names], color="tab:blue")
        ax.axvline(1.5, color="tab:red", linestyle="--", label="goal: 1.5x")
        ax.set_xlabel("fedcore time / baseline time")
        ax.set_title(place)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--s3-rows", type=int, default=1_000_000, help="0: leave S3 out")
    parser.add_argument(
        "--sections",
        default="write,merge_on_read,virtual_keys,table_versions,memory",
        help="comma separated: write (against pyarrow), merge_on_read (against copy-on-write), "
        "virtual_keys (against meta fields), table_versions (version 9 against 6), memory",
    )
    parser.add_argument("--plot", metavar="PNG")
    args = parser.parse_args()
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    unknown = sections - {"write", "merge_on_read", "virtual_keys", "table_versions", "memory"}
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    results, merge_on_read, virtual_keys, table_versions = main(args.rows, args.s3_rows, sections)
    memory = {}
    if "memory" in sections:
        memory = {
            "fedcore bulk_insert, a table": peak_memory("fedcore", args.rows),
            "pyarrow.dataset.write_dataset, a table": peak_memory("pyarrow", args.rows),
            "fedcore bulk_insert, a stream of batches": peak_memory("fedcore-stream", args.rows),
            "pyarrow.dataset.write_dataset, a stream": peak_memory("pyarrow-stream", args.rows),
        }
    report(results, memory)
    report_pairs(merge_on_read, "merge-on-read vs copy-on-write", ("MOR", "COW/base"), MOR_GOALS)
    report_pairs(virtual_keys, "virtual keys vs meta fields", ("virtual", "meta"), VIRTUAL_KEY_GOALS)
    version_goals = {case: VERSION_GOAL for results in table_versions.values() for case in results}
    report_pairs(table_versions, "table version 9 vs 6", ("version 9", "version 6"), version_goals)
    if args.plot and results:
        plot(results, args.plot)
    stem = (args.plot or "").removesuffix(".png")
    if args.plot and merge_on_read:
        plot_pairs(merge_on_read, f"{stem}-merge-on-read.png", "merge-on-read / copy-on-write", MOR_GOALS)
    if args.plot and virtual_keys:
        plot_pairs(virtual_keys, f"{stem}-virtual-keys.png", "virtual keys / meta fields", VIRTUAL_KEY_GOALS)
    if args.plot and table_versions:
        plot_pairs(table_versions, f"{stem}-table-versions.png", "version 9 / version 6", version_goals)
