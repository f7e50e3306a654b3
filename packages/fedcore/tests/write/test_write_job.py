"""The engine-neutral write protocol: a job begun in one process, written by tasks in others,
committed (or rolled back) where it began; what Spark's adapter runs on."""

from __future__ import annotations

import json
import pickle
import time
from collections import Counter

import pyarrow as pa
import pytest

from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.engine import Staging, WritePlanner
from fedcore.exceptions import CommitConflictError
from fedcore.table import Table, load_table
from fedcore.timeline.commit_metadata import WriteStat
from fedcore.write.job import Operation, WriteJob

from .test_writes import make_table, physical_files, trips


def _run_tasks(job: WriteJob, work: list[tuple[list[int], int, int]]) -> list[list[WriteStat]]:
    """Tasks as an engine runs them: each gets its own unpickled copy of the job (no timeline,
    no transaction) and its rows, and hands back its stats as JSON. (fed-spark's tests run
    them in Spark's worker processes.)"""
    payload = pickle.dumps(job)
    results = []
    for ids, task, attempt in work:
        copy: WriteJob = pickle.loads(payload)
        assert copy.timeline is None
        stats = copy.write_new(trips(ids, ["us", "de"] * (len(ids) // 2)), task, attempt)
        results.append([WriteStat.from_json(json.loads(json.dumps(s.to_json()))) for s in stats])
    return results


def _begun(table: Table, operation: Operation) -> WriteJob:
    """A job begun as an engine's driver side begins it, its heartbeat left to the tasks."""
    job = WriteJob.open(table, operation, trips([0]).schema)
    job.begin()
    job.inflight()
    job.detach()
    return job


def referenced(table: Table) -> set[str]:
    index = load_table(table.path, storage_options=table.storage_options).handle.file_index
    return {name for files in index.files(None).values() for name in files.files}


def test_tasks_write_and_the_driver_commits_only_what_succeeded(backend: Backend) -> None:
    table = make_table(backend)
    table.bulk_insert(trips(range(4)))
    job = _begun(table, "bulk_insert")
    first, retried, lost = _run_tasks(
        job,
        [
            (list(range(100, 110)), 0, 0),
            (list(range(200, 210)), 1, 1),  # task 1's retry: its stats reach the commit ...
            (list(range(200, 210)), 1, 0),  # ... its first attempt's do not (it failed after writing)
        ],
    )
    assert {s.path for s in lost}.isdisjoint({s.path for s in retried})  # attempts never share a file
    result = job.commit([*first, *retried], distributed=True)
    assert (result.operation, result.inserted, result.files_written) == ("bulk_insert", 20, 4)
    ids = sorted(table.read(columns=["trip_id"]).column(0).to_pylist())
    assert ids == [0, 1, 2, 3, *range(100, 110), *range(200, 210)]  # every row once
    assert backend.data_files() == referenced(table)  # the lost attempt's files are gone
    written = {s.path.rpartition("/")[2] for s in [*first, *retried]}
    assert all("_0-0-0_" in n or "_0-1-0_" in n or "_1-0-1_" in n or "_1-1-1_" in n for n in written)


def test_an_aborted_job_leaves_nothing(backend: Backend) -> None:
    table = make_table(backend)
    table.bulk_insert(trips(range(4)))
    job = _begun(table, "insert")
    _run_tasks(job, [(list(range(10, 20)), 0, 0)])
    pickle.loads(pickle.dumps(job)).abort()  # the driver side that aborts need not be the one that began
    assert sorted(table.read(columns=["trip_id"]).column(0).to_pylist()) == [0, 1, 2, 3]
    assert backend.data_files() == referenced(table)
    assert [i.action for i in table.timeline().completed()] == ["commit", "rollback"]


def test_a_task_that_writes_after_the_rollback_deletes_what_it_wrote(backend: Backend) -> None:
    """An engine fails a job while some of its tasks still run: the driver's rollback lists
    the markers before a late task marks its files, so the task, seeing the instant decided
    once it has written, deletes its files and its marker batch itself."""
    table = make_table(backend)
    table.bulk_insert(trips(range(4)))
    job = _begun(table, "bulk_insert")
    pickle.loads(pickle.dumps(job)).abort()
    with pytest.raises(CommitConflictError, match="rolled back or committed while this task wrote"):
        _run_tasks(job, [(list(range(10, 20)), 0, 0)])
    assert sorted(table.read(columns=["trip_id"]).column(0).to_pylist()) == [0, 1, 2, 3]
    assert backend.data_files() == referenced(table)
    markers = f"{table.path}/{P.HOODIE_FOLDER}/.temp/{job.instant}"
    assert not [m for m in table.fs.table_fs.find(markers) if "MARKERS-" in m]
    assert not table.fs.table_fs.exists(f"{table.path}/{P.HOODIE_FOLDER}/.heartbeat/{job.instant}")


def test_a_job_whose_heartbeat_expired_cannot_commit(backend: Backend) -> None:
    table = make_table(backend)  # heartbeats of 100 ms in these tests
    job = _begun(table, "bulk_insert")
    (stats,) = _run_tasks(job, [(list(range(10)), 0, 0)])
    time.sleep(0.5)  # nothing beats: the driver side died, say
    table.bulk_insert(trips(range(50, 52)))  # the next writer rolls the job back
    with pytest.raises(CommitConflictError, match="no longer a pending commit"):
        pickle.loads(pickle.dumps(job)).commit(stats, distributed=True)
    assert sorted(table.read(columns=["trip_id"]).column(0).to_pylist()) == [50, 51]
    assert backend.data_files() == referenced(table)


def test_the_table_services_run_after_the_commit_point(backend: Backend) -> None:
    """``commit`` completes the instant, then runs the services with the job's options (here
    the table's first clean), their failures warnings on its plain result."""
    table = make_table(backend, **{P.CLEANER_COMMITS_RETAINED: "1"})
    table.bulk_insert(trips(range(4)))
    assert not table.timeline().completed(["clean"])
    job = _begun(table, "insert")
    result = job.commit(_run_tasks(job, [([10, 11], 0, 0)])[0], distributed=True)
    (clean,) = table.timeline().completed(["clean"])
    assert clean.time > result.instant, "the clean ran after the commit"
    assert (result.inserted, result.warnings) == (2, ())
    assert sorted(table.read(columns=["trip_id"]).column(0).to_pylist()) == [0, 1, 2, 3, 10, 11]


def test_an_engine_jobs_inflight_plan_has_hudis_shape(backend: Backend) -> None:
    """Hudi reads an inflight instant's plan (its rollback of a failed write does): an engine's
    job writes the shape ``WriteClient`` writes, with no file groups (its tasks decide them)."""
    table = make_table(backend)
    job = WriteJob.open(table, "bulk_insert", trips([0]).schema, extra_metadata={"checkpoint": "7"})
    job.begin()
    job.inflight()
    pending = table.timeline().pending()
    assert [(i.time, i.state) for i in pending] == [(job.instant, "inflight")]
    plan = json.loads(table.fs.table_fs.cat_file(table.handle.layout.instants.path(table.path, pending[0])))
    assert plan == {
        "partitionToWriteStats": {},
        "extraMetadata": {"checkpoint": "7"},
        "operationType": "BULK_INSERT",
    }
    job.abort()


def test_staged_rows_come_back_whole_and_leave_nothing_behind(backend: Backend) -> None:
    table = make_table(backend)
    staging = pickle.loads(pickle.dumps(Staging(table, "write-1")))  # as a task gets it
    first = staging.put(trips(range(3)), task=0, attempt=0)
    retried = staging.put(trips(range(3, 5), "de"), task=1, attempt=1)
    staging.put(trips(range(3, 5), "de"), task=1, attempt=0)  # a failed attempt: not reported
    assert first.startswith(f"{table.path}/.hoodie/.fed/staging/write-1/part-00000-0-")
    got = Staging(table, "write-1").rows([first, retried], trips([0]).schema)
    assert Counter(map(tuple, got.to_pylist())) == Counter(
        map(tuple, pa.concat_tables([trips(range(3)), trips(range(3, 5), "de")]).to_pylist())
    )
    assert Staging(table, "write-1").rows([], trips([0]).schema).num_rows == 0
    staging.drop()
    assert not table.fs.table_fs.exists(staging.folder)
    staging.drop()  # gone already: fine
    assert physical_files(backend, backend.storage_path) == []  # staged rows are no data files


def test_found_keys_names_each_file_holding_a_wanted_key(backend: Backend) -> None:
    """What an engine's key lookup asks: of the keys wanted, which each latest base file holds;
    a key bulk-inserted twice is found in both its files, a partition not asked is not read."""
    table = make_table(backend)
    table.bulk_insert(trips(range(6), ["us", "de"] * 3))
    table.bulk_insert(trips([0, 2], "us"))  # keys 0 and 2 again, in a second group of "us"
    job = WriteJob.open(table, "upsert", trips([0]).schema)
    planner = WritePlanner(job)
    slices = planner.latest_base_files(["country=us", "country=de"])
    wanted = {"country=us": pa.array(["0", "2", "4", "9"]), "country=fr": pa.array(["1"])}
    found = planner.found_keys(slices, wanted)
    holding = Counter((p, k) for p, _, keys in found for k in keys.to_pylist())
    assert holding == {("country=us", "0"): 2, ("country=us", "2"): 2, ("country=us", "4"): 1}
    assert {p for p, _, _ in found} == {"country=us"}
    assert len({f for _, f, _ in found}) == 2
    assert planner.found_keys(slices, {}) == []
