"""Catalogs of fed tables' Iceberg views: registering a view in a Hive metastore or AWS Glue
(``sync``, Hudi's meta sync done fed's way), keeping what an engine connection reads fresh
(``ReadYourWrites``), and serving views over the Iceberg REST protocol (``fed serve``,
``fedcore.catalog.rest``).

This package is the catalogs' public API: engine adapters (fed-trino-client,
fed-hive-client) import it beside ``fedcore.engine``. Needs ``fedcore[iceberg]``; AWS Glue,
``fedcore[glue]`` (boto3); the REST catalog, ``fedcore[serve]``."""

from __future__ import annotations

from fedcore.catalog.freshness import FreshCursor, ReadYourWrites
from fedcore.catalog.glue import GlueTarget
from fedcore.catalog.meta_sync import (
    SyncResult,
    SyncTarget,
    registered_instant,
    registered_tables,
    sync,
    sync_targets,
)

__all__ = [
    "FreshCursor",
    "GlueTarget",
    "ReadYourWrites",
    "SyncResult",
    "SyncTarget",
    "registered_instant",
    "registered_tables",
    "sync",
    "sync_targets",
]
