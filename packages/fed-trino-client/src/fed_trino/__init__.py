"""Query fed tables from Trino through their Iceberg views, reading your own writes.

``connect`` returns a ``trino.dbapi`` connection. Trino's Iceberg catalog finds each fed
table in the Hive metastore (``fed sync``, or Hudi's hive_sync keys on the writes); before a
statement runs, the connection checks that the metastore shows the latest completed instant
of each fed table the statement names, and publishes first if not."""

from __future__ import annotations

from fed_trino.connection import FedConnection, connect

__all__ = ["FedConnection", "connect"]
