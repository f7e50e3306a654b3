"""Registering the Iceberg view in AWS Glue (moto's Glue on loopback, checking ``UpdateTable``'s
``VersionId`` as Glue does: ``fed_dev.glue``): ``fed sync --glue`` and Hudi's meta sync keys
naming its Glue sync tool; PyIceberg's ``GlueCatalog`` reads exactly fedcore's rows; racing
registrations never lose an update; another table of that name is refused; no credential
reaches Glue or a table's config."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

import boto3
import pytest
from pyiceberg.catalog.glue import GlueCatalog

from fed_dev.glue import check_table_versions, loopback_target
from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY, LoopbackS3
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.catalog import GlueTarget, sync
from fedcore.catalog.entry import INSTANT_PARAMETER, METADATA_LOCATION, TABLE_PATH_PARAMETER
from fedcore.catalog.glue import Glue
from fedcore.cli.main import main
from fedcore.exceptions import ConfigError, MetastoreError
from fedcore.iceberg import current_view, publish
from fedcore.table import create_table

from ..iceberg.test_iceberg_view import make, ordered
from ..write.test_writes import trips
from .test_hive_sync import cli_options


@pytest.fixture
def glue(s3_server: LoopbackS3) -> Any:
    """A boto3 Glue client on the loopback server (the same moto app serves S3 and Glue)."""
    check_table_versions()
    return boto3.client(
        "glue",
        endpoint_url=s3_server.endpoint_url,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )


@pytest.fixture
def s3_backend(s3_server: LoopbackS3) -> Backend:
    tables, storage = s3_server.create_bucket("glue-tables"), s3_server.create_bucket("glue-storage")
    return Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())


def target(s3_server: LoopbackS3, table: str = "trips") -> GlueTarget:
    return loopback_target(s3_server, "lake", table)


def catalog(s3_server: LoopbackS3) -> GlueCatalog:
    """PyIceberg's Glue catalog, as a reader configures it (its own credentials)."""
    settings = {
        "glue.endpoint": s3_server.endpoint_url,
        "glue.region": REGION,
        "glue.access-key-id": ACCESS_KEY,
        "glue.secret-access-key": SECRET_KEY,
        "s3.endpoint": s3_server.endpoint_url,
        "s3.access-key-id": ACCESS_KEY,
        "s3.secret-access-key": SECRET_KEY,
        "s3.region": REGION,
    }
    return GlueCatalog("glue", **settings)


def test_fed_sync_glue_registers_the_view_pyiceberg_reads_it_and_a_write_moves_it(
    s3_server: LoopbackS3,
    s3_backend: Backend,
    glue: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)  # the CLI takes boto3's credentials
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    table = make(s3_backend)
    instant = table.write(trips(range(8), ["us", "de"] * 4), "bulk_insert").instant
    args = ["sync", table.path, "--glue", "--glue-region", REGION, "--glue-endpoint", s3_server.endpoint_url]
    args += ["--database", "lake", *cli_options(s3_backend)]
    assert main(args) == 0
    assert f"instant {instant} registered as lake.trips in AWS Glue" in capsys.readouterr().out
    found = glue.get_table(DatabaseName="lake", Name="trips")["Table"]
    assert found["Parameters"]["table_type"] == "ICEBERG"
    assert found["Parameters"][METADATA_LOCATION] == current_view(table).location
    assert found["Parameters"][INSTANT_PARAMETER] == instant
    assert found["StorageDescriptor"]["Location"] == table.path
    assert [c["Name"] for c in found["StorageDescriptor"]["Columns"]][-4:] == [
        "trip_id",
        "country",
        "ts",
        "fare",
    ]
    assert SECRET_KEY not in json.dumps(found, default=str)
    reader = catalog(s3_server)
    assert ordered(reader.load_table("lake.trips").scan().to_arrow()) == ordered(table.read())
    assert main(args) == 0
    assert "already registered" in capsys.readouterr().out
    assert glue.get_table(DatabaseName="lake", Name="trips")["Table"]["VersionId"] == found["VersionId"]
    # A write, then a sync: Glue moves to the new version; the reader sees the write.
    table.upsert(trips([0, 1, 50], ["us", "de", "fr"], ts=2, fare=99.0))
    assert main(args) == 0
    moved = glue.get_table(DatabaseName="lake", Name="trips")["Table"]["Parameters"]
    assert moved[METADATA_LOCATION] == current_view(table).location
    assert moved["previous_metadata_location"] == found["Parameters"][METADATA_LOCATION]
    assert ordered(reader.load_table("lake.trips").scan().to_arrow()) == ordered(table.read())


def test_a_write_with_hudis_glue_sync_keys_registers_itself(
    s3_server: LoopbackS3, s3_backend: Backend, glue: Any
) -> None:
    table = make(s3_backend)
    options = {
        P.META_SYNC_ENABLE: "true",
        P.META_SYNC_TOOLS: P.GLUE_SYNC_TOOL,
        P.HIVE_SYNC_DATABASE: "lake",
        P.HIVE_SYNC_TABLE: "trips_synced",
        P.AWS_GLUE_ENDPOINT: s3_server.endpoint_url,
        P.AWS_GLUE_REGION: REGION,
        P.AWS_ACCESS_KEY: ACCESS_KEY,
        P.AWS_SECRET_KEY: SECRET_KEY,
    }
    writer = table.with_options(options)
    for step in range(3):
        result = writer.upsert(trips(range(step, step + 5), ["us", "de", "fr", "us", "de"], ts=step + 1))
        assert result.warnings == ()
        params = glue.get_table(DatabaseName="lake", Name="trips_synced")["Table"]["Parameters"]
        assert params[INSTANT_PARAMETER] == result.instant
        assert params[METADATA_LOCATION] == current_view(table).location
    reader = catalog(s3_server).load_table("lake.trips_synced")
    assert ordered(reader.scan().to_arrow()) == ordered(table.read())
    found = glue.get_table(DatabaseName="lake", Name="trips_synced")["Table"]
    assert SECRET_KEY not in json.dumps(found, default=str)
    assert SECRET_KEY not in table.fs.table_fs.cat_file(f"{table.path}/.hoodie/hoodie.properties").decode()


def test_hive_and_glue_sync_together_and_unknown_tools_are_refused(s3_backend: Backend) -> None:
    both = {
        P.META_SYNC_ENABLE: "true",
        P.META_SYNC_TOOLS: f"{P.HIVE_SYNC_TOOL},{P.GLUE_SYNC_TOOL}",
        P.HIVE_SYNC_METASTORE_URIS: "thrift://127.0.0.1:9083",
    }
    assert P.sync_tools(both) == (P.HIVE_SYNC_TOOL, P.GLUE_SYNC_TOOL)
    assert P.sync_tools({P.HIVE_SYNC_ENABLE: "true"}) == (P.HIVE_SYNC_TOOL,)
    assert P.sync_tools({P.META_SYNC_ENABLE: "true"}) == (P.HIVE_SYNC_TOOL,)  # Hudi's default tool
    # Hudi: the Hive sync's switch turns meta sync on too, and adds its tool to those named.
    hive_and_glue = {P.HIVE_SYNC_ENABLE: "true", P.META_SYNC_TOOLS: f"{P.GLUE_SYNC_TOOL},{P.GLUE_SYNC_TOOL}"}
    assert P.sync_tools(hive_and_glue) == (P.HIVE_SYNC_TOOL, P.GLUE_SYNC_TOOL)
    assert P.sync_tools({}) == ()
    table = make(s3_backend)
    datahub = {P.META_SYNC_ENABLE: "true", P.META_SYNC_TOOLS: "org.apache.hudi.sync.datahub.DataHubSyncTool"}
    with pytest.raises(ConfigError, match="fed syncs with"):
        table.with_options(datahub).upsert(trips(range(2)))
    with pytest.raises(ConfigError, match="is true"):
        table.with_options({P.META_SYNC_TOOLS: P.GLUE_SYNC_TOOL}).upsert(trips(range(2)))
    with pytest.raises(ConfigError, match=str(P.HIVE_SYNC_METASTORE_URIS)):
        table.with_options({P.META_SYNC_ENABLE: "true"}).upsert(trips(range(2)))
    assert table.read().num_rows == 0  # refused before anything was written


def test_a_credential_is_never_a_tables_config(s3_backend: Backend) -> None:
    with pytest.raises(ConfigError, match="is a credential"):
        create_table(
            f"{s3_backend.table_path}-2",
            name="trips",
            record_key_fields=["trip_id"],
            properties={P.AWS_SECRET_KEY: SECRET_KEY},
            storage_options=s3_backend.storage_options,
        )
    assert SECRET_KEY not in repr(GlueTarget("lake", "t", secret_key=SECRET_KEY))


def race(s3_server: LoopbackS3, table_path: str, racers: list[Any], versions: dict[str, int]) -> list[str]:
    """Register each of ``racers`` (publish results) as lake.raced on a thread of its own, both
    reading the same Glue version before either updates; the locations whose first update
    Glue refused."""
    gate = threading.Barrier(len(racers))
    lost: list[str] = []
    errors: list[BaseException] = []

    def register(result: Any) -> None:
        registrar = Glue(target(s3_server, "raced"))
        update = registrar._client.update_table
        first = [True]

        def gated(**kwargs: Any) -> Any:
            if first[0]:  # both racers have read the same version before either updates
                first[0] = False
                gate.wait(timeout=30)
            try:
                return update(**kwargs)
            except registrar._client.exceptions.ConcurrentModificationException:
                lost.append(result.metadata_location)
                raise

        registrar._client.update_table = gated
        ours = versions[result.metadata_location]
        try:
            registrar.register(
                "lake",
                "raced",
                table_path=table_path,
                metadata=result.metadata,
                metadata_location=result.metadata_location,
                instant=None,
                is_newer=lambda held: versions.get(held, 0) > ours,
            )
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=register, args=(racer,)) for racer in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    return lost


def test_racing_registrations_never_lose_an_update(
    s3_server: LoopbackS3, s3_backend: Backend, glue: Any
) -> None:
    """Two registrations read the same Glue version, then both update: Glue takes one, the other
    is told the table moved and looks again. Whatever the order, Glue ends on the newer view
    (without Glue's version check, the older one could land last and move the table back)."""
    table = make(s3_backend)
    table.write(trips(range(4)), "bulk_insert")
    older = publish(table)
    table.upsert(trips([1, 9], ["us", "de"], ts=2))
    newer = publish(table)
    assert older.metadata_location is not None
    assert newer.metadata_location is not None
    sync(table, target(s3_server, "raced"))  # the entry exists: both racers update it
    versions = {older.metadata_location: 1, newer.metadata_location: 2}
    for racers in ([older, newer], [newer, older]):
        glue.update_table(  # an older view again, so that both racers have work to do
            DatabaseName="lake",
            TableInput={
                "Name": "raced",
                "TableType": "EXTERNAL_TABLE",
                "Parameters": {
                    "table_type": "ICEBERG",
                    METADATA_LOCATION: "s3://elsewhere/0.metadata.json",
                    TABLE_PATH_PARAMETER: table.path,
                },
                "StorageDescriptor": {"Location": table.path, "Columns": []},
            },
        )
        lost = race(s3_server, table.path, racers, versions)
        assert len(lost) == 1, lost  # one racer lost the first round and looked again
        held = glue.get_table(DatabaseName="lake", Name="raced")["Table"]["Parameters"][METADATA_LOCATION]
        assert held == newer.metadata_location


def test_a_glue_table_that_is_not_this_view_is_refused(
    s3_server: LoopbackS3,
    s3_backend: Backend,
    glue: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    glue.create_database(DatabaseInput={"Name": "other"})
    theirs = {"Name": "trips", "TableType": "EXTERNAL_TABLE", "Parameters": {"owner": "someone else"}}
    glue.create_table(DatabaseName="other", TableInput=theirs)
    table = make(s3_backend)
    table.write(trips(range(3)), "bulk_insert")
    with pytest.raises(MetastoreError, match="is not the Iceberg view of"):
        sync(table, dataclasses.replace(target(s3_server), database="other"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    args = ["sync", table.path, "--glue", "--glue-region", REGION, "--glue-endpoint", s3_server.endpoint_url]
    assert main([*args, "--database", "other", *cli_options(s3_backend)]) == 2
    assert "is not the Iceberg view of" in capsys.readouterr().err
    assert glue.get_table(DatabaseName="other", Name="trips")["Table"]["Parameters"] == {
        "owner": "someone else"
    }
    assert main([*args, "--hive", *cli_options(s3_backend)]) == 2
    assert "goes with --metastore" in capsys.readouterr().err
