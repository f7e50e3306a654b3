"""Hudi's Hive sync, fed's way: publish the Iceberg view, then register it in a Hive metastore.

A commit with ``hoodie.datasource.hive_sync.enable=true`` syncs itself after it lands (a
failure then is a warning on the write's result: the commit stands, and the next sync
catches up); ``fed sync`` does it by hand."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fedcore import properties as P
from fedcore.exceptions import MetastoreError
from fedcore.handle import HasHandle, TableHandle, handle_of
from fedcore.iceberg.locations import version_of
from fedcore.iceberg.metastore import INSTANT_PARAMETER, Metastore
from fedcore.iceberg.view import publish


@dataclass(frozen=True)
class SyncTarget:
    """Where a table's view is registered: metastore URIs (tried in order), database, table;
    ``hive``: in Iceberg's Hive-engine form, so Hive reads it too (an entry keeps that form)."""

    uris: tuple[str, ...]
    database: str
    table: str
    hive: bool = False

    @classmethod
    def of(cls, table: TableHandle, options: Mapping[str, str]) -> SyncTarget | None:
        """From Hudi's hive_sync keys; None when sync is not enabled."""
        if not P.HIVE_SYNC_ENABLE.of(options):
            return None
        P.HIVE_SYNC_MODE.of(options)
        uris = P.HIVE_SYNC_METASTORE_URIS.of(options)
        if not uris:
            raise MetastoreError(f"{P.HIVE_SYNC_METASTORE_URIS} is required when {P.HIVE_SYNC_ENABLE}=true")
        return cls(
            uris,
            P.HIVE_SYNC_DATABASE.of(options) or P.DEFAULT_HIVE_SYNC_DATABASE,
            P.HIVE_SYNC_TABLE.of(options) or table.name,
        )


@dataclass(frozen=True)
class SyncResult:
    """The fed instant the metastore's table now shows, and through which metadata file."""

    instant: str | None
    metadata_location: str | None
    database: str
    table: str
    metastore: str
    registered: bool  # False: the metastore already held this version (or a newer one)


def sync(table: HasHandle, target: SyncTarget) -> SyncResult:
    """Publish the view, then point the metastore's table at it."""
    table = handle_of(table)
    result = publish(table)
    if result.metadata_location is None or result.metadata is None:
        raise MetastoreError(f"table {table.name} has no schema yet: nothing to register")
    ours = version_of(result.metadata_location)
    errors = []
    for uri in target.uris:
        try:
            with Metastore(uri) as metastore:
                registration = metastore.register(
                    target.database,
                    target.table,
                    table_path=table.path,
                    schema=result.metadata.schema(),
                    metadata_location=result.metadata_location,
                    instant=result.instant,
                    is_newer=lambda held: version_of(held) > ours,
                    hive=target.hive,
                )
        except MetastoreError as exc:
            errors.append(str(exc))
            continue
        return SyncResult(
            result.instant,
            registration.metadata_location,
            target.database,
            target.table,
            uri,
            registration.changed,
        )
    raise MetastoreError("; ".join(errors))


def registered_instant(uri: str, database: str, table: str) -> str | None:
    """The fed instant ``database.table`` shows in the metastore at ``uri`` (None: not there)."""
    with Metastore(uri) as metastore:
        params = metastore.parameters(database, table)
    return None if params is None else params.get(INSTANT_PARAMETER) or None


def registered_tables(uri: str, database: str) -> dict[str, str]:
    """The fed tables registered in ``database``: metastore name -> fed table path."""
    with Metastore(uri) as metastore:
        return metastore.fed_tables(database)
