"""The Iceberg view of a fed table: Iceberg metadata under ``.hoodie/iceberg/`` that names
the base files of the table's latest file slices by their physical URIs, one Iceberg
snapshot per fed instant, so Iceberg engines (Trino, Hive, Spark, PyIceberg) read the table
through its metadata, never by listing the storage path.

``publish`` brings the view up to the table's latest completed instant; registering it in a
catalog is ``fedcore.catalog``'s. Needs ``fedcore[iceberg]`` (PyIceberg writes the Avro
manifests and the table metadata)."""

from __future__ import annotations

from fedcore.iceberg.view import PublishResult, ViewState, current_view, latest_instant, publish

__all__ = ["PublishResult", "ViewState", "current_view", "latest_instant", "publish"]
