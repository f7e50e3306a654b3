"""A ``trino.dbapi`` connection whose statements see the fed tables' latest commits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trino.dbapi

from fedcore.catalog import FreshCursor, ReadYourWrites
from fedcore.engine import StorageOptions
from fedcore.exceptions import ConfigError


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
        self.metastore = metastore
        self.freshness: ReadYourWrites | None = None
        if not read_your_writes:
            self.fed_tables: dict[str, str] = dict(tables or {})
            return
        if metastore is None:
            raise ConfigError("metastore", "read_your_writes needs the Hive metastore Trino's catalog uses")
        self.freshness = ReadYourWrites(metastore, self.schema, tables, storage_options=storage_options)
        self.fed_tables = self.freshness.tables

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        cursor = super().cursor(*args, **kwargs)
        return cursor if self.freshness is None else FreshCursor(cursor, self.freshness)


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
