"""Copy-on-write writes with pyarrow: records in, one committed instant out.

A write reads top to bottom: records get their keys and partition paths; the
metadata table says which file groups each partition holds; records are
assigned to file groups (updates to the group holding their key, inserts to
small groups first, then to new ones); each group's new base file is written
through the federated filesystem, which places it with the storage strategy;
the transaction then records the metadata-table delta and completes the instant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

import pyarrow as pa

from fedcore import properties as P
from fedcore.commit.file_writer import (
    file_names,
    new_groups,
)
from fedcore.exceptions import ConfigError, DataFileMissingError
from fedcore.handle import HasHandle, handle_of
from fedcore.keygen.grouping import partition_rows
from fedcore.keygen.keys import check_columns, check_keys
from fedcore.schema.input import WriteInput, record_chunks, to_arrow_table
from fedcore.timeline.commit_metadata import WriteStat
from fedcore.write.job import (
    BULK_INSERT,
    DELETE,
    INSERT,
    INSERT_OVERWRITE,
    INSERT_OVERWRITE_TABLE,
    OPERATIONS,
    UPSERT,
    Operation,
    WriteJob,
    WriteResult,
)
from fedcore.write.planner import Prepared, WritePlanner

__all__ = ["OPERATIONS", "Operation", "Progress", "WriteClient", "WriteResult"]

#: How much of a streamed input a bulk insert holds at once (Arrow bytes).
_STREAM_CHUNK_BYTES: Final = 64 * 2**20

#: Called as (files done, files to write) while a write runs.
Progress = Callable[[int, int], None]


class WriteClient:
    """Writes to one table with one set of options: what engines and pipelines hold on to.

    Args:
        table: the table (from ``load_table`` or ``create_table``).
        options: Hudi's keys (``hoodie.parquet.max.file.size``, heartbeat, cleaning, archival)
            over the table's own; checked here. Storage keys must match the table's layout.
        progress: called as (files written, files to write) while a write runs.
    """

    def __init__(
        self,
        table: HasHandle,
        options: Mapping[str, str] | None = None,
        *,
        progress: Progress | None = None,
    ) -> None:
        """``options`` (Hudi's keys) apply to this client's writes over the table's own; storage
        keys must match the table's layout, and every value is checked here, before a write."""
        self.table = handle_of(table).with_options(options)
        self.options = self.table.options
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

    def write(
        self, data: WriteInput, operation: Operation, *, extra_metadata: Mapping[str, str] | None = None
    ) -> WriteResult:
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
            extra_metadata: kept in the instant's ``extraMetadata``, in its inflight plan and
                its commit (a streaming sink's checkpoint: ``fedcore.write.checkpoints``).

        Returns:
            What was committed. Once the instant has committed this returns, never raises;
            a table service that failed after the commit is in ``warnings``.

        Raises:
            ConfigError: ``operation`` is not one of ``OPERATIONS``.
            InvalidRecordsError: ``data`` is not records this table takes (a missing key
                column, a null key, colliding keys); ``SchemaMismatchError``: a column whose
                type cannot become the table's.
            CommitConflictError: another writer changed the same file groups first; nothing
                of this write is visible.
            StorageError: the store failed or refused a request.
        """
        if operation not in OPERATIONS:
            raise ConfigError(P.OPERATION, f"unknown operation {operation!r}; one of {', '.join(OPERATIONS)}")
        # A bulk insert streams its input a chunk at a time (it looks nothing up, so each
        # chunk makes file groups of its own); other operations combine or look up keys
        # across the whole input, so they read it whole.
        chunks = (
            record_chunks(data, _STREAM_CHUNK_BYTES)
            if operation == BULK_INSERT
            else iter([to_arrow_table(data)])
        )
        first = next(chunks)
        job = WriteJob.open(self.table, operation, first.schema, extra_metadata)
        planner = WritePlanner(job)  # one per write: its chunks' keys and their file groups
        prepared = [self._prepare(first, planner)]
        del first  # each chunk is let go once its files are written
        try:
            with job:
                job.begin()
                later = (self._prepare(chunk, planner) for chunk in chunks)
                return self._write(planner, prepared.pop(), later)
        except DataFileMissingError as error:  # rolled back: was it a concurrent writer's doing?
            raise job.missing_file(error) from error

    def _prepare(self, data: pa.Table, planner: WritePlanner) -> Prepared:
        """Records checked and conformed to the table's schema, with their partitions and
        (where the operation looks them up) keys, one record per key."""
        job = planner.job
        config, operation = self.table.config, job.operation
        if operation == DELETE:
            check_columns(data, [*config.record_key_fields, *config.partition_fields], "key")
        planner.check_ordering(data)  # as given: a missing column is not one filled with nulls
        data = job.conform(data)
        partitions = partition_rows(data, self.table.partition_scheme)
        keys = None
        if operation in (INSERT, BULK_INSERT):
            check_keys(data, config.record_key_fields)  # spelled per file group, in the writing threads
        else:
            keys = planner.record_keys(data)  # checks them too
            kept = planner.keep_latest(data, partitions.codes, keys)
            if len(kept) != data.num_rows:
                data, keys, partitions = data.take(kept), keys.take(kept), partitions.take(kept)
        job.size_records(data, keys)  # the first chunk sizes the files of a table with none yet
        return Prepared(data, keys, partitions.groups())

    # --- writing -----------------------------------------------------------------------------

    def _write(self, planner: WritePlanner, first: Prepared, later: Iterator[Prepared]) -> WriteResult:
        job = planner.job
        plan, replaced, supersedes, current = planner.plan(first)
        per_file = job.rows_per_file()
        # A streamed bulk insert plans its later chunks as they come: the inflight file lists
        # the file groups of the first.
        job.inflight(plan)

        stats: list[WriteStat] = []
        known = set(current)  # partitions with a partition metadata file
        chunk: Prepared | None = first
        del first
        put = job.put()
        while chunk is not None:
            known.update(chunk.by_partition)
            source = job.encoding(chunk.data, chunk.keys)
            # The file's number in the instant names it and its rows' sequence numbers.
            names = file_names(job.instant, len(plan), start=len(stats))
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
                    for group in new_groups(partition, rows, per_file, partition not in known)
                ]
        return job.commit(stats, supersedes=supersedes, replaced=replaced)
