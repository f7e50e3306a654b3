from __future__ import annotations

import json
import pickle
import sys
import textwrap
from pathlib import Path

import pytest
import xxhash

from fedcore import properties as P
from fedcore.exceptions import (
    InvalidPathError,
    InvalidStorageConfigError,
    InvalidTableConfigError,
    UnknownStorageStrategyError,
    UnmappedPartitionError,
)
from fedcore.storage import (
    HiveStorageStrategy,
    PartitionMapStorageStrategy,
    StorageStrategy,
    load_storage_strategy,
)

TABLE = "s3://lake-tables/trips"
FILE_ID = "075f3295-def8-4a42-a927-07fd2dd2976c-0"
BASE = f"{FILE_ID}_7-11-49_20220301005056692.parquet"


def object_store(**extra: str) -> StorageStrategy:
    props = {
        P.TABLE_NAME: "trips",
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: "s3://lake-storage",
        **extra,
    }
    return load_storage_strategy(TABLE, props)


def test_default_strategy_is_hive_and_keeps_data_under_the_table_path() -> None:
    strategy = load_storage_strategy(TABLE, {P.TABLE_NAME: "trips"})
    assert isinstance(strategy, HiveStorageStrategy)
    location = strategy.storage_location("country=usa", FILE_ID)
    assert location.join(f"country=usa/{BASE}") == f"{TABLE}/country=usa/{BASE}"
    assert strategy.roots() == (TABLE,)


def test_object_store_layout_matches_the_documented_example() -> None:
    location = object_store().storage_location("country=usa", FILE_ID)
    expected_hash = xxhash.xxh32_hexdigest(FILE_ID.encode())
    assert len(expected_hash) == 8
    assert expected_hash == expected_hash.lower()
    assert location.uri == f"s3://lake-storage/{expected_hash}/trips"
    assert location.root == "s3://lake-storage"
    assert location.join(f"country=usa/{BASE}") == (
        f"s3://lake-storage/{expected_hash}/trips/country=usa/{BASE}"
    )


def test_non_partitioned_tables_have_no_partition_segment() -> None:
    strategy = object_store()
    assert strategy.storage_location(FILE_ID) == strategy.storage_location("", FILE_ID)
    assert strategy.storage_location(FILE_ID).uri.endswith("/trips")


def test_xxh64_gives_sixteen_hex_characters() -> None:
    uri = object_store(**{P.STORAGE_HASH_FUNCTION: "xxh64"}).storage_location("p=1", FILE_ID).uri
    assert uri.split("/")[3] == xxhash.xxh64_hexdigest(FILE_ID.encode())
    assert len(uri.split("/")[3]) == 16


def test_hash_input_can_include_the_partition() -> None:
    strategy = object_store(**{P.STORAGE_HASH_INPUT: "partition_and_file_id"})
    a = strategy.storage_location("country=usa", FILE_ID).uri.split("/")[3]
    b = strategy.storage_location("country=fra", FILE_ID).uri.split("/")[3]
    assert a == xxhash.xxh32_hexdigest(f"country=usa/{FILE_ID}".encode())
    assert a != b


@pytest.mark.parametrize(("count", "width"), [(1, 1), (16, 1), (17, 2), (256, 2), (1000, 3), (4096, 3)])
def test_bounded_prefixes_are_fixed_width_hex(count: int, width: int) -> None:
    strategy = object_store(**{P.STORAGE_PREFIX_COUNT: str(count)})
    prefix = strategy.storage_location("p=1", FILE_ID).uri.split("/")[3]
    assert len(prefix) == width
    assert int(prefix, 16) == xxhash.xxh32_intdigest(FILE_ID.encode()) % count


@pytest.mark.parametrize(
    ("props", "key", "error"),
    [
        ({P.STORAGE_STRATEGY_CLASS: "no_such_layout"}, P.STORAGE_STRATEGY_CLASS, UnknownStorageStrategyError),
        ({P.STORAGE_STRATEGY_CLASS: "object_store"}, P.STORAGE_PATH, InvalidStorageConfigError),
        (
            {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: TABLE + "/data"},
            P.STORAGE_PATH,
            InvalidStorageConfigError,
        ),
        (
            {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: TABLE},
            P.STORAGE_PATH,
            InvalidStorageConfigError,
        ),
        (
            {
                P.STORAGE_STRATEGY_CLASS: "object_store",
                P.STORAGE_PATH: "s3://x",
                P.STORAGE_PREFIX_COUNT: "ten",
            },
            P.STORAGE_PREFIX_COUNT,
            InvalidStorageConfigError,
        ),
        (
            {
                P.STORAGE_STRATEGY_CLASS: "object_store",
                P.STORAGE_PATH: "s3://x",
                P.STORAGE_PREFIX_COUNT: "-4",
            },
            P.STORAGE_PREFIX_COUNT,
            InvalidStorageConfigError,
        ),
        (
            {
                P.STORAGE_STRATEGY_CLASS: "object_store",
                P.STORAGE_PATH: "s3://x",
                P.STORAGE_HASH_FUNCTION: "md5",
            },
            P.STORAGE_HASH_FUNCTION,
            InvalidStorageConfigError,
        ),
        (
            {
                P.STORAGE_STRATEGY_CLASS: "object_store",
                P.STORAGE_PATH: "s3://x",
                P.STORAGE_HASH_INPUT: "name",
            },
            P.STORAGE_HASH_INPUT,
            InvalidStorageConfigError,
        ),
        (
            {P.STORAGE_STRATEGY_CLASS: "collections.OrderedDict"},
            P.STORAGE_STRATEGY_CLASS,
            InvalidStorageConfigError,
        ),
        ({P.STORAGE_PATH: "s3://x"}, P.STORAGE_PATH, InvalidStorageConfigError),  # hive has no storage path
    ],
)
def test_bad_configuration_names_the_key(props: dict[str, str], key: str, error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        load_storage_strategy(TABLE, {P.TABLE_NAME: "trips", **props})
    assert raised.value.key == key  # type: ignore[attr-defined]
    assert str(raised.value).startswith(key)


def test_object_store_needs_a_table_name_that_is_one_folder() -> None:
    with pytest.raises(InvalidTableConfigError) as raised:
        load_storage_strategy(
            TABLE, {P.TABLE_NAME: "a/b", P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: "s3://x"}
        )
    assert raised.value.key == P.TABLE_NAME


def test_partition_map_sends_each_partition_to_its_own_location() -> None:
    props = {
        P.TABLE_NAME: "trips",
        P.STORAGE_STRATEGY_CLASS: "partition_map",
        P.STORAGE_PARTITION_LOCATIONS: json.dumps(
            {
                "country=us": "s3://lake-us",
                "country=de": "s3://lake-de/",
                "country=de/city=berlin": "s3://lake-ber",
            }
        ),
        P.STORAGE_PATH: "s3://lake-rest",
    }
    strategy = load_storage_strategy(TABLE, props)
    assert isinstance(strategy, PartitionMapStorageStrategy)
    assert strategy.storage_location("country=us/day=1", FILE_ID).uri == "s3://lake-us/trips"
    assert strategy.storage_location("country=de/city=bonn", FILE_ID).uri == "s3://lake-de/trips"
    assert strategy.storage_location("country=de/city=berlin", FILE_ID).uri == "s3://lake-ber/trips"
    # Whole segments only: "country=usa" is not under "country=us".
    assert strategy.storage_location("country=usa", FILE_ID).uri == "s3://lake-rest/trips"
    assert set(strategy.roots()) == {"s3://lake-us", "s3://lake-de", "s3://lake-ber", "s3://lake-rest"}


def test_partition_map_without_default_refuses_unmapped_partitions() -> None:
    props = {
        P.TABLE_NAME: "trips",
        P.STORAGE_STRATEGY_CLASS: "partition_map",
        P.STORAGE_PARTITION_LOCATIONS: json.dumps({"country=us": "s3://lake-us"}),
    }
    strategy = load_storage_strategy(TABLE, props)
    with pytest.raises(UnmappedPartitionError, match="country=fr"):
        strategy.storage_location("country=fr", FILE_ID)


@pytest.mark.parametrize("raw", ["", "not json", "[]", "{}", '{"country=us": 3}', '{"../x": "s3://a"}'])
def test_partition_map_rejects_bad_maps(raw: str) -> None:
    props = {
        P.TABLE_NAME: "trips",
        P.STORAGE_STRATEGY_CLASS: "partition_map",
        P.STORAGE_PARTITION_LOCATIONS: raw,
    }
    with pytest.raises(InvalidStorageConfigError) as raised:
        load_storage_strategy(TABLE, props)
    assert raised.value.key == P.STORAGE_PARTITION_LOCATIONS


def test_strategy_rejects_partition_paths_that_escape() -> None:
    with pytest.raises(InvalidPathError, match="not a safe table-relative path"):
        object_store().storage_location("../../etc", FILE_ID)


class BucketPerRegion(StorageStrategy):
    """A user's strategy: first partition segment picks the bucket."""

    accepted_keys = frozenset({P.STORAGE_PATH})

    def locate(self, partition_path: str, file_id: str):  # type: ignore[no-untyped-def]
        from fedcore.storage import StorageLocation

        root = f"{self.properties()[P.STORAGE_PATH]}-{partition_path.split('/')[0].split('=')[-1]}"
        return StorageLocation(root + "/t", root)

    def roots(self) -> tuple[str, ...]:
        return ()


def test_custom_strategy_by_class_path() -> None:
    for spec in (f"{__name__}.BucketPerRegion", f"{__name__}:BucketPerRegion"):
        strategy = load_storage_strategy(
            TABLE, {P.TABLE_NAME: "t", P.STORAGE_STRATEGY_CLASS: spec, P.STORAGE_PATH: "s3://b"}
        )
        assert isinstance(strategy, BucketPerRegion)
        assert strategy.storage_location("region=eu/day=1", FILE_ID).uri == "s3://b-eu/t"


def test_custom_strategy_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real installed distribution on sys.path, found through importlib.metadata.
    (tmp_path / "acme_layouts.py").write_text(
        textwrap.dedent(
            """
            from fedcore.storage import StorageLocation, StorageStrategy

            class Flat(StorageStrategy):
                def locate(self, partition_path, file_id):
                    return StorageLocation("s3://acme/flat", "s3://acme")

                def roots(self):
                    return ("s3://acme",)
            """
        )
    )
    dist = tmp_path / "acme_layouts-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-layouts\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{P.STORAGE_STRATEGY_ENTRY_POINT_GROUP}]\nacme_flat = acme_layouts:Flat\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    strategy = load_storage_strategy(TABLE, {P.TABLE_NAME: "t", P.STORAGE_STRATEGY_CLASS: "acme_flat"})
    assert type(strategy).__name__ == "Flat"
    assert strategy.storage_location("p=1", FILE_ID).uri == "s3://acme/flat"
    sys.modules.pop("acme_layouts", None)


def test_strategies_pickle_for_engine_workers() -> None:
    strategy = object_store(**{P.STORAGE_PREFIX_COUNT: "64"})
    clone = pickle.loads(pickle.dumps(strategy))
    assert clone == strategy
    assert clone.storage_location("p=1", FILE_ID) == strategy.storage_location("p=1", FILE_ID)


def test_split_physical_inverts_placement_for_each_builtin() -> None:
    strategies = [
        load_storage_strategy(TABLE, {P.TABLE_NAME: "trips"}),
        object_store(),
        object_store(**{P.STORAGE_PREFIX_COUNT: "16", P.STORAGE_HASH_INPUT: "partition_and_file_id"}),
        load_storage_strategy(
            TABLE,
            {
                P.TABLE_NAME: "trips",
                P.STORAGE_STRATEGY_CLASS: "partition_map",
                P.STORAGE_PARTITION_LOCATIONS: '{"a=1": "s3://one", "a=1/b=2": "s3://one/nested"}',
            },
        ),
    ]
    for strategy in strategies:
        for partition in ("a=1", "a=1/b=2", "a=1/b=3/c=x"):
            physical = strategy.storage_location(partition, FILE_ID).join(f"{partition}/{BASE}")
            assert strategy.split_physical(physical) == (partition, BASE)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {P.STORAGE_HASH_FUNCTION: "xxh64", P.STORAGE_HASH_INPUT: "partition_and_file_id"},
        {P.STORAGE_PREFIX_COUNT: "16"},
    ],
)
def test_fast_placement_agrees_with_locate(extra: dict[str, str]) -> None:
    strategy = object_store(**extra)
    for partition in ("", "a=1", "a=1/b=2"):
        relative = f"{partition}/{BASE}" if partition else BASE
        location = strategy.locate(partition, FILE_ID)
        assert strategy.place(partition, FILE_ID, relative) == (location.root, location.join(relative))
