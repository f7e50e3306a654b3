"""What a completed instant says it did, in Hudi's JSON shapes.

Commit and replace-commit metadata are Hudi's ``HoodieCommitMetadata`` /
``HoodieReplaceCommitMetadata`` JSON, so Hudi tools (and hudi-rs) read a fedcore
timeline. Paths in write stats are logical (``<partition>/<file>``): the physical
path is derived through the storage strategy, never stored.

Clean and rollback metadata are encoded by the table version's ``ServiceMetadataCodec``
(``fedcore.timeline.service_codec``); both encodings, fed's JSON and Hudi's Avro, are read
here (``action_body``): a table Hudi's writers also write holds Hudi's.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import fastavro

from fedcore.exceptions import MetadataTableError

#: The start of an Avro object container file (Hudi's clean and rollback metadata).
_AVRO_MAGIC: Final = b"Obj\x01"

#: fed's own field of a write stat: the file's column statistics. Hudi's readers ignore
#: fields they do not know (Apache Hudi 0.15 and 1.0 read such commits: ``tox -e hudi``).
COLUMN_STATS_FIELD = "fedColumnStats"
#: fed's own field of a compaction's write stat (``WriteStat.last_log_version``).
LAST_LOG_VERSION_FIELD = "fedLastLogVersion"
OPERATION_TYPES = ("BULK_INSERT", "INSERT", "UPSERT", "DELETE", "INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE")


@dataclass
class WriteStat:
    file_id: str
    path: str
    partition_path: str
    prev_commit: str = "null"
    num_writes: int = 0
    num_inserts: int = 0
    num_update_writes: int = 0
    num_deletes: int = 0
    total_write_bytes: int = 0
    file_size: int = 0
    #: The file's column statistics (``io.parquet.file_stats``), for the metadata table; None
    #: where none were taken (files written before fed took them, copies by migrate).
    column_stats: str | None = None
    #: A log file's place in its slice (merge-on-read; 0 for a base file: its version up to
    #: table version 6, ``FileGroup.logs_onto``), and the slice's base file name (Hudi's
    #: ``HoodieDeltaWriteStat``; ``prev_commit`` is the slice's start). What fed's claims are
    #: taken on as it commits; Hudi 1.x's metadata records a log file otherwise (its delta
    #: commit as ``prevCommit``, the name's version, no base file: ``AvroCommitCodec``), and
    #: reads back so.
    log_version: int = 0
    base_file: str = ""
    #: A compaction's new base file: the highest version among the log files it folded in
    #: (its slice's next log place is what an append racing the compaction would fill).
    last_log_version: int = 0

    @property
    def is_log(self) -> bool:
        """A log file's stat (appended onto a slice, superseding nothing)."""
        return self.log_version > 0

    def to_json(self) -> dict[str, Any]:
        stats: dict[str, Any] = {} if self.column_stats is None else {COLUMN_STATS_FIELD: self.column_stats}
        if self.is_log:  # HoodieDeltaWriteStat's fields: each log file is new, written whole
            name = self.path.rpartition("/")[2]
            stats.update(logVersion=self.log_version, logOffset=0, baseFile=self.base_file, logFiles=[name])
        if self.last_log_version:
            stats[LAST_LOG_VERSION_FIELD] = self.last_log_version
        return {
            "fileId": self.file_id,
            "path": self.path,
            "cdcStats": None,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": 0,
            "tempPath": None,
            "partitionPath": self.partition_path,
            "totalLogRecords": 0,
            "totalLogFilesCompacted": 0,
            "totalLogSizeCompacted": 0,
            "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size,
            "minEventTime": None,
            "maxEventTime": None,
            **stats,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WriteStat:
        return cls(
            file_id=data.get("fileId") or "",
            path=data.get("path") or "",
            partition_path=data.get("partitionPath") or "",
            prev_commit=str(data.get("prevCommit") or "null"),
            num_writes=int(data.get("numWrites") or 0),
            num_inserts=int(data.get("numInserts") or 0),
            num_update_writes=int(data.get("numUpdateWrites") or 0),
            num_deletes=int(data.get("numDeletes") or 0),
            total_write_bytes=int(data.get("totalWriteBytes") or 0),
            file_size=int(data.get("fileSizeInBytes") or 0),
            column_stats=data.get(COLUMN_STATS_FIELD) or None,
            log_version=int(data.get("logVersion") or 0),
            base_file=str(data.get("baseFile") or ""),
            last_log_version=int(data.get(LAST_LOG_VERSION_FIELD) or 0),
        )


@dataclass(frozen=True)
class PlannedWrite:
    """One file group a write plans to write, as the write's inflight file names it (Hudi's
    workload profile): its file id, the base instant of the version it rewrites (None for a
    new group), and its inserts, updates and deletes."""

    partition: str
    file_id: str
    base_instant: str | None
    inserts: int
    updates: int
    deletes: int


@dataclass
class CommitMetadata:
    operation: str
    stats: list[WriteStat] = field(default_factory=list)
    schema: str | None = None
    #: Replace commits only: partition -> file ids no longer part of the table.
    replaced: dict[str, list[str]] = field(default_factory=dict)
    #: A compaction's commit (merge-on-read: log files folded into new base files).
    compacted: bool = False
    #: What the writer records beside the schema in Hudi's ``extraMetadata`` (a streaming
    #: sink's checkpoint: ``fedcore.write.checkpoints``).
    extra: dict[str, str] = field(default_factory=dict)

    def file_groups(self) -> set[tuple[str, str]]:
        return {(s.partition_path, s.file_id) for s in self.stats}


def action_body(data: bytes) -> dict[str, Any]:
    """A clean's or rollback's metadata as a dict: fed's JSON, or Hudi's Avro (one record)."""
    if data.startswith(_AVRO_MAGIC):
        try:
            records = list(fastavro.reader(io.BytesIO(data)))
        except Exception as exc:  # fastavro's errors have no common base of their own
            raise ValueError(f"unreadable Avro: {exc}") from exc
        if len(records) != 1 or not isinstance(records[0], dict):
            raise ValueError(f"an Avro metadata file holds {len(records)} records, not one")
        return records[0]
    body = json.loads(data) if data.strip() else {}
    if not isinstance(body, dict):
        raise ValueError("the metadata is not a JSON object")
    return body


def deleted_files(data: bytes, *, failed_too: bool = False) -> dict[str, list[str]]:
    """partition -> file names a clean (or rollback) deleted, from its metadata; ``failed_too``:
    and those it failed to delete."""
    keys = ("successDeleteFiles", "failedDeleteFiles") if failed_too else ("successDeleteFiles",)
    try:
        partitions = action_body(data).get("partitionMetadata") or {}
        return {
            p: [str(name).rpartition("/")[2] for key in keys for name in body.get(key) or []]
            for p, body in partitions.items()
        }
    except (ValueError, AttributeError, TypeError) as exc:
        raise MetadataTableError(f"clean metadata is unreadable: {exc}") from exc


def savepointed_files(data: bytes) -> dict[str, set[str]]:
    """partition -> names of the files a savepoint keeps (a restore to it needs them), from its
    metadata (Hudi's Avro ``HoodieSavepointMetadata``, or the same fields in JSON)."""
    try:
        partitions = action_body(data).get("partitionMetadata") or {}
        return {
            p: {str(name).rpartition("/")[2] for name in body.get("savepointDataFile") or []}
            for p, body in partitions.items()
        }
    except (ValueError, AttributeError, TypeError) as exc:
        raise MetadataTableError(f"savepoint metadata is unreadable: {exc}") from exc


def appended_log_files(data: bytes) -> list[str]:
    """The log files a rollback appended a rollback block to (Hudi's merge-on-read rollbacks
    on storage that appends), rather than deleted: their recorded sizes are stale."""
    try:
        partitions = action_body(data).get("partitionMetadata") or {}
        return sorted(
            str(name) for body in partitions.values() for name in body.get("rollbackLogFiles") or {}
        )
    except (ValueError, AttributeError, TypeError) as exc:
        raise MetadataTableError(f"rollback metadata is unreadable: {exc}") from exc


def earliest_retained(data: bytes) -> str | None:
    """The earliest commit a clean kept the files of; time travel before it is impossible."""
    try:
        return action_body(data).get("earliestCommitToRetain") or None
    except (ValueError, AttributeError, TypeError):
        return None


def rolled_back_instants(data: bytes) -> list[str]:
    """The instants a rollback undid, from its metadata."""
    try:
        body = action_body(data)
        named = [str(t) for t in body.get("commitsRollback") or []]
        named += [str(i.get("commitTime")) for i in body.get("instantsRollback") or [] if i.get("commitTime")]
    except (ValueError, AttributeError, TypeError) as exc:
        raise MetadataTableError(f"rollback metadata is unreadable: {exc}") from exc
    return sorted(set(named))


def rolled_back_actions(data: bytes) -> dict[str, str]:
    """instant -> action of the instants a rollback undid, where its metadata names them."""
    try:
        body = action_body(data)
        return {
            str(i.get("commitTime")): str(i.get("action") or "")
            for i in body.get("instantsRollback") or []
            if i.get("commitTime")
        }
    except (ValueError, AttributeError, TypeError) as exc:
        raise MetadataTableError(f"rollback metadata is unreadable: {exc}") from exc
