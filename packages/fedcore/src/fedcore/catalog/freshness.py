"""Read your writes through an engine: before a statement runs, the metastore must show the
newest completed instant of every fed table the statement names; a table it lags on is
published first. The engine adapters (fed-trino-client, fed-hive-client) call this around
each statement, so a query right after a commit sees it, whether or not the commit synced."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fedcore.catalog.meta_sync import SyncTarget, registered_tables, sync
from fedcore.catalog.metastore import (
    HIVE_STORAGE_HANDLER,
    INSTANT_PARAMETER,
    STORAGE_HANDLER_PARAMETER,
    Metastore,
)
from fedcore.exceptions import FedError, MetastoreError
from fedcore.handle import TableHandle
from fedcore.iceberg.view import latest_instant
from fedcore.io.filesystems import StorageOptions


class ReadYourWrites:
    """The fed tables of one metastore database an engine connection looks after.

    ``tables``: metastore table name -> fed table path; None: every fed table registered in
    ``database`` (asked of the metastore once, here). ``hive``: the entries must be in
    Iceberg's Hive-engine form too (for Hive's connections): one that is not is re-registered."""

    def __init__(
        self,
        metastore: str,
        database: str,
        tables: Mapping[str, str] | None = None,
        *,
        storage_options: StorageOptions | None = None,
        hive: bool = False,
    ) -> None:
        self.metastore = metastore
        self.database = database
        self.tables = dict(tables) if tables is not None else registered_tables(metastore, database)
        self._storage_options = storage_options
        self._hive = hive
        self._handles: dict[str, TableHandle] = {}
        self._patterns = {
            name: re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])", re.IGNORECASE) for name in self.tables
        }

    def refresh(self, statement: str) -> list[str]:
        """Publish the fed tables ``statement`` names whose newest instant the metastore does
        not show yet; the names of those published. One metastore connection a statement."""
        named = [(name, path) for name, path in self.tables.items() if self._patterns[name].search(statement)]
        if not named:
            return []
        published = []
        with Metastore(self.metastore) as metastore:
            for name, path in named:
                table = self._table(name, path)
                latest = latest_instant(table)
                try:
                    if latest is None or self._current(metastore.parameters(self.database, name), latest):
                        continue
                    sync(table, SyncTarget((self.metastore,), self.database, name, hive=self._hive))
                except FedError as exc:
                    raise MetastoreError(
                        f"table {self.database}.{name} ({path}): publishing instant {latest} before the "
                        f"query failed: {exc}"
                    ) from exc
                published.append(name)
        return published

    def _current(self, held: Mapping[str, str] | None, latest: str) -> bool:
        held = held or {}
        hive_ready = not self._hive or held.get(STORAGE_HANDLER_PARAMETER) == HIVE_STORAGE_HANDLER
        return held.get(INSTANT_PARAMETER) == latest and hive_ready

    def _table(self, name: str, path: str) -> TableHandle:
        table = self._handles.get(name)
        if table is None:
            table = self._handles[name] = TableHandle.open(path, self._storage_options)
        return table


class FreshCursor:
    """A DB-API cursor (any engine's) that brings the fed tables a statement names up to date
    before running it; everything else is the wrapped cursor's."""

    def __init__(self, cursor: Any, freshness: ReadYourWrites) -> None:
        self._cursor = cursor
        self._freshness = freshness

    def execute(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        self._freshness.refresh(operation)
        self._cursor.execute(operation, *args, **kwargs)
        return self

    def executemany(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        self._freshness.refresh(operation)
        return self._cursor.executemany(operation, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def __iter__(self) -> Any:
        return iter(self._cursor)
