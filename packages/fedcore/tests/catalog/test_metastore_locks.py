"""Publishing to a Hive metastore before 4.0 (a real Apache Hive 3.1.3 standalone metastore,
Thrift, Derby): it applies an update without checking the location it replaces, so fed updates
under the table's metastore lock, as Iceberg's HiveCatalog commits. Racing publishers never
lose an update; a lock a dead publisher left is waited out until the metastore expires it; a
lock held past the timeout is a typed error, and the waiting lock is released."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
from hive_metastore.ThriftHiveMetastore import Client
from hive_metastore.ttypes import (
    HeartbeatRequest,
    LockComponent,
    LockLevel,
    LockRequest,
    LockState,
    LockType,
    ShowLocksRequest,
    UnlockRequest,
)
from pyiceberg.table import StaticTable
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from fed_dev.metastore import HiveMetastore
from fed_dev.testing import Backend
from fedcore.catalog.metastore import INSTANT_PARAMETER, METADATA_LOCATION, Metastore
from fedcore.cli.main import main
from fedcore.exceptions import MetastoreBusyError
from fedcore.iceberg import current_view, publish
from fedcore.iceberg.locations import version_of

from ..iceberg.test_iceberg_view import make, ordered
from ..write.test_writes import trips

#: Seconds the metastore keeps a lock nobody heartbeats (Hive's default is 300).
TXN_TIMEOUT_S = 10


@pytest.fixture(scope="module")
def hive3() -> Iterator[HiveMetastore]:
    with HiveMetastore(version="3.1.3", txn_timeout_s=TXN_TIMEOUT_S) as server:
        yield server


@pytest.fixture
def local(tmp_path: Any) -> Backend:
    return Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)


class RawClient:
    """A Thrift connection of the test's own: another publisher's locks."""

    def __init__(self, uri: str) -> None:
        parsed = urlparse(uri)
        self.transport = TTransport.TBufferedTransport(TSocket.TSocket(parsed.hostname, parsed.port))
        self.client = Client(TBinaryProtocol.TBinaryProtocol(self.transport))
        self.transport.open()

    def lock(self, database: str, table: str) -> int:
        component = LockComponent(
            type=LockType.EXCLUSIVE, level=LockLevel.TABLE, dbname=database, tablename=table
        )
        response = self.client.lock(LockRequest(component=[component], user="other", hostname="elsewhere"))
        assert response.state == LockState.ACQUIRED
        return int(response.lockid)

    def locks(self, table: str) -> list[Any]:
        return [
            lock for lock in self.client.show_locks(ShowLocksRequest()).locks or [] if lock.tablename == table
        ]

    def close(self) -> None:
        self.transport.close()


def register(hive3: HiveMetastore, table: Any, result: Any, name: str, **kwargs: Any) -> Any:
    ours = version_of(result.metadata_location)
    with Metastore(hive3.uri, **kwargs) as metastore:
        return metastore.register(
            "lake",
            name,
            table_path=table.path,
            schema=result.metadata.schema(),
            metadata_location=result.metadata_location,
            instant=result.instant,
            is_newer=lambda held: version_of(held) > ours,
        )


def registered_then_moved(hive3: HiveMetastore, local: Backend, name: str) -> tuple[Any, Any, Any]:
    """A table registered as ``lake.name``, and a newer view of it (published, not registered)."""
    table = make(local)
    table.write(trips(range(4)), "bulk_insert")
    result = publish(table)
    register(hive3, table, result, name)
    table.upsert(trips([5], ["de"], ts=2))
    return table, result, publish(table)


def held(hive3: HiveMetastore, name: str) -> str:
    with Metastore(hive3.uri) as metastore:
        return (metastore.parameters("lake", name) or {})[METADATA_LOCATION]


def test_fed_sync_registers_on_hive_3_and_a_write_moves_it(
    hive3: HiveMetastore, local: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    table = make(local)
    instant = table.write(trips(range(6), ["us", "de"] * 3), "bulk_insert").instant
    args = ["sync", table.path, "--metastore", hive3.uri, "--database", "lake", "--table", "synced"]
    assert main(args) == 0
    assert f"instant {instant} registered as lake.synced" in capsys.readouterr().out
    with Metastore(hive3.uri) as metastore:
        params = metastore.parameters("lake", "synced") or {}
    assert params[INSTANT_PARAMETER] == instant
    assert params[METADATA_LOCATION] == current_view(table).location
    assert ordered(StaticTable.from_metadata(params[METADATA_LOCATION]).scan().to_arrow()) == ordered(
        table.read()
    )
    table.upsert(trips([0, 7], ["us", "fr"], ts=2, fare=50.0))
    assert main(args) == 0
    assert held(hive3, "synced") == current_view(table).location
    other = RawClient(hive3.uri)
    try:
        assert other.locks("synced") == []  # every lock taken was released
    finally:
        other.close()


def test_racing_publishers_never_lose_an_update(hive3: HiveMetastore, local: Backend) -> None:
    """A publisher of an older view reads the entry, then is slow to alter it; the newest view's
    publisher comes meanwhile. Under the lock the newest waits, reads the slow one's update and
    replaces it. (Without the lock both would read the same entry and the slow one, landing
    last, would move the table back: Hive 3.1 does not check the location an update replaces.)"""
    table = make(local)
    table.write(trips(range(4)), "bulk_insert")
    register(hive3, table, publish(table), "raced")
    table.upsert(trips([1, 9], ["us", "de"], ts=2))
    older = publish(table)
    table.upsert(trips([2], ["us"], ts=3))
    newest = publish(table)
    slow_started = threading.Event()
    times: dict[str, float] = {}

    def slow_older() -> None:  # slow between reading the entry and altering it
        with Metastore(hive3.uri) as metastore:
            alter = metastore._client.alter_table_with_environment_context

            def slowly(*args: Any) -> Any:
                slow_started.set()
                time.sleep(1.5)
                return alter(*args)

            metastore._client.alter_table_with_environment_context = slowly
            ours = version_of(older.metadata_location)
            metastore.register(
                "lake",
                "raced",
                table_path=table.path,
                schema=older.metadata.schema(),
                metadata_location=older.metadata_location,
                instant=older.instant,
                is_newer=lambda held: version_of(held) > ours,
            )

    def fast_newest() -> None:  # comes while the slow one is between its read and its alter
        assert slow_started.wait(30)
        start = time.monotonic()
        register(hive3, table, newest, "raced")
        times["waited"] = time.monotonic() - start

    threads = [threading.Thread(target=slow_older), threading.Thread(target=fast_newest)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert held(hive3, "raced") == newest.metadata_location
    assert times["waited"] > 0.5  # it waited for the slow publisher's lock


def test_a_lock_a_dead_publisher_left_is_waited_out(hive3: HiveMetastore, local: Backend) -> None:
    table, _, moved = registered_then_moved(hive3, local, "stale")
    dead = RawClient(hive3.uri)
    dead.lock("lake", "stale")
    dead.close()  # died holding it: a closed connection does not release a lock
    start = time.monotonic()
    register(hive3, table, moved, "stale")
    waited = time.monotonic() - start
    assert TXN_TIMEOUT_S * 0.5 < waited < 90, waited  # until the metastore expired the dead lock
    assert held(hive3, "stale") == moved.metadata_location


def test_a_lock_held_past_the_timeout_is_a_typed_error_and_the_wait_is_released(
    hive3: HiveMetastore, local: Backend
) -> None:
    table, result, moved = registered_then_moved(hive3, local, "busy")
    holder = RawClient(hive3.uri)
    lock = holder.lock("lake", "busy")
    try:
        with pytest.raises(MetastoreBusyError, match="stayed locked for 3 s"):
            register(hive3, table, moved, "busy", lock_timeout_s=3.0)
        assert [entry.lockid for entry in holder.locks("busy")] == [lock]  # its waiting lock is gone
        holder.client.heartbeat(HeartbeatRequest(lockid=lock))
    finally:
        holder.client.unlock(UnlockRequest(lockid=lock))
        holder.close()
    assert held(hive3, "busy") == result.metadata_location  # unchanged
    register(hive3, table, moved, "busy")
    assert held(hive3, "busy") == moved.metadata_location
