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

Not a speed claim: it reports commits, conflicts and violations, and exits 1 on
any violation.

Run: ``python benchmarks/writer_stress.py [--backend local|s3|both] [--writers 4] [--rounds 30]``
(needs ``fedcore[test]``), or ``tox -e bench`` (a shorter run).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from fed_dev.servers import LoopbackS3
from fed_dev.stress import StressReport, run_stress


def run(backend: str, writers: int, rounds: int) -> StressReport:
    print(f"\n{backend}: {writers} writer processes x {rounds} rounds")
    if backend == "local":
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            return run_stress(
                f"file://{root}/tables/stress",
                f"file://{root}/storage",
                None,
                writers=writers,
                rounds=rounds,
                say=print,
            )
    with LoopbackS3() as server:
        tables, storage = server.create_bucket("tables"), server.create_bucket("storage")
        return run_stress(
            f"{tables}/stress", storage, server.storage_options(), writers=writers, rounds=rounds, say=print
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--backend", choices=("local", "s3", "both"), default="both")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    backends = ("local", "s3") if args.backend == "both" else (args.backend,)
    failed = False
    for backend in backends:
        report = run(backend, args.writers, args.rounds)
        print(f"{backend}: {report.summary()}")
        for violation in report.violations:
            print(f"  VIOLATION: {violation}")
        failed |= bool(report.violations)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
