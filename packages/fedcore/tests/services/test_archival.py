"""Archival keeps the active timeline short; reads, time travel and crashes stay right."""

from __future__ import annotations

import json

import pytest

from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import InstantNotRetainedError, StorageFileNotFoundError
from fedcore.metadata.folding import compact_metadata
from fedcore.services.archival import archive, read_archive
from fedcore.services.verify import verify_table
from fedcore.steps import observe_steps
from fedcore.table import Table, load_table
from fedcore.timeline import COMPLETED, Instant
from fedcore.write.client import WriteClient

from ..write.test_writes import make_table, rows, trips

KEEP = {
    P.ARCHIVE_MIN_INSTANTS: "4",
    P.ARCHIVE_MAX_INSTANTS: "8",
    P.CLEANER_COMMITS_RETAINED: "2",
    P.METADATA_COMPACT_DELTAS: "2",
}


class Crash(BaseException):
    """Stands for the death of the process."""


def write_rounds(table: Table, rounds: int, model: dict[int, tuple[str, float]]) -> list[str]:
    writer = WriteClient(table)
    instants = []
    for n in range(rounds):
        ids = [n % 5, 10 + n]
        instants.append(writer.upsert(trips(ids, ["us", "de"], fare=100.0 * n)).instant)
        model.update({i: (c, 100.0 * n + i) for i, c in zip(ids, ["us", "de"], strict=True)})
    return instants


def test_archival_keeps_the_timeline_short_and_reads_unchanged(backend: Backend) -> None:
    table = make_table(backend, **KEEP)
    model: dict[int, tuple[str, float]] = {}
    longest = 0
    instants = []
    for _ in range(5):
        instants += write_rounds(table, 3, model)
        longest = max(longest, len(table.timeline().completed()))
        assert rows(table) == model
    assert longest <= 8
    archived = read_archive(table.handle)
    names, contents = archived.column("file").to_pylist(), archived.column("content").to_pylist()
    files = dict(zip(names, contents, strict=True))
    archived_commits = {name[:17] for name in files if name.endswith(".commit")}
    assert instants[0] in archived_commits
    assert not archived_commits & {i.time for i in table.timeline()}, "an instant is active or archived"
    # Every timeline file of an archived instant is in the archive, content and all.
    assert b'"partitionToWriteStats"' in files[f"{instants[0]}.commit"]
    assert f"{instants[0]}.commit.requested" in files

    with pytest.raises(InstantNotRetainedError, match="archived"):
        table.read(as_of=instants[0])
    # Metadata-table files older than the archive boundary are gone: the folder stays small.
    index = table.handle.metadata_table_or_none()
    assert index is not None
    assert len(index.manifest_times()) <= 3
    assert index.deltas_since_compaction() <= 2


@pytest.mark.parametrize("step", ["written", "pending-states"])
def test_a_crash_during_archival_leaves_no_instant_looking_failed(backend: Backend, step: str) -> None:
    table = make_table(backend, **KEEP, **{P.ARCHIVE_AUTOMATIC: "false"})
    model: dict[int, tuple[str, float]] = {}
    write_rounds(table, 10, model)
    before = len(table.timeline().completed())

    def crash(reached: str) -> None:
        if reached == step:
            raise Crash(step)

    with pytest.raises(Crash), observe_steps(crash):
        archive(table.handle)
    assert table.timeline().pending() == []  # a rollback would undo a pending-looking instant
    assert rows(table) == model

    done = archive(table.handle)  # the next archival finishes the job
    assert done or step == "pending-states"
    assert len(table.timeline().completed()) < before
    write_rounds(table, 2, model)
    assert rows(table) == model


def test_a_boundary_manifest_without_a_pointer_is_found_when_archival_dies_before_pointing(
    backend: Backend,
) -> None:
    """A compaction that died between its manifest and its pointer leaves a manifest no
    pointer names; archival may still take it as its boundary, and if archival dies too,
    after moving the instants out but before pointing at its boundary, the newest pointer
    is older than what was archived. A lookup that started there would lack the moved
    instants (no delta it applies holds them): every handle must find the newer manifest."""
    table = make_table(backend, **(KEEP | {P.ARCHIVE_AUTOMATIC: "false", P.METADATA_COMPACT_DELTAS: "100"}))
    index = table.handle.metadata_table_or_none()
    assert index is not None
    model: dict[int, tuple[str, float]] = {}
    write_rounds(table, 3, model)
    first = compact_metadata(index)
    assert first is not None
    cached = load_table(backend.table_path, storage_options=backend.storage_options)  # a long-lived handle
    assert rows(cached) == model
    start = cached.handle.index_cache.manifest
    assert start is not None
    assert start.instant == first

    for n in range(5):  # each a new file group, whose file only the deltas after `first` hold
        ids = [100 + 2 * n, 101 + 2 * n]
        WriteClient(table).write(trips(ids, ["us", "de"], fare=7.0), "bulk_insert")
        model.update({i: (c, 7.0 + i) for i, c in zip(ids, ["us", "de"], strict=True)})
    second = compact_metadata(index)
    assert second is not None
    table.fs.table_fs.rm(index.pointer_path(second))  # the compaction died before pointing
    write_rounds(table, 4, model)

    def crash(reached: str) -> None:
        if reached == "moved":
            raise Crash(reached)

    with pytest.raises(Crash), observe_steps(crash):
        archive(table.handle)
    timeline = table.timeline()
    assert timeline.archived_through == second
    assert timeline.manifests
    assert timeline.manifests[-1] < second, "no pointer names the boundary"
    assert timeline.completed()[0].time > first, "instants after the cached manifest are gone"

    assert rows(cached) == model
    start = cached.handle.index_cache.manifest
    assert start is not None
    assert start.instant == second
    assert rows(load_table(backend.table_path, storage_options=backend.storage_options)) == model
    write_rounds(table, 6, model)  # later compactions and archivals carry on
    assert compact_metadata(index) is not None
    write_rounds(table, 4, model)
    assert archive(table.handle)
    timeline = table.timeline()
    assert timeline.archived_through is not None
    assert timeline.manifests[-1] >= timeline.archived_through
    assert rows(cached) == model
    assert rows(load_table(backend.table_path, storage_options=backend.storage_options)) == model


def test_a_savepoint_keeps_its_files_from_the_cleaner_and_its_instants_from_archival(
    backend: Backend,
) -> None:
    """A savepoint (Hudi's, made with its CLI before a risky change) names the files a restore
    to it needs: fed's cleaner keeps them, and its archival stops before the savepoint, as
    Hudi's own services do."""
    table = make_table(backend, **KEEP)
    model: dict[int, tuple[str, float]] = {}
    saved = write_rounds(table, 2, model)[-1]
    kept = {
        partition: sorted(files.files)
        for partition, files in table.handle.file_index.files(as_of=saved).items()
    }
    savepoint = {
        "savepointedBy": "hudi-cli",
        "savepointedAt": 0,
        "comments": "before the backfill",
        "partitionMetadata": {
            p: {"partitionPath": p, "savepointDataFile": names} for p, names in kept.items()
        },
        "version": 1,
    }
    fs = table.fs.table_fs
    fs.pipe_file(f"{table.path}/.hoodie/{saved}.savepoint.inflight", b"")
    fs.pipe_file(f"{table.path}/.hoodie/{saved}.savepoint", json.dumps(savepoint).encode())
    write_rounds(table, 12, model)
    assert rows(table) == model
    timeline = table.timeline()
    assert len(timeline.completed(["clean"])) >= 5, "the cleaner ran"
    assert timeline.find(saved) is not None, "archival stopped before the savepoint"
    for partition, names in kept.items():
        for name in names:
            assert table.fs.exists(f"{partition}/{name}"), f"{partition}/{name} was cleaned"
    assert verify_table(load_table(backend.table_path, storage_options=backend.storage_options)).ok


def test_an_instant_archived_after_the_listing_is_read_from_the_archive(backend: Backend) -> None:
    """A writer lists the timeline once and reads on; another process's archival may move a
    listed instant out in between. Its metadata is read from the archive, not lost."""
    table = make_table(backend, **KEEP)
    model: dict[int, tuple[str, float]] = {}
    write_rounds(table, 3, model)
    stale = load_table(backend.table_path, storage_options=backend.storage_options)
    listed = stale.timeline()  # listed now; no instant's metadata read by this handle yet
    oldest = listed.completed()[0]
    before = table.handle.commit_metadata(oldest)  # the other handle's read, while active
    other = load_table(backend.table_path, storage_options=backend.storage_options)
    write_rounds(other, 12, model)  # its archivals move the oldest instants out
    assert oldest.time not in {i.time for i in other.timeline()}, "archived"
    after = stale.handle.commit_metadata(oldest)
    encode = stale.handle.layout.commits.encode
    assert encode(after) == encode(before)
    # A completed file that no archive holds is lost, and says so.
    ghost = Instant("20000101000000000", "commit", COMPLETED)
    with pytest.raises(StorageFileNotFoundError, match=r"20000101000000000\.commit"):
        stale.handle.commit_metadata(ghost)
