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

import io
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any, Final

import fastavro

from fedcore.exceptions import MetadataTableError
from fedcore.timeline.commit_codec import CommitCodec, JsonCommitCodec
from fedcore.timeline.commit_metadata import CommitMetadata, PlannedWrite, action_body

_MAGIC: Final = b"Obj\x01"
_NAMESPACE: Final = "org.apache.hudi.avro.model"
#: Hudi's generated Java classes ask for ``java.lang.String``; the property is part of the
#: schema text Hudi embeds, so it is part of ours.
_STRING: Final[dict[str, Any]] = {"type": "string", "avro.java.string": "String"}


def _optional(name: str, type_: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", type_], "default": None}


def _longs(*names: str) -> list[dict[str, Any]]:
    return [_optional(name, "long") for name in names]


#: ``HoodieWriteStat``, in Hudi's field order.
_WRITE_STAT: Final[dict[str, Any]] = {
    "type": "record",
    "name": "HoodieWriteStat",
    "fields": [
        _optional("fileId", _STRING),
        _optional("path", _STRING),
        _optional("prevCommit", _STRING),
        *_longs("numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes", "totalWriteErrors"),
        _optional("partitionPath", _STRING),
        *_longs(
            "totalLogRecords",
            "totalLogFiles",
            "totalUpdatedRecordsCompacted",
            "numInserts",
            "totalLogBlocks",
            "totalCorruptLogBlock",
            "totalRollbackBlocks",
            "fileSizeInBytes",
        ),
        _optional("logVersion", "int"),
        _optional("logOffset", "long"),
        _optional("baseFile", _STRING),
        _optional("logFiles", {"type": "array", "items": _STRING, "default": None}),
        _optional(
            "cdcStats", {"type": "map", "values": "long", "avro.java.string": "String", "default": None}
        ),
        _optional("prevBaseFile", _STRING),
        *_longs("minEventTime", "maxEventTime"),
        _optional(
            "runtimeStats",
            {
                "type": "record",
                "name": "HoodieRuntimeStats",
                "fields": _longs("totalScanTime", "totalCreateTime", "totalUpsertTime"),
            },
        ),
        *_longs("totalLogFilesCompacted", "totalLogReadTimeMs", "totalLogSizeCompacted"),
        _optional("tempPath", _STRING),
        _optional("numUpdates", "long"),
    ],
}
WRITE_STAT_FIELDS: Final = tuple(f["name"] for f in _WRITE_STAT["fields"])


def _commit_schema(name: str, extra_map: dict[str, Any], *more: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "namespace": _NAMESPACE,
        "fields": [
            _optional(
                "partitionToWriteStats",
                {
                    "type": "map",
                    "values": {"type": "array", "items": _WRITE_STAT},
                    "avro.java.string": "String",
                },
            ),
            _optional("compacted", "boolean"),
            _optional(
                "extraMetadata", {"type": "map", "values": _STRING, "avro.java.string": "String", **extra_map}
            ),
            {"name": "version", "type": ["int", "null"], "default": 1},
            _optional("operationType", _STRING),
            *more,
        ],
    }


#: The two differ in one detail of Hudi's text beyond the last field: a default inside
#: ``HoodieCommitMetadata``'s ``extraMetadata`` map (meaningless to Avro, kept for the bytes).
COMMIT_METADATA_SCHEMA: Final = _commit_schema("HoodieCommitMetadata", {"default": None})
REPLACE_COMMIT_METADATA_SCHEMA: Final = _commit_schema(
    "HoodieReplaceCommitMetadata",
    {},
    _optional(
        "partitionToReplaceFileIds",
        {"type": "map", "values": {"type": "array", "items": _STRING}, "avro.java.string": "String"},
    ),
)
#: Operations whose completed commit is a replace commit (Hudi's ``replacecommit`` action).
REPLACE_OPERATIONS: Final = frozenset(
    {"INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE", "DELETE_PARTITION", "CLUSTER"}
)

#: An object container file's header, as the Avro specification defines it.
_HEADER: Final = fastavro.parse_schema(
    {
        "type": "record",
        "name": "org.apache.avro.file.Header",
        "fields": [
            {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
            {"name": "meta", "type": {"type": "map", "values": "bytes"}},
            {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": 16}},
        ],
    }
)


class _Schema:
    """A schema's text as Hudi embeds it (Java's compact ``Schema.toString``) and its parsed form."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.text = json.dumps(schema, separators=(",", ":")).encode()
        self.parsed = fastavro.parse_schema(schema)


_COMMIT: Final = _Schema(COMMIT_METADATA_SCHEMA)
_REPLACE: Final = _Schema(REPLACE_COMMIT_METADATA_SCHEMA)


def _container(schema: _Schema, record: dict[str, Any]) -> bytes:
    """One record in an object container file with no codec, the header as Hudi writes it
    (``avro.schema`` only: a missing ``avro.codec`` means none)."""
    block = io.BytesIO()
    fastavro.schemaless_writer(block, schema.parsed, record)
    sync = os.urandom(16)
    out = io.BytesIO()
    fastavro.schemaless_writer(
        out, _HEADER, {"magic": _MAGIC, "meta": {"avro.schema": schema.text}, "sync": sync}
    )
    fastavro.schemaless_writer(out, "long", 1)  # records in the block
    fastavro.schemaless_writer(out, "long", len(block.getvalue()))
    out.write(block.getvalue())
    out.write(sync)
    return out.getvalue()


class AvroCommitCodec(CommitCodec):
    """Table versions 8 and 9: Hudi 1.x's Avro ``HoodieCommitMetadata`` /
    ``HoodieReplaceCommitMetadata``, read back as ``JsonCommitCodec`` reads the JSON."""

    _json: Final = JsonCommitCodec()

    def encode(self, metadata: CommitMetadata) -> bytes:
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for stat in metadata.stats:
            fields = stat.to_json()  # Hudi's names; fed's own fields have no place in the schema
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
            return _container(_REPLACE, {**record, "partitionToReplaceFileIds": metadata.replaced})
        return _container(_COMMIT, record)

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
        return _container(_COMMIT, record)

    def decode(self, data: bytes, where: str = "commit") -> CommitMetadata:
        try:  # Avro (one record), or JSON: empty (a requested file), or a legacy 6 -> 8 file
            body = action_body(data)
        except ValueError as exc:
            raise MetadataTableError(f"{where}: unreadable commit metadata: {exc}") from exc
        # As Hudi reads it: the record as its JSON, whose fields are the version-6 ones.
        return self._json.decode(json.dumps(body).encode(), where)
