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
from fedcore.exceptions import MetastoreError, MissingDependencyError
from fedcore.handle import TableHandle
from fedcore.iceberg.entry import (
    ATTEMPTS,
    METADATA_LOCATION,
    TABLE_PATH_PARAMETER,
    Registration,
    check_view,
    sync_names,
    view_parameters,
)

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

    def parameters(self, database: str, table: str) -> dict[str, str] | None:
        """The parameters of ``database.table`` (None: no such table)."""
        found = self._table(database, table)
        return None if found is None else dict(found.get("Parameters") or {})

    def fed_tables(self, database: str) -> dict[str, str]:
        """The fed views registered in ``database``: Glue table name -> fed table path."""
        out = {}
        try:
            for page in self._client.get_paginator("get_tables").paginate(DatabaseName=database):
                for found in page["TableList"]:
                    path = (found.get("Parameters") or {}).get(TABLE_PATH_PARAMETER)
                    if path:
                        out[found["Name"]] = path
        except botocore.exceptions.ClientError as exc:
            if _code(exc) == "EntityNotFoundException":
                return {}
            raise self._failed(f"list database {database}", exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise self._failed(f"list database {database}", exc) from exc
        return out

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
                if self._call("register", name, "create_table", DatabaseName=database, TableInput=entry):
                    return Registration(database, table, metadata_location, True)
                continue  # created by another publisher meanwhile: update theirs
            params = dict(found.get("Parameters") or {})
            check_view(params, table_path, name, self.target.where)
            held = params.get(METADATA_LOCATION)
            if held == metadata_location or (held is not None and is_newer(held)):
                return Registration(database, table, held or metadata_location, False)
            entry = self._entry(table, table_path, metadata, metadata_location, held, instant, found)
            if self._call(
                "update",
                name,
                "update_table",
                DatabaseName=database,
                TableInput=entry,
                **({"VersionId": found["VersionId"]} if "VersionId" in found else {}),
                SkipArchive=True,
            ):
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

    def _call(self, what: str, name: str, operation: str, **kwargs: Any) -> bool:
        """Run ``operation``; False when it lost a race (the table was created, or moved on,
        by another publisher first)."""
        try:
            getattr(self._client, operation)(**kwargs)
            return True
        except botocore.exceptions.ClientError as exc:
            if _code(exc) in ("AlreadyExistsException", "ConcurrentModificationException"):
                return False
            raise self._failed(f"{what} {name}", exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise self._failed(f"{what} {name}", exc) from exc

    def _table(self, database: str, table: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self._client.get_table(DatabaseName=database, Name=table)["Table"]
            return found
        except botocore.exceptions.ClientError as exc:
            if _code(exc) == "EntityNotFoundException":
                return None  # no such table, or no such database
            raise self._failed(f"look up {database}.{table}", exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise self._failed(f"look up {database}.{table}", exc) from exc

    def _ensure_database(self, database: str) -> None:
        try:
            self._client.create_database(
                DatabaseInput={"Name": database, "Description": "fed tables' Iceberg views"}
            )
        except botocore.exceptions.ClientError as exc:
            if _code(exc) != "AlreadyExistsException":
                raise self._failed(f"create database {database}", exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise self._failed(f"create database {database}", exc) from exc

    def _failed(self, what: str, exc: Exception) -> MetastoreError:
        return MetastoreError(f"{self.target.where} failed to {what}: {exc}")


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
