"""Query fed tables from Hive through their Iceberg views, reading your own writes.

``register`` makes a fed table's view queryable from Hive: it publishes the view and
registers it in the Hive metastore in the form Iceberg's own Hive catalog writes for Hive
(storage handler, SerDe, input format), which Trino and Spark read as well. ``connect``
returns a pyhive (DB-API) connection to HiveServer2 whose statements see each fed table's
newest commit: before a statement runs, the metastore must show the table's latest
completed instant, published first if not."""

from __future__ import annotations

from fed_hive.connection import FedConnection, connect, register

__all__ = ["FedConnection", "connect", "register"]
