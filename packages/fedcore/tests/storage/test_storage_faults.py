"""The storage-fault catalogue: faults at a real S3 server on loopback (moto behind a relay
that answers chosen requests in its place: access denied, server errors, throttling, slow
answers; objects damaged in the store itself) and on local files. For each: the API's
typed error, the CLI's one line and exit 2, a time bound, and nothing lost or half-written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiobotocore.session
import pytest

from fed_dev.faults import Fault, FaultProxy
from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend, rows, trips, trips_table
from fedcore import properties as P
from fedcore.cli.main import main
from fedcore.engine import WriteJob, WritePlanner
from fedcore.exceptions import (
    CommitConflictError,
    DataFileCorruptError,
    DataFileMissingError,
    InvalidStorageConfigError,
    InvalidTableConfigError,
    StorageError,
    StoragePermissionError,
    StorageUnavailableError,
)
from fedcore.handle.config import properties_path
from fedcore.io.filesystems import StorageOptions
from fedcore.table import Table, create_table, load_table

from ..cli.test_cli_table import options
from ..write.test_writes import make_table

#: What a refused connection or an unknown host may take to fail, at most.
UNREACHABLE_S = 10.0


@dataclass
class Faulty:
    """A table on S3 reached through a fault relay; the store's own client beside it."""

    table: Table
    proxy: FaultProxy
    server: LoopbackS3
    options: StorageOptions

    def load(self) -> Table:
        return load_table(self.table.path, storage_options=self.options)

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, float]:
        flags = options(Backend("s3", self.table.path, "", self.options))
        start = time.monotonic()
        code = main([*argv, *flags])
        took = time.monotonic() - start
        return code, capsys.readouterr().err, took


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fed: error: "), err
    return lines[0]


@pytest.fixture
def faulty(s3_server: LoopbackS3) -> Iterator[Faulty]:
    """A trips table in the object-store layout (two buckets), written directly, then reached
    through the relay."""
    table, _ = trips_table(s3_server, "object_store", "faults")
    table.bulk_insert(trips(range(6), ["us", "de"] * 3))
    with FaultProxy(s3_server.endpoint_url) as proxy:
        options = dict(s3_server.storage_options()["s3"])
        options["client_kwargs"] = {**options["client_kwargs"], "endpoint_url": proxy.endpoint_url}
        yield Faulty(table, proxy, s3_server, {"s3": options})


def damage(backend_put: Callable[[str, bytes], None], table: Table, partition: str, how: str) -> str:
    """Overwrite the base file of ``partition`` in the store: truncated to 100 bytes, or its
    bytes zeroed at its own size. Returns the file's logical path."""
    (victim,) = [s for s in table.file_slices() if s.partition_path == partition]
    size = victim.size
    original = table.fs.cat_file(victim.path)
    backend_put(victim.path, original[:100] if how == "truncated" else bytes(size))
    return victim.path


EXPECTED = {i: (["us", "de"][i % 2], 10.0 + i) for i in range(6)}


@pytest.mark.parametrize("how", ["truncated", "zeroed"])
def test_a_damaged_data_file_is_a_typed_error_naming_it(
    faulty: Faulty, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    table = faulty.load()
    path = damage(lambda p, data: faulty.table.fs.pipe_file(p, data), faulty.table, "country=de", how)
    with pytest.raises(DataFileCorruptError, match=r"data file country=de/.*cannot be read as Parquet"):
        table.read()
    with pytest.raises(DataFileCorruptError, match=path.rpartition("/")[2]):
        table.upsert(trips([1], "de", ts=2))
    assert rows(table, filters=[("country", "=", "us")]) == {
        i: v for i, v in EXPECTED.items() if v[0] == "us"
    }
    assert table.timeline().pending() == [], "the refused upsert left nothing pending"
    code, err, took = faulty.cli(capsys, "read", table.path)
    assert code == 2
    assert "cannot be read as Parquet" in one_line(err)
    assert took < UNREACHABLE_S


@pytest.mark.parametrize("how", ["truncated", "zeroed"])
def test_a_damaged_local_data_file_is_a_typed_error(tmp_path: Path, how: str) -> None:
    table = make_table(
        Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    )
    table.bulk_insert(trips(range(6), ["us", "de"] * 3))
    damage(lambda p, data: table.fs.pipe_file(p, data), table, "country=us", how)
    with pytest.raises(DataFileCorruptError, match="country=us"):
        load_table(table.path).read()
    with pytest.raises(DataFileCorruptError, match="country=us"):
        load_table(table.path).upsert(trips([2], "us", ts=2))
    assert rows(load_table(table.path), filters=[("country", "=", "de")]) == {
        1: ("de", 11.0),
        3: ("de", 13.0),
        5: ("de", 15.0),
    }


def test_access_denied_names_the_path_fast(faulty: Faulty, capsys: pytest.CaptureFixture[str]) -> None:
    """Wrong credentials: every request answered 403, as S3 answers a bad signature."""
    faulty.proxy.add(Fault(403))
    start = time.monotonic()
    with pytest.raises(StoragePermissionError, match=r"hoodie\.properties.*access denied"):
        faulty.load()
    assert time.monotonic() - start < UNREACHABLE_S
    code, err, _ = faulty.cli(capsys, "read", faulty.table.path)
    line = one_line(err)
    assert code == 2
    assert "access denied" in line
    assert faulty.options["s3"]["secret"] not in line


def test_access_denied_on_data_files_only(faulty: Faulty, capsys: pytest.CaptureFixture[str]) -> None:
    table = faulty.load()
    storage_bucket = faulty.table.fs.to_physical(faulty.table.file_slices()[0].path).split("/")[2]
    faulty.proxy.add(Fault(403, bucket=storage_bucket))
    with pytest.raises(StoragePermissionError, match=rf"data file country=.*{storage_bucket}.*access denied"):
        table.read()
    with pytest.raises(StoragePermissionError, match="access denied"):
        table.upsert(trips([7], "us", ts=2))
    faulty.proxy.clear()
    assert rows(faulty.load()) == EXPECTED, "nothing half-written"
    assert faulty.load().timeline().pending() == []


def test_an_unreachable_endpoint_fails_within_seconds(
    faulty: Faulty, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port nothing listens on (a refused connection), and a host that does not resolve."""
    for endpoint in ("http://127.0.0.1:9", "http://no-such-host.invalid:9000"):
        options: dict[str, Any] = dict(faulty.options["s3"])
        options["client_kwargs"] = {**options["client_kwargs"], "endpoint_url": endpoint}
        start = time.monotonic()
        with pytest.raises(StorageUnavailableError, match="the storage endpoint cannot be reached"):
            load_table(faulty.table.path, storage_options={"s3": options})
        assert time.monotonic() - start < UNREACHABLE_S, endpoint
        capsys.readouterr()
        start = time.monotonic()
        flags = [f"endpoint_url={endpoint}", f"key={options['key']}", f"secret={options['secret']}"]
        code = main(["read", faulty.table.path, *(a for f in flags for a in ("--storage-option", f))])
        assert code == 2
        assert "cannot be reached" in one_line(capsys.readouterr().err)
        assert time.monotonic() - start < UNREACHABLE_S


def test_connect_attempts_are_configurable(faulty: Faulty) -> None:
    """``connect_attempts`` (fed's S3 storage option) bounds the attempts at an endpoint that
    refuses connections: counted as the requests botocore sends; a bad value is refused."""
    for attempts in (1, 2, 4):
        session = aiobotocore.session.AioSession()
        sent: list[str] = []
        session.register("before-send.s3", lambda request, sent=sent, **_: sent.append(request.url))
        options: dict[str, Any] = dict(faulty.options["s3"])
        options["client_kwargs"] = {**options["client_kwargs"], "endpoint_url": "http://127.0.0.1:9"}
        options |= {"session": session, "connect_attempts": str(attempts)}
        with pytest.raises(StorageUnavailableError, match="cannot be reached"):
            load_table(faulty.table.path, storage_options={"s3": options})
        assert len(sent) == attempts
    for bad in ("0", "many"):
        with pytest.raises(InvalidStorageConfigError, match="connect_attempts"):
            load_table(
                faulty.table.path, storage_options={"s3": {**faulty.options["s3"], "connect_attempts": bad}}
            )


def test_server_errors_are_retried_then_typed(faulty: Faulty) -> None:
    """A few 500s and 503s (throttling) are retried and the write lands exactly; errors that
    outlast the retries (here a client given two attempts) are a typed error naming the path."""
    faulty.proxy.add(Fault(500, method="GET", times=2))
    faulty.proxy.add(Fault(503, method="PUT", times=3))
    table = faulty.load()
    table.upsert(trips([1, 9], ["de", "us"], ts=2, fare=100.0))
    expected = EXPECTED | {1: ("de", 101.0), 9: ("us", 109.0)}
    assert rows(table) == expected
    assert all(f.hits == f.times for f in faulty.proxy.faults)
    faulty.proxy.clear()
    storage_bucket = faulty.table.fs.to_physical(faulty.table.file_slices()[0].path).split("/")[2]
    faulty.proxy.add(Fault(500, method="GET", bucket=storage_bucket))
    impatient: dict[str, Any] = dict(faulty.options["s3"])
    impatient["config_kwargs"] = {"retries": {"mode": "standard", "max_attempts": 2}}
    brief = load_table(faulty.table.path, storage_options={"s3": impatient})
    start = time.monotonic()
    with pytest.raises(StorageError, match=r"data file .*internal error"):
        brief.read()
    assert time.monotonic() - start < UNREACHABLE_S
    faulty.proxy.clear()
    assert rows(faulty.load()) == expected


def test_slow_answers_are_waited_for(faulty: Faulty) -> None:
    faulty.proxy.add(Fault(0, delay=1.0, method="GET", key=".parquet", times=2))
    assert rows(faulty.load()) == EXPECTED
    assert faulty.proxy.faults[0].hits == 2


def test_a_properties_file_without_a_key_the_write_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its record-key line removed: reads still work (the files hold the keys), a write is
    refused by the key's name (was a TypeError deep in the writer)."""
    table = create_table(
        f"file://{tmp_path}/t", name="t", record_key_fields=["trip_id"], partition_fields=["country"]
    )
    table.bulk_insert(trips(range(3)))
    path = Path(properties_path(table.path).removeprefix("file://"))
    path.write_text(
        "\n".join(line for line in path.read_text().splitlines() if "recordkey" not in line) + "\n"
    )
    assert rows(load_table(table.path)) == {i: ("us", 10.0 + i) for i in range(3)}
    with pytest.raises(InvalidTableConfigError, match=r"hoodie\.table\.recordkey\.fields: is missing"):
        load_table(table.path).upsert(trips([1], ts=2))
    csv = tmp_path / "in.csv"
    csv.write_text("trip_id,country,ts,fare\n1,us,2,1.0\n")
    assert main(["write", table.path, str(csv)]) == 2
    assert "hoodie.table.recordkey.fields" in one_line(capsys.readouterr().err)
    path.write_text(
        path.read_text().replace("hoodie.populate.meta.fields", "x") + "hoodie.populate.meta.fields=maybe\n"
    )
    with pytest.raises(
        InvalidTableConfigError, match=r"hoodie\.populate\.meta\.fields: 'maybe' is not true or false"
    ):
        load_table(table.path)


def test_verify_deep_finds_zeroed_and_swapped_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file zeroed at its own size passes the cheap check (sizes match); ``--deep`` reads it
    and names it, and a file swapped for another table file (other rows) too."""
    table = create_table(
        f"file://{tmp_path}/t", name="t", record_key_fields=["trip_id"], partition_fields=["country"]
    )
    table.bulk_insert(trips(range(9), ["us", "de", "fr"] * 3))
    table.upsert(trips([0], "us", ts=2))
    slices = {s.partition_path: s for s in table.file_slices()}
    zeroed, swapped = slices["country=de"], slices["country=fr"]
    table.fs.pipe_file(zeroed.path, bytes(zeroed.size))
    table.fs.pipe_file(swapped.path, table.fs.cat_file(slices["country=us"].path))
    assert main(["verify", table.path]) == 1  # the swapped file's size differs
    capsys.readouterr()
    assert main(["verify", "--deep", table.path]) == 1
    out = capsys.readouterr().out
    assert f"damaged: {zeroed.path}: cannot be read as Parquet" in out
    assert f"damaged: {swapped.path}: column statistics differ from those recorded" in out
    assert main(["verify", "--deep", "--json", table.path]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["checked"] == 4, "every version the metadata table references"
    assert sorted(d["name"] for d in report["damaged"]) == sorted(
        s.base_file_name for s in (zeroed, swapped) if s.base_file_name
    )


def test_a_file_a_concurrent_write_replaced_and_cleaned_is_a_conflict(tmp_path: Path) -> None:
    """A write plans by the table as it opened; another writer's upserts rewrite the same file
    group and their clean deletes the version the first one planned by. That is a conflict
    (retry the write), not a lost file (whose advice, rolling back the latest write, would
    undo the other writer's good commit)."""
    retain = {str(P.CLEANER_COMMITS_RETAINED): "1"}
    table = create_table(
        f"file://{tmp_path}/t", name="t", record_key_fields=["trip_id"], partition_fields=["country"]
    ).with_options(retain)
    table.bulk_insert(trips(range(4)))
    job = WriteJob.open(table, "upsert", trips([1]).schema)
    planner = WritePlanner(job)
    ((partition, _), base), *_ = planner.latest_base_files(["country=us"]).items()
    other = load_table(table.path).with_options(retain)
    first, last = [other.upsert(trips([2], ts=ts)).instant for ts in (2, 3)]
    other.upsert(trips([9], "de"))  # a write since, in another partition, is not the one named
    with pytest.raises(DataFileMissingError) as missing:
        planner.group_keys(partition, base)
    explained = job.missing_file(missing.value)
    assert isinstance(explained, CommitConflictError)
    assert f"(instant {first})" in str(explained), "the write that replaced the version it read"
    assert last not in str(explained)
    assert "retry it" in str(explained)
    assert "fed rollback" not in str(explained)
    # A file gone with no write since is the table's own loss: it stays a missing file.
    alone = WriteJob.open(load_table(table.path), "upsert", trips([1]).schema)
    assert alone.missing_file(missing.value) is missing.value
