"""How much a logical -> physical path conversion costs, next to one S3 request.

Every file the federated filesystem touches is converted on the fly (nothing
physical is stored), so conversion must cost nothing next to the request it
precedes. Target: under 2 us per path in CPython. The request is a HEAD on a
moto S3 server on loopback, the cheapest real request there is; a cloud request
costs 10-100x more, so the printed ratio is a lower bound.

Run: ``python benchmarks/path_conversion.py`` (needs ``fedcore[test]``), or ``tox -e bench``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid

from fed_dev.servers import LoopbackS3
from fedcore import properties as P
from fedcore.files.filenames import base_file_name, log_file_name
from fedcore.storage import load_storage_strategy
from fedcore.storage.federated import FederatedFileSystem

TARGET_NS = 2_000
TABLE = "s3://lake-tables/trips"

LAYOUTS = {
    "hive": {},
    "object_store (xxh32)": {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: "s3://lake-storage"},
    "object_store (xxh64, partition+file id)": {
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: "s3://lake-storage",
        P.STORAGE_HASH_FUNCTION: "xxh64",
        P.STORAGE_HASH_INPUT: "partition_and_file_id",
    },
    "object_store (256 prefixes)": {
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: "s3://lake-storage",
        P.STORAGE_PREFIX_COUNT: "256",
    },
    "partition_map": {
        P.STORAGE_STRATEGY_CLASS: "partition_map",
        P.STORAGE_PARTITION_LOCATIONS: '{"country=us": "s3://lake-us", "country=de": "s3://lake-de"}',
        P.STORAGE_PATH: "s3://lake-rest",
    },
}


def logical_paths(count: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    countries = ["us", "de", "fr", "br", "in"]
    paths = []
    for i in range(count):
        file_id = f"{uuid.UUID(int=rng.getrandbits(128), version=4)}-0"
        partition = f"country={countries[i % 5]}/day=2026-01-{i % 28 + 1:02d}"
        name = (
            log_file_name(file_id, "20260101000000000", 1, "0-1-1")
            if i % 4 == 0
            else base_file_name(file_id, "3-14-15", "20260101000000000")
        )
        paths.append(f"{partition}/{name}")
    return paths


def ns_per_conversion(fs: FederatedFileSystem, paths: list[str], repeats: int) -> float:
    convert = fs.to_physical
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for path in paths:
            convert(path)
        best = min(best, (time.perf_counter_ns() - start) / len(paths))
    return best


def ns_per_head_request(requests: int) -> float:
    with LoopbackS3() as server:
        client = server.client()
        client.create_bucket(Bucket="lake-storage")
        client.put_object(Bucket="lake-storage", Key="probe", Body=b"x")
        for _ in range(20):  # warm the connection pool
            client.head_object(Bucket="lake-storage", Key="probe")
        timings = []
        for _ in range(requests):
            start = time.perf_counter_ns()
            client.head_object(Bucket="lake-storage", Key="probe")
            timings.append(time.perf_counter_ns() - start)
    return statistics.median(timings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paths", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=25, help="best of this many: the VM is noisy")
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()

    paths = logical_paths(args.paths)
    print(
        f"Python {sys.version.split()[0]}; {args.paths:,} paths (3/4 base files, 1/4 log files), "
        f"best of {args.repeats} runs"
    )
    print("measuring one S3 HEAD request on a loopback moto server ...", flush=True)
    head_ns = ns_per_head_request(args.requests)
    print(f"\n{'layout':42} {'ns/path':>9} {'HEAD / conversion':>18}")
    worst = 0.0
    for name, props in LAYOUTS.items():
        strategy = load_storage_strategy(TABLE, {P.TABLE_NAME: "trips", **props})
        fs = FederatedFileSystem(TABLE, strategy)
        cost = ns_per_conversion(fs, paths, args.repeats)
        worst = max(worst, cost)
        print(f"{name:42} {cost:9,.0f} {head_ns / cost:17,.0f}x")
    print(f"\none S3 HEAD on loopback (median of {args.requests}): {head_ns:,.0f} ns")
    verdict = "met" if worst < TARGET_NS else "MISSED"
    print(f"target: under {TARGET_NS:,} ns per path in CPython -> {verdict} (slowest layout {worst:,.0f} ns)")
    return 0 if worst < TARGET_NS else 1


if __name__ == "__main__":
    sys.exit(main())
