"""Registering the Iceberg view in a real Hive metastore (Apache Hive 4.0.1, Thrift, Derby):
``fed sync`` and Hudi's hive_sync options on writes; updates that name the location they
replace; no credential in the metastore."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from hive_metastore.ttypes import EnvironmentContext, GetTableRequest, MetaException
from pyiceberg.table import StaticTable

from fed_dev.metastore import HiveMetastore
from fed_dev.servers import SECRET_KEY, LoopbackS3
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.catalog.metastore import (
    HIVE_STORAGE_HANDLER,
    INSTANT_PARAMETER,
    METADATA_LOCATION,
    STORAGE_HANDLER_PARAMETER,
    Metastore,
)
from fedcore.cli.main import main
from fedcore.iceberg import current_view
from fedcore.table import load_table

from ..iceberg.test_iceberg_view import iceberg, make, ordered
from ..write.test_writes import trips


@pytest.fixture(scope="module")
def metastore(s3_server: LoopbackS3) -> Iterator[HiveMetastore]:
    with HiveMetastore(s3_server) as server:
        yield server


def sync_options(metastore: HiveMetastore, table: str = "trips") -> dict[str, str]:
    return {
        P.HIVE_SYNC_ENABLE: "true",
        P.HIVE_SYNC_MODE: "hms",
        P.HIVE_SYNC_METASTORE_URIS: metastore.uri,
        P.HIVE_SYNC_DATABASE: "lake",
        P.HIVE_SYNC_TABLE: table,
    }


def registered(metastore: HiveMetastore, table: str) -> dict[str, str]:
    with Metastore(metastore.uri) as client:
        found = client._client.get_table_req(GetTableRequest(dbName="lake", tblName=table)).table
        return dict(found.parameters)


def test_fed_sync_registers_the_view_and_reports_the_instant(
    backend: Backend, metastore: HiveMetastore, capsys: pytest.CaptureFixture[str]
) -> None:
    table = make(backend)
    instant = table.write(trips(range(6), ["us", "de"] * 3), "bulk_insert").instant
    name = f"trips_{backend.name}"
    args = ["sync", table.path, "--metastore", metastore.uri, "--database", "lake", "--table", name]
    args += cli_options(backend)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"instant {instant} registered as lake.{name}" in out
    params = registered(metastore, name)
    assert params["table_type"] == "ICEBERG"
    assert params[INSTANT_PARAMETER] == instant
    assert params[METADATA_LOCATION] == current_view(table).location
    assert main(args) == 0  # nothing new: the metastore already holds this version
    assert "already registered" in capsys.readouterr().out
    # What an Iceberg catalog does: open the location the metastore holds.
    view = StaticTable.from_metadata(params[METADATA_LOCATION], properties=_reader(backend))
    assert ordered(view.scan().to_arrow()) == ordered(table.read())
    assert STORAGE_HANDLER_PARAMETER not in params
    assert main([*args, "--hive"]) == 0  # the same version, now also in Hive's form
    assert "registered as" in capsys.readouterr().out
    params = registered(metastore, name)
    assert params[STORAGE_HANDLER_PARAMETER] == HIVE_STORAGE_HANDLER
    assert params[METADATA_LOCATION] == current_view(table).location
    table.write(trips(range(6, 9), "us"), "insert")
    assert main(args) == 0  # a later sync without --hive keeps the form
    assert registered(metastore, name)[STORAGE_HANDLER_PARAMETER] == HIVE_STORAGE_HANDLER


def test_a_write_with_hive_sync_options_registers_itself(backend: Backend, metastore: HiveMetastore) -> None:
    name = f"auto_{backend.name}"
    table = make(backend, **sync_options(metastore, name))
    first = table.write(trips(range(4), "us"), "bulk_insert")
    assert first.warnings == ()
    assert registered(metastore, name)[INSTANT_PARAMETER] == first.instant
    second = table.write(trips(range(2, 6), ["us", "de"] * 2, fare=3.0), "upsert")
    params = registered(metastore, name)
    assert params[INSTANT_PARAMETER] == second.instant
    assert params["previous_metadata_location"] != params[METADATA_LOCATION]
    assert ordered(iceberg(table).scan().to_arrow()) == ordered(table.read())


def test_a_failed_sync_after_a_commit_is_a_warning_and_the_next_catches_up(
    backend: Backend, metastore: HiveMetastore
) -> None:
    name = f"late_{backend.name}"
    table = make(backend)
    dead = {**sync_options(metastore, name), P.HIVE_SYNC_METASTORE_URIS: "thrift://127.0.0.1:9"}
    result = table.write(trips(range(3), "us"), "bulk_insert", options=dead)
    assert result.instant in {i.time for i in table.timeline().completed()}  # the commit stands
    assert len(result.warnings) == 1
    assert "publishing to the Hive metastore" in result.warnings[0]
    assert "cannot reach the metastore at thrift://127.0.0.1:9" in result.warnings[0]
    later = table.write(trips(range(3, 5), "de"), "upsert", options=sync_options(metastore, name))
    assert later.warnings == ()
    assert registered(metastore, name)[INSTANT_PARAMETER] == later.instant


def test_the_metastore_refuses_an_update_naming_a_location_it_no_longer_holds(
    backend: Backend, metastore: HiveMetastore
) -> None:
    name = f"cas_{backend.name}"
    table = make(backend, **sync_options(metastore, name))
    table.write(trips(range(3), "us"), "bulk_insert")
    with Metastore(metastore.uri) as client:
        found = client._client.get_table_req(GetTableRequest(dbName="lake", tblName=name)).table
        found.parameters[METADATA_LOCATION] = "s3://elsewhere/v9.metadata.json"
        stale = EnvironmentContext(
            {
                "expected_parameter_key": METADATA_LOCATION,
                "expected_parameter_value": "s3://old/v1.metadata.json",
            }
        )
        with pytest.raises(MetaException, match="has been modified"):
            client._client.alter_table_with_environment_context("lake", name, found, stale)
    assert registered(metastore, name)[METADATA_LOCATION] == current_view(table).location


def test_racing_syncs_leave_the_newest_version_registered(backend: Backend, metastore: HiveMetastore) -> None:
    name = f"race_{backend.name}"
    table = make(backend)
    table.write(trips(range(4), "us"), "bulk_insert")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            handle = load_table(backend.table_path, storage_options=backend.storage_options)
            args_table = handle.with_options(sync_options(metastore, name))
            from fedcore.catalog.meta_sync import SyncTarget, sync

            target = SyncTarget.of(args_table.handle, args_table.options)
            assert target is not None
            sync(args_table, target)
        except BaseException as exc:  # the assertion below names it
            errors.append(exc)

    for n in range(3):
        table.write(trips([n + 10], "de"), "upsert")
        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    params = registered(metastore, name)
    assert params[METADATA_LOCATION] == current_view(table).location
    assert params[INSTANT_PARAMETER] == table.timeline().completed()[-1].time


def test_no_credential_reaches_the_metastore(s3_server: LoopbackS3, metastore: HiveMetastore) -> None:
    tables, storage = s3_server.create_bucket("hms-tables"), s3_server.create_bucket("hms-storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    table = make(backend, **sync_options(metastore, "secretless"))
    table.write(trips(range(3), "us"), "bulk_insert")
    with Metastore(metastore.uri) as client:
        found = client._client.get_table_req(GetTableRequest(dbName="lake", tblName="secretless")).table
        database = client._client.get_database("lake")
    text = repr(found) + repr(database)
    assert SECRET_KEY not in text
    assert "fed-testing" not in text


def test_a_bad_metastore_is_one_line_and_exit_2(backend: Backend, capsys: pytest.CaptureFixture[str]) -> None:
    table = make(backend)
    table.write(trips(range(2), "us"), "bulk_insert")
    args = ["sync", table.path, "--metastore", "http://127.0.0.1:1"]
    args += cli_options(backend)
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "is not thrift://HOST:PORT" in err[0]


def cli_options(backend: Backend) -> list[str]:
    if not backend.storage_options:
        return []
    s3 = backend.storage_options["s3"]
    pairs = {"key": s3["key"], "secret": s3["secret"], **s3["client_kwargs"]}
    return [f"--storage-option={k}={v}" for k, v in pairs.items()]


def _reader(backend: Backend) -> dict[str, str]:
    if not backend.storage_options:
        return {}
    s3 = backend.storage_options["s3"]
    return {
        "s3.endpoint": s3["client_kwargs"]["endpoint_url"],
        "s3.access-key-id": s3["key"],
        "s3.secret-access-key": s3["secret"],
        "s3.region": "us-east-1",
    }
