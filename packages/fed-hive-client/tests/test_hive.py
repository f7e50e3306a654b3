"""HiveServer2 (Hive 4.0.1 on a 4.0.1 metastore, and Hive 3.1.3 on a 3.1.3 metastore, where fed
publishes under the metastore's locks) reads exactly fedcore's rows through the Iceberg view,
after every kind of write and a clean, on every layout; a one-partition query opens only that
partition's files and never lists the storage bucket; a query right after a write sees it; the
Hive form of the metastore entry survives publishes that do not ask for it."""

from __future__ import annotations

import ipaddress
import itertools
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import fed_hive
from fed_dev.hive import VERSIONS, HiveServer2
from fed_dev.metastore import HiveMetastore
from fed_dev.servers import LoopbackS3
from fed_dev.testing import ENGINE_LAYOUTS, query, trips, trips_rows, trips_table
from fedcore import Table
from fedcore import properties as P
from fedcore.catalog import SyncTarget, sync
from fedcore.catalog.metastore import HIVE_STORAGE_HANDLER, Metastore

COLUMNS = "trip_id, country, ts, fare"
_names = itertools.count()


class Hive(NamedTuple):
    server: HiveServer2
    metastore: HiveMetastore


@pytest.fixture(params=VERSIONS)
def hive(request: pytest.FixtureRequest) -> Hive:
    """Each HiveServer2 version with the metastore of its version."""
    server, metastore = (
        ("hiveserver2", "metastore") if request.param == "4.0.1" else ("hiveserver2_3", "metastore3")
    )
    return Hive(request.getfixturevalue(server), request.getfixturevalue(metastore))


def make(s3: LoopbackS3, layout: str) -> tuple[Table, str, str]:
    """A new table on S3 (its own buckets); its metastore name and its storage bucket."""
    n = next(_names)
    table, storage = trips_table(s3, layout, f"h{n}", {P.CLEANER_COMMITS_RETAINED: "1"})
    return table, f"htrips_{n}", storage


def connect(server: HiveServer2, metastore: HiveMetastore, s3: LoopbackS3, **tables: str) -> Any:
    return fed_hive.connect(
        port=server.port,
        database="lake",
        metastore=metastore.uri,
        tables=tables,
        storage_options=s3.storage_options(),
    )


def assert_same(connection: Any, name: str, table: Table) -> None:
    """The whole table, one partition, a data-column filter and an aggregate, as fedcore reads them."""
    assert query(connection, f"SELECT {COLUMNS} FROM {name}") == trips_rows(table)
    assert query(connection, f"SELECT {COLUMNS} FROM {name} WHERE country = 'us'") == trips_rows(
        table, filters=[("country", "=", "us")]
    )
    assert query(connection, f"SELECT {COLUMNS} FROM {name} WHERE fare >= 15") == trips_rows(
        table, filters=[("fare", ">=", 15.0)]
    )
    expected: dict[str, list[float]] = {}
    for _, country, _, fare in trips_rows(table):
        expected.setdefault(country, []).append(fare)
    assert query(connection, f"SELECT country, count(*), sum(fare) FROM {name} GROUP BY country") == sorted(
        (country, len(fares), pytest.approx(sum(fares))) for country, fares in expected.items()
    )


@pytest.mark.parametrize("layout", sorted(ENGINE_LAYOUTS))
def test_hive_reads_fedcores_rows_after_every_write_and_clean(
    hive: Hive, s3_server: LoopbackS3, layout: str
) -> None:
    hiveserver2, metastore = hive
    table, name, _ = make(s3_server, layout)
    table.write(trips(range(8), ["us", "de"] * 4), "bulk_insert")
    fed_hive.register(table, metastore=metastore.uri, database="lake", name=name)
    connection = connect(hiveserver2, metastore, s3_server, **{name: table.path})
    assert_same(connection, name, table)
    table.write(trips(range(4, 12), ["us", "de"] * 4, ts=2, fare=100.0), "upsert")
    assert_same(connection, name, table)
    table.write(trips([0, 2], ["us", "us"]), "delete")
    assert_same(connection, name, table)
    table.write(trips(range(50, 53), "fr"), "insert_overwrite")
    assert_same(connection, name, table)
    table.write(trips(range(60, 64), "us"), "insert")
    table.clean(retained=1)
    assert_same(connection, name, table)


def test_a_one_partition_query_opens_only_its_files_and_lists_nothing(
    hive: Hive, s3_server: LoopbackS3
) -> None:
    hiveserver2, metastore = hive
    table, name, storage = make(s3_server, "object_store")
    table.write(trips(range(40), ["us", "de", "fr", "br"] * 10), "bulk_insert")
    table.write(trips(range(40, 60), ["us", "de"] * 10), "insert")
    fed_hive.register(table, metastore=metastore.uri, database="lake", name=name)
    connection = connect(hiveserver2, metastore, s3_server, **{name: table.path})
    bucket = storage.removeprefix("s3://")
    us_files = {
        table.fs.to_physical(s.path).removeprefix("s3://")
        for s in table.scan([("country", "=", "us")]).plan_files()
    }
    for sql in (
        f"SELECT trip_id, fare FROM {name} WHERE country = 'us'",
        f"SELECT count(*), sum(fare) FROM {name} WHERE country = 'us'",  # a MapReduce job
    ):
        s3_server.requests.reset()
        got = query(connection, sql)
        assert got, sql
        assert not [p for p in s3_server.requests.listed if p.startswith(bucket)], s3_server.requests.listed
        read = {key for key in s3_server.requests.gets if key.startswith(bucket)}
        assert read, "the query read the partition's files"
        assert read <= us_files, read - us_files
    expected = trips_rows(table, filters=[("country", "=", "us")])
    assert got == [(len(expected), pytest.approx(sum(r[3] for r in expected)))]


def test_a_query_right_after_a_write_sees_it(hive: Hive, s3_server: LoopbackS3) -> None:
    hiveserver2, metastore = hive
    table, name, _ = make(s3_server, "object_store")
    table.write(trips(range(3), "us"), "bulk_insert")
    fresh = connect(hiveserver2, metastore, s3_server, **{name: table.path})
    assert query(fresh, f"SELECT count(*) FROM {name}") == [(3,)]  # published, in Hive's form, first
    table.write(trips(range(3, 5), "de"), "insert")  # no hive sync on this write
    stale = fed_hive.connect(port=hiveserver2.port, database="lake", read_your_writes=False)
    assert query(stale, f"SELECT count(*) FROM {name}") == [(3,)]  # what the metastore shows
    assert query(fresh, f"SELECT count(*) FROM {name}") == [(5,)]
    every = fed_hive.connect(
        port=hiveserver2.port,
        database="lake",
        metastore=metastore.uri,
        storage_options=s3_server.storage_options(),
    )
    assert every.fed_tables[name] == table.path


def test_the_hive_form_survives_publishes_that_do_not_ask_for_it(hive: Hive, s3_server: LoopbackS3) -> None:
    hiveserver2, metastore = hive
    table, name, _ = make(s3_server, "object_store")
    table.write(trips(range(3), "us"), "bulk_insert")
    plain = SyncTarget((metastore.uri,), "lake", name)
    sync(table, plain)  # as Trino's client or Hudi's hive_sync keys register it
    with Metastore(metastore.uri) as client:
        assert "storage_handler" not in (client.parameters("lake", name) or {})
    registered = fed_hive.register(table, metastore=metastore.uri, database="lake", name=name)
    assert registered.registered  # the same version, now in Hive's form
    table.write(trips(range(3, 6), "de"), "insert")
    sync(table, plain)
    with Metastore(metastore.uri) as client:
        params = client.parameters("lake", name) or {}
    assert params["storage_handler"] == HIVE_STORAGE_HANDLER
    assert params["table_type"] == "ICEBERG"
    stale = fed_hive.connect(port=hiveserver2.port, database="lake", read_your_writes=False)
    assert query(stale, f"SELECT count(*) FROM {name}") == [(6,)]


def _listening_addresses(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on ``port`` (IPv4, from /proc)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(str(ipaddress.IPv4Address(bytes(reversed(bytes.fromhex(address))))))
    return found


def test_hiveserver2_listens_on_loopback_only(hive: Hive) -> None:
    """Hive 3.1.3's binary transport ignores its bind address unless patched (fed_dev.hive)."""
    assert _listening_addresses(hive.server.port) == {"127.0.0.1"}
