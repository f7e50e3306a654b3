"""Table versions 8 and 9 (Hudi 1.0 / 1.1): commit metadata as Avro.

Hudi 1.x writes a commit's, delta commit's and replace commit's metadata (completed, and a
write's inflight skeleton) as an Avro object container file holding one record, no codec:
``org.apache.hudi.avro.model.HoodieCommitMetadata``, or ``HoodieReplaceCommitMetadata`` for
a completed replace commit (the same fields and ``partitionToReplaceFileIds``). Hudi's reader
turns the record into the version-6 JSON (same field names) and parses that; so does this
codec, through ``JsonCommitCodec``, which keeps one mapping onto ``CommitMetadata`` for both
encodings. Empty bytes are empty metadata (a requested file), and JSON is read too: a
completed file a 6 -> 8 upgrade left without a completion time keeps its JSON.

The schemas are Hudi's as its 1.0 and 1.1 writers embed them in each file, field order,
defaults and ``avro.java.string`` properties included, and the container header carries
their text byte for byte as Hudi's: Hudi's readers resolve by record name, and a file that
differs from Hudi's only in its sync marker leaves nothing to doubt. Fields
``CommitMetadata``/``WriteStat`` have no place for are written null (Hudi's default).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from fedcore.exceptions import MetadataTableError
from fedcore.files.filenames import LogFileNamingV8
from fedcore.timeline.avro_file import NAMESPACE, STRING, AvroSchema, container, longs, optional
from fedcore.timeline.commit_codec import CommitCodec, JsonCommitCodec
from fedcore.timeline.commit_metadata import CommitMetadata, PlannedWrite, action_body

#: ``HoodieWriteStat``, in Hudi's field order.
_WRITE_STAT: Final[dict[str, Any]] = {
    "type": "record",
    "name": "HoodieWriteStat",
    "fields": [
        optional("fileId", STRING),
        optional("path", STRING),
        optional("prevCommit", STRING),
        *longs("numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes", "totalWriteErrors"),
        optional("partitionPath", STRING),
        *longs(
            "totalLogRecords",
            "totalLogFiles",
            "totalUpdatedRecordsCompacted",
            "numInserts",
            "totalLogBlocks",
            "totalCorruptLogBlock",
            "totalRollbackBlocks",
            "fileSizeInBytes",
        ),
        optional("logVersion", "int"),
        optional("logOffset", "long"),
        optional("baseFile", STRING),
        optional("logFiles", {"type": "array", "items": STRING, "default": None}),
        optional(
            "cdcStats", {"type": "map", "values": "long", "avro.java.string": "String", "default": None}
        ),
        optional("prevBaseFile", STRING),
        *longs("minEventTime", "maxEventTime"),
        optional(
            "runtimeStats",
            {
                "type": "record",
                "name": "HoodieRuntimeStats",
                "fields": longs("totalScanTime", "totalCreateTime", "totalUpsertTime"),
            },
        ),
        *longs("totalLogFilesCompacted", "totalLogReadTimeMs", "totalLogSizeCompacted"),
        optional("tempPath", STRING),
        optional("numUpdates", "long"),
    ],
}
WRITE_STAT_FIELDS: Final = tuple(f["name"] for f in _WRITE_STAT["fields"])


def _commit_schema(name: str, extra_map: dict[str, Any], *more: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "namespace": NAMESPACE,
        "fields": [
            optional(
                "partitionToWriteStats",
                {
                    "type": "map",
                    "values": {"type": "array", "items": _WRITE_STAT},
                    "avro.java.string": "String",
                },
            ),
            optional("compacted", "boolean"),
            optional(
                "extraMetadata", {"type": "map", "values": STRING, "avro.java.string": "String", **extra_map}
            ),
            {"name": "version", "type": ["int", "null"], "default": 1},
            optional("operationType", STRING),
            *more,
        ],
    }


#: The two differ in one detail of Hudi's text beyond the last field: a default inside
#: ``HoodieCommitMetadata``'s ``extraMetadata`` map (meaningless to Avro, kept for the bytes).
COMMIT_METADATA_SCHEMA: Final = _commit_schema("HoodieCommitMetadata", {"default": None})
REPLACE_COMMIT_METADATA_SCHEMA: Final = _commit_schema(
    "HoodieReplaceCommitMetadata",
    {},
    optional(
        "partitionToReplaceFileIds",
        {"type": "map", "values": {"type": "array", "items": STRING}, "avro.java.string": "String"},
    ),
)
#: Operations whose completed commit is a replace commit (Hudi's ``replacecommit`` action).
REPLACE_OPERATIONS: Final = frozenset(
    {"INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE", "DELETE_PARTITION", "CLUSTER"}
)

_COMMIT: Final = AvroSchema(COMMIT_METADATA_SCHEMA)
_LOG_NAMES: Final = LogFileNamingV8()
_REPLACE: Final = AvroSchema(REPLACE_COMMIT_METADATA_SCHEMA)


def _hudi_log_fields(path: str) -> dict[str, Any]:
    """What Hudi 1.x's append handle records of a log file it wrote (``HoodieDeltaWriteStat``):
    each delta commit writes a file of its own, so its ``prevCommit`` is the writing delta
    commit and its version is the name's (1), with no base file named. fed's own account of
    a log file (the slice it went onto, its place there: ``WriteStat.prev_commit``,
    ``log_version``) is what its claims are taken on, at the commit, from the stats in hand."""
    name = path.rpartition("/")[2]
    parsed = _LOG_NAMES.parse(name)
    assert parsed is not None, f"{name} is a log file fed named"
    return {"prevCommit": parsed.instant, "logVersion": parsed.version, "baseFile": ""}


class AvroCommitCodec(CommitCodec):
    """Table versions 8 and 9: Hudi 1.x's Avro ``HoodieCommitMetadata`` /
    ``HoodieReplaceCommitMetadata``, read back as ``JsonCommitCodec`` reads the JSON."""

    _json: Final = JsonCommitCodec()

    def encode(self, metadata: CommitMetadata) -> bytes:
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for stat in metadata.stats:
            fields = stat.to_json()  # Hudi's names; fed's own fields have no place in the schema
            if stat.is_log:
                fields.update(_hudi_log_fields(stat.path))
            by_partition.setdefault(stat.partition_path, []).append(
                {n: fields.get(n) for n in WRITE_STAT_FIELDS}
            )
        record: dict[str, Any] = {
            "partitionToWriteStats": by_partition,
            "compacted": metadata.compacted,
            "extraMetadata": {**metadata.extra, **({"schema": metadata.schema} if metadata.schema else {})},
            "version": None,  # what Hudi 1.0 and 1.1 write
            "operationType": metadata.operation,
        }
        if metadata.replaced or metadata.operation in REPLACE_OPERATIONS:
            return container(_REPLACE, {**record, "partitionToReplaceFileIds": metadata.replaced})
        return container(_COMMIT, record)

    def encode_inflight(
        self, operation: str, writes: Iterable[PlannedWrite], extra: Mapping[str, str]
    ) -> bytes:
        """Hudi 1.x's inflight file: a ``HoodieCommitMetadata`` (for every write action) whose
        stats are a skeleton of the planned file groups (no path)."""
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for write in writes:
            skeleton: dict[str, Any] = dict.fromkeys(WRITE_STAT_FIELDS)
            skeleton.update(
                fileId=write.file_id,
                prevCommit=write.base_instant or "null",
                numInserts=write.inserts,
                numUpdateWrites=write.updates,
                numDeletes=write.deletes,
            )
            by_partition.setdefault(write.partition, []).append(skeleton)
        record: dict[str, Any] = {
            "partitionToWriteStats": by_partition,
            "compacted": False,
            "extraMetadata": dict(extra),
            "version": None,
            "operationType": operation.upper(),
        }
        return container(_COMMIT, record)

    def decode(self, data: bytes, where: str = "commit") -> CommitMetadata:
        try:  # Avro (one record), or JSON: empty (a requested file), or a legacy 6 -> 8 file
            body = action_body(data)
        except ValueError as exc:
            raise MetadataTableError(f"{where}: unreadable commit metadata: {exc}") from exc
        # As Hudi reads it: the record as its JSON, whose fields are the version-6 ones.
        return self._json.decode(json.dumps(body).encode(), where)
