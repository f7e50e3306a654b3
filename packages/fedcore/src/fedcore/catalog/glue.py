"""Registering the Iceberg view in the AWS Glue Data Catalog, atomically.

The Glue table is an Iceberg table in the form Iceberg's own Glue catalog writes
(``table_type=ICEBERG``, ``metadata_location``, columns with Iceberg's field ids), so Athena,
EMR, Trino's and Spark's Glue catalogs and PyIceberg's ``GlueCatalog`` find it. Every update
names the Glue table version it replaces (``UpdateTable``'s ``VersionId``): Glue applies it
only if the table is still at that version, else answers ``ConcurrentModificationException``
and the update is tried again on what is there now, so two publishers never lose an update
and a stale one never moves the table back. Archived table versions are not kept
(``SkipArchive``): a view publishes often, and Glue's versions are a quota.

boto3 speaks to Glue (Apache Hudi's Glue sync and PyIceberg's ``GlueCatalog`` do the same
through the AWS SDK): credentials, region and endpoint come from Hudi's ``hoodie.aws.*`` keys
when given, else from boto3's own chain (environment, profile, instance role)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import botocore.exceptions
from pyiceberg.table.metadata import TableMetadata

from fedcore import properties as P
from fedcore.catalog.entry import (
    ATTEMPTS,
    METADATA_LOCATION,
    Registration,
    check_view,
    sync_names,
    view_parameters,
)
from fedcore.exceptions import MetastoreError, MissingDependencyError
from fedcore.handle import TableHandle

#: The keys of a Glue table that ``UpdateTable`` takes back (``GetTable`` answers more).
_TABLE_INPUT_KEYS = frozenset(
    {
        "Name",
        "Description",
        "Owner",
        "LastAccessTime",
        "LastAnalyzedTime",
        "Retention",
        "StorageDescriptor",
        "PartitionKeys",
        "TableType",
        "Parameters",
    }
)
#: Glue's error codes that are answers, not failures: no such entity; it exists already; a
#: registration lost its race (created, or moved on, by another publisher first).
_MISSING = frozenset({"EntityNotFoundException"})
_EXISTS = frozenset({"AlreadyExistsException"})
_LOST = frozenset({"AlreadyExistsException", "ConcurrentModificationException"})


@dataclass(frozen=True)
class GlueTarget:
    """Where a table's view is registered in AWS Glue: region, endpoint (None: boto3's
    defaults), credentials (None: boto3's chain), database and table."""

    database: str
    table: str
    region: str | None = None
    endpoint_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None

    @classmethod
    def of(cls, table: TableHandle, options: Mapping[str, str]) -> GlueTarget | None:
        """From Hudi's meta sync keys naming its Glue sync tool, and its ``hoodie.aws.*`` keys;
        None when no commit syncs to Glue."""
        if P.GLUE_SYNC_TOOL not in P.sync_tools(options):
            return None
        database, name = sync_names(table, options)
        return cls(
            database,
            name,
            region=P.AWS_GLUE_REGION.of(options),
            endpoint_url=P.AWS_GLUE_ENDPOINT.of(options),
            access_key=P.AWS_ACCESS_KEY.of(options),
            secret_key=P.AWS_SECRET_KEY.of(options),
            session_token=P.AWS_SESSION_TOKEN.of(options),
        )

    @property
    def where(self) -> str:
        return f"AWS Glue ({self.endpoint_url or self.region or 'the default region'})"

    def __repr__(self) -> str:  # never a credential
        return (
            f"GlueTarget(database={self.database!r}, table={self.table!r}, region={self.region!r}, "
            f"endpoint_url={self.endpoint_url!r})"
        )


class Glue:
    """The Glue Data Catalog ``target`` names."""

    def __init__(self, target: GlueTarget) -> None:
        try:  # boto3 is an extra: fedcore[glue]
            import boto3
        except ImportError as exc:
            raise MissingDependencyError(
                f"syncing to AWS Glue needs fedcore[glue]: pip install 'fedcore[glue]' ({exc})"
            ) from exc
        self.target = target
        try:
            # A session of its own: boto3's default one keeps the first credentials it found.
            self._client = boto3.session.Session().client(
                "glue",
                region_name=target.region,
                endpoint_url=target.endpoint_url,
                aws_access_key_id=target.access_key,
                aws_secret_access_key=target.secret_key,
                aws_session_token=target.session_token,
            )
        except botocore.exceptions.BotoCoreError as exc:  # no region anywhere, say
            raise MetastoreError(f"cannot make a client for {target.where}: {exc}") from exc

    def register(
        self,
        database: str,
        table: str,
        *,
        table_path: str,
        metadata: TableMetadata,
        metadata_location: str,
        instant: str | None,
        is_newer: Callable[[str], bool],
    ) -> Registration:
        """Make ``database.table`` point at ``metadata_location``, replacing whatever location it
        held, unless that one is newer (``is_newer(held)``: another publisher got further)."""
        name = f"{database}.{table}"
        for _ in range(ATTEMPTS):
            found = self._table(database, table)
            if found is None:
                self._ensure_database(database)
                entry = self._entry(table, table_path, metadata, metadata_location, None, instant, {})
                created = self._call(
                    f"register {name}", "create_table", _LOST, DatabaseName=database, TableInput=entry
                )
                if created is not None:
                    return Registration(database, table, metadata_location, True)
                continue  # created by another publisher meanwhile: update theirs
            params = dict(found.get("Parameters") or {})
            check_view(params, table_path, name, self.target.where)
            held = params.get(METADATA_LOCATION)
            if held == metadata_location or (held is not None and is_newer(held)):
                return Registration(database, table, held or metadata_location, False)
            entry = self._entry(table, table_path, metadata, metadata_location, held, instant, found)
            updated = self._call(
                f"update {name}",
                "update_table",
                _LOST,
                DatabaseName=database,
                TableInput=entry,
                **({"VersionId": found["VersionId"]} if "VersionId" in found else {}),
                SkipArchive=True,
            )
            if updated is not None:
                return Registration(database, table, metadata_location, True)
            # another publisher moved it first: look again
        raise MetastoreError(
            f"{name} in {self.target.where} kept moving under {ATTEMPTS} attempts to update it"
        )

    @staticmethod
    def _entry(
        table: str,
        table_path: str,
        metadata: TableMetadata,
        location: str,
        held: str | None,
        instant: str | None,
        found: dict[str, Any],
    ) -> dict[str, Any]:
        """The table input that points ``table`` at ``location``: what Glue held, kept (an
        update replaces the whole definition), with the view's parameters and columns."""
        from pyiceberg.catalog.glue import _to_columns  # imports boto3: fedcore[glue]

        entry = {key: value for key, value in found.items() if key in _TABLE_INPUT_KEYS}
        descriptor = dict(entry.get("StorageDescriptor") or {})
        descriptor.update({"Columns": _to_columns(metadata), "Location": table_path})
        entry.update(
            {
                "Name": table,
                "TableType": "EXTERNAL_TABLE",
                "Parameters": {
                    **(entry.get("Parameters") or {}),
                    "EXTERNAL": "TRUE",
                    **view_parameters(location, held, instant, table_path),
                },
                "StorageDescriptor": descriptor,
            }
        )
        return entry

    def _call(self, what: str, operation: str, tolerated: frozenset[str], **kwargs: Any) -> Any:
        """Glue's answer to ``operation``, or None when Glue refused it with one of the
        ``tolerated`` error codes; any other failure is a ``MetastoreError`` about ``what``."""
        try:
            return getattr(self._client, operation)(**kwargs)
        except botocore.exceptions.ClientError as exc:
            if _code(exc) in tolerated:
                return None
            raise self._failed(what, exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise self._failed(what, exc) from exc

    def _table(self, database: str, table: str) -> dict[str, Any] | None:
        """``database.table`` as Glue holds it (None: no such table, or no such database)."""
        answer = self._call(
            f"look up {database}.{table}", "get_table", _MISSING, DatabaseName=database, Name=table
        )
        return None if answer is None else dict(answer["Table"])

    def _ensure_database(self, database: str) -> None:
        self._call(
            f"create database {database}",
            "create_database",
            _EXISTS,
            DatabaseInput={"Name": database, "Description": "fed tables' Iceberg views"},
        )

    def _failed(self, what: str, exc: Exception) -> MetastoreError:
        return MetastoreError(f"{self.target.where} failed to {what}: {exc}")


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
