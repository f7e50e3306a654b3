"""Concurrent writers get the truth: Spark upserts (``fed_spark.write``) and a fedcore
``WriteClient`` in another process race on one copy-on-write table (the object-store
layout, on local disk), each cleaning after its commits with one commit retained, so a
file one write planned by is often replaced and deleted by the other's commit and clean.

Every attempt either commits (and its rows are read back, as of its instant) or is refused
as a conflict: ``CommitConflictError`` naming the other writer's instant, one line from a
Spark task (no worker traceback), never a missing data file and never advice to roll back.
The table read back (by fedcore and by Spark) is, row for row, its committed writes applied
in instant order.

This file is also the other writer: ``python test_concurrent_writers.py TABLE LOG STOP``
upserts until ``STOP`` exists, one JSON line in ``LOG`` per attempt.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

import fed_spark
from fed_dev.testing import keyed_rows
from fedcore import WriteClient, create_table, load_table, verify_table
from fedcore import properties as P
from fedcore.exceptions import CommitConflictError
from fedcore.services.archival import read_archive

COUNTRIES = ("us", "nl", "de", "fr", "it", "es")
#: Keys every writer updates: ``100 * c + i`` in country ``c``.
SHARED = 6
#: Every third Spark write goes to a country of its own (``rows_of``).
QUIET = 3
#: Each write inserts one key of its own: ``base + seq`` (two writers never insert one key,
#: which only a lock could keep from being inserted twice, in Hudi as in fed).
NEW_KEY_BASE = {"spark": 10_000, "engine": 20_000}
#: Cleaning after every commit, one commit retained: a version another write replaced is
#: deleted by that write's clean.
RETAIN = {str(P.CLEANER_COMMITS_RETAINED): "1"}
SCHEMA = pa.schema(
    [
        pa.field("trip_id", pa.int64()),
        pa.field("country", pa.string()),
        pa.field("writer", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("fare", pa.float64()),
    ]
)
SPARK_SCHEMA = "trip_id long, country string, writer string, seq long, fare double"
#: The race: Spark writes until ``RACE`` seconds have passed, longer (up to ``LONGEST``) until
#: it has both committed and been refused; the other writer stops when told, or after ``LONGEST``.
RACE, LONGEST = 24.0, 40.0
#: Seconds between the other writer's upserts.
PAUSE = (0.3, 1.0)
#: An instant time as fedcore names it (milliseconds).
INSTANT = re.compile(r"\b(\d{17})\b")
CONFLICT = re.compile(r"^(fedcore\.exceptions\.)?CommitConflictError: ", re.MULTILINE)
#: Spark's line above a Python worker's error (whose traceback fed_spark leaves out).
SPARK_PREFACE = "An exception was thrown from the Python worker:"


def rows_of(writer: str, seq: int) -> list[dict[str, Any]]:
    """Write ``seq`` of ``writer``: half the shared keys of one country, and a key of its own.
    Every ``QUIET``-th Spark write goes to the last country, which the other writer leaves
    alone, so the race has Spark writes that must commit (no file group of theirs changes
    under them); the other writes go to the countries both write."""
    rng = random.Random(f"{writer}/{seq}")
    c = len(COUNTRIES) - 1 if quiet(writer, seq) else rng.randrange(len(COUNTRIES) - 1)
    keys = sorted(rng.sample(range(100 * c, 100 * c + SHARED), SHARED // 2))
    keys.append(NEW_KEY_BASE[writer] + seq)
    return [
        {"trip_id": k, "country": COUNTRIES[c], "writer": writer, "seq": seq, "fare": seq + k / 1000}
        for k in keys
    ]


def quiet(writer: str, seq: int) -> bool:
    """Whether write ``seq`` of ``writer`` goes to the country only Spark writes."""
    return writer == "spark" and seq % QUIET == 0


# --- the other writer (a child process) -------------------------------------------------------


def engine_writer(path: str, log: Path, stop: Path) -> None:
    """Upsert the table at ``path`` every 0.3-1 s until ``stop`` exists (or ``LONGEST`` s
    passed); each attempt a JSON line in ``log``: committed, refused (a conflict, its
    message) or failed (anything else, with its traceback)."""
    client = WriteClient(load_table(path), RETAIN)
    pause = random.Random(0)
    deadline = time.monotonic() + LONGEST
    seq = 0
    with log.open("w") as out:
        while not stop.exists() and time.monotonic() < deadline:
            seq += 1
            data = pa.Table.from_pylist(rows_of("engine", seq), SCHEMA)
            record: dict[str, Any] = {"seq": seq}
            try:
                result = client.upsert(data)
                record |= {"committed": result.instant, "warnings": list(result.warnings)}
            except CommitConflictError as error:
                record["refused"] = f"{type(error).__name__}: {error}"
            except Exception as error:
                record["failed"] = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
            out.write(json.dumps(record) + "\n")
            out.flush()
            time.sleep(pause.uniform(*PAUSE))


# --- the test ------------------------------------------------------------------------------------


@dataclass
class Attempt:
    writer: str
    seq: int
    committed: str | None = None  # its instant
    refused: str | None = None  # the conflict's message
    failed: str | None = None  # anything else: the test fails
    warnings: list[str] = field(default_factory=list)  # table services that failed after it


def spark_attempt(spark: SparkSession, path: str, seq: int) -> Attempt:
    """One Spark upsert: committed, or refused as a conflict (what the driver was told)."""
    frame = spark.createDataFrame([tuple(r.values()) for r in rows_of("spark", seq)], SPARK_SCHEMA)
    options = {"hoodie.datasource.write.operation": "upsert", **RETAIN}
    try:
        result = fed_spark.write(frame, path, options)
    except CommitConflictError as error:  # on the driver: a version the other writer claimed first
        return Attempt("spark", seq, refused=f"{type(error).__name__}: {error}")
    except Exception as error:
        said = str(error)
        if CONFLICT.search(said):  # from a task, in Spark's exception: checked by the test
            return Attempt("spark", seq, refused=said)
        return Attempt("spark", seq, failed=f"{type(error).__name__}: {said}\n{traceback.format_exc()}")
    return Attempt("spark", seq, committed=result.instant, warnings=list(result.warnings))


def one_line(said: str) -> str:
    """The conflict a refusal reports, which must be all it reports: the error's one line
    (after Spark's own line saying a Python worker raised it, from a task)."""
    lines = said.strip().splitlines()
    if len(lines) == 2 and lines[0].strip() == SPARK_PREFACE:
        lines = lines[1:]
    assert len(lines) == 1, f"more than the conflict's one line: {said}"
    assert CONFLICT.match(lines[0]), f"not a CommitConflictError: {said}"
    return lines[0]


def engine_attempts(log: Path) -> list[Attempt]:
    return [Attempt("engine", **json.loads(line)) for line in log.read_text().splitlines()]


def whole_rows(found: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """Rows as (their data columns..., the instant that wrote them), counted."""
    keyed_rows(found, "trip_id", lambda r: r)  # each key once, its record key spelled right
    return Counter((*(r[c] for c in SCHEMA.names), r["_hoodie_commit_time"]) for r in found)


def difference(got: Counter[tuple[Any, ...]], want: Counter[tuple[Any, ...]]) -> str:
    return f"missing {sorted((want - got).elements())}, unexpected {sorted((got - want).elements())}"


def test_writers_racing_on_a_table_commit_or_are_refused_as_conflicts(
    local_fed: SparkSession, tmp_path: Path
) -> None:
    spark = local_fed
    table = create_table(
        f"file://{tmp_path}/tables/trips",
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: f"file://{tmp_path}/storage"},
    )
    seed = [
        {"trip_id": 100 * c + i, "country": country, "writer": "seed", "seq": 0, "fare": 0.0}
        for c, country in enumerate(COUNTRIES)
        for i in range(SHARED)
    ]
    first = WriteClient(table).bulk_insert(pa.Table.from_pylist(seed, SCHEMA))  # a file group a country
    log, stop = tmp_path / "engine.jsonl", tmp_path / "stop"
    engine = subprocess.Popen(
        [sys.executable, __file__, table.path, str(log), str(stop)], stderr=subprocess.PIPE, text=True
    )
    attempts: list[Attempt] = []
    try:
        start = time.monotonic()
        seq = 0
        # Past RACE seconds, the race goes on (up to LONGEST) until Spark has both committed
        # and been refused (the other writer, many times faster, commits long before).
        while (elapsed := time.monotonic() - start) < LONGEST and not (
            elapsed > RACE and any(a.committed for a in attempts) and any(a.refused for a in attempts)
        ):
            seq += 1
            attempts.append(spark_attempt(spark, table.path, seq))
    finally:
        stop.touch()
        try:
            _, errors = engine.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            engine.kill()
            raise
    assert engine.returncode == 0, errors
    attempts += engine_attempts(log)

    failed = [a for a in attempts if a.failed]
    assert not failed, "\n\n".join(f"{a.writer} write {a.seq}: {a.failed}" for a in failed)
    commits = {a.committed: a for a in attempts if a.committed}
    kinds: Counter[tuple[str, str]] = Counter()
    for attempt in (a for a in attempts if a.refused):
        said = one_line(attempt.refused or "")
        assert not re.search(r"roll ?back", said), f"a conflict is retried, not rolled back: {said}"
        others = {i for i in INSTANT.findall(said) if i in commits and commits[i].writer != attempt.writer}
        assert others, f"{attempt.writer} write {attempt.seq} was refused naming no other write: {said}"
        kinds[(attempt.writer, "cleaned" if "and cleaned" in said else "claimed")] += 1
    summary = {
        writer: f"{sum(1 for a in attempts if a.writer == writer and a.committed)} committed, "
        f"{kinds[(writer, 'cleaned')]} refused as their files were replaced and cleaned, "
        f"{kinds[(writer, 'claimed')]} as a version they replace was claimed first"
        for writer in NEW_KEY_BASE
    }
    print("", *(f"{writer}: {said}" for writer, said in summary.items()), sep="\n")
    print("table service warnings:", [w for a in attempts for w in a.warnings])
    for writer in NEW_KEY_BASE:
        assert any(a.writer == writer and a.committed for a in attempts), f"{writer} never committed"
    apart = [a for a in attempts if quiet(a.writer, a.seq)]
    assert all(a.committed for a in apart), f"writes to file groups no one else wrote were refused: {apart}"
    assert kinds, "no write was refused: the writers did not race"

    # The model: the committed writes applied in instant order (a key's latest write wins).
    latest: dict[int, tuple[Any, ...]] = {}
    for instant, rows in [(first.instant, seed)] + [
        (i, rows_of(a.writer, a.seq)) for i, a in sorted(commits.items())
    ]:
        for row in rows:
            latest[row["trip_id"]] = (*(row[c] for c in SCHEMA.names), instant)
    want = Counter(latest.values())

    table = load_table(table.path)
    got = whole_rows(table.read().to_pylist())
    assert got == want, difference(got, want)
    in_spark = fed_spark.read(spark, table.path).toArrow().to_pylist()
    assert whole_rows(in_spark) == want, difference(whole_rows(in_spark), want)
    # The timeline's writes, active and archived, are those that committed; none is pending.
    timeline = table.timeline()
    archived = [
        table.handle.layout.instants.parse(row["file"]) for row in read_archive(table.handle).to_pylist()
    ]
    writes = [i for i in [*archived, *timeline.completed()] if i and i.action in table.write_actions]
    assert {i.time for i in writes if i.is_completed} == {first.instant, *commits}
    # Archival leaves no gap: Hudi's readers take an archived instant later than the active
    # timeline's first for an uncommitted one.
    active = [i.time for i in timeline.completed()]
    assert not [i.time for i in archived if i and active and i.time > active[0]], (
        "archived past an active write"
    )
    assert not [i for i in timeline.pending() if i.action in table.write_actions], "no write is left pending"
    report = verify_table(table)
    assert report.ok, report.to_json()


if __name__ == "__main__":
    engine_writer(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
