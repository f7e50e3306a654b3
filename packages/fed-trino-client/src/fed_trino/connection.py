"""A ``trino.dbapi`` connection whose statements see the fed tables' latest commits."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import trino.dbapi

import fedcore
from fedcore.engine import StorageOptions
from fedcore.exceptions import ConfigError, FedError, MetastoreError
from fedcore.iceberg import SyncTarget, latest_instant, registered_instant, registered_tables, sync


class FedConnection(trino.dbapi.Connection):  # type: ignore[misc,unused-ignore]
    """A Trino connection that publishes a fed table's newest commit before a statement that
    names the table reads it (``read_your_writes``).

    ``tables``: metastore table name -> fed table path, the fed tables of ``schema`` this
    connection looks after; None: every fed table registered in ``schema`` (asked of the
    metastore once, when the connection opens)."""

    def __init__(
        self,
        *args: Any,
        metastore: str | None,
        tables: Mapping[str, str] | None,
        storage_options: StorageOptions | None,
        read_your_writes: bool,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.read_your_writes = read_your_writes
        self.metastore = metastore
        self._storage_options = storage_options
        self._handles: dict[str, fedcore.Table] = {}
        if not read_your_writes:
            self.fed_tables: dict[str, str] = dict(tables or {})
            return
        if metastore is None:
            raise ConfigError("metastore", "read_your_writes needs the Hive metastore Trino's catalog uses")
        self.fed_tables = dict(tables) if tables is not None else registered_tables(metastore, self.schema)
        self._patterns = {
            name: re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])", re.IGNORECASE)
            for name in self.fed_tables
        }

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        cursor = super().cursor(*args, **kwargs)
        if not self.read_your_writes:
            return cursor
        return _FreshCursor(cursor, self)

    def refresh(self, statement: str) -> list[str]:
        """Publish the fed tables ``statement`` names whose newest instant the metastore does
        not show yet; the names of those published."""
        published = []
        assert self.metastore is not None
        for name, path in self.fed_tables.items():
            if not self._patterns[name].search(statement):
                continue
            table = self._table(name, path)
            latest = latest_instant(table)
            try:
                if latest is None or registered_instant(self.metastore, self.schema, name) == latest:
                    continue
                sync(table, SyncTarget((self.metastore,), self.schema, name))
            except FedError as exc:
                raise MetastoreError(
                    f"table {self.schema}.{name} ({path}): publishing instant {latest} before the query "
                    f"failed: {exc}"
                ) from exc
            published.append(name)
        return published

    def _table(self, name: str, path: str) -> fedcore.Table:
        table = self._handles.get(name)
        if table is None:
            table = self._handles[name] = fedcore.load_table(path, storage_options=self._storage_options)
        return table


class _FreshCursor:
    """A Trino cursor that brings the fed tables a statement names up to date first."""

    def __init__(self, cursor: Any, connection: FedConnection) -> None:
        self._cursor = cursor
        self._connection = connection

    def execute(self, operation: str, params: Any = None) -> Any:
        self._connection.refresh(operation)
        self._cursor.execute(operation, params)
        return self

    def executemany(self, operation: str, seq_of_params: Any) -> Any:
        self._connection.refresh(operation)
        return self._cursor.executemany(operation, seq_of_params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def __iter__(self) -> Any:
        return iter(self._cursor)


def connect(
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    user: str = "fed",
    catalog: str = "iceberg",
    schema: str = "default",
    metastore: str | None = None,
    tables: Mapping[str, str] | None = None,
    storage_options: StorageOptions | None = None,
    read_your_writes: bool = True,
    **kwargs: Any,
) -> FedConnection:
    """A ``trino.dbapi`` connection to Trino at ``host:port`` with ``catalog.schema`` its
    default. ``metastore``: the ``thrift://HOST:PORT`` of the Hive metastore Trino's Iceberg
    catalog uses (needed to read your own writes); ``tables``: the fed tables of ``schema``
    (name -> table path; default: every one registered there); ``storage_options``: how this
    process reaches the tables' storage (Trino uses its own catalog's). Other keyword
    arguments go to ``trino.dbapi.connect``."""
    return FedConnection(
        host,
        port,
        user=user,
        catalog=catalog,
        schema=schema,
        metastore=metastore,
        tables=tables,
        storage_options=storage_options,
        read_your_writes=read_your_writes,
        **kwargs,
    )
