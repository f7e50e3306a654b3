"""Copy-on-write writes with pyarrow: records in, one committed instant out.

A write reads top to bottom: records get their keys and partition paths; the
metadata table says which file groups each partition holds; records are
assigned to file groups (updates to the group holding their key, inserts to
small groups first, then to new ones); each group's new base file is written
through the federated filesystem, which places it with the storage strategy;
the transaction then records the metadata-table delta and completes the instant.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple, TypeAlias, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fedcore import properties as P
from fedcore.avro_schema import to_avro_json
from fedcore.commit_metadata import CommitMetadata, WriteStat
from fedcore.exceptions import InvalidRecordsError
from fedcore.filenames import base_file_name, new_file_id
from fedcore.handle import TableHandle
from fedcore.io.filesystems import open_sized
from fedcore.io.parquet import open_parquet, read_parquet
from fedcore.io.uris import protocol_of
from fedcore.metadata.file_index import PartitionFiles
from fedcore.metadata.table import ADD, REPLACE, Op
from fedcore.records import (
    COMMIT_SEQNO,
    FILE_NAME,
    META_COLUMNS,
    RECORD_KEY,
    WriteInput,
    check_columns,
    check_keys,
    conform,
    latest_per_key,
    partition_rows,
    record_chunks,
    record_keys,
    to_arrow_table,
)
from fedcore.services import run_table_services
from fedcore.timeline import COMMIT, REPLACE_COMMIT, WRITE_ACTIONS, Timeline
from fedcore.transaction import StepHook, Transaction, roll_back_failed_writes

Operation: TypeAlias = Literal["bulk_insert", "insert", "upsert", "delete", "insert_overwrite"]
BULK_INSERT: Final = "bulk_insert"
INSERT: Final = "insert"
UPSERT: Final = "upsert"
DELETE: Final = "delete"
INSERT_OVERWRITE: Final = "insert_overwrite"
OPERATIONS: Final[tuple[Operation, ...]] = get_args(Operation)
_IO_THREADS: Final = 8

_NO_ROWS: Final = np.empty(0, np.int64)
#: Base files an upsert fetches whole on an object store (at most this size each) and keeps
#: for their rewrite (at most this much in all).
_WHOLE_READ_BYTES: Final = 8 * 2**20
_KEPT_BASE_BYTES: Final = 256 * 2**20
#: How much of a streamed input a bulk insert holds at once (Arrow bytes).
_STREAM_CHUNK_BYTES: Final = 64 * 2**20
_UNIQUE_META_COLUMNS: Final = frozenset({COMMIT_SEQNO, RECORD_KEY})

#: Called as (files done, files to write) while a write runs.
Progress = Callable[[int, int], None]


@dataclass
class FileGroupWrite:
    """One new base file: a file group's next version, or a new file group."""

    partition: str
    file_id: str
    base: tuple[str, str] | None = None  # (base instant, file name) of the version replaced
    base_size: int | None = None
    rows: np.ndarray = field(default_factory=lambda: _NO_ROWS)  # input rows written into it
    updates: int = 0  # of ``rows``, those replacing a record of the base file
    deletes: int = 0
    #: Keys whose records in the base file the new version leaves out (updated or deleted).
    removed_keys: pa.Array | None = None
    #: The base file's record keys, when the key lookup has read them already.
    base_keys: pa.ChunkedArray | None = None
    #: The whole base file, when the key lookup has fetched it already (object stores).
    base_bytes: bytes | None = None


class Prepared(NamedTuple):
    """One chunk of a write's records, ready to plan: its records, their keys where the
    operation looks them up, and the rows of each partition."""

    data: pa.Table
    keys: pa.Array | None
    by_partition: dict[str, np.ndarray]


class Encoding(NamedTuple):
    """What every file group of a chunk is encoded with."""

    instant: str
    data: pa.Table
    keys: pa.Array | None
    schema: pa.Schema | None
    parquet: dict[str, Any]


@dataclass(frozen=True)
class WriteResult:
    """What a committed write did. ``warnings``: table services that failed after the
    commit (the write itself succeeded; they run again after the next write)."""

    instant: str
    operation: str
    files_written: int
    rows_written: int
    inserted: int
    updated: int
    deleted: int
    bytes_written: int
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, instant: str, metadata: CommitMetadata, warnings: Iterable[str] = ()) -> WriteResult:
        stats = metadata.stats
        return cls(
            instant=instant,
            operation=metadata.operation.lower(),
            files_written=len(stats),
            rows_written=sum(s.num_writes for s in stats),
            inserted=sum(s.num_inserts for s in stats),
            updated=sum(s.num_update_writes for s in stats),
            deleted=sum(s.num_deletes for s in stats),
            bytes_written=sum(s.total_write_bytes for s in stats),
            warnings=tuple(warnings),
        )


class WriteClient:
    """Writes to one table with one set of options: what engines and pipelines hold on to.

    Args:
        table: the table (from ``load_table`` or ``create_table``).
        options: Hudi's keys (``hoodie.parquet.max.file.size``, heartbeat, cleaning, archival)
            over the table's own; checked here. Storage keys must match the table's layout.
        hook: called with each commit-protocol step name (crash-injection tests).
        progress: called as (files written, files to write) while a write runs.
    """

    def __init__(
        self,
        table: TableHandle,
        options: Mapping[str, str] | None = None,
        *,
        hook: StepHook | None = None,
        progress: Progress | None = None,
    ) -> None:
        """``options`` (Hudi's keys) apply to this client's writes over the table's own; storage
        keys must match the table's layout, and every value is checked here, before a write."""
        table.check_writable()
        self.table = table.with_options(options)
        self.options = self.table.options
        self._hook = hook
        self._progress = progress or (lambda done, total: None)

    def __repr__(self) -> str:
        return f"WriteClient({self.table!r})"

    # --- operations ----------------------------------------------------------------------

    def bulk_insert(self, data: WriteInput) -> WriteResult:
        return self.write(data, BULK_INSERT)

    def insert(self, data: WriteInput) -> WriteResult:
        return self.write(data, INSERT)

    def upsert(self, data: WriteInput) -> WriteResult:
        return self.write(data, UPSERT)

    def delete(self, data: WriteInput) -> WriteResult:
        """Delete the records whose keys (record key and partition columns) appear in ``data``."""
        return self.write(data, DELETE)

    def insert_overwrite(self, data: WriteInput) -> WriteResult:
        """Replace every file group of the partitions ``data`` touches with ``data``."""
        return self.write(data, INSERT_OVERWRITE)

    def write(self, data: WriteInput, operation: Operation) -> WriteResult:
        """Write ``data`` as one instant with ``operation``.

        Args:
            data: a pyarrow Table, RecordBatch or RecordBatchReader, or anything exporting an
                Arrow stream (polars, pandas, ...). For ``delete``, the record key and
                partition columns are enough. ``bulk_insert`` reads a stream a chunk at a
                time (each chunk's files are written before the next is read); the other
                operations read it whole.
            operation: ``upsert`` (update keys in place, insert the rest: idempotent),
                ``insert`` / ``bulk_insert`` (no key lookup: an existing key gets a second
                row, as in Hudi), ``delete``, or ``insert_overwrite`` (replace the file
                groups of the partitions written).

        Returns:
            What was committed. Once the instant has committed this returns, never raises;
            a table service that failed after the commit is in ``warnings``.

        Raises:
            InvalidRecordsError, SchemaMismatchError, CommitConflictError (another writer
            changed the same file groups first; nothing of this write is visible),
            StorageError.
        """
        if operation not in OPERATIONS:
            raise InvalidRecordsError(f"unknown operation {operation!r}; one of {', '.join(OPERATIONS)}")
        # A bulk insert streams its input a chunk at a time (it looks nothing up, so each
        # chunk makes file groups of its own); other operations combine or look up keys
        # across the whole input, so they read it whole.
        chunks = (
            record_chunks(data, _STREAM_CHUNK_BYTES)
            if operation == BULK_INSERT
            else iter([to_arrow_table(data)])
        )
        first = next(chunks)
        # One listing of the timeline serves recovery, the schema and the plan.
        timeline = self.table.timeline()
        timeline.check_readable(self.table.name)
        if roll_back_failed_writes(self.table, timeline):
            timeline = self.table.timeline()
        schema = self.table.schema(timeline)
        prepared = [self._prepare(first, operation, schema)]
        del first  # each chunk is let go once its files are written
        schema = prepared[0].data.schema if operation != DELETE else schema

        action = REPLACE_COMMIT if operation == INSERT_OVERWRITE else COMMIT
        with Transaction(self.table, action, self._hook) as transaction:
            later = (self._prepare(chunk, operation, schema) for chunk in chunks)
            metadata = self._write(transaction, timeline, operation, schema, prepared.pop(), later)
        return WriteResult.of(transaction.time, metadata, run_table_services(self.table))

    def _prepare(self, data: pa.Table, operation: str, schema: pa.Schema | None) -> Prepared:
        """Records checked and conformed to the table's schema, with their partitions and
        (where the operation looks them up) keys, one record per key."""
        config = self.table.config
        if operation == DELETE:
            check_columns(data, [*config.record_key_fields, *config.partition_fields], "key")
        else:
            data = conform(data, schema)
        partitions = partition_rows(data, self.table.partition_scheme)
        keys = None
        if operation in (INSERT, BULK_INSERT):
            check_keys(data, config.record_key_fields)  # spelled per file group, in the writing threads
        else:
            keys = self._record_keys(data)  # checks them too
            precombine = config.precombine_field
            column = data.column(precombine) if precombine and precombine in data.column_names else None
            kept = latest_per_key(partitions.codes, keys, column)
            if len(kept) != data.num_rows:
                data, keys, partitions = data.take(kept), keys.take(kept), partitions.take(kept)
        return Prepared(data, keys, partitions.groups())

    # --- planning ----------------------------------------------------------------------------

    def _write(
        self,
        transaction: Transaction,
        timeline: Timeline,
        operation: str,
        schema: pa.Schema | None,
        first: Prepared,
        later: Iterator[Prepared],
    ) -> CommitMetadata:
        record_size = self._record_size(timeline)
        index = self.table.file_index_at(timeline)
        current = index.files(first.by_partition) if first.by_partition else {}
        plan: list[FileGroupWrite] = []
        replaced: dict[str, list[str]] = {}
        kept = 0
        for partition, rows in sorted(first.by_partition.items()):
            files = current.get(partition, PartitionFiles())
            slices = files.latest_slices()
            if operation == INSERT_OVERWRITE:
                replaced[partition] = sorted(slices)
                plan.extend(self._new_groups(partition, rows, record_size))
            elif operation == BULK_INSERT:
                plan.extend(self._new_groups(partition, rows, record_size))
            else:
                planned = self._plan_partition(
                    operation, partition, rows, first.keys, files, slices, record_size
                )
                for group in planned:  # base files fetched whole are kept within a budget
                    if group.base_bytes is not None:
                        if kept + len(group.base_bytes) > _KEPT_BASE_BYTES:
                            group.base_bytes = None
                        else:
                            kept += len(group.base_bytes)
                plan.extend(planned)
        supersedes = [(g.file_id, g.base[0]) for g in plan if g.base is not None]
        supersedes += [
            (file_id, current[p].latest_slices()[file_id][0])
            for p, ids in replaced.items()
            for file_id in ids
        ]
        # A streamed bulk insert plans its later chunks as they come: the inflight file lists
        # the file groups of the first.
        transaction.inflight(_plan_json(plan, operation))

        stats: list[WriteStat] = []
        ops: list[Op] = []
        known = set(current)  # partitions with a partition metadata file
        # Files go to many prefixes (often many buckets): write them in parallel.
        # Reading and uploading overlap freely; building and encoding files is CPU work, done
        # on one thread per core (more only contend, and each thread's allocator heap would
        # hold on to memory of its own).
        parquet = self._parquet_options(record_size)
        data_schema = first.data.schema
        chunk: Prepared | None = first
        del first
        with ThreadPoolExecutor(_IO_THREADS) as pool, ThreadPoolExecutor(os.cpu_count() or 1) as encoder:
            while chunk is not None:
                for partition in sorted(chunk.by_partition.keys() - known):
                    self._write_partition_metadata(partition, transaction.time)
                known.update(chunk.by_partition)
                source = Encoding(transaction.time, chunk.data, chunk.keys, schema, parquet)
                total = len(stats) + len(plan)  # files known so far: a stream's later chunks add more
                futures = [
                    # The index is unique in the instant: it names files and sequence numbers.
                    pool.submit(self._write_group, transaction, len(stats) + number, group, source, encoder)
                    for number, group in enumerate(plan)
                ]
                for future in futures:
                    stat = future.result()
                    stats.append(stat)
                    ops.append(Op(stat.partition_path, stat.path.rpartition("/")[2], stat.file_size, ADD))
                    self._progress(len(stats), total)
                chunk = next(later, None)
                if chunk is not None:
                    plan = [
                        group
                        for partition, rows in sorted(chunk.by_partition.items())
                        for group in self._new_groups(partition, rows, record_size)
                    ]
        for partition, file_ids in replaced.items():
            ops.extend(Op(partition, file_id, int(transaction.time), REPLACE) for file_id in file_ids)
        table_schema = schema if schema is not None else data_schema
        metadata = CommitMetadata(
            operation=operation.upper(),
            stats=stats,
            schema=to_avro_json(table_schema, self.table.name),
            replaced=replaced,
        )
        transaction.commit(metadata.to_bytes(), ops, supersedes, metadata.schema)
        return metadata

    def _plan_partition(
        self,
        operation: str,
        partition: str,
        rows: np.ndarray,
        keys: pa.Array | None,
        files: PartitionFiles,
        slices: dict[str, tuple[str, str]],
        record_size: int,
    ) -> list[FileGroupWrite]:
        groups: dict[str, FileGroupWrite] = {}
        inserts = rows
        keys_by_file: dict[str, pa.ChunkedArray] = {}
        whole: dict[str, bytes] = {}
        if keys is not None and operation in (UPSERT, DELETE):
            index_keys, owners, file_ids, keys_by_file, whole = self._key_index(partition, slices, files)
            row_keys = keys.take(rows)
            # Hash the batch's keys (the small side), probe the partition's keys with them,
            # then look the batch up among the keys found only.
            present = np.flatnonzero(pc.is_in(index_keys, value_set=row_keys).to_numpy(zero_copy_only=False))
            found = pc.index_in(row_keys, value_set=index_keys.take(present))
            hit = pc.is_valid(found).to_numpy(zero_copy_only=False)
            owner = owners[present][found.fill_null(0).to_numpy()][hit] if len(present) else present
            hit_rows = rows[hit]
            inserts = rows[~hit] if operation == UPSERT else _NO_ROWS
            order = np.argsort(owner, kind="stable")
            starts = np.flatnonzero(np.diff(owner[order], prepend=-1))
            split = np.split(hit_rows[order], starts[1:]) if len(starts) else []
            for first, group_rows in zip(starts, split, strict=True):
                file_id = file_ids[owner[order][first]]
                base = slices[file_id]
                matched = groups[file_id] = FileGroupWrite(partition, file_id, base, files.files[base[1]])
                matched.base_keys, matched.base_bytes = keys_by_file[file_id], whole.get(file_id)
                matched.removed_keys = keys.take(group_rows)
                if operation == UPSERT:
                    matched.rows, matched.updates = group_rows, len(group_rows)
                else:
                    matched.deletes = len(group_rows)
        if not len(inserts):
            return list(groups.values())
        # Inserts fill small file groups first (Hudi's file sizing), then open new ones.
        max_size = P.MAX_FILE_SIZE.of(self.options)
        small_limit = P.SMALL_FILE_LIMIT.of(self.options)
        remaining = inserts
        for file_id, (instant, name) in sorted(slices.items(), key=lambda item: files.files[item[1][1]]):
            size = files.files[name]
            if not len(remaining) or size >= small_limit:
                continue
            capacity = max(0, (max_size - size) // record_size)
            if capacity == 0:
                continue
            group = groups.get(file_id)
            if group is None:
                group = groups[file_id] = FileGroupWrite(partition, file_id, (instant, name), size)
                group.base_keys, group.base_bytes = keys_by_file.get(file_id), whole.get(file_id)
            group.rows = np.concatenate([group.rows, remaining[:capacity]])
            remaining = remaining[capacity:]
        return [*groups.values(), *self._new_groups(partition, remaining, record_size)]

    def _new_groups(self, partition: str, rows: np.ndarray, record_size: int) -> list[FileGroupWrite]:
        per_file = max(1, P.MAX_FILE_SIZE.of(self.options) // record_size)
        return [
            FileGroupWrite(partition, new_file_id(), rows=rows[start : start + per_file])
            for start in range(0, len(rows), per_file)
        ]

    def _key_index(
        self, partition: str, slices: dict[str, tuple[str, str]], files: PartitionFiles
    ) -> tuple[pa.ChunkedArray, np.ndarray, list[str], dict[str, pa.ChunkedArray], dict[str, bytes]]:
        """The keys of a partition's latest base files, for each the position of its file
        group in the file ids returned (a key in several files, inserted twice, is the
        last's), and each file group's keys (its rewrite need not decode them again).

        On an object store, small base files are fetched whole in one GET (a ranged read of
        their keys would fetch most of them anyway) and returned too, so a file group that
        is rewritten is not fetched twice; elsewhere only the keys are read."""
        file_ids = list(reversed(slices))  # the first occurrence of a key is what index_in finds
        names = [slices[file_id][1] for file_id in file_ids]
        paths = [f"{partition}/{name}" if partition else name for name in names]
        sizes = [files.files[name] for name in names]
        fetch_whole = (
            bool(paths)
            and protocol_of(self.table.fs.to_physical(paths[0])) != "file"
            and max(sizes) <= _WHOLE_READ_BYTES
            and sum(sizes) <= _KEPT_BASE_BYTES
        )

        def keys_of(path: str, size: int) -> tuple[pa.ChunkedArray, bytes | None]:
            fs = self.table.fs
            with fs.errors(path), open_sized(fs, path, size) as handle:
                if fetch_whole:
                    data = handle.read()  # one GET: the size is known, no HEAD
                    return read_parquet(io.BytesIO(data), [RECORD_KEY]).column(0), data
                return read_parquet(handle, [RECORD_KEY]).column(0), None

        with ThreadPoolExecutor(_IO_THREADS) as pool:
            found = list(pool.map(keys_of, paths, sizes))
        owners = np.repeat(np.arange(len(found), dtype=np.int64), [len(keys) for keys, _ in found])
        keys = pa.chunked_array([chunk for keys, _ in found for chunk in keys.chunks], pa.string())
        by_file = {file_id: keys for file_id, (keys, _) in zip(file_ids, found, strict=True)}
        whole = {
            file_id: data for file_id, (_, data) in zip(file_ids, found, strict=True) if data is not None
        }
        return keys, owners, file_ids, by_file, whole

    def _record_keys(self, data: pa.Table) -> pa.Array:
        config = self.table.config
        return record_keys(data, config.record_key_fields, config.get(P.KEY_GENERATOR_CLASS, ""))

    def _parquet_options(self, record_size: int) -> dict[str, Any]:
        """pyarrow's settings for base files, from Hudi's keys."""
        return {
            "compression": P.PARQUET_COMPRESSION_CODEC.of(self.options),
            "row_group_size": max(1, P.PARQUET_BLOCK_SIZE.of(self.options) // record_size),
            "data_page_size": P.PARQUET_PAGE_SIZE.of(self.options),
        }

    def _record_size(self, timeline: Timeline) -> int:
        """Bytes per record, from the latest commit that wrote any (Hudi's estimate)."""
        default = P.RECORD_SIZE_ESTIMATE.of(self.options)
        for instant in reversed(timeline.completed(WRITE_ACTIONS)[-5:]):
            stats = self.table.commit_metadata(instant).stats
            written = sum(s.num_writes for s in stats)
            if written > 0:
                return max(1, sum(s.total_write_bytes for s in stats) // written)
        return max(1, default)

    # --- writing -----------------------------------------------------------------------------

    def _write_group(
        self,
        transaction: Transaction,
        index: int,
        group: FileGroupWrite,
        source: Encoding,
        encoder: ThreadPoolExecutor,
    ) -> WriteStat:
        name = base_file_name(group.file_id, f"{index}-1-0", source.instant)
        relative = f"{group.partition}/{name}" if group.partition else name
        base = group.base_bytes
        group.base_bytes = None  # held by this call only from here
        if group.base is not None and base is None:
            base_path = f"{group.partition}/{group.base[1]}" if group.partition else group.base[1]
            fs = self.table.fs
            with fs.errors(base_path), open_sized(fs, base_path, group.base_size) as handle:
                base = handle.read()
        payload, rows_written = encoder.submit(self._encode_group, source, index, name, group, base).result()
        transaction.write_file(relative, payload, "MERGE" if group.base else "CREATE")
        updates = group.updates
        return WriteStat(
            file_id=group.file_id,
            path=relative,
            partition_path=group.partition,
            prev_commit=group.base[0] if group.base else "null",
            num_writes=rows_written,
            num_inserts=len(group.rows) - updates,
            num_update_writes=updates,
            num_deletes=group.deletes,
            total_write_bytes=len(payload),
            file_size=len(payload),
        )

    def _encode_group(
        self, source: Encoding, index: int, name: str, group: FileGroupWrite, base: bytes | None
    ) -> tuple[bytes, int]:
        """A file group's new base file: the base file's records that stay, then the new ones."""
        instant, data, keys, schema, parquet = source
        n = len(group.rows)
        new_rows = data.take(group.rows) if n else data.slice(0, 0)
        if schema is not None and n:
            new_rows = new_rows.select(schema.names)
        sequence = pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string())
        fresh = pa.Table.from_arrays(
            [
                pa.repeat(pa.scalar(instant), n),
                pc.binary_join_element_wise(f"{instant}_{index}_", sequence, ""),
                self._record_keys(new_rows) if keys is None else keys.take(group.rows),
                pa.repeat(pa.scalar(group.partition), n),
                pa.repeat(pa.scalar(name), n),
                *new_rows.columns,
            ],
            names=[*META_COLUMNS, *new_rows.column_names],
        )
        if base is not None:
            stored = open_parquet(io.BytesIO(base))
            names = stored.schema_arrow.names
            if group.base_keys is None:
                old = stored.read(use_threads=False)
            else:  # read already: decode the rest only
                old = stored.read(columns=[c for c in names if c != RECORD_KEY], use_threads=False)
                old = old.add_column(names.index(RECORD_KEY), RECORD_KEY, group.base_keys)
            if group.removed_keys is not None:
                gone = pc.is_in(old.column(RECORD_KEY), value_set=group.removed_keys)
                old = old.filter(pc.invert(gone))
            kept = old.num_rows
            old = old.set_column(
                old.schema.get_field_index(FILE_NAME), FILE_NAME, pa.repeat(pa.scalar(name), kept)
            )
            fresh = pa.concat_tables([old.select(fresh.column_names).cast(fresh.schema), fresh]) if n else old
        all_keys = fresh.column(RECORD_KEY)
        footer = {}
        if fresh.num_rows:
            footer = {
                b"hoodie_min_record_key": str(pc.min(all_keys).as_py()).encode(),
                b"hoodie_max_record_key": str(pc.max(all_keys).as_py()).encode(),
            }
        sink = pa.BufferOutputStream()  # Arrow memory, freed as soon as the bytes are copied out
        # Record keys and sequence numbers are unique per file: a dictionary would only be
        # built to be dropped. Every other column may repeat (the other meta columns do).
        # Min/max statistics of the sequence numbers, which no reader filters on, would take
        # a third of the encoding time; every other column has them, as in Hudi's files.
        names = fresh.column_names
        pq.write_table(
            fresh.replace_schema_metadata(footer),
            sink,
            use_dictionary=[c for c in names if c not in _UNIQUE_META_COLUMNS],
            write_statistics=[c for c in names if c != COMMIT_SEQNO],
            **parquet,
        )
        return sink.getvalue().to_pybytes(), fresh.num_rows

    def _write_partition_metadata(self, partition: str, instant: str) -> None:
        path = f"{partition}/{P.PARTITION_METADATA_FILE}" if partition else P.PARTITION_METADATA_FILE
        depth = len(partition.split("/")) if partition else 0
        stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
        body = f"#partition metadata\n#{stamp}\ncommitTime={instant}\npartitionDepth={depth}\n".encode()
        # A concurrent writer may have written it: same content but for the time.
        with contextlib.suppress(FileExistsError):
            self.table.fs.pipe_file(path, body, mode="create")

    # --- after the commit ----------------------------------------------------------------------


def _plan_json(plan: Iterable[FileGroupWrite], operation: str) -> bytes:
    by_partition: dict[str, list[dict[str, object]]] = {}
    for group in plan:
        by_partition.setdefault(group.partition, []).append(
            {
                "fileId": group.file_id,
                "prevCommit": group.base[0] if group.base else "null",
                "numInserts": len(group.rows) - group.updates,
                "numUpdateWrites": group.updates,
                "numDeletes": group.deletes,
            }
        )
    return json.dumps(
        {"partitionToWriteStats": by_partition, "operationType": operation.upper()}, indent=2
    ).encode()
