"""``python -m fed_dev demo``: a whole write-and-query run on an in-process S3 endpoint.

Creates an object-store table whose metadata lives in one bucket and whose data
spreads over hashed prefixes of another, writes generated trips in several
commits (bulk insert, upserts, deletes), checks every row against an
in-memory model of what the table must hold, reads with partition pruning and
shows the physical layout. Nothing is faked: the S3 server is moto on
loopback, the same one the tests use.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

import pyarrow as pa

from fed_dev.servers import LoopbackS3
from fedcore import properties as P
from fedcore import table_layout
from fedcore.exceptions import FedError
from fedcore.table import Table, create_table
from fedcore.write.client import Operation, WriteClient

COUNTRIES = ("usa", "bra", "deu", "ind", "jpn")
START = date(2026, 1, 1)


@dataclass
class DemoResult:
    table: Table
    rows: int
    commits: int
    slices_total: int
    slices_read: int
    rows_read: int
    seconds: float


def generate_trips(ids: range, rng: random.Random, days: int, version: int = 0) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "trip_id": pa.array(list(ids), pa.int64()),
            "country": [COUNTRIES[i % len(COUNTRIES)] for i in ids],
            "day": [str(START + timedelta(days=(i // len(COUNTRIES)) % days)) for i in ids],
            "ts": pa.array([version] * n, pa.int64()),
            "rider": [f"rider-{rng.randrange(10_000):04d}" for _ in ids],
            "fare": pa.array([round(rng.uniform(3, 80), 2) for _ in ids], pa.float64()),
        }
    )


def run_demo(
    rows: int = 10_000,
    days: int = 7,
    plot: str | None = None,
    say: Callable[[str], None] = print,
    progress: Callable[[int, int], None] | None = None,
) -> DemoResult:
    started = time.monotonic()
    rng = random.Random(7)
    with LoopbackS3() as server:
        tables, storage = server.create_bucket("lake-tables"), server.create_bucket("lake-storage")
        say(f"S3 endpoint on loopback: {server.endpoint_url}; buckets {tables} (metadata), {storage} (data)")
        table = create_table(
            f"{tables}/trips",
            name="trips",
            record_key_fields=["trip_id"],
            partition_fields=["country", "day"],
            precombine_field="ts",
            properties={
                P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE,
                P.STORAGE_PATH: storage,
                P.MAX_FILE_SIZE: str(256 * 1024),
                P.SMALL_FILE_LIMIT: str(192 * 1024),
                P.METADATA_COMPACT_DELTAS: "3",
            },
            storage_options=server.storage_options(),
        )
        writer = WriteClient(table, progress=progress)
        model: dict[int, float] = {}

        def commit(label: str, operation: Operation, data: pa.Table) -> None:
            instant = writer.write(data, operation).instant
            ids = data.column("trip_id").to_pylist()
            if operation == "delete":
                for trip in ids:
                    model.pop(trip, None)
            else:
                model.update(zip(ids, data.column("fare").to_pylist(), strict=True))
            say(f"  {instant} {operation:<11} {data.num_rows:>7,} records  {label}")

        say(f"Writing {rows:,} trips over {len(COUNTRIES)} countries x {days} days:")
        commit("initial load", "bulk_insert", generate_trips(range(rows), rng, days))
        updated = range(0, rows, 7)
        commit("fare corrections", "upsert", generate_trips(updated, rng, days, version=1))
        commit("late arrivals", "upsert", generate_trips(range(rows, rows + rows // 10), rng, days, 1))
        doomed = list(range(0, rows, 11))
        gone = pa.table(
            {
                "trip_id": pa.array(doomed, pa.int64()),
                "country": [COUNTRIES[i % len(COUNTRIES)] for i in doomed],
                "day": [str(START + timedelta(days=(i // len(COUNTRIES)) % days)) for i in doomed],
            }
        )
        commit("cancelled trips", "delete", gone)
        commit("more corrections", "upsert", generate_trips(range(3, rows, 13), rng, days, version=2))

        say("\nChecking every row against the expected state ...")
        full = table.read(columns=["trip_id", "fare"])
        got = dict(zip(full.column("trip_id").to_pylist(), full.column("fare").to_pylist(), strict=True))
        twice = full.num_rows - len(got)  # a key held twice is one dict entry
        if got != model or twice:
            raise FedError(
                f"demo check failed: table holds {full.num_rows:,} rows ({twice:,} keys twice), "
                f"expected {len(model):,}"
            )
        say(f"  {len(got):,} rows, all as expected, each key once")

        where = [("country", "=", "usa"), ("day", ">=", str(START + timedelta(days=days - 3)))]
        slices_total = len(table.file_slices())
        pruned = table.file_slices(where)
        result = table.read(where, columns=["trip_id", "country", "day", "fare"])
        partitions = len(table.partitions())
        say(
            f"\nPruned read: country = 'usa' AND day >= '{where[1][2]}': {result.num_rows:,} rows "
            f"from {len(pruned)} of {slices_total} file slices "
            f"({len({s.partition_path for s in pruned})} of {partitions} partitions)"
        )
        layout = table_layout(table)
        say("\n" + layout.format())
        if plot:
            layout.plot(plot)
            say(f"Plot written to {plot}")
        return DemoResult(
            table, len(got), 5, slices_total, len(pruned), result.num_rows, time.monotonic() - started
        )
