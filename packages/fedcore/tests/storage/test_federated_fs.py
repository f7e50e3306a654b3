"""The federated filesystem against real stores: local files and S3 on loopback."""

from __future__ import annotations

import datetime as dt
import json
import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from botocore.utils import parse_timestamp

from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import InvalidFileNameError, InvalidPathError, ListingNotSupportedError
from fedcore.files.filenames import base_file_name, log_file_name, new_file_id
from fedcore.io.filesystems import _parse_timestamp, filesystem_for, read_object, read_objects
from fedcore.io.uris import normalize_uri
from fedcore.storage import load_storage_strategy
from fedcore.storage.federated import FederatedFileSystem

INSTANT = "20260101120000123"


def object_store_fs(backend: Backend, **extra: str) -> FederatedFileSystem:
    strategy = load_storage_strategy(
        backend.table_path,
        {
            P.TABLE_NAME: "trips",
            P.STORAGE_STRATEGY_CLASS: "object_store",
            P.STORAGE_PATH: backend.storage_path,
            **extra,
        },
    )
    return FederatedFileSystem(backend.table_path, strategy, backend.storage_options)


def sample_table() -> pa.Table:
    return pa.table({"id": pa.array([1, 2, 3], pa.int64()), "city": ["sf", "nyc", "la"]})


def test_pyarrow_writes_and_reads_data_through_the_storage_path(backend: Backend) -> None:
    fs = object_store_fs(backend)
    name = base_file_name(new_file_id(), "0-1-1", INSTANT)
    logical = f"country=usa/{name}"

    pq.write_table(sample_table(), logical, filesystem=fs)

    physical = fs.to_physical(logical)
    assert physical.startswith(backend.storage_path + "/")
    assert physical.endswith(f"/trips/{logical}")
    assert backend.exists(physical)
    assert not backend.exists(f"{backend.table_path}/{logical}")
    assert pq.read_table(logical, filesystem=fs).equals(sample_table())
    assert pq.read_table(f"{backend.table_path}/{logical}", filesystem=fs).equals(sample_table())
    assert fs.info(logical)["size"] == len(backend.read(physical))
    assert fs.info(logical)["name"] == logical


def test_metadata_stays_under_the_table_path(backend: Backend) -> None:
    fs = object_store_fs(backend)
    fs.pipe_file(".hoodie/hoodie.properties", b"hoodie.table.name=trips\n")
    fs.pipe_file("country=usa/.hoodie_partition_metadata", b"commitTime=1\n")

    assert backend.read(f"{backend.table_path}/.hoodie/hoodie.properties") == b"hoodie.table.name=trips\n"
    assert backend.exists(f"{backend.table_path}/country=usa/.hoodie_partition_metadata")
    assert fs.table_fs.cat_file(f"{backend.table_path}/.hoodie/hoodie.properties").startswith(b"hoodie")
    assert fs.ls(".hoodie", detail=False) == [".hoodie/hoodie.properties"]


def test_base_and_log_files_land_in_one_folder(backend: Backend) -> None:
    fs = object_store_fs(backend)
    file_id = new_file_id()
    base = f"country=usa/{base_file_name(file_id, '0-1-1', INSTANT)}"
    log = f"country=usa/{log_file_name(file_id, INSTANT, 1, '0-2-2')}"
    fs.pipe_file(base, b"base")
    fs.pipe_file(log, b"log")
    assert fs.to_physical(base).rpartition("/")[0] == fs.to_physical(log).rpartition("/")[0]
    assert fs.cat_file(log) == b"log"
    assert backend.read(fs.to_physical(base)) == b"base"


def test_files_spread_over_prefixes_and_map_back(backend: Backend) -> None:
    fs = object_store_fs(backend)
    logical = [f"day=2026-01-0{i % 3}/{base_file_name(new_file_id(), '0-1-1', INSTANT)}" for i in range(12)]
    for path in logical:
        fs.pipe_file(path, path.encode())
    physical = [fs.to_physical(path) for path in logical]
    prefixes = {p[len(backend.storage_path) + 1 :].split("/")[0] for p in physical}
    assert len(prefixes) >= 10  # twelve random file ids: ten or more distinct 8-hex prefixes
    assert [fs.to_logical(p) for p in physical] == logical
    assert all(backend.read(p) == path.encode() for p, path in zip(physical, logical, strict=False))


def test_listing_data_folders_is_refused_not_silently_partial(backend: Backend) -> None:
    fs = object_store_fs(backend)
    fs.pipe_file(f"country=usa/{base_file_name(new_file_id(), '0-1-1', INSTANT)}", b"x")
    with pytest.raises(ListingNotSupportedError):
        fs.ls("country=usa")
    with pytest.raises(ListingNotSupportedError):
        fs.find("")
    with pytest.raises(ListingNotSupportedError):
        fs.rm("country=usa", recursive=True)


def test_hive_layout_lists_and_reads_like_a_plain_folder(backend: Backend) -> None:
    strategy = load_storage_strategy(backend.table_path, {P.TABLE_NAME: "trips"})
    fs = FederatedFileSystem(backend.table_path, strategy, backend.storage_options)
    name = base_file_name(new_file_id(), "0-1-1", INSTANT)
    pq.write_table(sample_table(), f"country=usa/{name}", filesystem=fs)
    assert fs.to_physical(f"country=usa/{name}") == f"{backend.table_path}/country=usa/{name}"
    assert fs.ls("country=usa", detail=False) == [f"country=usa/{name}"]


def test_copy_move_and_delete_across_roots(backend: Backend) -> None:
    fs = object_store_fs(backend)
    source = f"p=1/{base_file_name(new_file_id(), '0-1-1', INSTANT)}"
    target = f"p=2/{base_file_name(new_file_id(), '0-1-1', INSTANT)}"
    fs.pipe_file(source, b"payload")
    fs.cp_file(source, target)
    assert fs.cat_file(target) == b"payload"
    fs.rm_file(source)
    assert not fs.exists(source)
    assert not backend.exists(fs.to_physical(source))
    assert backend.exists(fs.to_physical(target))


@pytest.mark.parametrize(
    "path",
    ["../escape.parquet", "p=1/../../x", "p=1//f", "/etc/passwd", "s3://elsewhere/t/x", "p=\x00/f"],
)
def test_paths_outside_the_table_are_refused(backend: Backend, path: str) -> None:
    fs = object_store_fs(backend)
    with pytest.raises(InvalidPathError):
        fs.to_physical(path)
    with pytest.raises(InvalidPathError):
        fs.exists(path)


def test_only_data_files_and_metadata_can_be_written(backend: Backend) -> None:
    fs = object_store_fs(backend)
    with pytest.raises(InvalidFileNameError):
        fs.pipe_file("country=usa/notes.txt", b"x")
    with pytest.raises(InvalidFileNameError), fs.open("country=usa/part-0000.parquet", "wb") as handle:
        handle.write(b"x")
    assert not fs.exists("country=usa/notes.txt")


def test_exclusive_create_lets_exactly_one_writer_win(backend: Backend) -> None:
    fs = object_store_fs(backend)
    fs.pipe_file(".hoodie/20260101120000123.commit", b"first", mode="create")
    with pytest.raises(FileExistsError):
        fs.pipe_file(".hoodie/20260101120000123.commit", b"second", mode="create")
    assert fs.cat_file(".hoodie/20260101120000123.commit") == b"first"


def test_filesystem_pickles_and_keeps_resolving(backend: Backend) -> None:
    fs = object_store_fs(backend, **{P.STORAGE_PREFIX_COUNT: "32"})
    path = f"p=1/{base_file_name(new_file_id(), '0-1-1', INSTANT)}"
    fs.pipe_file(path, b"shipped")
    clone = pickle.loads(pickle.dumps(fs))
    assert clone.to_physical(path) == fs.to_physical(path)
    assert clone.cat_file(path) == b"shipped"


def test_partition_map_writes_each_bucket_with_its_own_kms_key(s3_server: LoopbackS3) -> None:
    tables, us, de = (s3_server.create_bucket(n) for n in ("tables", "lake-us", "lake-de"))
    options = {
        **s3_server.storage_options(),
        us: {"s3_additional_kwargs": {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "key-us"}},
        de: {"s3_additional_kwargs": {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "key-de"}},
    }
    strategy = load_storage_strategy(
        f"{tables}/trips",
        {
            P.TABLE_NAME: "trips",
            P.STORAGE_STRATEGY_CLASS: "partition_map",
            P.STORAGE_PARTITION_LOCATIONS: json.dumps({"country=us": us, "country=de": de}),
        },
    )
    fs = FederatedFileSystem(f"{tables}/trips", strategy, options)
    client = s3_server.client()
    for country, bucket, key_id in (("us", us, "key-us"), ("de", de, "key-de")):
        logical = f"country={country}/day=1/{base_file_name(new_file_id(), '0-1-1', INSTANT)}"
        pq.write_table(sample_table(), logical, filesystem=fs)
        physical = fs.to_physical(logical)
        assert physical == f"{bucket}/trips/{logical}"
        head = client.head_object(Bucket=bucket[5:], Key=physical[len(bucket) + 1 :])
        assert head["ServerSideEncryption"] == "aws:kms"
        assert head["SSEKMSKeyId"] == key_id
        assert pq.read_table(logical, filesystem=fs).num_rows == 3
    # The endpoint came from the protocol-wide options; only the key differs per bucket.
    assert client.list_objects_v2(Bucket=tables[5:]).get("KeyCount", 0) == 0


def test_small_objects_are_read_with_one_get_each(s3_server: LoopbackS3) -> None:
    bucket = s3_server.create_bucket("reads")
    fs = filesystem_for(bucket, s3_server.storage_options())
    paths = [f"{bucket}/o{i}" for i in range(5)]
    for i, path in enumerate(paths):
        fs.pipe_file(path, b"x" * i)  # o0 is empty: a range cannot be served from it
    s3_server.requests.reset()
    assert read_objects(fs, paths[1:]) == [b"x" * i for i in range(1, 5)]
    assert read_object(fs, paths[3]) == b"xxx"
    assert s3_server.requests.by_method == {"GET": 5}, "no HEAD before a GET"
    assert read_objects(fs, paths[:2]) == [b"", b"x"]
    with pytest.raises(FileNotFoundError):
        read_objects(fs, [paths[1], f"{bucket}/missing"])


def test_listed_and_read_modification_times_are_the_stores(s3_server: LoopbackS3) -> None:
    """A listing's ``LastModified`` (ISO 8601, read without dateutil) and a HEAD's (an HTTP
    date) are the same aware instant, the one the store gives."""
    bucket = s3_server.create_bucket("times")
    fs = filesystem_for(bucket, s3_server.storage_options())
    fs.pipe_file(f"{bucket}/o", b"x")
    (listed,) = fs.ls(bucket, detail=True, refresh=True)
    fs.invalidate_cache()
    headed = fs.info(f"{bucket}/o")
    stored = s3_server.client().head_object(Bucket=bucket[5:], Key="o")["LastModified"]
    assert listed["LastModified"].utcoffset() == headed["LastModified"].utcoffset() == dt.timedelta(0)
    # (a listing gives milliseconds, an HTTP date whole seconds)
    assert listed["LastModified"].replace(microsecond=0) == headed["LastModified"] == stored


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01T12:00:00.123Z", dt.datetime(2024, 5, 1, 12, 0, 0, 123000, dt.timezone.utc)),
        ("2024-05-01T12:00:00Z", dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc)),
        ("2024-05-01T14:00:00.5+02:00", dt.datetime(2024, 5, 1, 12, 0, 0, 500000, dt.timezone.utc)),
        ("2024-05-01T12:00:00.1234567Z", dt.datetime(2024, 5, 1, 12, 0, 0, 123456, dt.timezone.utc)),
        ("Wed, 01 May 2024 12:00:00 GMT", dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc)),
        ("1714564800", dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc)),  # epoch seconds, not 1714-56-...
        (1714564800, dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc)),
    ],
)
def test_a_response_timestamp_reads_as_botocore_reads_it(value: object, expected: dt.datetime) -> None:
    parsed = _parse_timestamp(value)
    assert parsed == expected == parse_timestamp(value)
    assert parsed.utcoffset() == parse_timestamp(value).utcoffset()


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("file:/tmp/t/", "file:///tmp/t"),  # Hadoop's spelling, as Spark passes a SQL table's path
        ("file:///tmp/t", "file:///tmp/t"),
        ("/tmp/t", "file:///tmp/t"),
        ("s3://b/t/", "s3://b/t"),
    ],
)
def test_every_spelling_of_a_path_normalises_alike(given: str, normal: str) -> None:
    assert normalize_uri(given) == normal
