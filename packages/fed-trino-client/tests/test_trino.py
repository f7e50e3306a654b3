"""Trino reads exactly fedcore's rows through the Iceberg view, after every kind of write and
table service, on every layout; a one-partition query touches only that partition's files
and never lists the storage bucket; a partition split over several manifests reads the same;
a query right after a write sees it; a publish racing queries never shows Trino a mixed
state."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
import trino

import fed_trino
from fed_dev.glue import loopback_target
from fed_dev.metastore import HiveMetastore
from fed_dev.servers import LoopbackS3
from fed_dev.testing import ENGINE_LAYOUTS, query, trips, trips_rows, trips_table
from fed_dev.trino import TrinoServer
from fedcore import Table
from fedcore import properties as P
from fedcore.catalog import SyncTarget, sync
from fedcore.iceberg import view as view_module
from fedcore.services.archival import archive
from fedcore.services.cleaning import clean
from fedcore.services.rollback import rollback

KEEP = {
    P.ARCHIVE_MIN_INSTANTS: "3",
    P.ARCHIVE_MAX_INSTANTS: "5",
    P.CLEANER_COMMITS_RETAINED: "1",
    P.HEARTBEAT_INTERVAL_MS: "100",
}
_names = itertools.count()


def make(s3: LoopbackS3, layout: str, **extra: str) -> tuple[Table, str, str]:
    """A new table on S3 (its own buckets); its metastore name and its storage bucket."""
    n = next(_names)
    table, storage = trips_table(s3, layout, f"t{n}", {**KEEP, **extra})
    return table, f"trips_{n}", storage


def connect(server: TrinoServer, metastore: HiveMetastore, s3: LoopbackS3, **tables: str) -> Any:
    return fed_trino.connect(
        port=server.port,
        schema="lake",
        metastore=metastore.uri,
        tables=tables,
        storage_options=s3.storage_options(),
    )


def assert_same(connection: Any, name: str, table: Table) -> None:
    columns = "trip_id, country, ts, fare"
    assert query(connection, f"SELECT {columns} FROM {name}") == trips_rows(table)
    assert query(connection, f"SELECT {columns} FROM {name} WHERE country = 'us'") == trips_rows(
        table, filters=[("country", "=", "us")]
    )
    assert query(connection, f"SELECT {columns} FROM {name} WHERE fare >= 15") == trips_rows(
        table, filters=[("fare", ">=", 15.0)]
    )


@pytest.mark.parametrize("layout", sorted(ENGINE_LAYOUTS))
def test_trino_reads_fedcores_rows_after_every_write_and_service(
    trino_server: TrinoServer, metastore: HiveMetastore, s3_server: LoopbackS3, layout: str
) -> None:
    table, name, _ = make(s3_server, layout)
    connection = connect(trino_server, metastore, s3_server, **{name: table.path})
    table.write(trips(range(8), ["us", "de"] * 4), "bulk_insert")
    assert_same(connection, name, table)
    table.write(trips(range(4, 12), ["us", "de"] * 4, ts=2, fare=100.0), "upsert")
    assert_same(connection, name, table)
    table.write(trips([0, 2], ["us", "us"]), "delete")
    assert_same(connection, name, table)
    table.write(trips(range(50, 53), "fr"), "insert_overwrite")
    assert_same(connection, name, table)
    clean(table.handle, retained=1)
    assert_same(connection, name, table)
    upserted = table.write(trips([50], "fr", ts=9, fare=7.0), "upsert").instant
    assert_same(connection, name, table)
    rollback(table.handle, upserted)
    assert_same(connection, name, table)
    for n in range(6):
        table.write(trips([n + 100], "us", fare=float(n)), "upsert")
    archive(table.handle)
    assert_same(connection, name, table)


def test_a_one_partition_query_reads_only_its_files_and_lists_nothing(
    trino_server: TrinoServer, metastore: HiveMetastore, s3_server: LoopbackS3
) -> None:
    table, name, storage = make(s3_server, "object_store")
    connection = connect(trino_server, metastore, s3_server, **{name: table.path})
    table.write(trips(range(40), ["us", "de", "fr", "br"] * 10), "bulk_insert")
    table.write(trips(range(40, 60), ["us", "de"] * 10), "insert")
    query(connection, f"SELECT count(*) FROM {name}")  # published; metadata cached by Trino
    bucket = storage.removeprefix("s3://")
    us_files = {
        table.fs.to_physical(s.path).removeprefix("s3://")
        for s in table.scan([("country", "=", "us")]).plan_files()
    }
    s3_server.requests.reset()
    got = query(connection, f"SELECT trip_id, fare FROM {name} WHERE country = 'us'")
    assert got == sorted((r[0], r[3]) for r in trips_rows(table, filters=[("country", "=", "us")]))
    assert not [p for p in s3_server.requests.listed if p.startswith(bucket)], s3_server.requests.listed
    read = {key for key in s3_server.requests.gets if key.startswith(bucket)}
    assert read, "the query read the partition's files"
    assert read <= us_files, read - us_files


def test_trino_reads_a_partition_split_over_several_manifests(
    trino_server: TrinoServer,
    metastore: HiveMetastore,
    s3_server: LoopbackS3,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a small manifest target, a partition of 140 one-row files is split over several
    manifests: Trino reads every row once, the partition alone where a query keeps one, and
    after an upsert (one of the partition's manifests rewritten, the others carried over)
    the new rows."""
    monkeypatch.setattr(view_module, "MANIFEST_TARGET_BYTES", 16_000)  # some 50 entries
    one_row_files = {P.RECORD_SIZE_ESTIMATE: "64", P.MAX_FILE_SIZE: "64", P.SMALL_FILE_LIMIT: "0"}
    table, name, _ = make(s3_server, "object_store", **one_row_files)
    connection = connect(trino_server, metastore, s3_server, **{name: table.path})
    table.write(trips(range(150), ["us"] * 140 + ["de"] * 10), "bulk_insert")
    assert_same(connection, name, table)
    live = query(
        connection, f'SELECT added_data_files_count + existing_data_files_count FROM "{name}$manifests"'
    )
    assert len(live) >= 5, live  # "us" split, "de" one
    assert sum(n for (n,) in live) == 150
    table.write(trips([3, 145], ["us", "de"], ts=2, fare=1.0), "upsert")
    assert_same(connection, name, table)


def test_a_query_right_after_a_write_sees_it(
    trino_server: TrinoServer, metastore: HiveMetastore, s3_server: LoopbackS3
) -> None:
    table, name, _ = make(s3_server, "object_store")
    table.write(trips(range(3), "us"), "bulk_insert")
    fresh = connect(trino_server, metastore, s3_server, **{name: table.path})
    assert query(fresh, f"SELECT count(*) FROM {name}") == [(3,)]
    table.write(trips(range(3, 5), "de"), "insert")  # no hive sync on this write
    stale = fed_trino.connect(port=trino_server.port, schema="lake", read_your_writes=False)
    assert query(stale, f"SELECT count(*) FROM {name}") == [(3,)]  # what the metastore shows
    assert query(fresh, f"SELECT count(*) FROM {name}") == [(5,)]  # published before the query
    # Every fed table registered in the schema, asked of the metastore.
    every = fed_trino.connect(
        port=trino_server.port,
        schema="lake",
        metastore=metastore.uri,
        storage_options=s3_server.storage_options(),
    )
    assert every.fed_tables[name] == table.path


def test_publishes_racing_queries_never_show_a_mixed_state(
    trino_server: TrinoServer, metastore: HiveMetastore, s3_server: LoopbackS3
) -> None:
    sync = {
        P.HIVE_SYNC_ENABLE: "true",
        P.HIVE_SYNC_METASTORE_URIS: metastore.uri,
        P.HIVE_SYNC_DATABASE: "lake",
    }
    table, name, _ = make(s3_server, "object_store", **{**sync, P.HIVE_SYNC_TABLE: f"race_{next(_names)}"})
    name = table.options[P.HIVE_SYNC_TABLE]
    table.write(trips(range(20), ["us", "de"] * 10), "bulk_insert")
    reader = fed_trino.connect(port=trino_server.port, schema="lake", read_your_writes=False)
    seen: list[tuple[Any, ...]] = []
    done = threading.Event()

    def write() -> None:
        try:
            for n in range(6):  # each upsert rewrites both partitions' file groups
                table.write(
                    trips(range(20), ["us", "de"] * 10, ts=n + 2, fare=float(100 * (n + 1))), "upsert"
                )
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    while not done.is_set():
        seen += query(reader, f"SELECT count(*), sum(fare), min(fare), max(fare) FROM {name}")
    writer.join()
    # Each instant's state: 20 rows, every fare from the same write.
    states = {
        (20, float(sum(f + i for i in range(20))), float(f), float(f + 19))
        for f in [10.0] + [100.0 * (n + 1) for n in range(6)]
    }
    assert seen
    assert set(seen) <= states, set(seen) - states
    assert query(reader, f"SELECT count(*), max(fare) FROM {name}") == [(20, 619.0)]


def test_trino_reads_through_feds_rest_catalog_with_no_sync(
    trino_server: TrinoServer, served_table: Table, rest_catalog: Any
) -> None:
    """Trino's REST-catalog Iceberg connector (catalog ``fed``) loads the table from fed's
    REST catalog: exactly fedcore's rows, and a write's rows on the next query, with no sync
    or publish step in between."""
    connection = trino.dbapi.connect(
        host="127.0.0.1", port=trino_server.port, user="fed", catalog="fed", schema="lake"
    )
    served_table.write(trips(range(10), ["us", "de"] * 5), "bulk_insert")
    assert query(connection, "SHOW TABLES") == [("trips",)]
    columns = "trip_id, country, ts, fare"
    assert query(connection, f"SELECT {columns} FROM trips") == trips_rows(served_table)
    served_table.write(trips([1, 2, 30], ["de", "us", "fr"], ts=2, fare=99.0), "upsert")
    assert query(connection, f"SELECT {columns} FROM trips") == trips_rows(served_table)
    assert query(connection, f"SELECT {columns} FROM trips WHERE country = 'fr'") == trips_rows(
        served_table, filters=[("country", "=", "fr")]
    )
    assert len(trips_rows(served_table)) == 11


def test_trino_reads_a_view_fed_registered_in_aws_glue(
    trino_server: TrinoServer, s3_server: LoopbackS3
) -> None:
    """``fed sync --glue``'s registration, read by Trino's Glue catalog (catalog ``glue``, on
    the loopback server's Glue): exactly fedcore's rows, a partition filter, and the next
    sync's rows."""
    table, _, _ = make(s3_server, "object_store")
    table.write(trips(range(12), ["us", "de", "fr"] * 4), "bulk_insert")
    target = loopback_target(s3_server, "glue_lake", "trips")
    sync(table, target)
    connection = trino.dbapi.connect(
        host="127.0.0.1", port=trino_server.port, user="fed", catalog="glue", schema="glue_lake"
    )
    columns = "trip_id, country, ts, fare"
    assert query(connection, f"SELECT {columns} FROM trips") == trips_rows(table)
    table.write(trips([1, 2, 40], ["de", "fr", "us"], ts=2, fare=77.0), "upsert")
    sync(table, target)
    assert query(connection, f"SELECT {columns} FROM trips") == trips_rows(table)
    assert query(connection, f"SELECT {columns} FROM trips WHERE country = 'us'") == trips_rows(
        table, filters=[("country", "=", "us")]
    )
    assert len(trips_rows(table)) == 13


def test_trino_reads_a_view_published_to_a_hive_3_metastore(
    trino_server: TrinoServer, metastore3: HiveMetastore, s3_server: LoopbackS3
) -> None:
    """A Hive 3.1.3 metastore (catalog ``hive3``), where fed publishes under the table's lock:
    Trino reads exactly fedcore's rows, and the next sync's."""
    table, _, _ = make(s3_server, "object_store")
    table.write(trips(range(12), ["us", "de", "fr"] * 4), "bulk_insert")
    target = SyncTarget((metastore3.uri,), "lake3", "trips")
    sync(table, target)
    connection = trino.dbapi.connect(
        host="127.0.0.1", port=trino_server.port, user="fed", catalog="hive3", schema="lake3"
    )
    columns = "trip_id, country, ts, fare"
    assert query(connection, f"SELECT {columns} FROM trips") == trips_rows(table)
    table.write(trips([3, 4, 60], ["de", "fr", "us"], ts=2, fare=66.0), "upsert")
    sync(table, target)
    assert query(connection, f"SELECT {columns} FROM trips") == trips_rows(table)
    assert query(connection, f"SELECT {columns} FROM trips WHERE country = 'fr'") == trips_rows(
        table, filters=[("country", "=", "fr")]
    )
