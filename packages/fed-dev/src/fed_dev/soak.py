"""A soak: writer processes writing one table continuously under aggressive table services,
and a check of everything they claim.

``run_soak`` creates an object-store table (data files under a storage path of their own),
copy-on-write or merge-on-read (compacted inline every few delta commits), with retention as
short as Hudi allows: two to three instants kept active, one commit retained by the cleaner,
the metadata table compacted after every write. It seeds the table, then starts ``writers``
processes together (fresh interpreters, as a scheduler starts them), each writing in a loop
for a fixed number of writes or a fixed time, whichever ends first, one ``WriteClient`` held
throughout (as a pipeline holds one). Each write is one of:

- ``upsert-shared``: a few of the keys every writer shares, in one shared partition (the
  writers contend for its file group);
- ``insert-private``: new keys of the writer's own, in its own partition;
- ``delete-private``: some of the writer's own keys;
- ``upsert-private``: some of the writer's own keys, written again.

Each process records every write as a JSON line (``WriteOutcome``): what it wrote, its tag
(every row carries the tag of the write that last wrote it), and the instant it committed
(from the ``WriteResult``) or the error's class and message. Afterwards the failed writes are
recovered (their heartbeats left to expire, then rolled back, as the next writer would), and
the rules are checked:

- every failure is a ``CommitConflictError``: any other error is a violation, reported with
  its message;
- every conflict names the concurrent change it lost to: a committed write of another writer
  to the partition it writes, a completed compaction of a file group it names, or a compaction
  that held the file-group version the write claimed and then lost a claim of its own (rolled
  back: two claimants that each take one version first can both lose; nothing is lost). A
  write refused for anything else (a compaction merely planned, a write to other partitions, no
  instant at all) is misattributed: a violation, reported with what the instants it names are;
- the table's rows, read whole as a multiset, equal the replay of the committed writes in
  instant order (a key held twice, a failed write's row, a committed write's row missing:
  violations);
- ``fed verify`` passes (``verify_table(...).ok``), with no orphans, unrecorded or missing
  files, and nothing pending or in flight once failed writes are recovered.

The report also counts the table services that ran (compactions, cleans, archived
instants), in the active timeline and the archive, so a test can require that they did.
The suite runs it short (``packages/fed-dev/tests/test_soak.py``, ``tox -e soak``);
``benchmarks/writer_stress.py --soak`` runs it long.

Two writers upserting the same *new* key at once both succeed (each creates its own file
group), as in Hudi without a lock provider: the workload never does that (shared keys are
seeded and never deleted; new keys are a writer's own).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

from fed_dev.writers import (
    CONFLICT,
    HEARTBEAT,
    compare_rows,
    describe_failure,
    finish_writer,
    records,
    recover,
    start_writer,
)
from fedcore import properties as P
from fedcore.io.filesystems import StorageOptions
from fedcore.services.archival import read_archive
from fedcore.services.verify import verify_table
from fedcore.table import Table, create_table, load_table
from fedcore.timeline import CLEAN, COMMIT, COMPACTION, ROLLBACK
from fedcore.timeline.commit_metadata import rolled_back_actions
from fedcore.write.client import WriteClient
from fedcore.write.job import BULK_INSERT, DELETE, INSERT, UPSERT, Operation

SHARED: Final = "shared"
#: Keys 0 .. SHARED_KEYS - 1, in partition ``shared``, seeded and never deleted.
SHARED_KEYS: Final = 20
#: Each writer's own keys at the start (more come with its inserts).
OWN_KEYS: Final = 8
#: Every row's ordering (precombine) value, the same for all. Hudi's merge keeps the record
#: with the greater ordering value, and of equal ones the later write's (in commit order on
#: copy-on-write, in log order on merge-on-read, which compaction keeps). Were the values to
#: differ, a write that committed later with a smaller value would lose to an earlier one, and
#: the table would not be the replay of the committed writes in instant order; equal, merge
#: order is instant order, and any row out of that order is fedcore's doing.
TS: Final = 0
#: Retention as short as Hudi allows: 2 to 3 instants active, 1 commit retained by the
#: cleaner, the metadata table compacted after every write; so archival, cleaning and
#: metadata-table compaction run after most writes and race the other writers.
RETENTION: Final[dict[str, str]] = {
    P.ARCHIVE_MIN_INSTANTS: "2",
    P.ARCHIVE_MAX_INSTANTS: "3",
    P.CLEANER_COMMITS_RETAINED: "1",
    P.METADATA_COMPACT_DELTAS: "1",
}
#: Merge-on-read: compacted by the writer whose write makes the third delta commit since the
#: last compaction.
INLINE_COMPACTION: Final[dict[str, str]] = {P.COMPACT_INLINE: "true", P.COMPACT_INLINE_MAX_DELTA_COMMITS: "3"}
#: What a write does, and how often (weights).
KINDS: Final[dict[str, int]] = {
    "upsert-shared": 4,
    "insert-private": 2,
    "delete-private": 2,
    "upsert-private": 2,
}
COLUMNS: Final = ["id", "p", "ts", "tag"]
#: An instant time a message names, outside file names (a file version's or a log file's name
#: holds the instant it was written at).
_NAMED_INSTANT: Final = re.compile(r"(?<![\w.])\d{17}(?!\w|\.\w)")
#: How a write that finds the file-group version it claims held by another instant is refused.
_CLAIM_CONFLICT: Final = "both change file group version"
#: A file group's id, as a message names it.
_FILE_ID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-\d+")
#: Seconds a writer process gets beyond its share of the soak before it is killed.
_GRACE: Final = 180.0


@dataclass(frozen=True)
class WriteOutcome:
    """One write of one writer process: what it wrote and how it ended (``instant``: committed;
    ``error``: the exception's class, ``message`` its text)."""

    writer: int
    seq: int
    kind: str
    operation: str
    keys: tuple[int, ...]
    partition: str
    tag: str
    instant: str | None = None
    error: str | None = None
    message: str = ""
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def committed(self) -> bool:
        return self.error is None and self.instant is not None

    def describe(self) -> str:
        return f"writer {self.writer} write {self.seq} ({self.kind} of {list(self.keys)}, tag {self.tag})"

    @classmethod
    def from_json(cls, line: str) -> WriteOutcome:
        body = json.loads(line)
        return cls(**{**body, "keys": tuple(body["keys"]), "warnings": tuple(body["warnings"])})


@dataclass
class SoakReport:
    label: str
    outcomes: list[WriteOutcome] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    #: Merge-on-read compactions completed (in the active timeline or archived).
    compactions: int = 0
    #: Cleans completed (in the active timeline or archived).
    cleans: int = 0
    #: Instants archival moved out of the active timeline.
    archived: int = 0
    #: The tags of writes refused as conflicts that name no concurrent change of the data they
    #: write as the cause (``_check_attribution``).
    misattributed: set[str] = field(default_factory=set)
    rows: int = 0
    seconds: float = 0.0

    @property
    def committed(self) -> int:
        return sum(1 for o in self.outcomes if o.committed)

    @property
    def conflicts(self) -> Counter[str]:
        """Conflicts with a concurrent write, by kind of message (instants, file ids, paths and
        numbers left out)."""
        return Counter(
            message_kind(o.message)
            for o in self.outcomes
            if o.error == CONFLICT and o.tag not in self.misattributed
        )

    @property
    def misattributed_conflicts(self) -> Counter[str]:
        """Conflicts whose cause is no concurrent write of the same data (each a violation)."""
        return Counter(message_kind(o.message) for o in self.outcomes if o.tag in self.misattributed)

    @property
    def failures(self) -> Counter[str]:
        """Every other failure (each a violation), by error class and kind of message."""
        return Counter(
            f"{o.error}: {message_kind(o.message)}"
            for o in self.outcomes
            if not o.committed and o.error != CONFLICT
        )

    @property
    def warnings(self) -> Counter[str]:
        """Table services that failed after committed writes, by kind of message."""
        return Counter(message_kind(w) for o in self.outcomes for w in o.warnings)

    def summary(self) -> str:
        def listed(counts: Counter[str]) -> str:
            return "; ".join(f"{n} x {kind}" for kind, n in counts.most_common()) or "none"

        verdict = "OK" if not self.violations else f"{len(self.violations)} VIOLATIONS"
        return (
            f"{self.label}: {len(self.outcomes)} writes, {self.committed} committed, "
            f"{sum(self.conflicts.values())} conflicts ({listed(self.conflicts)}), "
            f"misattributed conflicts: {listed(self.misattributed_conflicts)}, "
            f"other failures: {listed(self.failures)}; service warnings: {listed(self.warnings)}; "
            f"{self.compactions} compactions, {self.cleans} cleans, {self.archived} instants archived; "
            f"table: {self.rows} rows; {self.seconds:.1f} s; {verdict}"
        )

    def details(self, limit: int = 20) -> str:
        """The summary, then the first ``limit`` violations (a traceback's last lines kept)."""
        shown = [
            f"  VIOLATION: {v if len(v) < 3000 else v[:1000] + ' ... ' + v[-2000:]}" for v in self.violations
        ]
        more = len(self.violations) - limit
        return "\n".join([self.summary(), *shown[:limit], *([f"  ... and {more} more"] if more > 0 else [])])


def message_kind(message: str) -> str:
    """A message's first line with what varies between writes (instant times, file ids,
    paths, numbers) left out: conflicts counted by kind."""
    line = message.strip().split("\n", 1)[0]
    line = re.sub(r"\S*/\S*", "<path>", line)
    line = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?:-\d+)?", "<file id>", line)
    line = re.sub(r"(?<!\d)\d{14,17}(?!\d)", "<instant>", line)
    line = re.sub(r"\b\d+\b", "<n>", line)
    return line[:160]


def run_soak(
    table_path: str,
    storage_path: str,
    storage_options: StorageOptions | None = None,
    *,
    table_type: P.TableType = P.TABLE_TYPE_COW,
    writers: int = 4,
    writes: int = 40,
    seconds: float = 60.0,
    seed: int = 0,
    label: str | None = None,
    log_folder: str | Path | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> SoakReport:
    """Create a table at ``table_path`` (data under ``storage_path``), then run ``writers``
    writer processes on it at once, each writing until it has made ``writes`` writes or
    ``seconds`` have passed; the report lists every broken rule (see the module docstring).
    ``log_folder``: where the writers' JSON lines are kept (a temporary folder if None)."""
    started = time.monotonic()
    properties = {
        P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE,
        P.STORAGE_PATH: storage_path,
        **RETENTION,
        **(INLINE_COMPACTION if table_type == P.TABLE_TYPE_MOR else {}),
    }
    table = create_table(
        table_path,
        name="soak",
        record_key_fields=["id"],
        partition_fields=["p"],
        precombine_field="ts",
        table_type=table_type,
        properties=properties,
        storage_options=storage_options,
    )
    report = SoakReport(label or f"{table_type.lower()} on {table_path.split('://', 1)[0]}")
    own = {w: [own_key(w, k) for k in range(OWN_KEYS)] for w in range(writers)}
    seeded = [*range(SHARED_KEYS), *(key for keys in own.values() for key in keys)]
    WriteClient(table).write(records(seeded, [partition_of(k) for k in seeded], "seed", TS), BULK_INSERT)
    model: dict[int, tuple[Any, ...]] = {key: (partition_of(key), TS, "seed") for key in seeded}
    with tempfile.TemporaryDirectory() as scratch:
        logs = Path(log_folder or scratch)
        logs.mkdir(parents=True, exist_ok=True)
        start_at = time.time() + 2.0  # every process has imported fedcore by then: maximal overlap
        jobs: list[dict[str, Any]] = [
            {
                "writer": w,
                "table": table.path,
                "storage_options": storage_options,
                "own": own[w],
                "writes": writes,
                "start_at": start_at,
                "until": start_at + seconds,
                "seed": seed * 1000 + w,
                "log": str(logs / f"writer-{w}.jsonl"),
            }
            for w in range(writers)
        ]
        processes = [start_writer("fed_dev.soak", job) for job in jobs]
        for job, process in zip(jobs, processes, strict=True):
            _, err = finish_writer(process, timeout=seconds + _GRACE)
            if process.returncode != 0:
                report.violations.append(
                    f"writer {job['writer']} exited {process.returncode}: {err.strip()[-2000:]}"
                )
            log = Path(job["log"])
            lines = log.read_text().splitlines() if log.exists() else []
            report.outcomes.extend(WriteOutcome.from_json(line) for line in lines if line.strip())
    say(f"{report.label}: writers done after {time.monotonic() - started:.1f} s; checking")
    report.violations.extend(_check_outcomes(report.outcomes))
    fresh = recover(table.path, storage_options)
    history = _history(fresh)
    report.violations.extend(_check_attribution(report, history))
    report.violations.extend(_check_timeline(fresh, report, history))
    _replay(model, report.outcomes)
    failed_tags = {o.tag for o in report.outcomes if not o.committed}
    report.violations.extend(compare_rows(fresh, COLUMNS, model, failed_tags))
    report.violations.extend(_check_storage(fresh))
    report.rows = len(model)
    report.seconds = time.monotonic() - started
    say(report.summary())
    return report


def own_key(writer: int, k: int) -> int:
    """Writer ``writer``'s ``k``-th own key (never another writer's, never shared)."""
    return 1_000_000 + writer * 100_000 + k


def partition_of(key: int) -> str:
    """The partition a key always lives in: ``shared``, or its writer's own ``w<n>``."""
    return SHARED if key < SHARED_KEYS else f"w{(key - 1_000_000) // 100_000}"


def _check_outcomes(outcomes: list[WriteOutcome]) -> list[str]:
    """Every failure a conflict; every committed instant its own."""
    problems = [
        f"{o.describe()} failed with {o.error}, not a conflict: {o.message}"
        for o in outcomes
        if not o.committed and o.error != CONFLICT
    ]
    instants = Counter(o.instant for o in outcomes if o.committed)
    problems += [
        f"instant {t} reported committed by {n} writes" for t, n in sorted(instants.items()) if n > 1
    ]
    return problems


def _replay(model: dict[int, tuple[Any, ...]], outcomes: list[WriteOutcome]) -> None:
    """The committed writes applied to ``model``, in instant order."""
    for o in sorted((o for o in outcomes if o.committed), key=lambda o: o.instant or ""):
        for key in o.keys:
            if o.operation == DELETE:
                model.pop(key, None)
            else:
                model[key] = (o.partition, TS, o.tag)


@dataclass
class _History:
    """What the table's timeline, active and archived, says happened."""

    #: Every completed instant's action (a compaction completes as a ``commit``).
    actions: dict[str, str]
    #: Instants archival moved out of the active timeline.
    archived: set[str]
    #: Every completed compaction: the file ids of the groups it compacted.
    compactions: dict[str, set[str]]
    #: Compactions a completed rollback undid.
    rolled_back_compactions: set[str]


def _history(table: Table) -> _History:
    timeline = table.timeline()
    actions = {i.time: i.action for i in timeline.completed()}
    commits = {i.time: table.commit_metadata(i) for i in timeline.completed([COMMIT])}
    fs = table.fs.table_fs
    layout = table.handle.layout
    rollbacks = [fs.cat_file(layout.instants.path(table.path, i)) for i in timeline.completed([ROLLBACK])]
    archived = set()
    for row in read_archive(table.handle).to_pylist():
        archived.add(row["instant"])
        instant = layout.instants.parse(row["file"].rsplit("/", 1)[-1])
        if instant is not None and instant.is_completed:
            actions[instant.time] = instant.action
            if instant.action == COMMIT:
                commits[instant.time] = layout.commits.decode(row["content"], row["file"])
            if instant.action == ROLLBACK:
                rollbacks.append(row["content"])
    compactions = {t: {fid for _, fid in m.file_groups()} for t, m in commits.items() if m.compacted}
    undone = {t for data in rollbacks for t, a in rolled_back_actions(data).items() if a == COMPACTION}
    return _History(actions, archived, compactions, undone)


def _check_attribution(report: SoakReport, history: _History) -> list[str]:
    """A write refused as a conflict lost to a concurrent change of the same data: its message
    names (outside file names) the instant of a committed write of another writer to the
    partition it writes, or of a completed compaction of a file group it names (Hudi's writers
    conflict with a compaction of a file group they write, too), or of a compaction that held
    the version the write claimed and was then rolled back, having lost a claim itself.
    Refused for anything else (a compaction merely planned, a write to other partitions, its
    own earlier write, no instant at all): misattributed."""
    writes = {o.instant: o for o in report.outcomes if o.committed}
    problems = []
    for o in report.outcomes:
        if o.error != CONFLICT:
            continue
        named = list(dict.fromkeys(_NAMED_INSTANT.findall(o.message)))
        groups = set(_FILE_ID.findall(o.message))
        rivals = [writes[t] for t in named if t in writes]
        if any(w.writer != o.writer and w.partition == o.partition for w in rivals):
            continue
        if any(history.compactions.get(t, set()) & groups for t in named):
            continue
        if _CLAIM_CONFLICT in o.message and any(t in history.rolled_back_compactions for t in named):
            continue  # the compaction held the version the write claimed, then lost one itself
        report.misattributed.add(o.tag)
        what = ", ".join(f"{t} ({_instant_kind(t, writes, history)})" for t in named) or "no instant"
        problems.append(
            f"{o.describe()} was refused as a conflict, but no concurrent change of its data is the "
            f"cause (it names {what}): {o.message}"
        )
    return problems


def _instant_kind(time_: str, writes: Mapping[str | None, WriteOutcome], history: _History) -> str:
    if time_ in writes:
        write = writes[time_]
        return f"writer {write.writer}'s {write.kind} to {write.partition}"
    if time_ in history.compactions:
        return "a compaction of other file groups"
    if time_ in history.rolled_back_compactions:
        return "a compaction rolled back"
    if time_ in history.actions:
        return f"a completed {history.actions[time_]}"
    return "no completed instant"


def _check_timeline(table: Table, report: SoakReport, history: _History) -> list[str]:
    """Every committed write's instant is a completed one (active or archived), nothing is
    pending after recovery; and the services that ran, counted into ``report``."""
    report.archived = len(history.archived)
    report.cleans = sum(1 for action in history.actions.values() if action == CLEAN)
    report.compactions = len(history.compactions)
    writes = {o.instant for o in report.outcomes if o.instant is not None and o.committed}
    problems = [f"pending instant after recovery: {i}" for i in table.timeline().pending()]
    missing = sorted(t for t in writes if t not in history.actions)
    problems += [f"instant {t} was reported committed and is not on the timeline" for t in missing]
    return problems


def _check_storage(table: Table) -> list[str]:
    """``fed verify``: passes, and storage holds exactly the files the metadata table references."""
    verified = verify_table(table)
    problems = [] if verified.ok else [f"fed verify failed:\n{verified.format()}"]
    problems += [f"orphan file: {f.path}" for f in verified.orphans]
    problems += [f"file of a write in flight after recovery: {f.path}" for f in verified.in_flight]
    if verified.ok:  # else the report's text names them
        problems += [f"referenced file missing: {p}/{n}" for p, n, _ in verified.missing]
        problems += [f"unrecorded file: {f.path}" for f in verified.unrecorded]
    return problems


# --- one writer process --------------------------------------------------------------------


def _next_write(rng: random.Random, writer: int, seq: int, own: list[int], fresh: int) -> WriteOutcome:
    """What writer ``writer`` writes as its write ``seq``: ``own`` its keys in the table,
    ``fresh`` the number of its next new key."""
    kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
    if kind in ("delete-private", "upsert-private") and not own:
        kind = "insert-private"  # nothing of its own left to delete or write again
    operation: Operation = UPSERT
    if kind == "upsert-shared":
        keys, partition = rng.sample(range(SHARED_KEYS), 3), SHARED
    elif kind == "insert-private":
        keys, operation, partition = [own_key(writer, fresh + k) for k in range(3)], INSERT, f"w{writer}"
    elif kind == "delete-private":
        keys, operation, partition = rng.sample(own, min(2, len(own))), DELETE, f"w{writer}"
    else:
        keys, partition = rng.sample(own, min(3, len(own))), f"w{writer}"
    return WriteOutcome(writer, seq, kind, operation, tuple(sorted(keys)), partition, f"w{writer}-{seq}")


def _writer(job: Mapping[str, Any]) -> int:
    """One writer process: writes until its count or time is up, recording each write as a
    JSON line in ``job["log"]``; exit 0 once done, whatever the writes' outcomes."""
    writer: int = job["writer"]
    rng = random.Random(job["seed"])
    own = list(job["own"])  # its keys in the table, as its own committed writes left them
    fresh = OWN_KEYS  # the number of its next new key
    client = WriteClient(load_table(job["table"], options=HEARTBEAT, storage_options=job["storage_options"]))
    time.sleep(max(0.0, job["start_at"] - time.time()))
    with open(job["log"], "a") as log:
        for seq in range(job["writes"]):
            if time.time() >= job["until"]:
                break
            outcome = _next_write(rng, writer, seq, own, fresh)
            keys, operation = list(outcome.keys), cast(Operation, outcome.operation)
            rows = records(keys, [outcome.partition] * len(keys), outcome.tag, TS)
            if operation == INSERT:
                fresh += len(keys)  # never used again, whatever the outcome
            began = time.monotonic()
            try:
                result = client.write(rows.select(["id", "p"]) if operation == DELETE else rows, operation)
            except Exception as exc:  # recorded, and the loop goes on: anything but a conflict is a violation
                failure = describe_failure(exc)
                outcome = dataclasses.replace(outcome, error=failure["error"], message=failure["message"])
            else:
                outcome = dataclasses.replace(outcome, instant=result.instant, warnings=result.warnings)
                if operation == INSERT:
                    own += keys
                elif operation == DELETE:
                    own = [k for k in own if k not in keys]
            outcome = dataclasses.replace(outcome, seconds=round(time.monotonic() - began, 3))
            log.write(json.dumps(dataclasses.asdict(outcome)) + "\n")
            log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_writer(json.loads(sys.argv[1])))
