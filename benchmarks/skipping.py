"""A selective query: fedcore's scan against ``pyarrow.dataset`` reading the same files.

One table in the object-store layout: ``--rows`` rows (``id`` int64 ascending, ``x``
float64) in 4 partitions (``id % 4``), bulk-inserted so that each partition holds 9 base
files of one row group each (36 files, each covering a range of ids). The query is
``id < 1000`` on ``id`` and ``x``, as ``table.scan([("id", "<", 1000)], ["id", "x"])``;
``pyarrow.dataset`` gets the same 36 physical paths and the same filter, which is what a
user would run on those files without fed. Timed in the same run: fedcore on the same
rows written without column statistics (``hoodie.metadata.index.column.stats.enable=false``,
as tables were before fed recorded them: filters then prune by each file's footer only),
decoding every row and filtering afterwards (fedcore's reads before filters reached the
files), and a full scan of both columns.

- Local files: median seconds over ``--repeats`` rounds (each round runs every read once),
  and the ratio to pyarrow.dataset (goal: at most 1.2x for ``id < 1000``).
- S3 on loopback (a moto server in this process; a smaller table of the same shape,
  ``--s3-rows``): the requests one read sends, counted at the server, by a handle that has
  read the table before (as a service or a Spark driver plans query after query), and how
  many of the 36 files it fetched anything from (goal: only the 4 whose ids match).
- The metadata table's bytes, with and without statistics: the delta a commit writes (the
  36-file bulk insert, and a one-file upsert), and what a new handle fetches to plan the
  query, before and after a compaction (goal: at most 1.5x).

Run: ``python benchmarks/skipping.py [--plot skipping.png]`` (needs ``fedcore[test]``),
or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from tqdm import tqdm

from fed_dev.servers import LoopbackS3
from fedcore import properties as P
from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.metadata.folding import compact_metadata
from fedcore.table import Table, create_table, load_table

PARTITIONS = 4
FILES = PARTITIONS * 9
BOUND = 1000
SELECTIVE = [("id", "<", BOUND)]
COLUMNS = ["id", "x"]
#: Bytes a row is estimated at when fedcore sizes files; with the byte limits below it
#: makes FILES // PARTITIONS files per partition, each one row group.
RECORD_SIZE = 16
NO_STATS = {str(P.COLUMN_STATS_ENABLE): "false"}


@dataclass(frozen=True)
class Timing:
    seconds: float
    rows: int


def build(table_path: str, storage: str, rows: int, options: StorageOptions | None, **extra: str) -> Table:
    per_file = -(-rows // FILES)
    limit = str(per_file * RECORD_SIZE)
    table = create_table(
        table_path,
        name="skipping",
        record_key_fields=["id"],
        partition_fields=["part"],
        properties={
            P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE,
            P.STORAGE_PATH: storage,
            str(P.RECORD_SIZE_ESTIMATE): str(RECORD_SIZE),
            str(P.MAX_FILE_SIZE): limit,
            str(P.PARQUET_BLOCK_SIZE): limit,
            **extra,
        },
        storage_options=options,
    )
    ids = pa.array(range(rows), pa.int64())
    part = pc.binary_join_element_wise("p", pc.cast(pc.bit_wise_and(ids, PARTITIONS - 1), pa.string()), "")
    table.bulk_insert(pa.table({"id": ids, "part": part, "x": pc.multiply(pc.cast(ids, pa.float64()), 0.5)}))
    found = load_table(table_path, storage_options=options)
    if len(found.file_slices()) != FILES:
        raise SystemExit(f"the table has {len(found.file_slices())} base files, not {FILES}")
    return found


def reads(table: Table, bare: Table, options: StorageOptions | None) -> dict[str, Callable[[], int]]:
    """The reads compared, by name; each returns the rows it found. ``bare``: the same rows
    written without column statistics."""
    files = [table.fs.to_physical(s.path) for s in table.file_slices()]
    fs = filesystem_for(files[0], options)
    dataset = ds.dataset([f.split("://", 1)[1] for f in files], format="parquet", filesystem=fs)
    return {
        f"pyarrow.dataset: id < {BOUND}": lambda: (
            dataset.to_table(columns=COLUMNS, filter=pc.field("id") < BOUND).num_rows
        ),
        f"fedcore scan: id < {BOUND}": lambda: table.scan(SELECTIVE, COLUMNS).to_arrow().num_rows,
        f"fedcore scan, no column stats: id < {BOUND}": lambda: (
            bare.scan(SELECTIVE, COLUMNS).to_arrow().num_rows
        ),
        f"fedcore: every row decoded, then id < {BOUND}": lambda: (
            table.scan(columns=COLUMNS).to_arrow().filter(pc.field("id") < BOUND).num_rows
        ),
        "pyarrow.dataset: full scan": lambda: dataset.to_table(columns=COLUMNS).num_rows,
        "fedcore scan: full scan": lambda: table.scan(columns=COLUMNS).to_arrow().num_rows,
    }


def timed(candidates: dict[str, Callable[[], int]], repeats: int) -> dict[str, Timing]:
    """Median seconds of each read over ``repeats`` rounds, each round running every read once
    (interleaved, so that no read is measured in a warmer or a busier moment than another)."""
    for read in candidates.values():
        read()  # warm: file caches, a long-lived handle's metadata-table lookups
    seconds: dict[str, list[float]] = {name: [] for name in candidates}
    rows: dict[str, set[int]] = {name: set() for name in candidates}
    for _ in tqdm(range(repeats), desc="timing", unit="round"):
        for name, read in candidates.items():
            start = time.perf_counter()
            rows[name].add(read())
            seconds[name].append(time.perf_counter() - start)
    for name, found in rows.items():
        if len(found) != 1:
            raise SystemExit(f"{name} returned different row counts over its runs: {sorted(found)}")
    return {name: Timing(statistics.median(seconds[name]), rows[name].pop()) for name in candidates}


def local(rows: int, repeats: int) -> dict[str, Timing]:
    with tempfile.TemporaryDirectory() as folder:
        print(f"writing {rows:,} rows into {FILES} files, twice (local files) ...")
        table = build(f"file://{folder}/tables/t", f"file://{folder}/storage", rows, None)
        bare = build(f"file://{folder}/tables/bare", f"file://{folder}/storage", rows, None, **NO_STATS)
        found = timed(reads(table, bare, None), repeats)
    check(found, rows)
    return found


def s3(rows: int) -> dict[str, tuple[int, int, int]]:
    """Per read: the GETs on the storage bucket, the other requests, and the files fetched from."""
    counted: dict[str, tuple[int, int, int]] = {}
    with LoopbackS3() as server:
        options = server.storage_options()
        tables, storage = server.create_bucket("tables"), server.create_bucket("storage")
        print(f"writing {rows:,} rows into {FILES} files, twice (S3 on loopback) ...")
        table = build(f"{tables}/t", storage, rows, options)
        bare = build(f"{tables}/bare", storage, rows, options, **NO_STATS)
        bucket = storage.removeprefix("s3://")
        for name, read in reads(table, bare, options).items():
            read()  # warm: a handle (and a dataset) that has read the table before
            server.requests.reset()
            read()
            data = {key: n for key, n in server.requests.gets.items() if key.startswith(bucket + "/")}
            counted[name] = (sum(data.values()), server.requests.total - sum(data.values()), len(data))
    return counted


def metadata_bytes(rows: int) -> dict[str, tuple[int, int]]:
    """Bytes without and with column statistics: what a commit writes to the metadata table,
    and what a new handle fetches from it to plan the selective query."""
    measured: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for extra in (NO_STATS, {}):
            path = f"file://{folder}/tables/{'bare' if extra else 'stats'}"
            table = build(path, f"file://{folder}/storage", rows, None, **extra)
            index = table.handle.metadata_table_or_none()
            assert index is not None
            fs = table.fs.table_fs
            bulk = table.timeline().completed()[-1].time
            one = table.upsert(pa.table({"id": [7], "part": ["p3"], "x": [0.0]})).instant

            def lookup(path: str = path) -> int:
                """What planning the query looks up (every partition: it has no partition filter)."""
                fresh = load_table(path).handle.metadata_table_or_none()
                assert fresh is not None
                fresh.files(fresh.partitions())
                return fresh.stats.bytes

            rows_before = lookup()
            compact_metadata(index)
            for key, value in (
                ("delta of the 36-file bulk insert", fs.size(index.delta_path(bulk))),
                ("delta of a one-file upsert", fs.size(index.delta_path(one))),
                ("lookup by a new handle, 2 deltas", rows_before),
                ("lookup by a new handle, after a compaction", lookup()),
            ):
                measured.setdefault(key, []).append(value)
    return {key: (before, after) for key, (before, after) in measured.items()}


def check(found: dict[str, Timing], rows: int) -> None:
    selective = {t.rows for name, t in found.items() if "full scan" not in name}
    full = {t.rows for name, t in found.items() if "full scan" in name}
    if selective != {BOUND} or full != {rows}:
        raise SystemExit(f"the reads disagree: {selective} rows for id < {BOUND}, {full} for a full scan")


def report(
    found: dict[str, Timing],
    counted: dict[str, tuple[int, int, int]] | None,
    sizes: dict[str, tuple[int, int]],
) -> None:
    base = {
        "selective": found[f"pyarrow.dataset: id < {BOUND}"].seconds,
        "full": found["pyarrow.dataset: full scan"].seconds,
    }
    print(f"\n{'read (local files)':48}{'median':>10} {'vs pyarrow.dataset':>19}")
    for name, timing in found.items():
        ratio = timing.seconds / base["full" if "full scan" in name else "selective"]
        print(f"{name:48}{timing.seconds * 1000:>8.1f}ms {ratio:>18.2f}x")
    if counted:
        header = f"{'data GETs':>10} {'other requests':>15} {'files fetched':>14}"
        print(f"\n{'read (S3 on loopback, warm)':48}{header}")
        for name, (data, others, files) in counted.items():
            print(f"{name:48}{data:>10} {others:>15} {files:>9} / {FILES}")
    print(f"\n{'metadata-table bytes':48}{'no stats':>10} {'stats':>8} {'ratio':>7}")
    for name, (before, after) in sizes.items():
        print(f"{name:48}{before:>10,} {after:>8,} {after / before:>6.2f}x")


def plot(found: dict[str, Timing], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(found)
    fig, ax = plt.subplots(figsize=(9, 3.8))
    colours = ["tab:gray" if n.startswith("pyarrow") else "tab:blue" for n in names]
    ax.barh(names, [found[n].seconds * 1000 for n in names], color=colours)
    ax.invert_yaxis()
    ax.set_xlabel("median ms (local files)")
    ax.set_title(f"id < {BOUND} and a full scan: {FILES} files of one row group each")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows of the local table")
    parser.add_argument("--s3-rows", type=int, default=400_000, help="rows of the S3 table (0: no S3 run)")
    parser.add_argument("--repeats", type=int, default=25, help="rounds of reads (each read's median)")
    parser.add_argument("--plot", metavar="PNG", help="also draw the local times into this file")
    args = parser.parse_args()
    timings = local(args.rows, args.repeats)
    requests = s3(args.s3_rows) if args.s3_rows else None
    sizes = metadata_bytes(40_000)
    report(timings, requests, sizes)
    if args.plot:
        plot(timings, args.plot)
