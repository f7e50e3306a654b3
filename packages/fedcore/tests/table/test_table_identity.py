"""A table's files are its own: two tables of one name on one storage path, tables that
shared a folder before each got one of its own, and a table copied with its ``.hoodie/``
folder each keep every row through verify, orphan deletion, repair and clean, whichever of
them runs them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fed_dev.crash import Crash, crash_at
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import CopiedTableError
from fedcore.handle import storage_checksum
from fedcore.handle.config import TableConfig
from fedcore.io.filesystems import filesystem_for
from fedcore.services.history import load_history
from fedcore.services.verify import delete_orphans, verify_table
from fedcore.steps import observe_steps
from fedcore.table import Table, create_table, load_table
from fedcore.write.client import WriteClient

from ..write.test_writes import FAST_HEARTBEAT

#: Retention that makes every write clean and archive: cleanups have files to delete.
KEEP = {P.CLEANER_COMMITS_RETAINED: "1", P.ARCHIVE_MIN_INSTANTS: "2", P.ARCHIVE_MAX_INSTANTS: "3"}
LAYOUTS = ("object_store", "partition_map")


def _storage(layout: str, storage_path: str) -> dict[str, str]:
    if layout == "object_store":
        return {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: storage_path}
    return {
        P.STORAGE_STRATEGY_CLASS: "partition_map",
        P.STORAGE_PARTITION_LOCATIONS: f'{{"country=us": "{storage_path}/us"}}',
        P.STORAGE_PATH: f"{storage_path}/rest",
    }


def _create(backend: Backend, path: str, layout: str = "object_store", **extra: str) -> Table:
    return create_table(
        path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={**FAST_HEARTBEAT, **KEEP, **_storage(layout, backend.storage_path), **extra},
        storage_options=backend.storage_options,
    )


def _open(backend: Backend, path: str) -> Table:
    return load_table(path, storage_options=backend.storage_options)


def _trips(ids: list[int], fare: float) -> pa.Table:
    return pa.table(
        {
            "trip_id": pa.array(ids, pa.int64()),
            "country": [("us", "de", "fr")[i % 3] for i in ids],
            "ts": pa.array([1] * len(ids), pa.int64()),
            "fare": [fare + i for i in ids],
        }
    )


def _rows(table: Table) -> Counter[tuple[Any, ...]]:
    """Whole rows as a multiset: a key held twice, or a row lost, fails a comparison."""
    data = table.read(columns=["trip_id", "country", "fare"])
    return Counter(zip(*(data.column(n).to_pylist() for n in data.column_names), strict=True))


class Model:
    """What a table must hold: each key's row after the writes it was given."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[int, str, float]] = {}

    def upsert(self, table: Table, ids: list[int], fare: float) -> None:
        WriteClient(table).upsert(_trips(ids, fare))
        self.rows.update((i, (i, ("us", "de", "fr")[i % 3], fare + i)) for i in ids)

    def expected(self) -> Counter[tuple[Any, ...]]:
        return Counter(self.rows.values())


def _writes(first: tuple[Table, Model], second: tuple[Table, Model]) -> None:
    """Both tables written in turns, each with updates of its keys, so cleans have files to
    delete, and one write of the first left failed and rolled back (an orphan's origin)."""
    for n in range(4):
        for (table, model), base in ((first, 0), (second, 1000)):
            model.upsert(
                table, [base + i for i in range(6)] if n == 0 else [base + n, base + n + 3], 10.0 * n
            )
    table, _ = first
    with pytest.raises(Crash), observe_steps(crash_at("metadata")):
        WriteClient(table).upsert(_trips([1, 2], 99.0))
    time.sleep(0.5)  # its heartbeat expires: the next write rolls it back


def _maintain(backend: Backend, path: str) -> None:
    """verify, orphan deletion at once, repair, clean: every cleanup a user runs."""
    table = _open(backend, path)
    report = verify_table(table)
    assert report.ok, report.format()
    assert not report.foreign, report.format()  # the other table's files are in its own folder
    delete_orphans(table.handle, report, timedelta(0))
    repaired = table.repair()
    assert not repaired.foreign, repaired.format()
    assert not repaired.missing_latest, repaired.format()
    _open(backend, path).clean(retained=1)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_two_tables_of_one_name_on_one_storage_path_keep_every_row(backend: Backend, layout: str) -> None:
    """Two tables called trips (a dev and a prod one, say) created with one storage path: each
    gets a folder of its own, so one's cleanups never reach the other's files."""
    dev, prod = f"{backend.table_path}_dev", f"{backend.table_path}_prod"
    first, second = (_create(backend, dev, layout), Model()), (_create(backend, prod, layout), Model())
    assert first[0].config[P.STORAGE_TABLE_FOLDER] != second[0].config[P.STORAGE_TABLE_FOLDER]
    _writes(first, second)
    WriteClient(_open(backend, dev)).upsert(_trips([5], 7.0))  # rolls the failed write back
    first[1].rows[5] = (5, "fr", 12.0)
    # A failed task attempt's file in a new file group, of a completed write: in a folder of
    # the table's own, its instant alone makes it the table's orphan.
    write = _open(backend, prod).timeline().latest_completed()
    assert write is not None
    attempt = _put_file(backend, prod, write.time)
    for path in (dev, prod, dev):
        _maintain(backend, path)
    assert not backend.exists(attempt)
    assert _rows(_open(backend, dev)) == first[1].expected()
    assert _rows(_open(backend, prod)) == second[1].expected()
    for path in (dev, prod):
        report = verify_table(_open(backend, path))
        assert report.ok, report.format()
        assert not report.orphans, report.format()
        assert not report.foreign, report.format()


def _legacy(backend: Backend, path: str) -> Table:
    """A table as fedcore made them before tables had an identity: files in a folder named
    after the table alone (two tables of one name on one storage path share it)."""
    table = _create(backend, path)
    fs = table.fs.table_fs
    config = TableConfig.load(fs, path).without([P.TABLE_ID, P.TABLE_ID_PATH, P.STORAGE_TABLE_FOLDER])
    storage = {k: v for k, v in config.items() if k in P.STORAGE_KEYS}
    config.with_properties({P.STORAGE_CHECKSUM: storage_checksum(storage)}).save_replacing(fs, path)
    return _open(backend, path)


def test_tables_that_share_a_folder_from_before_never_touch_each_others_files(backend: Backend) -> None:
    """Two tables of one name made before each got a folder of its own share one: whose file
    is whose is told by the timeline, so verify, orphan deletion, repair and clean of either
    leave the other's files alone, and delete the orphan of its own failed write."""
    dev, prod = f"{backend.table_path}_dev", f"{backend.table_path}_prod"
    first, second = (_legacy(backend, dev), Model()), (_legacy(backend, prod), Model())
    _writes(first, second)
    shared = {Path(p).parent.parent.name for p in _data_files(backend)}
    assert shared == {"trips"}, "both tables' files in one folder per prefix"
    # The failed write of the first left files: the second's write comes after and rolls
    # nothing of it back (it is not its table's), the first's next write rolls it back.
    WriteClient(_open(backend, dev)).upsert(_trips([5], 7.0))
    first[1].rows[5] = (5, "fr", 12.0)
    orphan = _put_orphan(backend, dev)
    # A file of the other table whose instant happens to equal the first's rolled-back write
    # (instants are unique only within a table): not named by that rollback, in no group of
    # the first table's, so never the first table's orphan.
    stranger = _put_file(backend, dev, min(load_history(_open(backend, dev).handle).rolled_back))
    # The first write under this fedcore recorded an identity; the folder stays the name.
    upgraded = _open(backend, dev).config
    assert P.TABLE_ID in upgraded
    assert P.STORAGE_TABLE_FOLDER not in upgraded
    WriteClient(_open(backend, prod)).upsert(_trips([1003], 9.0))  # the second table wrote last
    second[1].rows[1003] = (1003, ("us", "de", "fr")[1003 % 3], 1012.0)

    for path, own, other in ((dev, first, second), (prod, second, first)):
        table = _open(backend, path)
        report = verify_table(table)
        assert report.ok, report.format()
        assert not report.in_flight, report.format()
        theirs = {f.path for f in report.foreign}
        assert _files_of(backend, other[0]) <= theirs, report.format()
        assert not theirs & _files_of(backend, own[0]), report.format()
        assert not {f.path for f in report.orphans} & _files_of(backend, other[0]), report.format()
        deleted = delete_orphans(table.handle, report, timedelta(0))
        assert (deleted == [orphan]) == (path == dev), deleted
        assert stranger in {f.path for f in report.foreign}, report.format()
        repaired = _open(backend, path).repair()
        assert not repaired.missing_latest, repaired.format()
        _open(backend, path).clean(retained=1)
        assert _rows(_open(backend, path)) == own[1].expected()
        assert _rows(_open(backend, other[0].path)) == other[1].expected()
    assert not backend.exists(orphan)
    assert backend.exists(stranger)


def _data_files(backend: Backend) -> list[str]:
    fs = filesystem_for(backend.storage_path, backend.storage_options)
    fs.invalidate_cache()
    return sorted(str(p) for p in fs.find(backend.storage_path) if str(p).endswith(".parquet"))


def _files_of(backend: Backend, table: Table) -> set[str]:
    """The physical paths of every file the table's metadata references now."""
    fresh = _open(backend, table.path)
    return {
        fresh.fs.to_physical(f"{partition}/{name}")
        for partition, files in fresh.handle.file_index.files().items()
        for name in files.files
    }


def _put_orphan(backend: Backend, path: str) -> str:
    """A file of the table's rolled-back write left in storage (its deletion failed), in a
    file group of the table's."""
    table = _open(backend, path)
    return _put_file(backend, path, min(load_history(table.handle).rolled_back), own_group=True)


def _put_file(backend: Backend, path: str, instant: str, *, own_group: bool = False) -> str:
    """A copy of one of the table's base files named after ``instant``, in the file group it
    belongs to (``own_group``) or in a new one; its physical path."""
    table = _open(backend, path)
    partition, files = next(iter(table.handle.file_index.files().items()))
    name = next(iter(files.files))
    file_id, token, _ = name.split("_")
    group = file_id if own_group else f"{uuid.uuid4()}-0"
    placed = table.fs.to_physical(f"{partition}/{group}_{token}_{instant}.parquet")
    fs = filesystem_for(placed, backend.storage_options)
    fs.pipe_file(placed, fs.cat_file(table.fs.to_physical(f"{partition}/{name}")))
    return placed


def _copy_tree(backend: Backend, source: str, target: str) -> None:
    """``cp -r`` of a table path (its ``.hoodie/`` folder: a federated table's data is elsewhere)."""
    if backend.name == "local":
        shutil.copytree(source.removeprefix("file://"), target.removeprefix("file://"))
        return
    fs = filesystem_for(source, backend.storage_options)
    fs.invalidate_cache()
    stripped = fs._strip_protocol(source)
    for path in fs.find(source):
        fs.copy(path, fs._strip_protocol(target) + path[len(stripped) :])


def test_a_copied_table_is_refused_writes_and_cleanups_and_its_source_keeps_every_row(
    backend: Backend,
) -> None:
    """A table copied with its ``.hoodie/`` folder shares its source's data files: writes and
    cleanups through the copy are refused, naming the command that gives it files of its own;
    verify and repair of the copy call the source's newer files another table's."""
    # The source keeps its older slices: the copy's rows stay readable (a copy that shares
    # files loses them to its source's cleans, as any shallow copy does).
    source = _create(backend, f"{backend.table_path}_source", **{P.CLEANER_COMMITS_RETAINED: "10"})
    model = Model()
    model.upsert(source, list(range(8)), 1.0)
    model.upsert(source, [1, 2], 2.0)
    copied_rows = model.expected()
    copy_path = f"{backend.table_path}_copy"
    _copy_tree(backend, source.path, copy_path)
    copied_files = _files_of(backend, _open(backend, copy_path))
    model.upsert(_open(backend, source.path), [3, 4], 3.0)  # the source writes on
    model.upsert(_open(backend, source.path), [100], 3.0)
    newer = _files_of(backend, source) - copied_files
    assert newer

    copy = _open(backend, copy_path)
    assert _rows(copy) == copied_rows  # reading a copy is fine
    with pytest.raises(
        CopiedTableError, match=f"copy of the table at {source.path}.*fed migrate {copy_path}"
    ) as refused:
        WriteClient(copy).upsert(_trips([1], 50.0))
    with pytest.raises(CopiedTableError):
        _open(backend, copy_path).clean(retained=1)
    report = verify_table(_open(backend, copy_path))
    assert report.ok, report.format()
    assert not report.orphans, report.format()
    assert newer <= {f.path for f in report.foreign}, report.format()
    with pytest.raises(CopiedTableError):
        delete_orphans(_open(backend, copy_path).handle, report, timedelta(0))
    repaired = _open(backend, copy_path).repair()  # the copy's own metadata table, rebuilt
    assert newer <= {f.path for f in repaired.foreign}, repaired.format()
    assert not repaired.orphans, repaired.format()
    assert _files_of(backend, _open(backend, copy_path)) == copied_files
    assert _rows(_open(backend, copy_path)) == copied_rows
    assert _rows(_open(backend, source.path)) == model.expected()
    assert all(backend.exists(path) for path in _files_of(backend, source))

    # The hint, followed: the copy becomes a table of its own, written where the source never reads.
    target, storage = f"{backend.table_path}_own", f"{backend.storage_path}/own"
    hint = "--storage-strategy object_store --storage-path NEW_STORAGE_PATH"
    assert hint in str(refused.value)
    migrated = _fed(
        backend, "migrate", copy_path, target, "--storage-strategy", "object_store", "--storage-path", storage
    )
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    own = _open(backend, target)
    assert _rows(own) == copied_rows
    WriteClient(own).upsert(_trips([1], 60.0))
    expected = copied_rows - Counter([(1, "de", 3.0)]) + Counter([(1, "de", 61.0)])
    assert _rows(_open(backend, target)) == expected
    assert _rows(_open(backend, source.path)) == model.expected()


def _fed(backend: Backend, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``fed`` command, with the backend's storage options as flat ``--storage-option``s."""
    flat: dict[str, str] = {}
    for options in (backend.storage_options or {}).values():
        for key, value in options.items():
            flat.update(value if isinstance(value, dict) else {key: value})
    given = [f"--storage-option={k}={v}" for k, v in flat.items()]
    return subprocess.run([sys.executable, "-m", "fedcore", *args, *given], capture_output=True, text=True)


def test_a_moved_table_writes_and_records_its_new_path(tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table = _create(backend, backend.table_path)
    model = Model()
    model.upsert(table, [1, 2, 3], 1.0)
    moved = f"file://{tmp_path}/moved/trips"
    Path(tmp_path, "moved").mkdir()
    shutil.move(f"{tmp_path}/tables/trips", f"{tmp_path}/moved/trips")
    model.upsert(_open(backend, moved), [2, 4], 2.0)
    assert _open(backend, moved).config[P.TABLE_ID_PATH] == moved
    assert _rows(_open(backend, moved)) == model.expected()


def test_the_commands_keep_two_tables_of_one_name_apart(tmp_path: Path) -> None:
    """As a user types it: two `fed create` of one name and storage path, each written, then
    `fed verify --delete-orphans` on one: the other reads every row."""
    storage = f"{tmp_path}/storage"
    paths = [f"{tmp_path}/dev/trips", f"{tmp_path}/prod/trips"]
    data = tmp_path / "in.parquet"
    pq.write_table(_trips(list(range(10)), 1.0), data)
    for path in paths:
        created = _fed_local(
            "create",
            path,
            "--name",
            "trips",
            "--record-key",
            "trip_id",
            "--partition-by",
            "country",
            "--precombine",
            "ts",
            "--storage-strategy",
            "object_store",
            "--storage-path",
            storage,
        )
        assert created.returncode == 0, created.stderr
        for _ in range(2):
            written = _fed_local("write", path, str(data))
            assert written.returncode == 0, written.stderr
    verified = _fed_local("verify", paths[0], "--delete-orphans", "--older-than", "0m")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "OK" in verified.stdout
    for path in paths:
        assert _rows(load_table(path)) == Counter((i, ("us", "de", "fr")[i % 3], 1.0 + i) for i in range(10))


def _fed_local(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedcore", *args], capture_output=True, text=True)


def test_a_table_opened_through_a_link_to_its_path_is_the_table_itself(tmp_path: Path) -> None:
    """A path that resolves to the table's own (a symbolic link, a bind mount) is no copy."""
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    model = Model()
    model.upsert(_create(backend, backend.table_path), [1, 2], 1.0)
    (tmp_path / "link").symlink_to(tmp_path / "tables")
    linked = f"file://{tmp_path}/link/trips"
    model.upsert(_open(backend, linked), [2, 3], 2.0)
    assert _open(backend, linked).config[P.TABLE_ID_PATH] == backend.table_path  # not re-recorded
    assert _rows(_open(backend, backend.table_path)) == model.expected()


def test_a_table_whose_recorded_path_cannot_be_read_says_how_to_record_a_move(tmp_path: Path) -> None:
    """The table path its identity records cannot be read from here (a store this caller does
    not reach: here an endpoint that refuses connections), so a copy cannot be told from a
    move: the write is refused saying how to record a move, and once that is done, it goes on."""
    refusing = {"s3": {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}}
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", refusing)
    model = Model()
    model.upsert(_create(backend, backend.table_path), [1], 1.0)
    stored = Path(tmp_path / "tables/trips/.hoodie/hoodie.properties")
    recorded = f"{P.TABLE_ID_PATH}=file\\:///{tmp_path}/tables/trips".replace("file\\:////", "file\\:///")
    assert recorded in stored.read_text(), stored.read_text()
    stored.write_text(stored.read_text().replace(recorded, f"{P.TABLE_ID_PATH}=s3\\://elsewhere/trips"))
    with pytest.raises(CopiedTableError) as refused:
        WriteClient(_open(backend, backend.table_path)).upsert(_trips([2], 2.0))
    hint = re.search(
        rf"if it was moved, set ({re.escape(P.TABLE_ID_PATH)})=(\S+) in (\S+)$", str(refused.value)
    )
    assert hint is not None, str(refused.value)
    assert hint[3] == f"{backend.table_path}/.hoodie/hoodie.properties"
    text = stored.read_text().replace(
        f"{P.TABLE_ID_PATH}=s3\\://elsewhere/trips", f"{hint[1]}={hint[2]}".replace(":", "\\:")
    )
    stored.write_text(text)
    model.upsert(_open(backend, backend.table_path), [2], 2.0)
    assert _rows(_open(backend, backend.table_path)) == model.expected()
