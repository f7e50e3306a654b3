"""fedcore against the Python-native table formats a user would pick instead: delta-rs and PyIceberg.

The same rows through each, every system in a process of its own (so one's caches, threads
and allocator never help or hurt another), on local files:

- ``id`` int64 (the record key), ``p`` (8 string partitions), ``ts`` int64 (the ordering
  field), ``v`` double, ``s`` string (``write_path.rows_of``);
- a bulk insert of the rows into a new table partitioned by ``p``;
- an upsert that updates 1% of the keys (spread over every partition) and adds 0.1% new
  ones;
- a full scan of two columns, and two selective scans of the same columns: one partition
  (``p = 'p3'``, pruned by every system) and a key range (``id < rows / 100``, skipped by
  column statistics).

Systems: fedcore copy-on-write (meta fields, and virtual keys:
``hoodie.populate.meta.fields=false``) and merge-on-read, in the object-store layout;
delta-rs (``write_deltalake``, ``DeltaTable.merge`` on ``id`` and ``p``); PyIceberg
(``append``, ``upsert`` on ``id``; a SQLite catalog). PyIceberg runs at the smaller sizes
only (``--pyiceberg-max-rows``): its upsert compares every row of the table.

Each answer is checked against the others: the same row count and the same sum of ``v`` for
every scan. Times are wall clock in the worker; peak memory is the worker's peak RSS (the
input rows included, as a user's process holds them).

Run: ``python benchmarks/peers.py [--rows 2000000,10000000] [--plot peers.png]`` (needs
``fedcore[test]``, ``deltalake`` and ``pyiceberg[sql-sqlite]``), or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from tqdm import tqdm
from write_path import rows_of, updates_of  # type: ignore[import-not-found]

STEPS = ("bulk insert", "upsert", "full scan", "partition scan", "key-range scan")
SCANS = STEPS[2:]
COLUMNS = ["id", "v"]
SYSTEMS = ("fedcore cow", "fedcore cow, virtual keys", "fedcore mor", "delta-rs", "pyiceberg")
#: The systems a ratio is taken against, and the one measured.
PEER, OURS = "delta-rs", "fedcore cow"
#: Issue goals: fedcore copy-on-write's time over delta-rs's (virtual keys, meta fields).
GOALS = {"bulk insert": (1.0, 1.3), "upsert": (1.0, 1.3), "full scan": (1.0, 1.0)}


def upsert_batch(n: int) -> pa.Table:
    """1% of the keys updated (a newer ``ts`` and a new ``v``: the scans' sums tell an
    update applied from one lost), 0.1% new keys."""
    updates = updates_of(n, 0.01)
    updates = updates.set_column(3, "v", pc.add(updates.column("v"), 1.0))
    new = rows_of(max(1, n // 1000), start=n)
    new = new.set_column(2, "ts", pa.array([2] * new.num_rows, pa.int64()))
    return pa.concat_tables([updates, new])


def scan_checks(table: pa.Table) -> tuple[int, float]:
    return table.num_rows, float(pc.sum(table.column("v")).as_py() or 0.0)


# --- the workers: each system's steps, in a process of its own ---------------------------------


def fedcore_steps(root: Path, kind: str) -> dict[str, Callable[[Any], Any]]:
    from fedcore import properties as P
    from fedcore.table import create_table, load_table

    path = f"file://{root}/tables/t"
    properties = {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: f"file://{root}/storage"}
    if kind == "fedcore cow, virtual keys":
        properties[P.POPULATE_META_FIELDS] = "false"

    def bulk_insert(rows: pa.Table) -> None:  # the table made in the step, as the others' are
        table = create_table(
            path,
            name="t",
            record_key_fields=["id"],
            partition_fields=["p"],
            precombine_field="ts",
            table_type="MERGE_ON_READ" if kind == "fedcore mor" else "COPY_ON_WRITE",
            properties=properties,
        )
        table.bulk_insert(rows)

    # Every step opens the table anew, as the others do: no handle's cache helps a later one.
    return {
        "bulk insert": bulk_insert,
        "upsert": lambda batch: load_table(path).upsert(batch),
        "full scan": lambda _: load_table(path).scan(columns=COLUMNS).to_arrow(),
        "partition scan": lambda _: load_table(path).scan([("p", "=", "p3")], COLUMNS).to_arrow(),
        "key-range scan": lambda limit: load_table(path).scan([("id", "<", limit)], COLUMNS).to_arrow(),
    }


def delta_steps(root: Path) -> dict[str, Callable[[Any], Any]]:
    from deltalake import DeltaTable, write_deltalake

    path = str(root / "delta")

    def upsert(batch: pa.Table) -> None:
        merge = DeltaTable(path).merge(
            source=batch, predicate="t.id = s.id AND t.p = s.p", source_alias="s", target_alias="t"
        )
        merge.when_matched_update_all().when_not_matched_insert_all().execute()

    return {
        "bulk insert": lambda rows: write_deltalake(path, rows, partition_by=["p"]),
        "upsert": upsert,
        "full scan": lambda _: DeltaTable(path).to_pyarrow_table(columns=COLUMNS),
        "partition scan": lambda _: DeltaTable(path).to_pyarrow_table(
            columns=COLUMNS, filters=[("p", "=", "p3")]
        ),
        "key-range scan": lambda limit: DeltaTable(path).to_pyarrow_table(
            columns=COLUMNS, filters=[("id", "<", limit)]
        ),
    }


def iceberg_steps(root: Path) -> dict[str, Callable[[Any], Any]]:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo, LessThan

    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/iceberg")
    catalog.create_namespace("bench")

    def bulk_insert(rows: pa.Table) -> None:
        table = catalog.create_table("bench.t", schema=rows.schema)
        with table.update_spec() as spec:
            spec.add_identity("p")
        table.append(rows)

    def scan(row_filter: Any = None) -> pa.Table:
        table = catalog.load_table("bench.t")
        if row_filter is None:
            return table.scan(selected_fields=tuple(COLUMNS)).to_arrow()
        return table.scan(row_filter=row_filter, selected_fields=tuple(COLUMNS)).to_arrow()

    return {
        "bulk insert": bulk_insert,
        "upsert": lambda batch: catalog.load_table("bench.t").upsert(batch, join_cols=["id"]),
        "full scan": lambda _: scan(),
        "partition scan": lambda _: scan(EqualTo("p", "p3")),
        "key-range scan": lambda limit: scan(LessThan("id", limit)),
    }


def work(system: str, n: int, root: Path) -> dict[str, Any]:
    """Every step of ``system`` on ``n`` rows: its time, the scans' checks, peak RSS."""
    rows, batch = rows_of(n), upsert_batch(n)
    if system.startswith("fedcore"):
        steps = fedcore_steps(root, system)
    elif system == "delta-rs":
        steps = delta_steps(root)
    else:
        steps = iceberg_steps(root)
    arguments = {"bulk insert": rows, "upsert": batch, "key-range scan": n // 100}
    times: dict[str, float] = {}
    checks: dict[str, tuple[int, float]] = {}
    for step in STEPS:
        start = time.perf_counter()
        result = steps[step](arguments.get(step))
        times[step] = time.perf_counter() - start
        if step in SCANS:
            checks[step] = scan_checks(result)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"times": times, "checks": checks, "peak_rss": peak}


# --- the driver ---------------------------------------------------------------------------------


def run(system: str, n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as root:
        done = subprocess.run(
            [sys.executable, __file__, "--worker", system, "--rows", str(n), "--root", root],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"{system} at {n:,} rows failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(sizes: list[int], iceberg_max: int) -> dict[int, dict[str, dict[str, Any]]]:
    found: dict[int, dict[str, dict[str, Any]]] = {}
    runs = [(n, s) for n in sizes for s in SYSTEMS if s != "pyiceberg" or n <= iceberg_max]
    with tqdm(total=len(runs), desc="systems", unit="run") as progress:
        for n, system in runs:
            progress.set_postfix_str(f"{system}, {n:,} rows")
            found.setdefault(n, {})[system] = run(system, n)
            progress.update()
    for n, systems in found.items():
        for step in SCANS:
            answers = {s: tuple(r["checks"][step]) for s, r in systems.items()}
            counts = {count for count, _ in answers.values()}
            sums = [total for _, total in answers.values()]
            # The same rows summed in another order may differ in the last bits only.
            if len(counts) != 1 or max(sums) - min(sums) > 1e-9 * max(1.0, abs(sums[0])):
                raise SystemExit(f"{n:,} rows, {step}: the systems disagree: {answers}")
    return found


def report(found: dict[int, dict[str, dict[str, Any]]]) -> None:
    for n, systems in found.items():
        names = [s for s in SYSTEMS if s in systems]
        print(f"\n{n:,} rows (seconds; peak RSS in MB)\n")
        print("| step | " + " | ".join(names) + f" | {OURS} / {PEER} |")
        print("| --- | " + " | ".join("---:" for _ in names) + " | ---: |")
        for step in STEPS:
            cells = [f"{systems[s]['times'][step]:.2f}" for s in names]
            ratio = systems[OURS]["times"][step] / systems[PEER]["times"][step]
            print(f"| {step} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
        peaks = [f"{systems[s]['peak_rss'] / 2**20:.0f}" for s in names]
        memory = systems[OURS]["peak_rss"] / systems[PEER]["peak_rss"]
        print("| peak RSS | " + " | ".join(peaks) + f" | {memory:.2f}x |")
        for step, (virtual, meta) in GOALS.items():
            got_virtual = systems["fedcore cow, virtual keys"]["times"][step] / systems[PEER]["times"][step]
            got_meta = systems[OURS]["times"][step] / systems[PEER]["times"][step]
            print(
                f"goal {step}: virtual keys {got_virtual:.2f}x (≤ {virtual}x), "
                f"meta fields {got_meta:.2f}x (≤ {meta}x)"
            )


def plot(found: dict[int, dict[str, dict[str, Any]]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(found)
    figure, axes = plt.subplots(1, len(sizes), figsize=(7 * len(sizes), 4.5), squeeze=False)
    for axis, n in zip(axes[0], sizes, strict=True):
        systems = [s for s in SYSTEMS if s in found[n]]
        width = 0.8 / len(systems)
        for index, system in enumerate(systems):
            times = [found[n][system]["times"][step] for step in STEPS]
            axis.bar([i + index * width for i in range(len(STEPS))], times, width, label=system)
        axis.set_xticks([i + 0.4 - width / 2 for i in range(len(STEPS))], STEPS, rotation=15)
        axis.set_yscale("log")
        axis.set_ylabel("seconds (log)")
        axis.set_title(f"{n:,} rows, local files")
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot written to {path}")


def sizes_of(given: str) -> list[int]:
    sizes = [int(part) for part in given.split(",") if part.strip()]
    if not sizes or any(n < 1000 for n in sizes):
        raise argparse.ArgumentTypeError("sizes are comma-separated row counts of at least 1000")
    return sizes


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=sizes_of, default=[2_000_000, 10_000_000], help="comma-separated sizes"
    )
    parser.add_argument("--pyiceberg-max-rows", type=int, default=2_000_000)
    parser.add_argument("--plot", metavar="PNG")
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(work(args.worker, args.rows[0], Path(args.root))), flush=True)
        # Measured and said: skip the interpreter's teardown, where delta-rs's runtime threads
        # sometimes abort the process ("terminate called without an active exception").
        os._exit(0)
    results = main(args.rows, args.pyiceberg_max_rows)
    report(results)
    if args.plot:
        plot(results, args.plot)
