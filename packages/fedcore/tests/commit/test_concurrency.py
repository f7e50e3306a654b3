"""Concurrent writers: a committed write always reports success, a live writer is never
rolled back, and racing table services back off quietly."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from fed_dev.stress import run_stress
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.commit.transaction import is_failed, roll_back_failed_writes, roll_back_pending
from fedcore.engine import WriteJob, WritePlanner
from fedcore.exceptions import CommitConflictError, RollbackError, StorageError
from fedcore.io.atomic import create_exclusive
from fedcore.metadata.folding import compact_metadata
from fedcore.metadata.table import MetadataTable
from fedcore.services.archival import archive, read_archive
from fedcore.services.cleaning import clean, plan_clean
from fedcore.services.history import load_history
from fedcore.services.rollback import rollback
from fedcore.services.verify import verify_table
from fedcore.steps import observe_steps
from fedcore.table import Table, load_table
from fedcore.timeline import CLEAN, COMMIT, Instant, heartbeat_path, instant_time, new_instant
from fedcore.timeline.instant import parse_instant_time
from fedcore.timeline.retention import last_clean_retained
from fedcore.write.client import WriteClient

from ..write.test_merge_on_read_writes import mor_table
from ..write.test_writes import make_table, physical_files, rows, trips

KEEP = {P.ARCHIVE_MIN_INSTANTS: "4", P.ARCHIVE_MAX_INSTANTS: "8", P.METADATA_COMPACT_DELTAS: "2"}


def test_writer_processes_never_misreport_a_commit(backend: Backend) -> None:
    """The short run of benchmarks/writer_stress.py: every exit code tells the truth."""
    report = run_stress(
        f"{backend.table_path}-stress", f"{backend.storage_path}/stress", backend.storage_options, rounds=3
    )
    assert report.violations == [], report.summary()
    assert report.committed >= 3, report.summary()  # at least one writer per round got through
    assert set(report.errors) <= {"CommitConflictError"}


def test_a_just_requested_instant_never_looks_failed(backend: Backend) -> None:
    table = make_table(backend)  # 100 ms heartbeats, two misses tolerated
    instant = new_instant(table.fs.table_fs, table.path, table.handle.layout.instants, COMMIT)
    # The heartbeat is there from the moment the instant is: it reserved the time.
    assert table.fs.table_fs.exists(heartbeat_path(table.path, instant.time))
    assert not is_failed(table.handle, instant)
    time.sleep(0.5)
    assert is_failed(table.handle, instant)
    assert roll_back_failed_writes(table.handle) == [instant.time]


def test_pending_instants_of_another_writer_are_left_to_it(backend: Backend) -> None:
    """Apache Hudi's writers leave pending instants without a heartbeat of fed's (none at all
    under Hudi's single-writer default, an empty file under its multi-writer one; a
    clustering plan waits for Hudi to run it). fed cannot tell whether such a writer is alive
    or undo exactly what it wrote: its writes go on beside them, its automatic rollback leaves
    them, and ``fed rollback`` refuses, naming the instant."""
    table = make_table(backend)  # 100 ms heartbeats: an hour-old instant is long expired
    table.upsert(trips(range(4), ["us", "de"] * 2))
    fs = table.fs.table_fs
    old = datetime.now(timezone.utc) - timedelta(hours=1)
    silent, empty = instant_time(old), instant_time(old + timedelta(seconds=1))
    clustering = instant_time(old + timedelta(seconds=2))
    for instant in (Instant(silent, COMMIT, "requested"), Instant(silent, COMMIT, "inflight")):
        create_exclusive(fs, table.handle.layout.instants.path(table.path, instant), b"")
    create_exclusive(
        fs, table.handle.layout.instants.path(table.path, Instant(empty, COMMIT, "requested")), b""
    )
    create_exclusive(fs, heartbeat_path(table.path, empty), b"")  # Hudi's: an empty file
    create_exclusive(
        fs,
        table.handle.layout.instants.path(table.path, Instant(clustering, "replacecommit", "requested")),
        b"",
    )
    assert roll_back_failed_writes(table.handle) == []
    table.upsert(trips([0, 9], "us", ts=2, fare=7.0))
    timeline = table.timeline()
    assert [i.time for i in timeline.pending()] == [silent, empty, clustering]
    assert not [i for i in timeline.completed() if i.action == "rollback"]
    assert rows(table) == {**rows(table, as_of=timeline.completed()[0].time), 0: ("us", 7.0), 9: ("us", 16.0)}
    for time_ in (silent, empty, clustering):
        with pytest.raises(RollbackError, match=f"{time_}.*begun by another writer"):
            rollback(table.handle, time_)


def test_instant_times_are_unique_across_actions(backend: Backend) -> None:
    """A clean must never take the time another writer's commit has taken: the two would
    share a metadata-table delta, a marker folder and an outcome. Timeline file names differ
    by action, so the time itself is reserved (by the heartbeat file)."""
    table = make_table(backend)
    fs = table.fs.table_fs
    latest = datetime.now(timezone.utc) + timedelta(hours=1)  # so the next pick is predictable
    create_exclusive(
        fs,
        table.handle.layout.instants.path(table.path, Instant(instant_time(latest), COMMIT, "requested")),
        b"",
    )
    contested = instant_time(latest + timedelta(milliseconds=1))
    # Another writer has reserved the next millisecond and is about to request its commit.
    create_exclusive(fs, heartbeat_path(table.path, contested), b"0")
    clean_instant = new_instant(fs, table.path, table.handle.layout.instants, CLEAN)
    assert clean_instant.time > contested
    # Its first pick (now) was requested after a later instant was visible: withdrawn, so a
    # reader that listed the timeline's tail from that later instant on misses nothing.
    assert [i.time for i in table.timeline()] == [instant_time(latest), clean_instant.time]


def test_an_instant_time_taken_by_a_completed_instant_is_not_taken_again(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instant times run ahead of the clock when writers contend, so the clock can reach the
    time of an instant that completed (its heartbeat gone): a clean taking that time beside the
    commit would share its outcome, and a writer rolling the commit forward would complete
    it with the clean's metadata (a soak run did so)."""
    table = make_table(backend)
    table.upsert(trips(range(4), ["us", "de"] * 2))
    fs = table.fs.table_fs
    taken = table.timeline().last_time()
    assert taken is not None
    assert not fs.exists(heartbeat_path(table.path, taken))
    moment = parse_instant_time(taken)

    class Clock(datetime):  # the clock has reached the commit's time
        @classmethod
        def now(cls, tz: object = None) -> Clock:
            return cls.fromtimestamp(moment.timestamp(), timezone.utc)

    monkeypatch.setattr("fedcore.timeline.datetime", Clock)
    clean_instant = new_instant(fs, table.path, table.handle.layout.instants, CLEAN)
    assert clean_instant.time > taken
    latest = [(i.time, i.action) for i in table.timeline()][-2:]
    assert latest == [(taken, COMMIT), (clean_instant.time, CLEAN)]


def test_two_writers_rolling_back_one_dead_instant_both_succeed(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2]))
    dead = new_instant(table.fs.table_fs, table.path, table.handle.layout.instants, COMMIT)
    time.sleep(0.5)
    assert is_failed(table.handle, dead)
    roll_back_pending(table.handle, dead)
    roll_back_pending(table.handle, dead)  # a second writer that saw it pending too: no error
    assert table.timeline().pending() == []
    assert rows(table) == {1: ("us", 11.0), 2: ("us", 12.0)}


def test_racing_compactions_back_off_quietly(backend: Backend) -> None:
    table = make_table(backend)
    for n in range(3):
        WriteClient(table, {P.METADATA_COMPACT_DELTAS: "100"}).upsert(trips([n]))
    barrier = threading.Barrier(2, timeout=30)
    timeline = table.timeline()

    def listed_together() -> object:
        barrier.wait()  # both have listed the same timeline before either reads a manifest
        return timeline

    results: list[object] = []

    def compact_once() -> None:
        index = MetadataTable(table.fs.table_fs, table.path, listed_together, layout=table.handle.layout)  # type: ignore[arg-type]
        try:
            results.append(compact_metadata(index))
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=compact_once) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(str, results)) == sorted([str(None), timeline.completed()[-1].time]), results
    assert rows(table) == {n: ("us", 10.0 + n) for n in range(3)}


def test_an_archival_that_loses_the_race_backs_off_quietly(backend: Backend) -> None:
    table = make_table(backend, **KEEP, **{P.ARCHIVE_AUTOMATIC: "false"})
    for n in range(10):
        WriteClient(table).upsert(trips([n % 3], fare=100.0 * n))
    expected = rows(table)
    other: list[list[str]] = []

    def meanwhile(step: str) -> None:
        if step == "written" and not other:
            other.append(archive(table.handle))  # another writer's archival runs to completion now

    with observe_steps(meanwhile):
        archived = archive(table.handle)
    assert other, "the other archival ran"
    assert other[0] == archived  # the same instants; deleting them twice is no error
    assert rows(table) == expected
    assert len(read_archive(table.handle)) > 0


def test_a_failing_table_service_is_a_warning_on_a_committed_write(tmp_path: Path) -> None:
    # A file where archival's folder must be: possible on a file system (S3 has no folders).
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table = make_table(backend, **KEEP)
    for n in range(6):
        WriteClient(table).upsert(trips([n]))
    # Archival cannot write its archive: a file stands where its folder must be.
    archived = Path(table.path.removeprefix("file://")) / ".hoodie" / "archived"
    archived.parent.mkdir(parents=True, exist_ok=True)
    archived.write_bytes(b"in the way")
    results = [WriteClient(table).upsert(trips([100 + n])) for n in range(6)]
    warned = [r for r in results if r.warnings]
    assert warned, "archival was due and failed"
    assert all("archival" in w for r in warned for w in r.warnings)
    assert all(r.instant in {i.time for i in table.timeline().completed()} for r in results)
    assert set(rows(table)) == {*range(6), *range(100, 106)}


def test_services_cleaning_twice_the_same_files_is_no_error(backend: Backend) -> None:
    table = make_table(backend, **{P.CLEAN_AUTOMATIC: "false"})
    for fare in (1.0, 2.0, 3.0, 4.0):
        WriteClient(table).upsert(trips([1], fare=fare))
    files_before = len(physical_files(backend, backend.storage_path))
    first, second = clean(_fresh(table).handle, 1), clean(_fresh(table).handle, 1)
    assert first.instant is not None
    assert second.instant is None  # the first clean's retained commit is where the second starts
    assert len(physical_files(backend, backend.storage_path)) < files_before
    assert rows(table) == {1: ("us", 5.0)}


def _fresh(table: Table) -> Table:
    from fedcore.table import load_table

    return load_table(table.path, storage_options=table.storage_options)


def test_a_failed_clean_stops_its_heartbeat_and_leaves_nothing_pending(tmp_path: Path) -> None:
    # A folder where the clean must delete a file makes the delete fail (a file system only).
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table = make_table(backend, **{P.CLEAN_AUTOMATIC: "false"})
    for fare in (1.0, 2.0, 3.0):
        WriteClient(table).upsert(trips([1], fare=fare))
    plan = plan_clean(table.handle, 1)
    assert plan is not None
    ((partition, names),) = plan.doomed.items()
    (name,) = names
    physical = Path(table.fs.to_physical(f"{partition}/{name}").removeprefix("file://"))
    physical.unlink()
    physical.mkdir()
    with pytest.raises(StorageError):
        clean(table.handle, 1)
    beating = [t.name for t in threading.enumerate() if t.name.startswith("fed-heartbeat-")]
    assert beating == [], "the failed clean's heartbeat thread is still running"
    assert table.timeline().pending() == [], "the failed clean was dropped at once"
    assert rows(table) == {1: ("us", 4.0)}


#: Another writer's settings under which each of its writes compacts the metadata table,
#: archives all but the newest instants and cleans: the deltas a view of an older listing
#: of the timeline would apply are gone a few writes later.
BUSY = {
    P.METADATA_COMPACT_DELTAS: "1",
    P.ARCHIVE_MIN_INSTANTS: "1",
    P.ARCHIVE_MAX_INSTANTS: "2",
    P.CLEANER_COMMITS_RETAINED: "1",
}


def busy_writer(table: Table, backend: Backend, **extra: str) -> WriteClient:
    options = {**BUSY, **extra}
    return WriteClient(load_table(table.path, options=options, storage_options=backend.storage_options))


def test_a_plan_builds_on_the_table_as_it_is_once_its_listing_was_archived(backend: Backend) -> None:
    """A write opened on a timeline whose instants another writer archived (with their
    metadata-table deltas) before the plan is made plans on the table as it is, as a write
    opened then would; its commit is the newest."""
    table = make_table(backend)
    table.bulk_insert(trips(range(4), "us"))
    job = WriteJob.open(table, "upsert", trips([0]).schema)  # lists the timeline now
    table.handle.forget_file_index()  # a driver that holds none of the deltas the plan needs
    other = busy_writer(table, backend)
    for fare in range(6):
        other.upsert(trips(range(4), "us", ts=2, fare=100.0 * fare))
    assert not any(i.time == job.timeline.completed()[0].time for i in table.timeline().instants)
    found = WritePlanner(job).latest_base_files(["country=us"])
    latest = table.handle.file_index.files(["country=us"])["country=us"].latest_base_files(
        table.handle.layout.log_files
    )
    assert {fid: base.name for (_, fid), base in found.items()} == {fid: n for fid, (_, n) in latest.items()}
    WriteClient(table).upsert(trips([0], ts=3, fare=7.0))
    assert rows(table) == {0: ("us", 7.0), **{n: ("us", 500.0 + n) for n in range(1, 4)}}


def test_a_begun_write_cannot_build_on_a_file_newer_than_itself(backend: Backend) -> None:
    """A write whose listing was archived before its instant was requested may find, when it
    plans, the file of a write that completed after it began, in a partition it writes.
    Building on that file would rank this write's files below it (a lost update): a
    conflict, named, and nothing of it left."""
    table = make_table(backend)
    table.bulk_insert(trips(range(4), "us"))
    job = WriteJob.open(table, "upsert", trips([0]).schema)
    table.handle.forget_file_index()  # a driver that holds none of the deltas the plan needs
    other = busy_writer(table, backend)
    for fare in range(6):
        other.upsert(trips(range(4), "us", ts=2, fare=100.0 * fare))
    job.begin()
    newer = other.upsert(trips([2], "us", ts=3, fare=70.0)).instant
    with pytest.raises(CommitConflictError, match=rf"since this upsert began \(instant {newer}\)"), job:
        WritePlanner(job).latest_base_files(["country=us"])
    assert rows(table) == {0: ("us", 500.0), 1: ("us", 501.0), 2: ("us", 72.0), 3: ("us", 503.0)}
    assert not table.timeline().pending()


def test_a_write_commits_beside_another_writer_archiving_in_other_partitions(backend: Backend) -> None:
    table = make_table(backend)
    table.bulk_insert(trips([0, 1], ["us", "fr"]))
    other = busy_writer(table, backend)

    def hook(step: str) -> None:
        if step == "requested":  # listed, begun, not yet planned
            for fare in range(6):
                other.upsert(trips(range(10, 14), "us", ts=2, fare=100.0 * fare))

    fresh = load_table(table.path, storage_options=backend.storage_options)
    with observe_steps(hook):
        WriteClient(fresh).upsert(trips([1], "fr", ts=3, fare=7.0))
    assert rows(table) == {0: ("us", 10.0), 1: ("fr", 8.0), **{n: ("us", 500.0 + n) for n in range(10, 14)}}


def test_a_begun_write_cannot_build_on_a_newer_log_file_either(backend: Backend) -> None:
    """Merge-on-read: a newer delta commit's log file names only its slice's start, older
    than the begun write; the newer write is found by what it committed."""
    table = mor_table(backend)
    table.bulk_insert(trips(range(4), "us"))
    job = WriteJob.open(table, "upsert", trips([0]).schema)
    table.handle.forget_file_index()
    # Merge-on-read archival waits for a compaction to hold what it moves out.
    other = busy_writer(table, backend, **{P.COMPACT_INLINE: "true", P.COMPACT_INLINE_MAX_DELTA_COMMITS: "2"})
    for fare in range(6):
        other.upsert(trips(range(4), "us", ts=2, fare=100.0 * fare))
    job.begin()
    plain = WriteClient(load_table(table.path, storage_options=backend.storage_options))  # no compaction
    newer = plain.upsert(trips([2], "us", ts=3, fare=70.0)).instant
    logs = [n for files in table.handle.file_index.files(["country=us"]).values() for n in files.files]
    assert any(n.startswith(".") for n in logs), "the newer write appended a log file"
    with pytest.raises(CommitConflictError, match=rf"since this upsert began \(instant {newer}\)"), job:
        WritePlanner(job).latest_base_files(["country=us"])
    assert rows(table) == {0: ("us", 500.0), 1: ("us", 501.0), 2: ("us", 72.0), 3: ("us", 503.0)}


def test_a_plan_whose_listing_was_archived_refuses_a_schema_changed_since(backend: Backend) -> None:
    table = make_table(backend)
    table.bulk_insert(trips(range(4), "us"))
    job = WriteJob.open(table, "upsert", trips([0]).schema)
    other = busy_writer(table, backend)
    wider = trips(range(4), "us", ts=2).append_column("tip", pa.array([1.0] * 4))
    for _ in range(6):
        other.upsert(wider)
    with pytest.raises(CommitConflictError, match="changed its schema"):
        WritePlanner(job).latest_base_files(["country=us"])


def test_verify_and_a_clean_read_what_another_writers_archival_moved_out_since_their_listing(
    backend: Backend,
) -> None:
    """A timeline listed just before another writer's archival names completed instants (a
    clean among them) whose files are in the archive by the time they are read: verify's
    account of the table and a clean's start read them from there."""
    table = make_table(backend, **KEEP, **{P.ARCHIVE_AUTOMATIC: "false", P.CLEANER_COMMITS_RETAINED: "1"})
    for n in range(8):
        WriteClient(table).upsert(trips([n % 3], fare=10.0 * n))
    assert table.timeline().completed([CLEAN]), "a clean ran"
    listed = table.timeline()
    assert archive(table.handle), "archival moved instants out"
    assert not {i.time for i in listed.completed()} <= {i.time for i in table.timeline().completed()}
    history = load_history(table.handle, listed)
    assert history.files, "the account of the archived instants, from the archive"
    assert (
        last_clean_retained(table.fs.table_fs, table.path, table.handle.layout.instants, listed) is not None
    )
    assert verify_table(table).ok


def test_a_metadata_table_cleanup_leaves_a_file_another_writer_is_creating(tmp_path: Path) -> None:
    """On a local disk a file is written under a temporary name and hard-linked into place:
    one in a metadata-table folder is another writer's file in the making, not an old one."""
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table = make_table(backend, **{**KEEP, P.METADATA_COMPACT_DELTAS: "1"})
    index = table.handle.metadata_table_or_none()
    assert index is not None
    making = (
        Path(f"{index.folder}/base".removeprefix("file://")) / ".20200101000000000-00000-x.parquet.ab.tmp"
    )
    making.parent.mkdir(parents=True, exist_ok=True)
    making.write_bytes(b"being written")
    for n in range(10):  # compactions, archival past them, and its cleanup
        WriteClient(table).upsert(trips([n % 3], fare=10.0 * n))
    assert read_archive(table.handle).num_rows, "archival ran"
    assert making.exists()
    assert rows(table) == {0: ("us", 90.0), 1: ("us", 71.0), 2: ("us", 82.0)}
