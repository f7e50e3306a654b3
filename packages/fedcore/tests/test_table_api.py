"""``Table`` holds a handle: the user's names are its own, the handle's others answer with a
``DeprecationWarning`` for one release, and the maintenance methods do the services' work."""

from __future__ import annotations

import pickle

import pytest

from fed_dev.testing import Backend, rows, trips
from fedcore import properties as P
from fedcore.exceptions import ConfigError
from fedcore.handle import TableHandle
from fedcore.table import Table, create_table, load_table


def make(backend: Backend) -> Table:
    return create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: backend.storage_path},
        storage_options=backend.storage_options,
    )


def test_a_table_holds_its_handle(backend: Backend) -> None:
    table = make(backend)
    assert not isinstance(table, TableHandle)
    assert isinstance(table.handle, TableHandle)
    assert (table.path, table.name, table.config) == (table.handle.path, "trips", table.handle.config)
    assert isinstance(table.with_options({P.MAX_FILE_SIZE: "1000000"}), Table)
    table.upsert(trips(range(4), ["usa", "bra"] * 2))
    again = pickle.loads(pickle.dumps(table))
    assert rows(again) == rows(table)
    assert len(rows(table)) == 4


def test_a_table_shows_no_handle_name_of_its_own(backend: Backend) -> None:
    """The handle's inner names (its file index, caches, protocol paths) are the handle's:
    a ``Table`` answers only its own, and ``write_actions`` and ``partitions`` are those."""
    table = make(backend)
    table.upsert(trips(range(3), ["usa", "bra", "usa"]))
    assert not hasattr(Table, "__getattr__")
    for name in ("file_index", "index_cache", "metadata_table_or_none", "outcome_path", "open"):
        with pytest.raises(AttributeError):
            getattr(table, name)
    assert table.handle.file_index is not None
    assert table.write_actions == table.handle.write_actions
    assert table.partitions() == ["country=bra", "country=usa"]


def test_load_tables_properties_is_the_old_name_of_options(backend: Backend) -> None:
    table = make(backend)
    with pytest.warns(DeprecationWarning, match="properties= is deprecated|load_table\\(properties="):
        old = load_table(
            table.path, properties={P.MAX_FILE_SIZE: "1000000"}, storage_options=backend.storage_options
        )
    assert old.options[P.MAX_FILE_SIZE] == "1000000"
    with (
        pytest.raises(ConfigError, match="options= alone"),
        pytest.warns(DeprecationWarning, match="properties="),
    ):
        load_table(table.path, options={}, properties={}, storage_options=backend.storage_options)


def test_maintenance_methods(backend: Backend) -> None:
    table = make(backend)
    table.bulk_insert(trips(range(6), ["usa", "bra"] * 3))
    for fare in (1.0, 2.0, 3.0):
        table.upsert(trips(range(6), ["usa", "bra"] * 3, fare=fare), {P.CLEAN_AUTOMATIC: "false"})
    versions = len(table.handle.file_index.files(["country=usa"])["country=usa"].files)
    done = table.clean(retained=1)
    assert done.instant is not None  # older versions were there to delete
    assert (done.retained, done.earliest_retained) == (
        1,
        table.timeline().completed(table.write_actions)[-1].time,
    )
    every = sum(len(found.files) for found in table.handle.file_index.files().values())
    assert done.files_deleted == 2 * versions - every  # both partitions were written alike
    assert table.clean(retained=1).instant is None  # nothing older left
    assert len(table.handle.file_index.files(["country=usa"])["country=usa"].files) < versions
    assert rows(table) == {i: ("usa" if i % 2 == 0 else "bra", 3.0 + i) for i in range(6)}
    assert table.archive() == []  # 5 instants: below hoodie.keep.max.commits
    report = table.verify()
    assert report.ok
    dry = table.repair(dry_run=True)
    assert dry.files == report.referenced
    assert (dry.added, dry.dropped) == ([], [])
