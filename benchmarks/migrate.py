"""Migrating a Hive-layout table of many files onto the object-store layout, on loopback S3.

The source is a fedcore table in the default Hive layout, written with one row per file
so that it holds ``--files`` data files over 100 partitions (a table with many small
files is where a migration's cost is per file, not per byte). It is migrated twice, into
two new object-store-layout tables, in this one run:

- with the same endpoint and options on both ends, as a user moving a table within one
  store: each file is copied server-side (S3 CopyObject), no bytes through the process;
- with the source opened through a filesystem of its own, as between two stores: each
  file is downloaded and uploaded (streamed through the process).

Both read the latest file slices from the source's metadata table (no listing), write a
marker per file and commit one instant. Reported: files per second for each, their
ratio, and requests by method counted at the server. moto answers every request in
Python, so absolute rates are moto's; the ratio is the point.

Run: ``python benchmarks/migrate.py [--files 10000] [--plot PNG]`` (needs ``fedcore[test]``),
or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from fed_dev.servers import LoopbackS3
from fedcore import properties as P
from fedcore.services.migrate import MigrationReport, migrate
from fedcore.table import create_table, load_table

PARTITIONS = 100


def build_source(server: LoopbackS3, bucket: str, files: int) -> str:
    options = server.storage_options()
    path = f"{bucket}/hive_trips"
    table = create_table(
        path,
        name="trips",
        record_key_fields=["id"],
        partition_fields=["p"],
        properties={P.MAX_FILE_SIZE: "1", P.ARCHIVE_AUTOMATIC: "false", P.CLEAN_AUTOMATIC: "false"},
        storage_options=options,
    )
    rows = pa.table(
        {
            "id": pa.array(range(files), pa.int64()),
            "p": [f"p{i % PARTITIONS:03d}" for i in range(files)],
            "v": [float(i) for i in range(files)],
        }
    )
    start = time.monotonic()
    with tqdm(total=files, unit=" files", desc="writing the source") as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        from fedcore.write.client import WriteClient

        result = WriteClient(table, progress=progress).write(rows, "bulk_insert")
    print(f"source: {result.files_written:,} files written in {time.monotonic() - start:.1f} s")
    return path


def run(server: LoopbackS3, source: str, target: str, storage: str, source_options: Any) -> MigrationReport:
    options = server.storage_options()
    server.requests.reset()
    with tqdm(total=0, unit=" files", desc=f"migrating to {target.rsplit('/', 1)[-1]}") as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        report = migrate(
            source,
            target,
            storage={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: storage},
            source_options=source_options,
            target_options=options,
            progress=progress,
        )
    methods = dict(sorted(server.requests.by_method.items()))
    print(report.format())
    print(f"requests: {methods}")
    expected = load_table(source, storage_options=options).read(columns=["id", "v"]).sort_by("id")
    got = load_table(target, storage_options=options).read(columns=["id", "v"]).sort_by("id")
    if not got.equals(expected):
        raise SystemExit(f"{target}: the migrated rows differ from the source's")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--plot", help="draw files/s of both migrations into this PNG")
    args = parser.parse_args()
    with LoopbackS3() as server:
        tables, storage = server.create_bucket("tables"), server.create_bucket("storage")
        source = build_source(server, tables, args.files)
        copied = run(server, source, f"{tables}/trips", storage, server.storage_options())
        separate = server.storage_options()
        separate["s3"]["skip_instance_cache"] = True  # its own filesystem: no server-side copy
        streamed = run(server, source, f"{tables}/trips_streamed", storage, separate)
    ratio = copied.files_per_second / streamed.files_per_second
    print(
        f"\n{args.files:,} files: server-side copies {copied.files_per_second:,.0f} files/s, "
        f"streamed {streamed.files_per_second:,.0f} files/s ({ratio:.2f}x)"
    )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        labels = ["server-side copy\n(one endpoint)", "streamed\n(two endpoints)"]
        values = [copied.files_per_second, streamed.files_per_second]
        ax.bar(labels, values, color=["tab:blue", "tab:gray"])
        ax.set_ylabel("files / s")
        ax.set_title(f"fed migrate: {args.files:,} files, Hive layout -> object store (moto)")
        for x, value in enumerate(values):
            ax.text(x, value, f"{value:,.0f}", ha="center", va="bottom")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()
