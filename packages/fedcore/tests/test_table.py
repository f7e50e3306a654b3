from __future__ import annotations

import json
import threading

import pytest

from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import (
    InvalidStorageConfigError,
    StorageStrategyMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from fedcore.handle.config import TableConfig, properties_path
from fedcore.storage import ObjectStoreStorageStrategy
from fedcore.table import create_table, load_table


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
