"""What a metadata-table lookup and a commit read and write, as the table grows to 1,000,000 files.

The issue's scale claim, measured in bytes and reads rather than time (so the VM's
noise does not matter): with 1,000,000 files in 10,000 partitions, looking up one
partition reads bytes that grow with that partition, not the table, and a commit
writes bytes that grow with the files it changed. The table is on local files;
every commit goes through the real commit protocol, with metadata only (no data
files: the metadata table never looks at them). Each fill commit adds one file
to every partition, so every partition grows at the same pace.

Run: ``python benchmarks/metadata_lookup.py`` (about a minute), or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from tqdm import tqdm

from fedcore.commit.transaction import Transaction
from fedcore.metadata.folding import compact_metadata
from fedcore.metadata.format import ADD, Op
from fedcore.metadata.table import MetadataTable
from fedcore.table import Table, create_table
from fedcore.timeline import COMMIT

PARTITIONS = 10_000
STAGES = (10_000, 100_000, 1_000_000)
LOOKUP_TARGET = 2.0  # bytes read per lookup, largest table / smallest (the table grows 100x)


def commit(table: Table, ops: list[Op]) -> str:
    transaction = Transaction(table.handle, COMMIT)
    transaction.begin()
    return transaction.commit(b"{}", ops)


def fill_ops(round_: int, partitions: list[str]) -> list[Op]:
    stamp = f"2026010100{round_:07d}"
    return [
        Op(p, f"{round_:08x}-{j:04x}-0000-0000-000000000000-0_0-1-0_{stamp}.parquet", 1_000, ADD)
        for j, p in enumerate(partitions)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=lambda s: [int(x) for x in s.split(",")], default=list(STAGES))
    args = parser.parse_args()
    partitions = [f"p={i:05d}" for i in range(PARTITIONS)]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        table = create_table(f"file://{folder}/t", name="t", record_key_fields=["id"], partition_fields=["p"])
        index = MetadataTable(table.fs.table_fs, table.path, table.timeline, layout=table.handle.layout)
        files = 0
        for stage in args.stages:
            with tqdm(total=stage - files, desc=f"fill to {stage:,} files", unit="file", leave=False) as bar:
                while files < stage:
                    commit(table, fill_ops(files // PARTITIONS, partitions))
                    files += PARTITIONS
                    bar.update(PARTITIONS)
            start = time.perf_counter()
            compact_metadata(index)
            compact_seconds = time.perf_counter() - start
            manifest = index.manifest(index.manifest_times()[-1])
            assert manifest is not None
            index.stats.bytes = index.stats.requests = 0
            found = index.files([partitions[1234]])
            lookup = (index.stats.requests, index.stats.bytes, len(found[partitions[1234]].files))
            small = commit(
                table,
                [
                    Op(
                        partitions[0],
                        f"ffffffff-0000-0000-0000-{files:012d}-0_0-1-0_20260101000000000.parquet",
                        5,
                        ADD,
                    )
                ],
            )
            small_delta = len(table.fs.table_fs.cat_file(index.delta_path(small)))
            rows.append((files, manifest.shard_count, *lookup, small_delta, compact_seconds))
            files += 1

    print(f"{PARTITIONS:,} partitions; one partition looked up after compaction\n")
    print(
        f"{'files':>10} {'shards':>7} {'reads':>6} {'bytes read':>11} {'its files':>10} "
        f"{'1-file delta':>13} {'compaction':>11}"
    )
    for total, shards, reads, nbytes, own, delta, seconds in rows:
        print(
            f"{total:>10,} {shards:>7} {reads:>6} {nbytes:>11,} {own:>10,} {delta:>11,} B {seconds:>9.1f} s"
        )
    first, last = rows[0], rows[-1]
    grow_bytes = last[3] / first[3]
    grow_delta = last[5] / first[5]
    print(
        f"\ntable {last[0] / first[0]:.0f}x, the partition {last[4] / first[4]:.0f}x: bytes read per lookup "
        f"{grow_bytes:.2f}x (at most one shard, about one 64 KiB footer read plus its row group)"
    )
    print(f"a one-file commit's delta: {first[5]:,} B, then {last[5]:,} B ({grow_delta:.2f}x)")
    met = grow_bytes <= LOOKUP_TARGET and grow_delta <= 1.5
    print(
        f"target: lookup bytes <= {LOOKUP_TARGET}x and one-file delta <= 1.5x as the table grows "
        f"-> {'met' if met else 'MISSED'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
