"""The Iceberg view of a fed table: Iceberg metadata under ``.hoodie/iceberg/`` that names
the base files of the table's latest file slices by their physical URIs, one Iceberg
snapshot per fed instant, so Iceberg engines (Trino, Hive, Spark, PyIceberg) read the table
through its metadata, never by listing the storage path.

``publish`` brings the view up to the table's latest completed instant; ``sync`` publishes
and registers it in a catalog (a Hive metastore, AWS Glue). This package is the view's public
API: engine adapters (fed-trino-client, fed-hive-client) import it beside ``fedcore.engine``.
Needs ``fedcore[iceberg]`` (PyIceberg writes the Avro manifests and the table metadata);
syncing to AWS Glue, ``fedcore[glue]`` (boto3)."""

from __future__ import annotations

from fedcore.iceberg.freshness import FreshCursor, ReadYourWrites
from fedcore.iceberg.glue import GlueTarget
from fedcore.iceberg.meta_sync import (
    SyncResult,
    SyncTarget,
    registered_instant,
    registered_tables,
    sync,
    sync_targets,
)
from fedcore.iceberg.view import PublishResult, ViewState, current_view, latest_instant, publish

__all__ = [
    "FreshCursor",
    "GlueTarget",
    "PublishResult",
    "ReadYourWrites",
    "SyncResult",
    "SyncTarget",
    "ViewState",
    "current_view",
    "latest_instant",
    "publish",
    "registered_instant",
    "registered_tables",
    "sync",
    "sync_targets",
]
