"""Copy-on-write writes with pyarrow: records in, one committed instant out.

A write reads top to bottom: records get their keys and partition paths; the
metadata table says which file groups each partition holds; records are
assigned to file groups (updates to the group holding their key, inserts to
small groups first, then to new ones); each group's new base file is written
through the federated filesystem, which places it with the storage strategy;
the transaction then records the metadata-table delta and completes the instant.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Final, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fedcore import properties as P
from fedcore.commit_metadata import WriteStat
from fedcore.exceptions import InvalidRecordsError
from fedcore.file_writer import (
    NO_ROWS,
    Encoding,
    FileGroupWrite,
    FileName,
    new_groups,
    write_partition_metadata,
)
from fedcore.handle import TableHandle
from fedcore.io.filesystems import open_sized
from fedcore.io.parquet import read_parquet
from fedcore.io.uris import protocol_of
from fedcore.metadata.file_index import PartitionFiles
from fedcore.records import (
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
from fedcore.timeline import Timeline
from fedcore.transaction import StepHook
from fedcore.write_job import (
    BULK_INSERT,
    DELETE,
    INSERT,
    INSERT_OVERWRITE,
    INSERT_OVERWRITE_TABLE,
    IO_THREADS,
    OPERATIONS,
    REPLACING,
    UPSERT,
    Operation,
    WriteJob,
    WriteResult,
)

__all__ = ["OPERATIONS", "Operation", "Progress", "WriteClient", "WriteResult"]

#: Base files an upsert fetches whole on an object store (at most this size each) and keeps
#: for their rewrite (at most this much in all).
_WHOLE_READ_BYTES: Final = 8 * 2**20
_KEPT_BASE_BYTES: Final = 256 * 2**20
#: How much of a streamed input a bulk insert holds at once (Arrow bytes).
_STREAM_CHUNK_BYTES: Final = 64 * 2**20

#: Called as (files done, files to write) while a write runs.
Progress = Callable[[int, int], None]


class Prepared(NamedTuple):
    """One chunk of a write's records, ready to plan: its records, their keys where the
    operation looks them up, and the rows of each partition."""

    data: pa.Table
    keys: pa.Array | None
    by_partition: dict[str, np.ndarray]


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

    def insert_overwrite_table(self, data: WriteInput) -> WriteResult:
        """Replace every file group of the table with ``data``."""
        return self.write(data, INSERT_OVERWRITE_TABLE)

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
                row, as in Hudi), ``delete``, ``insert_overwrite`` (replace the file
                groups of the partitions written) or ``insert_overwrite_table`` (replace every
                file group).

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
        job = WriteJob.open(self.table, operation, first.schema)
        prepared = [self._prepare(first, operation, job.schema)]
        del first  # each chunk is let go once its files are written
        with job:
            job.begin(self._hook)
            later = (self._prepare(chunk, operation, job.schema) for chunk in chunks)
            return self._write(job, prepared.pop(), later)

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

    def _write(self, job: WriteJob, first: Prepared, later: Iterator[Prepared]) -> WriteResult:
        assert job.timeline is not None
        plan, replaced, supersedes, current = self._plan(job, first, job.timeline)
        operation = job.operation
        per_file = job.rows_per_file()
        # A streamed bulk insert plans its later chunks as they come: the inflight file lists
        # the file groups of the first.
        job.inflight(_plan_json(plan, operation))

        stats: list[WriteStat] = []
        known = set(current)  # partitions with a partition metadata file
        chunk: Prepared | None = first
        del first
        put = job.put()
        while chunk is not None:
            write_partition_metadata(self.table, sorted(chunk.by_partition.keys() - known), job.instant)
            known.update(chunk.by_partition)
            source = Encoding(job.instant, chunk.data, chunk.keys, job.schema, job.parquet)
            # The file's number in the instant names it and its rows' sequence numbers.
            names = [
                FileName(f"{number}-1-0", f"{job.instant}_{number}_")
                for number in range(len(stats), len(stats) + len(plan))
            ]
            total = len(stats) + len(plan)  # files known so far: a stream's later chunks add more
            done = len(stats)

            def progress(stat: WriteStat, total: int = total) -> None:
                nonlocal done
                done += 1
                self._progress(done, total)

            stats.extend(job.write_groups(plan, source, names, put, progress))
            chunk = next(later, None)
            if chunk is not None:
                plan = [
                    group
                    for partition, rows in sorted(chunk.by_partition.items())
                    for group in new_groups(partition, rows, per_file)
                ]
        return job.commit(stats, supersedes=supersedes, replaced=replaced)

    def _plan(
        self, job: WriteJob, first: Prepared, timeline: Timeline
    ) -> tuple[list[FileGroupWrite], dict[str, list[str]], list[tuple[str, str]], dict[str, PartitionFiles]]:
        """The file groups to write for ``first``, those an overwrite replaces, the (file id,
        base instant) of every version superseded, and the partitions' files as found."""
        operation = job.operation
        index = self.table.file_index_at(timeline)
        current = index.files(first.by_partition) if first.by_partition else {}
        if operation == INSERT_OVERWRITE_TABLE:
            current = index.files(None)
        plan: list[FileGroupWrite] = []
        replaced: dict[str, list[str]] = {}
        kept = 0
        per_file = job.rows_per_file()
        for partition in sorted(current) if operation == INSERT_OVERWRITE_TABLE else ():
            if current[partition].latest_slices():
                replaced[partition] = sorted(current[partition].latest_slices())
        for partition, rows in sorted(first.by_partition.items()):
            files = current.get(partition, PartitionFiles())
            slices = files.latest_slices()
            if operation in REPLACING:
                if slices:
                    replaced[partition] = sorted(slices)
                plan.extend(new_groups(partition, rows, per_file))
            elif operation == BULK_INSERT:
                plan.extend(new_groups(partition, rows, per_file))
            else:
                planned = self._plan_partition(
                    operation, partition, rows, first.keys, files, slices, job.record_size
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

        return plan, replaced, supersedes, current

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
            inserts = rows[~hit] if operation == UPSERT else NO_ROWS
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
        return [*groups.values(), *new_groups(partition, remaining, max(1, max_size // record_size))]

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

        with ThreadPoolExecutor(IO_THREADS) as pool:
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
