"""Compaction of a merge-on-read table: each file slice's log files folded into a new base file.

As Hudi schedules and runs it: the plan (every latest slice with log files) is the
content of ``<t>.compaction.requested``, in Hudi's Avro ``HoodieCompactionPlan`` (its
readers load it to learn which slices are being compacted); ``<t>.compaction.inflight``
follows; each slice is read merged (the snapshot read's own merge, so a compacted base
file holds exactly what a snapshot read returned) and written as a new base file of the
same file group, in the same prefix, with the records' own meta columns (commit time and
sequence number of the write that last changed each); the instant completes as
``<t>.commit``. Readers of either type see the new slice once it completes, and the old
one until then; the old slice's files go with a later clean.

A compaction goes through the commit protocol like a write. It claims each slice's base
version and its next log place: a writer that appended onto a slice after the plan was
made wins that place first, and the compaction then fails with ``CommitConflictError`` and
is rolled back (nothing of it visible), to be planned again; a compaction that committed
first makes the writer's claim fail instead. Writers do not start while a compaction is
pending (``commit.pending.wait_for_services``); one whose process died is rolled back by the
next writer, like a failed write. A compaction Hudi scheduled is left to Hudi.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import fastavro
import pyarrow as pa

from fedcore.commit.file_group_writer import FileGroupWriter, NewFile
from fedcore.commit.file_writer import (
    encode_base_file,
    file_names,
    parquet_options,
    record_size,
)
from fedcore.commit.pending import refuse_beside_services
from fedcore.commit.transaction import Transaction, roll_back_failed_writes, stat_claims
from fedcore.exceptions import UnsupportedTableError
from fedcore.files.file_slice import FileSlice
from fedcore.files.filenames import base_file_name
from fedcore.metadata.operations import commit_ops
from fedcore.read.planner import ScanPlanner
from fedcore.schema.avro import to_avro_json
from fedcore.schema.meta import FILE_NAME
from fedcore.steps import observers_now
from fedcore.timeline import COMMIT, COMPACTION, DELTA_COMMIT, Timeline
from fedcore.timeline.commit_metadata import CommitMetadata, WriteStat

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

_STRINGS: Final = {"type": "array", "items": "string"}
#: Hudi's compaction plan, as its readers resolve it (names and fields they know; version 2:
#: file names, not paths).
PLAN_SCHEMA: Final[dict[str, Any]] = {
    "namespace": "org.apache.hudi.avro.model",
    "type": "record",
    "name": "HoodieCompactionPlan",
    "fields": [
        {
            "name": "operations",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "name": "HoodieCompactionOperation",
                        "type": "record",
                        "fields": [
                            {"name": "baseInstantTime", "type": ["null", "string"]},
                            {
                                "name": "deltaFilePaths",
                                "type": ["null", {"type": "array", "items": "string"}],
                            },
                            {"name": "dataFilePath", "type": ["null", "string"]},
                            {"name": "fileId", "type": ["null", "string"]},
                            {"name": "partitionPath", "type": ["null", "string"]},
                            {"name": "metrics", "type": ["null", {"type": "map", "values": "double"}]},
                        ],
                    },
                },
            ],
        },
        {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}]},
        {"name": "version", "type": ["int", "null"]},
    ],
}
PLAN_VERSION: Final = 2
#: The operation type of a compaction's commit metadata (Hudi's ``WriteOperationType``).
COMPACT: Final = "COMPACT"
_THREADS: Final = 4


@dataclass(frozen=True)
class CompactionOperation:
    """One slice to compact: its base file (None for a slice of log files only) and its log
    files (name, size), in merge order."""

    partition: str
    file_id: str
    base_instant: str
    base_file: str | None
    base_size: int
    log_files: tuple[tuple[str, int], ...]
    #: The place of its last log file in the slice (``FileGroup.logs_onto``): an append racing
    #: the compaction would fill the next one.
    last_place: int

    def file_slice(self, partition_values: dict[str, Any]) -> FileSlice:
        return FileSlice(
            self.partition,
            self.file_id,
            self.base_instant,
            self.base_file,
            self.base_size,
            partition_values,
            self.log_files,
        )


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction committed: its instant, the slices it folded and the bytes written."""

    instant: str
    file_groups: int
    log_files: int
    rows_written: int
    bytes_written: int


def plan_compaction(table: TableHandle, timeline: Timeline) -> list[CompactionOperation]:
    """Every latest file slice with log files, as of ``timeline`` (Hudi's default strategy
    with no size bound: a slice's logs only ever grow until compacted)."""
    completed = {i.time for i in timeline.completed(table.write_actions)}
    found = table.file_index_at(timeline).files(None)
    naming, slicing = table.layout.log_files, table.log_slicing(timeline)
    operations = []
    for partition, files in sorted(found.items()):
        groups = files.groups(naming, slicing)
        for file_id, slice_files in sorted(
            files.latest_file_slices(naming, None, completed.__contains__, slicing).items()
        ):
            if not slice_files.log_files:
                continue
            group = groups[file_id]
            places = {name: place for start in group.starts() for place, name in group.logs_onto(start)}
            base = slice_files.base_file
            operations.append(
                CompactionOperation(
                    partition,
                    file_id,
                    slice_files.base_instant,
                    base,
                    files.files[base] if base is not None else 0,
                    tuple((name, files.files[name]) for name in slice_files.log_files),
                    max(places[name] for name in slice_files.log_files),
                )
            )
    return operations


def plan_bytes(operations: list[CompactionOperation]) -> bytes:
    """The plan as Hudi's ``<t>.compaction.requested`` holds it: an Avro data file."""
    records = [
        {
            "operations": [
                {
                    "baseInstantTime": op.base_instant,
                    "deltaFilePaths": [name for name, _ in op.log_files],
                    "dataFilePath": op.base_file,
                    "fileId": op.file_id,
                    "partitionPath": op.partition,
                    "metrics": {
                        "TOTAL_LOG_FILES": float(len(op.log_files)),
                        "TOTAL_LOG_FILES_SIZE": float(sum(size for _, size in op.log_files)),
                    },
                }
                for op in operations
            ],
            "extraMetadata": None,
            "version": PLAN_VERSION,
        }
    ]
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(PLAN_SCHEMA), records)
    return out.getvalue()


def delta_commits_since_compaction(timeline: Timeline) -> int:
    """Delta commits completed after the last compaction (on a merge-on-read table, every
    completed ``commit`` is one)."""
    last = timeline.latest_completed([COMMIT])
    return sum(1 for i in timeline.completed([DELTA_COMMIT]) if last is None or i.time > last.time)


def compact(table: TableHandle, *, timeline: Timeline | None = None) -> CompactionResult | None:
    """Plan and run a compaction of every slice with log files; None when none has any.

    Raises:
        UnsupportedTableError: a copy-on-write table (nothing to compact), or a pending
            compaction that Hudi scheduled.
        CommitConflictError: a writer appended onto a slice meanwhile, or another compaction
            is running; nothing of this one is visible, and it can run again.
    """
    if not table.config.merge_on_read:
        raise UnsupportedTableError(f"table {table.name} is copy-on-write: it has no log files to compact")
    timeline = table.timeline() if timeline is None else timeline
    timeline.check_readable(table.name, True)
    if roll_back_failed_writes(table, timeline):
        timeline = table.timeline()
    refuse_beside_services(table, timeline, "the compaction")
    operations = plan_compaction(table, timeline)
    if not operations:
        return None
    schema = table.schema(timeline)
    assert schema is not None, "a table with log files has a schema"
    parquet = parquet_options(table.options, record_size(table, timeline))
    transaction = Transaction(table, COMPACTION, observers_now())
    try:
        instant = transaction.begin(plan_bytes(operations))
        transaction.inflight(b"")
        stats = _write(table, transaction, instant, operations, parquet)
        metadata = CommitMetadata(
            operation=COMPACT, stats=stats, schema=to_avro_json(schema, table.name), compacted=True
        )
        ops = commit_ops(instant, metadata)
        claims = [claim for s in stats for claim in stat_claims(s, True)]
        transaction.commit(table.layout.commits.encode(metadata), ops, claims, metadata.schema)
    except BaseException as error:
        transaction.end(error)
        raise
    transaction.stop_heartbeat()
    return CompactionResult(
        instant,
        len(stats),
        sum(len(op.log_files) for op in operations),
        sum(s.num_writes for s in stats),
        sum(s.total_write_bytes for s in stats),
    )


def _write(
    table: TableHandle,
    transaction: Transaction,
    instant: str,
    operations: list[CompactionOperation],
    parquet: dict[str, Any],
) -> list[WriteStat]:
    """Each slice read merged and written as its group's new base file, marker first."""
    planner = ScanPlanner.open(table)
    names = file_names(instant, len(operations))
    paths = []
    for op, naming in zip(operations, names, strict=True):
        name = base_file_name(op.file_id, naming.token, instant)
        paths.append(f"{op.partition}/{name}" if op.partition else name)

    def one(job: tuple[CompactionOperation, str]) -> WriteStat:
        op, path = job
        values = planner.partition_values(op.partition) if op.partition else {}
        rows = planner.reader.read(op.file_slice(values or {}), None, [])
        name = path.rpartition("/")[2]
        rows = rows.set_column(
            rows.schema.get_field_index(FILE_NAME), FILE_NAME, pa.repeat(pa.scalar(name), rows.num_rows)
        )
        payload, count, column_stats = encode_base_file(table, rows, parquet)
        transaction.write_file(path, payload)
        return WriteStat(
            file_id=op.file_id,
            path=path,
            partition_path=op.partition,
            prev_commit=op.base_instant,
            num_writes=count,
            total_write_bytes=len(payload),
            file_size=len(payload),
            column_stats=column_stats,
            last_log_version=op.last_place,
        )

    writer = FileGroupWriter(table, instant, _THREADS)
    files = [NewFile(path, "MERGE") for path in paths]
    return writer.write(files, list(zip(operations, paths, strict=True)), one, names[0].token)
