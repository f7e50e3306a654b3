"""What each instant records in the metadata table, pinned whole (every op's partition, name,
size, kind and column statistics): a write's, a compaction's, a clean's and a rollback's
deltas as fedcore writes them, and what catch-up (``fedcore.metadata.catch_up``) derives from
the same instants' timeline files when another writer left no delta. The derivations live
once (``fedcore.metadata.operations``); these tests keep every caller producing what it did."""

from __future__ import annotations

from pathlib import Path

import pytest

from fed_dev.testing import trips
from fedcore import properties as P
from fedcore.exceptions import MetadataTableError
from fedcore.io.filesystems import read_object
from fedcore.metadata.catch_up import instant_ops
from fedcore.metadata.format import ADD, REMOVE, REPLACE, UNREPLACE, Op
from fedcore.metadata.table import MetadataTable
from fedcore.services.rollback import rollback
from fedcore.table import Table, create_table
from fedcore.timeline import Instant
from fedcore.timeline.commit_metadata import deleted_files


def _table(tmp_path: Path, table_type: str) -> Table:
    props = {
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: f"file://{tmp_path}/storage",
        P.METADATA_COMPACT_DELTAS: "1000",  # every delta stays to be read back
    }
    return create_table(
        f"file://{tmp_path}/tables/trips",
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        table_type=table_type,
        properties=props,
    )


def _index(table: Table) -> MetadataTable:
    index = table.handle.metadata_table_or_none()
    assert index is not None
    return index


def _delta(table: Table, instant: Instant) -> list[Op]:
    return _index(table).read_deltas([instant.time], None)[0]


def _latest(table: Table) -> Instant:
    return table.timeline().completed()[-1]


def _body(table: Table, instant: Instant) -> bytes:
    return read_object(table.handle.fs.table_fs, table.handle.layout.instants.path(table.path, instant))


def _sorted(ops: list[Op]) -> list[Op]:
    return sorted(ops, key=lambda op: op[:4])  # the order a delta is stored in


def _name(path: str) -> str:
    return path.rpartition("/")[2]


def _write_expected(table: Table, instant: Instant) -> list[Op]:
    """A write's delta as its own commit metadata states it: every file written added with its
    size and column statistics, every file group it replaced retired at its time."""
    metadata = table.commit_metadata(instant)
    ops = [Op(s.partition_path, _name(s.path), s.file_size, ADD, s.column_stats) for s in metadata.stats]
    ops += [Op(p, f, int(instant.time), REPLACE, None) for p, ids in metadata.replaced.items() for f in ids]
    return _sorted(ops)


def _check_write(table: Table, kinds: dict[int, int]) -> Instant:
    """The latest instant's delta is what its commit metadata states, catch-up derives the same
    from its timeline file, and it holds ``kinds`` ({op kind: count})."""
    instant = _latest(table)
    delta = _delta(table, instant)
    assert delta == _write_expected(table, instant)
    assert {k: sum(1 for op in delta if op.op == k) for k in kinds} == kinds
    assert all(op.stats is not None for op in delta if op.op == ADD and op.name.endswith(".parquet"))
    assert (
        _sorted(
            instant_ops(
                instant.time, instant.action, _body(table, instant), "trips", table.handle.layout.commits
            )
        )
        == delta
    )
    return instant


def _files(table: Table) -> dict[str, dict[str, int]]:
    return {p: dict(f.files) for p, f in table.handle.file_index.files(None).items()}


def _check_clean(table: Table, before: dict[str, dict[str, int]]) -> None:
    """A clean's delta removes each file its metadata names, with the size it had; catch-up
    takes the same removals in without sizes (a clean's metadata records none)."""
    assert table.clean(retained=1) is not None
    instant = _latest(table)
    deleted = deleted_files(_body(table, instant))
    assert deleted
    expected = _sorted([Op(p, n, before[p][n], REMOVE, None) for p, names in deleted.items() for n in names])
    assert _delta(table, instant) == expected
    caught = instant_ops(
        instant.time, instant.action, _body(table, instant), "trips", table.handle.layout.commits
    )
    assert _sorted(caught) == [op._replace(size=0) for op in expected]


def _check_rollback(table: Table, undone: Instant) -> Instant:
    """Rolling back a completed write removes every file it added (with its size) and brings
    back every group it retired; catch-up takes in the files the rollback deleted."""
    metadata = table.commit_metadata(undone)
    rollback(table.handle, undone.time)
    instant = _latest(table)
    expected = [Op(s.partition_path, _name(s.path), s.file_size, REMOVE, None) for s in metadata.stats]
    expected += [Op(p, f, 0, UNREPLACE, None) for p, ids in metadata.replaced.items() for f in ids]
    assert _delta(table, instant) == _sorted(expected)
    return instant


def test_copy_on_write_instants_record_whole_ops(tmp_path: Path) -> None:
    table = _table(tmp_path, "COPY_ON_WRITE")
    table.bulk_insert(trips(range(6), ["us", "de"] * 3))
    _check_write(table, {ADD: 2, REPLACE: 0})
    table.upsert(trips([0, 1, 100], ["us", "de", "us"], ts=2))  # updates and an insert
    _check_write(table, {ADD: 2, REPLACE: 0})
    table.delete(trips([2], "us", ts=3))
    _check_write(table, {ADD: 1, REPLACE: 0})
    before = _files(table)
    _check_clean(table, before)
    table.insert_overwrite(trips([7, 8], "de", ts=4))
    overwrite = _check_write(table, {ADD: 1, REPLACE: 1})
    written = [op.name for op in _delta(table, overwrite) if op.op == ADD]
    done = _check_rollback(table, overwrite)
    # Catch-up takes in a rollback of a replace commit the view never held: its file removed.
    caught = instant_ops(
        done.time, done.action, _body(table, done), "trips", table.handle.layout.commits, lambda _: False
    )
    assert caught == [Op("country=de", name, 0, REMOVE, None) for name in written]
    with pytest.raises(MetadataTableError, match="rolled back the replace commit"):
        _caught(table, done)


def test_merge_on_read_instants_record_whole_ops(tmp_path: Path) -> None:
    table = _table(tmp_path, "MERGE_ON_READ")
    table.bulk_insert(trips(range(6), ["us", "de"] * 3))
    _check_write(table, {ADD: 2})
    table.upsert(trips([0, 1], ["us", "de"], ts=2))  # log files appended onto both slices
    upsert = _check_write(table, {ADD: 2})
    assert all(".log." in op.name for op in _delta(table, upsert))
    table.delete(trips([2], "us", ts=3))
    _check_write(table, {ADD: 1})
    assert table.compact() is not None
    compaction = _check_write(table, {ADD: 2})
    assert all(op.name.endswith(".parquet") for op in _delta(table, compaction))
    table.upsert(trips([1], "de", ts=4))  # onto the compacted slice: the slices before retire
    _check_write(table, {ADD: 1})
    _check_clean(table, _files(table))
    table.upsert(trips([3], "de", ts=5))
    appended = _check_write(table, {ADD: 1})
    done = _check_rollback(table, appended)
    caught = _caught(table, done)
    assert caught == [op._replace(size=0) for op in _delta(table, done)]


def _caught(table: Table, instant: Instant, held: bool = True) -> list[Op]:
    """Catch-up's ops of ``instant``, read from its completed timeline file."""
    body = _body(table, instant)
    return instant_ops(
        instant.time, instant.action, body, "trips", table.handle.layout.commits, lambda _: held
    )
