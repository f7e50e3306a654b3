"""Concurrent writer processes on one table, and a check of everything they claim.

The rule a scheduler depends on: a writer that exits 0 committed, and its rows are
in the table; a writer that exits non-zero did not, and none of its rows are; the
only failure concurrency may cause is ``CommitConflictError``; and once failed
writes are recovered, storage holds exactly the files the table's metadata
references. ``run_stress`` starts rounds of writer processes (each a fresh
interpreter, as a scheduler would start them) that upsert into one shared hot
partition (so they conflict), upsert, insert and delete in partitions of their
own, and insert new keys into the hot partition (competing for its small file
group); then it compares the table with a model built from the successful
writes, in commit order, and lists storage. The suite runs it short on local
files and S3; ``benchmarks/writer_stress.py`` runs it long.

Two writers upserting the same *new* key at once both succeed (each creates its
own file group), as in Hudi without a lock provider: the workload never does that.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from fed_dev.writers import (
    CONFLICT,
    HEARTBEAT,
    compare_rows,
    describe_failure,
    finish_writer,
    records,
    recover,
    release_writers,
    start_writer,
    wait_for_release,
)
from fedcore import properties as P
from fedcore.exceptions import FedError
from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.table import Table, create_table, load_table
from fedcore.write.client import WriteClient
from fedcore.write.job import DELETE, INSERT, UPSERT

HOT: Final = "hot"
HOT_KEYS: Final = 40
OWN_KEYS: Final = 10
_KINDS: Final = ("upsert-hot", "upsert-own", "insert-hot", "delete-own")


@dataclass(frozen=True)
class Outcome:
    """One writer process: what it was asked to do and how it ended."""

    round: int
    writer: int
    kind: str
    exit_code: int
    instant: str | None
    error: str | None
    message: str
    ids: tuple[int, ...]
    partition: str
    tag: str


@dataclass
class StressReport:
    outcomes: list[Outcome] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    rows: int = 0
    files: int = 0
    seconds: float = 0.0

    @property
    def committed(self) -> int:
        return sum(1 for o in self.outcomes if o.exit_code == 0)

    @property
    def errors(self) -> Counter[str]:
        return Counter(o.error or f"exit {o.exit_code}" for o in self.outcomes if o.exit_code != 0)

    def summary(self) -> str:
        errors = ", ".join(f"{n} {name}" for name, n in sorted(self.errors.items())) or "none"
        verdict = "OK" if not self.violations else f"{len(self.violations)} VIOLATIONS"
        return (
            f"{len(self.outcomes)} writer processes: {self.committed} committed, failures: {errors}; "
            f"table: {self.rows} rows, {self.files} files on storage; {self.seconds:.1f} s; {verdict}"
        )


def run_stress(
    table_path: str,
    storage_path: str,
    storage_options: StorageOptions | None = None,
    *,
    writers: int = 4,
    rounds: int = 3,
    say: Callable[[str], None] = lambda line: None,
) -> StressReport:
    """Create an object-store table at ``table_path`` and run ``rounds`` rounds of
    ``writers`` concurrent writer processes on it; the report lists every broken rule."""
    started = time.monotonic()
    table = create_table(
        table_path,
        name="stress",
        record_key_fields=["id"],
        partition_fields=["p"],
        precombine_field="ts",
        properties={
            P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE,
            P.STORAGE_PATH: storage_path,
            P.METADATA_COMPACT_DELTAS: "3",  # services (and their races) after most commits
            P.ARCHIVE_MIN_INSTANTS: "6",
            P.ARCHIVE_MAX_INSTANTS: "10",
            P.CLEANER_COMMITS_RETAINED: "3",
        },
        storage_options=storage_options,
    )
    model: dict[int, tuple[str, str]] = {}
    seed = [(i, HOT) for i in range(HOT_KEYS)]
    seed += [(_own_key(w, k), _own(w)) for w in range(writers) for k in range(OWN_KEYS)]
    WriteClient(table).bulk_insert(records([i for i, _ in seed], [p for _, p in seed], "seed", 0))
    model.update({i: (p, "seed") for i, p in seed})
    report = StressReport()
    for number in range(1, rounds + 1):
        specs = [_spec(number, w, model) for w in range(writers)]
        outcomes = _run_round(table, storage_options, specs)
        report.outcomes.extend(outcomes)
        _apply(model, outcomes)
        report.violations.extend(_check_round(table, model, outcomes))
        counts = Counter("ok" if o.exit_code == 0 else (o.error or f"exit {o.exit_code}") for o in outcomes)
        say(f"round {number}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    report.violations.extend(_check_storage(table, storage_path, storage_options))
    report.rows = len(model)
    report.files = len(_storage_files(storage_path, storage_options))
    report.seconds = time.monotonic() - started
    return report


def _own(writer: int) -> str:
    return f"w{writer}"


def _own_key(writer: int, k: int) -> int:
    return 1_000_000 + writer * 100_000 + k


def _spec(number: int, writer: int, model: Mapping[int, tuple[str, str]]) -> dict[str, Any]:
    """What writer ``writer`` does in round ``number``: the kinds rotate, so every round
    mixes them. Keys are chosen so that only file groups, never new keys, are contended."""
    kind = _KINDS[(number + writer) % len(_KINDS)]
    own_keys = sorted(i for i, (p, _) in model.items() if p == _own(writer))
    if kind == "upsert-hot":
        ids, operation = [(number * 7 + writer * 3 + k) % HOT_KEYS for k in range(5)], UPSERT
    elif kind == "upsert-own":
        ids, operation = own_keys[:3] + [_own_key(writer, 1000 + number * 10 + k) for k in range(3)], UPSERT
    elif kind == "insert-hot":
        ids, operation = [10_000 + number * 100 + writer * 10 + k for k in range(4)], INSERT
    else:
        ids, operation = own_keys[:2], DELETE
    if not ids:  # an own partition deleted empty: upsert into it instead
        ids, operation, kind = [_own_key(writer, 2000 + number)], UPSERT, "upsert-own"
    return {"round": number, "writer": writer, "kind": kind, "operation": operation, "ids": ids}


def _spec_partition(spec: Mapping[str, Any]) -> str:
    return HOT if spec["kind"].endswith("-hot") else _own(spec["writer"])


def _spec_tag(spec: Mapping[str, Any]) -> str:
    return f"r{spec['round']}w{spec['writer']}"


def _run_round(
    table: Table, storage_options: StorageOptions | None, specs: list[dict[str, Any]]
) -> list[Outcome]:
    where = {"table": table.path, "storage_options": storage_options}
    processes = [start_writer("fed_dev.stress", {**spec, **where}, gated=True) for spec in specs]
    # Each writes once all have imported fedcore and loaded the table: maximal overlap.
    printed = release_writers(processes)
    outcomes = []
    for spec, process, before in zip(specs, processes, printed, strict=True):
        out, err = finish_writer(process, timeout=300)
        out = before + out
        body: dict[str, Any] = {}
        for line in out.splitlines():
            if line.startswith("{"):
                body = json.loads(line)
        outcomes.append(
            Outcome(
                round=spec["round"],
                writer=spec["writer"],
                kind=spec["kind"],
                exit_code=process.returncode,
                instant=body.get("instant"),
                error=body.get("error"),
                message=body.get("message") or err.strip()[-2000:],
                ids=tuple(spec["ids"]),
                partition=_spec_partition(spec),
                tag=_spec_tag(spec),
            )
        )
    return outcomes


def _apply(model: dict[int, tuple[str, str]], outcomes: list[Outcome]) -> None:
    """The successful writes of a round, in commit order (concurrent ones touched
    different keys, or all but one would have failed, so their order among
    themselves cannot change the result)."""
    for outcome in sorted((o for o in outcomes if o.exit_code == 0), key=lambda o: o.instant or ""):
        for key in outcome.ids:
            if outcome.kind == "delete-own":
                model.pop(key, None)
            else:
                model[key] = (outcome.partition, outcome.tag)


def _check_round(table: Table, model: Mapping[int, tuple[str, str]], outcomes: list[Outcome]) -> list[str]:
    problems = []
    for o in outcomes:
        if o.exit_code == 0 and not o.instant:
            problems.append(f"round {o.round} writer {o.writer} exited 0 without an instant")
        if o.exit_code != 0 and o.error != CONFLICT:
            problems.append(
                f"round {o.round} writer {o.writer} ({o.kind}) failed with "
                f"{o.error or f'exit {o.exit_code}'}: {o.message}"
            )
    failed_tags = {o.tag for o in outcomes if o.exit_code != 0}
    return problems + compare_rows(table, ["id", "p", "tag"], model, failed_tags)


def _storage_files(storage_path: str, storage_options: StorageOptions | None) -> set[str]:
    fs = filesystem_for(storage_path, storage_options)
    fs.invalidate_cache()
    try:
        found = fs.find(storage_path, detail=False)
    except FileNotFoundError:
        return set()
    return {str(p).split("://", 1)[-1] for p in found if str(p).endswith(".parquet")}


def _check_storage(table: Table, storage_path: str, storage_options: StorageOptions | None) -> list[str]:
    """After recovery, storage holds exactly the files the metadata table references."""
    fresh = recover(table.path, storage_options)
    referenced = {
        fresh.fs.to_physical(f"{partition}/{name}").split("://", 1)[-1]
        for partition, files in fresh.handle.file_index.files().items()
        for name in files.files
    }
    on_storage = _storage_files(storage_path, storage_options)
    problems = []
    if fresh.timeline().pending():
        problems.append(f"pending instants after recovery: {fresh.timeline().pending()}")
    for path in sorted(on_storage - referenced):
        problems.append(f"orphan file on storage: {path}")
    for path in sorted(referenced - on_storage):
        problems.append(f"referenced file missing from storage: {path}")
    return problems


def _worker(job: dict[str, Any]) -> int:
    """One writer process: prints a JSON line; exit 0 committed, 2 a FedError (named)."""
    try:
        table = load_table(job["table"], options=HEARTBEAT, storage_options=job["storage_options"])
        ids = job["ids"]
        rows = records(ids, [_spec_partition(job)] * len(ids), _spec_tag(job), job["round"])
        if job["operation"] == DELETE:
            rows = rows.select(["id", "p"])
        wait_for_release()
        result = WriteClient(table).write(rows, job["operation"])
    except FedError as exc:  # anything but a conflict is a violation: where it came from, too
        print(json.dumps(describe_failure(exc)), flush=True)
        return 2
    print(json.dumps({"instant": result.instant, "warnings": list(result.warnings)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_worker(json.loads(sys.argv[1])))
