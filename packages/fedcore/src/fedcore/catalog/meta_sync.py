"""Hudi's meta sync, fed's way: publish the Iceberg view, then register it in a catalog: a Hive
metastore (where Hudi's Hive sync goes) or AWS Glue (Hudi's Glue sync).

A commit with Hudi's sync keys (``hoodie.datasource.hive_sync.enable``, or
``hoodie.datasource.meta.sync.enable`` with ``hoodie.meta.sync.client.tool.class``) syncs
itself after it lands (a failure then is a warning on the write's result: the commit stands,
and the next sync catches up); ``fed sync`` does it by hand."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyiceberg.table.metadata import TableMetadata

from fedcore import properties as P
from fedcore.catalog.entry import INSTANT_PARAMETER, Registration, sync_names
from fedcore.catalog.glue import Glue, GlueTarget
from fedcore.catalog.metastore import Metastore
from fedcore.exceptions import MetastoreBusyError, MetastoreError
from fedcore.handle import HasHandle, TableHandle, handle_of
from fedcore.iceberg.locations import version_of
from fedcore.iceberg.view import PublishResult, publish


@dataclass(frozen=True)
class SyncTarget:
    """Where a table's view is registered in a Hive metastore: its URIs (tried in order),
    database, table; ``hive``: in Iceberg's Hive-engine form, so Hive reads it too (an entry
    keeps that form)."""

    uris: tuple[str, ...]
    database: str
    table: str
    hive: bool = False

    @classmethod
    def of(cls, table: TableHandle, options: Mapping[str, str]) -> SyncTarget | None:
        """From Hudi's hive_sync keys; None when no commit syncs to a Hive metastore."""
        if P.HIVE_SYNC_TOOL not in P.sync_tools(options):
            return None
        P.HIVE_SYNC_MODE.of(options)
        uris = P.HIVE_SYNC_METASTORE_URIS.of(options)
        if not uris:
            raise MetastoreError(f"{P.HIVE_SYNC_METASTORE_URIS} is required to sync to a Hive metastore")
        database, name = sync_names(table, options)
        return cls(uris, database, name)


def sync_targets(table: TableHandle, options: Mapping[str, str]) -> list[SyncTarget | GlueTarget]:
    """Every catalog a commit of ``table`` with ``options`` syncs with (Hudi's keys)."""
    targets: list[SyncTarget | GlueTarget] = []
    for target in (SyncTarget.of(table, options), GlueTarget.of(table, options)):
        if target is not None:
            targets.append(target)
    return targets


@dataclass(frozen=True)
class SyncResult:
    """The fed instant the catalog's table now shows, and through which metadata file."""

    instant: str | None
    metadata_location: str | None
    database: str
    table: str
    metastore: str  # the catalog: a metastore's URI, or "AWS Glue (...)"
    registered: bool  # False: the catalog already held this version (or a newer one)


def sync(table: HasHandle, target: SyncTarget | GlueTarget) -> SyncResult:
    """Publish the view, then point the catalog's table at it."""
    table = handle_of(table)
    result = publish(table)
    if result.metadata_location is None or result.metadata is None:
        raise MetastoreError(f"table {table.name} has no schema yet: nothing to register")
    if isinstance(target, GlueTarget):
        return _glue(table, result, result.metadata, result.metadata_location, target)
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
        except MetastoreBusyError:
            raise  # the same metastore behind another URI holds the same lock
        except MetastoreError as exc:
            errors.append(str(exc))
            continue
        return _result(result, registration, uri)
    raise MetastoreError("; ".join(errors))


def _glue(
    table: TableHandle, result: PublishResult, metadata: TableMetadata, location: str, target: GlueTarget
) -> SyncResult:
    ours = version_of(location)
    registration = Glue(target).register(
        target.database,
        target.table,
        table_path=table.path,
        metadata=metadata,
        metadata_location=location,
        instant=result.instant,
        is_newer=lambda held: version_of(held) > ours,
    )
    return _result(result, registration, target.where)


def _result(result: PublishResult, registration: Registration, where: str) -> SyncResult:
    return SyncResult(
        result.instant,
        registration.metadata_location,
        registration.database,
        registration.table,
        where,
        registration.changed,
    )


def registered_instant(uri: str, database: str, table: str) -> str | None:
    """The fed instant ``database.table`` shows in the metastore at ``uri`` (None: not there)."""
    with Metastore(uri) as metastore:
        params = metastore.parameters(database, table)
    return None if params is None else params.get(INSTANT_PARAMETER) or None


def registered_tables(uri: str, database: str) -> dict[str, str]:
    """The fed tables registered in ``database``: metastore name -> fed table path."""
    with Metastore(uri) as metastore:
        return metastore.fed_tables(database)
