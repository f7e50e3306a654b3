"""Tables created, opened and held: the persisted strategy and its storage keys, racing creators,
typed errors; ``Table``'s own names (it forwards none of its handle's) and its maintenance
methods."""

from __future__ import annotations

import json
import pickle
import threading

import pytest

from fed_dev.testing import Backend, rows, trips
from fedcore import properties as P
from fedcore.exceptions import (
    ConfigError,
    InvalidStorageConfigError,
    StorageStrategyMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from fedcore.handle import TableHandle
from fedcore.handle.config import TableConfig, properties_path
from fedcore.storage import ObjectStoreStorageStrategy
from fedcore.table import Table, create_table, load_table


def object_store_props(backend: Backend, **extra: str) -> dict[str, str]:
    return {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: backend.storage_path, **extra}


def create(backend: Backend, **extra: str):  # type: ignore[no-untyped-def]
    return create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        properties=object_store_props(backend, **extra),
        storage_options=backend.storage_options,
    )


def test_strategy_is_persisted_and_rebuilt_on_open(backend: Backend) -> None:
    created = create(backend, **{P.STORAGE_PREFIX_COUNT: "64"})
    raw = backend.read(properties_path(backend.table_path))
    persisted = TableConfig.from_bytes(raw)
    assert persisted[P.STORAGE_STRATEGY_CLASS] == "object_store"
    assert persisted[P.STORAGE_PATH] == backend.storage_path
    assert persisted[P.STORAGE_HASH_FUNCTION] == "xxh32"
    assert persisted[P.STORAGE_HASH_INPUT] == "file_id"
    assert persisted[P.STORAGE_PREFIX_COUNT] == "64"

    opened = load_table(backend.table_path, storage_options=backend.storage_options)
    assert isinstance(opened.strategy, ObjectStoreStorageStrategy)
    assert opened.strategy == created.strategy
    path = "country=us/0a1b2c3d-0000-4000-8000-000000000000-0_0-1-1_20260101000000000.parquet"
    assert opened.fs.to_physical(path) == created.fs.to_physical(path)


def test_no_storage_option_reaches_the_properties_file(s3_server) -> None:  # type: ignore[no-untyped-def]
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    create_table(
        f"{tables}/trips",
        name="trips",
        record_key_fields=["id"],
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: storage},
        storage_options=s3_server.storage_options(),
    )
    client = s3_server.client()
    raw = client.get_object(Bucket=tables[5:], Key="trips/.hoodie/hoodie.properties")["Body"].read()
    options = s3_server.storage_options()["s3"]
    for secret in (options["key"], options["secret"], options["client_kwargs"]["endpoint_url"]):
        assert secret.encode() not in raw


def test_opening_with_matching_storage_keys_is_fine(backend: Backend) -> None:
    create(backend)
    same = object_store_props(backend, **{P.STORAGE_HASH_FUNCTION: "xxh32"})
    table = load_table(backend.table_path, options=same, storage_options=backend.storage_options)
    assert table.strategy.properties()[P.STORAGE_PATH] == backend.storage_path
    # A storage path spelled with a trailing slash is the same path.
    load_table(
        backend.table_path,
        options={P.STORAGE_PATH: backend.storage_path + "/"},
        storage_options=backend.storage_options,
    )


@pytest.mark.parametrize(
    "asked",
    [
        {P.STORAGE_STRATEGY_CLASS: "hive"},
        {P.STORAGE_HASH_FUNCTION: "xxh64"},
        {P.STORAGE_PREFIX_COUNT: "16"},
        {P.STORAGE_HASH_INPUT: "partition_and_file_id"},
        {P.STORAGE_PATH: "s3://some-other-bucket"},
    ],
)
def test_a_different_strategy_is_refused_with_a_migration_hint(
    backend: Backend, asked: dict[str, str]
) -> None:
    create(backend)
    with pytest.raises(StorageStrategyMismatchError, match="migration"):
        load_table(backend.table_path, options=asked, storage_options=backend.storage_options)


def test_hive_table_refuses_object_store_options(backend: Backend) -> None:
    create_table(
        backend.table_path, name="trips", record_key_fields=["id"], storage_options=backend.storage_options
    )
    config = TableConfig.from_bytes(backend.read(properties_path(backend.table_path)))
    assert config[P.STORAGE_STRATEGY_CLASS] == "hive"
    with pytest.raises(StorageStrategyMismatchError):
        load_table(
            backend.table_path,
            options=object_store_props(backend),
            storage_options=backend.storage_options,
        )


def test_partition_map_is_persisted_canonically(backend: Backend) -> None:
    locations = {"country=us": backend.storage_path + "/us/", "country=de": backend.storage_path + "/de"}
    create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["id"],
        partition_fields=["country"],
        properties={
            P.STORAGE_STRATEGY_CLASS: "partition_map",
            P.STORAGE_PARTITION_LOCATIONS: json.dumps(locations),
        },
        storage_options=backend.storage_options,
    )
    table = load_table(backend.table_path, storage_options=backend.storage_options)
    assert json.loads(table.config[P.STORAGE_PARTITION_LOCATIONS]) == {
        "country=de": backend.storage_path + "/de",
        "country=us": backend.storage_path + "/us",
    }


def test_creating_twice_fails_and_keeps_the_first(backend: Backend) -> None:
    create(backend)
    with pytest.raises(TableAlreadyExistsError):
        create(backend, **{P.STORAGE_PREFIX_COUNT: "8"})
    table = load_table(backend.table_path, storage_options=backend.storage_options)
    assert P.STORAGE_PREFIX_COUNT not in table.config


def test_two_racing_creators_exactly_one_wins(backend: Backend) -> None:
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def creator(count: str) -> None:
        barrier.wait()
        try:
            create(backend, **{P.STORAGE_PREFIX_COUNT: count})
            outcomes.append(count)
        except TableAlreadyExistsError:
            outcomes.append("lost")

    threads = [threading.Thread(target=creator, args=(c,)) for c in ("8", "16")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 2
    assert outcomes.count("lost") == 1
    (winner,) = [o for o in outcomes if o != "lost"]
    table = load_table(backend.table_path, storage_options=backend.storage_options)
    assert table.config[P.STORAGE_PREFIX_COUNT] == winner


def test_missing_table_and_bad_options_are_typed(backend: Backend) -> None:
    with pytest.raises(TableNotFoundError):
        load_table(backend.table_path, storage_options=backend.storage_options)
    with pytest.raises(InvalidStorageConfigError) as raised:
        create_table(
            backend.table_path,
            name="trips",
            record_key_fields=["id"],
            properties={P.STORAGE_STRATEGY_CLASS: "object_store"},
            storage_options=backend.storage_options,
        )
    assert raised.value.key == P.STORAGE_PATH
    with pytest.raises(TableNotFoundError):  # nothing half-created
        load_table(backend.table_path, storage_options=backend.storage_options)


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
