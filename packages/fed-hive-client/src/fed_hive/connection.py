"""A pyhive connection to HiveServer2 whose statements see the fed tables' latest commits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyhive import hive

import fedcore
from fedcore.catalog import FreshCursor, ReadYourWrites, SyncResult, SyncTarget, sync
from fedcore.engine import StorageOptions
from fedcore.exceptions import ConfigError


def register(
    table: fedcore.Table | str,
    *,
    metastore: str,
    database: str = "default",
    name: str | None = None,
    storage_options: StorageOptions | None = None,
) -> SyncResult:
    """Publish ``table``'s Iceberg view and register it as ``database.name`` (default: the
    table's name) in the Hive metastore at ``metastore`` (``thrift://HOST:PORT``), in the form
    Hive reads. Later publishes (Hudi's hive_sync keys, ``fed sync``, either client) keep
    that form. ``table``: a fedcore table or its path (opened with ``storage_options``)."""
    handle = (
        table
        if isinstance(table, fedcore.Table)
        else fedcore.load_table(table, storage_options=storage_options)
    )
    return sync(handle, SyncTarget((metastore,), database, name or handle.name, hive=True))


class FedConnection(hive.Connection):  # type: ignore[misc,unused-ignore]
    """A HiveServer2 connection that publishes a fed table's newest commit before a statement
    that names the table reads it (``read_your_writes``).

    ``tables``: metastore table name -> fed table path, the fed tables of ``database`` this
    connection looks after; None: every fed table registered in ``database`` (asked of the
    metastore once, when the connection opens)."""

    def __init__(
        self,
        *args: Any,
        database: str,
        metastore: str | None,
        tables: Mapping[str, str] | None,
        storage_options: StorageOptions | None,
        read_your_writes: bool,
        **kwargs: Any,
    ) -> None:
        self.freshness: ReadYourWrites | None = None  # pyhive runs `USE database` while opening
        super().__init__(*args, database=database, **kwargs)
        self.database = database
        self.metastore = metastore
        if not read_your_writes:
            self.fed_tables: dict[str, str] = dict(tables or {})
            return
        if metastore is None:
            raise ConfigError("metastore", "read_your_writes needs the Hive metastore HiveServer2 uses")
        self.freshness = ReadYourWrites(
            metastore, database, tables, storage_options=storage_options, hive=True
        )
        self.fed_tables = self.freshness.tables

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        cursor = super().cursor(*args, **kwargs)
        return cursor if self.freshness is None else FreshCursor(cursor, self.freshness)


def connect(
    host: str = "127.0.0.1",
    port: int = 10000,
    *,
    database: str = "default",
    username: str = "fed",
    metastore: str | None = None,
    tables: Mapping[str, str] | None = None,
    storage_options: StorageOptions | None = None,
    read_your_writes: bool = True,
    **kwargs: Any,
) -> FedConnection:
    """A pyhive connection to HiveServer2 at ``host:port`` with ``database`` its default.
    ``metastore``: the ``thrift://HOST:PORT`` of the Hive metastore HiveServer2 uses (needed to
    read your own writes); ``tables``: the fed tables of ``database`` (name -> table path;
    default: every one registered there); ``storage_options``: how this process reaches the
    tables' storage (HiveServer2 uses its own settings). Other keyword arguments go to
    ``pyhive.hive.Connection`` (``auth``, ``password``, ``configuration``, ...)."""
    return FedConnection(
        host,
        port,
        username=username,
        database=database,
        metastore=metastore,
        tables=tables,
        storage_options=storage_options,
        read_your_writes=read_your_writes,
        **kwargs,
    )
