"""A clean's and a rollback's metadata as Hudi writes them in every table version: Avro
``HoodieCleanMetadata`` (version 2) and ``HoodieRollbackMetadata`` (version 1), one record each.

Hudi's readers read a clean's metadata beyond its own services: a time-travel query checks the
instant asked for against the last clean's ``earliestCommitToRetain`` (Hudi 0.14.1 and later),
and takes metadata it cannot decode as Avro for a cleaned instant; Hudi's cleaner reads the
last clean to clean incrementally. fed writes them as Hudi does (fed's earlier JSON is still
read: ``commit_metadata.action_body``). The schemas are Hudi's, field for field: a field
fed has nothing for gets Hudi's default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from fedcore.timeline.avro_file import NAMESPACE, STRING, AvroSchema, container, optional, strings
from fedcore.timeline.service_codec import ServiceMetadataCodec

_CLEAN_PARTITION: Final[dict[str, Any]] = {
    "type": "record",
    "name": "HoodieCleanPartitionMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "partitionPath", "type": STRING},
        {"name": "policy", "type": STRING},
        {"name": "deletePathPatterns", "type": strings()},
        {"name": "successDeleteFiles", "type": strings()},
        {"name": "failedDeleteFiles", "type": strings()},
        optional("isPartitionDeleted", "boolean"),
    ],
}
CLEAN_METADATA_SCHEMA: Final[dict[str, Any]] = {
    "type": "record",
    "name": "HoodieCleanMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "startCleanTime", "type": STRING},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": STRING},
        {"name": "lastCompletedCommitTimestamp", "type": STRING, "default": ""},
        {
            "name": "partitionMetadata",
            "type": {"type": "map", "values": _CLEAN_PARTITION, "avro.java.string": "String"},
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        optional(
            "bootstrapPartitionMetadata",
            {"type": "map", "values": "HoodieCleanPartitionMetadata", "avro.java.string": "String"},
        ),
        optional("extraMetadata", {"type": "map", "values": STRING, "avro.java.string": "String"}),
    ],
}
_FILE_SIZES: Final[dict[str, Any]] = {"type": "map", "values": "long", "avro.java.string": "String"}
ROLLBACK_METADATA_SCHEMA: Final[dict[str, Any]] = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "startRollbackTime", "type": STRING},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": strings()},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": STRING},
                        {"name": "successDeleteFiles", "type": strings()},
                        {"name": "failedDeleteFiles", "type": strings()},
                        optional("rollbackLogFiles", _FILE_SIZES),
                        optional("logFilesFromFailedCommit", _FILE_SIZES),
                    ],
                },
                "avro.java.string": "String",
            },
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "instantsRollback",
            "type": strings(
                {
                    "type": "record",
                    "name": "HoodieInstantInfo",
                    "fields": [{"name": "commitTime", "type": STRING}, {"name": "action", "type": STRING}],
                }
            ),
            "default": [],
        },
    ],
}
_CLEAN: Final = AvroSchema(CLEAN_METADATA_SCHEMA)
_ROLLBACK: Final = AvroSchema(ROLLBACK_METADATA_SCHEMA)


class AvroServiceMetadataCodec(ServiceMetadataCodec):
    """Hudi's Avro clean and rollback metadata (what every table version's Hudi writes)."""

    def clean(
        self, *, start: str, earliest_retained: str | None, deleted: Mapping[str, Iterable[str]], took_ms: int
    ) -> bytes:
        files = {partition: sorted(names) for partition, names in deleted.items()}
        partitions = {
            partition: {
                "partitionPath": partition,
                "policy": "KEEP_LATEST_COMMITS",
                "deletePathPatterns": names,
                "successDeleteFiles": names,
                "failedDeleteFiles": [],
                "isPartitionDeleted": False,
            }
            for partition, names in files.items()
        }
        return container(
            _CLEAN,
            {
                "startCleanTime": start,
                "timeTakenInMillis": took_ms,
                "totalFilesDeleted": sum(map(len, files.values())),
                "earliestCommitToRetain": earliest_retained or "",
                "lastCompletedCommitTimestamp": "",
                "partitionMetadata": partitions,
                "version": 2,
                "bootstrapPartitionMetadata": {},
                "extraMetadata": None,
            },
        )

    def rollback(
        self, *, start: str, rolled_back: str, action: str, deleted: Mapping[str, Iterable[str]], took_ms: int
    ) -> bytes:
        files = {partition: sorted(names) for partition, names in deleted.items()}
        partitions = {
            partition: {
                "partitionPath": partition,
                "successDeleteFiles": names,
                "failedDeleteFiles": [],
                "rollbackLogFiles": {},
                "logFilesFromFailedCommit": {},
            }
            for partition, names in files.items()
        }
        return container(
            _ROLLBACK,
            {
                "startRollbackTime": start,
                "timeTakenInMillis": took_ms,
                "totalFilesDeleted": sum(map(len, files.values())),
                "commitsRollback": [rolled_back],
                "partitionMetadata": partitions,
                "version": 1,
                "instantsRollback": [{"commitTime": rolled_back, "action": action}],
            },
        )
