"""What the writer harnesses share: ``fed_dev.stress`` (rounds of writer processes) and
``fed_dev.soak`` (writer processes writing continuously).

The rows they write (a key, a partition, an ordering value and the tag of the write that
wrote them), writer processes started as a scheduler would start them (fresh interpreters),
a failed write described for the record, the recovery of failed writes once their writers
are gone, and the table's rows compared with a model of the committed writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

import pyarrow as pa

from fedcore import properties as P
from fedcore.commit.transaction import roll_back_failed_writes
from fedcore.exceptions import CommitConflictError
from fedcore.io.filesystems import StorageOptions
from fedcore.table import Table, load_table

#: A writer presumed dead after 3 s without a beat: long enough that a busy 2-core
#: machine never makes a live writer look dead, short enough to recover in a test.
HEARTBEAT: Final[dict[str, str]] = {P.HEARTBEAT_INTERVAL_MS: "1000", P.HEARTBEAT_TOLERABLE_MISSES: "2"}
#: The one failure concurrency may cause.
CONFLICT: Final = CommitConflictError.__name__


def records(ids: list[int], partitions: list[str], tag: str, ts: int) -> pa.Table:
    """Rows ``id``, ``p``, ``ts`` (the ordering value), ``tag`` (which write wrote them)."""
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array(partitions, pa.string()),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "tag": pa.array([tag] * len(ids), pa.string()),
        }
    )


def describe_failure(exc: BaseException) -> dict[str, str]:
    """A failed write, for the record: the error's class and message; for anything but a
    conflict (a violation) where it came from, too. Call it in the ``except`` block."""
    message = str(exc)
    if not isinstance(exc, CommitConflictError):
        message += "\n" + "".join(traceback.format_exc(limit=-12))
    return {"error": type(exc).__name__, "message": message}


#: What a writer started with ``gated=True`` prints once it is ready to write, and then waits
#: for a line on its standard input (``release_writers``).
READY: Final = "ready"


def start_writer(module: str, job: Mapping[str, Any], *, gated: bool = False) -> subprocess.Popen[str]:
    """``python -m module JOB`` (the job as JSON): a writer in a fresh interpreter, as a
    scheduler starts one; its stdout and stderr piped (and its stdin, ``gated``: it writes
    when ``release_writers`` says so)."""
    return subprocess.Popen(
        [sys.executable, "-m", module, json.dumps(job)],
        stdin=subprocess.PIPE if gated else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )


def wait_for_release() -> None:
    """In a gated writer, once it is ready to write (fedcore imported, the table loaded):
    say so, and wait for the word to go."""
    print(READY, flush=True)
    sys.stdin.readline()


def release_writers(processes: list[subprocess.Popen[str]], timeout: float = 300.0) -> list[str]:
    """Once every gated writer is ready (or has ended before that: it printed what it
    printed; or was killed, not ready after ``timeout`` seconds), let them all write at
    once; what each printed before its ready line.

    Its ready line read, a writer prints nothing more until released, so nothing of its
    output waits in the pipe's text reader, which ``communicate`` (``finish_writer``) skips."""
    before = []

    def kill_all() -> None:
        for process in processes:
            process.kill()

    watchdog = threading.Timer(timeout, kill_all)
    watchdog.start()
    try:
        for process in processes:
            assert process.stdout is not None  # (piped)
            lines = []
            for line in process.stdout:  # to its end, where it exited before it was ready
                if line.strip() == READY:
                    break
                lines.append(line)
            before.append("".join(lines))
    finally:
        watchdog.cancel()
    for process in processes:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # one that has exited: nothing to release
            process.stdin.write("go\n")
            process.stdin.flush()  # (left open: ``communicate`` closes it)
    return before


def finish_writer(process: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """Wait for a writer (killed after ``timeout`` seconds); its stdout and stderr."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()


def recover(table_path: str, storage_options: StorageOptions | None) -> Table:
    """Once every writer has exited: wait until their heartbeats have expired, roll back
    the writes they left pending (as the next writer would), and open the table afresh."""
    handle = load_table(table_path, options=HEARTBEAT, storage_options=storage_options).handle
    if handle.timeline().pending():  # (none pending, there is nothing to wait for or roll back)
        time.sleep(handle.heartbeat_interval_ms * (handle.heartbeat_tolerable_misses + 1) / 1000 + 0.5)
        roll_back_failed_writes(handle)
    return load_table(table_path, storage_options=storage_options)


def compare_rows(
    table: Table, columns: list[str], model: Mapping[Any, tuple[Any, ...]], failed_tags: set[str]
) -> list[str]:
    """The table's rows (``columns``, the record key first and the tag last, read whole as a
    multiset) against ``model`` (each key's expected row, without the key): every key held
    twice, every row that differs (naming a failed write's row as such)."""
    fresh = load_table(table.path, storage_options=table.storage_options)
    data = fresh.read(columns=columns)
    rows = Counter(zip(*(data.column(n).to_pylist() for n in columns), strict=True))
    held: dict[Any, list[tuple[Any, ...]]] = {}
    for key, *rest in rows.elements():
        held.setdefault(key, []).append(tuple(rest))
    problems = [
        f"key {key} appears {len(kept)} times: {', '.join(map(str, kept))}"
        for key, kept in sorted(held.items())
        if len(kept) > 1
    ]
    found = {key: kept[0] for key, kept in held.items()}
    if rows != Counter((key, *row) for key, row in model.items()):
        for key in sorted(set(found) | set(model)):
            if found.get(key) != model.get(key):
                seen = found.get(key)
                why = "a failed writer's row" if seen and seen[-1] in failed_tags else "differs"
                problems.append(f"key {key}: table has {seen}, model has {model.get(key)} ({why})")
    return problems
