"""AWS Glue for tests: moto's Glue, served by the loopback S3 server (``LoopbackS3``: one moto
app answers every AWS service on its port), made to check ``UpdateTable``'s ``VersionId`` as
Glue does.

Glue applies an ``UpdateTable`` that names a ``VersionId`` only while the table is still at
that version, else answers ``ConcurrentModificationException``: that check is what keeps two
publishers from losing an update. moto (5.2) accepts any ``VersionId``, so a test of racing
publishers would pass against it whether or not they sent one. ``check_table_versions()``
adds the check to this process's moto; the rest of moto's Glue is as moto has it."""

from __future__ import annotations

import threading
from typing import Any

from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY, S3Endpoint
from fedcore.catalog.glue import GlueTarget

_installed = False
_install = threading.Lock()
_updates = threading.Lock()


def check_table_versions() -> None:
    """Make this process's moto answer a stale ``VersionId`` as Glue does (idempotent)."""
    global _installed
    from moto.core.responses import EmptyResult
    from moto.glue import responses
    from moto.glue.exceptions import GlueClientError

    with _install:
        if _installed:
            return
        unchecked = responses.GlueResponse.update_table

        def update_table(self: Any) -> Any:
            given = self.parameters.get("VersionId")
            if given is None:
                return unchecked(self)
            database = self.parameters.get("DatabaseName")
            entry = self.parameters.get("TableInput") or {}
            with _updates:  # moto serves requests on threads: the check and the update are one step
                table = self.glue_backend.get_table(database, entry.get("Name"))
                current = getattr(table, "_current_version", None)
                if current is None:
                    raise RuntimeError("this moto's Glue tables keep no version: use moto 5.2")
                if str(given) != str(current):
                    raise GlueClientError(
                        "ConcurrentModificationException",
                        f"Table version {given} is not the current version ({current}) of "
                        f"{database}.{entry.get('Name')}",
                    )
                self.glue_backend.update_table(database, entry.get("Name"), entry)
            return EmptyResult()

        responses.GlueResponse.update_table = update_table
        _installed = True


def loopback_target(server: S3Endpoint, database: str, table: str) -> GlueTarget:
    """Where ``fed sync`` registers ``database.table`` in the loopback server's Glue, with the
    server's credentials."""
    return GlueTarget(
        database,
        table,
        region=REGION,
        endpoint_url=server.endpoint_url,
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
    )
