"""How a table version encodes a write's commit metadata in its instant files.

Every commit, delta commit and replace commit file, and a write's inflight plan (which
streaming checkpoints read back), is encoded and decoded through the table's ``CommitCodec``
(``TableHandle.layout.commits``, picked by ``fedcore.timeline.layout``): a table version whose
Hudi writes another encoding (Hudi 1.x writes some actions' metadata as Avro) is one more
implementation here, not a condition in each caller.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from fedcore.exceptions import MetadataTableError
from fedcore.timeline.commit_metadata import CommitMetadata, PlannedWrite, WriteStat


class CommitCodec(ABC):
    """Commit metadata to the bytes of an instant file, and back."""

    @abstractmethod
    def encode(self, metadata: CommitMetadata) -> bytes:
        """The bytes of a completed write instant's file."""

    @abstractmethod
    def encode_inflight(
        self, operation: str, writes: Iterable[PlannedWrite], extra: Mapping[str, str]
    ) -> bytes:
        """The bytes of a write's inflight file: the file groups it plans to write (none where
        an engine's tasks decide them), its operation and the commit's ``extraMetadata``, which
        ``decode`` gives back (a streaming sink's checkpoint: ``fedcore.write.checkpoints``)."""

    @abstractmethod
    def decode(self, data: bytes, where: str = "commit") -> CommitMetadata:
        """The metadata an instant file holds; ``MetadataTableError`` (naming ``where``) when
        it cannot be read."""


class JsonCommitCodec(CommitCodec):
    """Table version 6: Hudi's ``HoodieCommitMetadata`` / ``HoodieReplaceCommitMetadata`` JSON,
    indented as Hudi writes it."""

    def encode(self, metadata: CommitMetadata) -> bytes:
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for stat in metadata.stats:
            by_partition.setdefault(stat.partition_path, []).append(stat.to_json())
        body: dict[str, Any] = {
            "partitionToWriteStats": by_partition,
            "compacted": metadata.compacted,
            "extraMetadata": {**metadata.extra, **({"schema": metadata.schema} if metadata.schema else {})},
            "operationType": metadata.operation,
        }
        if metadata.replaced or metadata.operation in ("INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE"):
            body["partitionToReplaceFileIds"] = metadata.replaced
        return json.dumps(body, indent=2).encode()

    def encode_inflight(
        self, operation: str, writes: Iterable[PlannedWrite], extra: Mapping[str, str]
    ) -> bytes:
        by_partition: dict[str, list[dict[str, object]]] = {}
        for write in writes:
            by_partition.setdefault(write.partition, []).append(
                {
                    "fileId": write.file_id,
                    "prevCommit": write.base_instant or "null",
                    "numInserts": write.inserts,
                    "numUpdateWrites": write.updates,
                    "numDeletes": write.deletes,
                }
            )
        body = {
            "partitionToWriteStats": by_partition,
            "extraMetadata": dict(extra),
            "operationType": operation.upper(),
        }
        return json.dumps(body, indent=2).encode()

    def decode(self, data: bytes, where: str = "commit") -> CommitMetadata:
        try:
            body = json.loads(data) if data.strip() else {}
            stats = [
                WriteStat.from_json(stat)
                for stats in (body.get("partitionToWriteStats") or {}).values()
                for stat in stats or []
            ]
            extra = {str(k): str(v) for k, v in (body.get("extraMetadata") or {}).items() if v is not None}
            return CommitMetadata(
                operation=str(body.get("operationType") or "UNKNOWN"),
                stats=[s for s in stats if s.file_id and s.path],
                schema=extra.pop("schema", None),
                replaced={k: list(v) for k, v in (body.get("partitionToReplaceFileIds") or {}).items()},
                compacted=bool(body.get("compacted")),
                extra=extra,
            )
        except (ValueError, TypeError, AttributeError) as exc:
            raise MetadataTableError(f"{where}: unreadable commit metadata: {exc}") from exc
