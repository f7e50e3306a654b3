"""Concurrent writer processes, many rounds: a committed write never exits non-zero.

The long run of the stress check the test suite runs short (``fed_dev.stress``):
rounds of N writer processes (fresh interpreters, as a scheduler starts them) on
one object-store table, upserting into a shared hot partition (they conflict),
upserting, inserting and deleting in partitions of their own, and inserting new
keys into the hot partition; with aggressive table services (metadata-table
compaction every 3 commits, archival, cleaning), so writers' services race each
other. After every round the table must equal a model of the successful writes;
every failure must be a ``CommitConflictError``; at the end, after recovery,
storage must hold exactly the files the metadata table references.

With ``--soak``, the long run of the soak the ``soak`` tox env runs short (``fed_dev.soak``):
N writer processes writing continuously for ``--seconds`` (no rounds), under the shortest
retention, on copy-on-write and merge-on-read tables (compacted inline); every failure must be
a conflict with a concurrent write, the table the replay of the committed writes in instant
order, and ``fed verify`` must pass.

Not a speed claim: it reports commits, conflicts and violations, and exits 1 on
any violation.

Run: ``python benchmarks/writer_stress.py [--backend local|s3|both] [--writers 4] [--rounds 30]``
or ``python benchmarks/writer_stress.py --soak [--table-type cow|mor|both] [--seconds 300]``
(needs ``fedcore[test]``), or ``tox -e bench`` (a shorter run of the rounds).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Iterator

from fed_dev.servers import LoopbackS3
from fed_dev.soak import SoakReport, run_soak
from fed_dev.stress import StressReport, run_stress
from fedcore import properties as P
from fedcore.io.filesystems import StorageOptions

TABLE_TYPES: dict[str, P.TableType] = {"cow": P.TABLE_TYPE_COW, "mor": P.TABLE_TYPE_MOR}


@contextlib.contextmanager
def place(backend: str) -> Iterator[tuple[str, str, StorageOptions | None]]:
    """Where a run's table goes (a folder for its tables, its storage path, the storage
    options): local files in a temporary folder, or two buckets of an S3 server on loopback."""
    if backend == "local":
        with tempfile.TemporaryDirectory() as folder:
            yield f"file://{folder}/tables", f"file://{folder}/storage", None
        return
    with LoopbackS3() as server:
        yield server.create_bucket("tables"), server.create_bucket("storage"), server.storage_options()


def run(backend: str, writers: int, rounds: int) -> StressReport:
    print(f"\n{backend}: {writers} writer processes x {rounds} rounds")
    with place(backend) as (tables, storage, options):
        return run_stress(f"{tables}/stress", storage, options, writers=writers, rounds=rounds, say=print)


def soak(backend: str, table_type: str, writers: int, seconds: float) -> SoakReport:
    print(f"\n{backend}, {table_type}: {writers} writer processes for {seconds:.0f} s")
    with place(backend) as (tables, storage, options):
        return run_soak(
            f"{tables}/soak",
            storage,
            options,
            table_type=TABLE_TYPES[table_type],
            writers=writers,
            writes=1_000_000,  # bounded by time alone
            seconds=seconds,
            label=f"{table_type} on {backend}",
            say=print,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--backend", choices=("local", "s3", "both"), default="both")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--soak", action="store_true", help="writers write continuously (fed_dev.soak)")
    parser.add_argument("--table-type", choices=("cow", "mor", "both"), default="both", help="with --soak")
    parser.add_argument("--seconds", type=float, default=300.0, help="with --soak: how long writers write")
    args = parser.parse_args()
    backends = ("local", "s3") if args.backend == "both" else (args.backend,)
    table_types = tuple(TABLE_TYPES) if args.table_type == "both" else (args.table_type,)
    failed = False
    for backend in backends:
        if args.soak:
            for table_type in table_types:
                soaked = soak(backend, table_type, args.writers, args.seconds)
                print(soaked.details(limit=len(soaked.violations)))
                failed |= bool(soaked.violations)
            continue
        report = run(backend, args.writers, args.rounds)
        print(f"{backend}: {report.summary()}")
        for violation in report.violations:
            print(f"  VIOLATION: {violation}")
        failed |= bool(report.violations)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
