"""Reading: a file slice in, its rows out as Arrow (log files merged onto the base file,
computed columns added, filters applied).

A ``SliceReader`` is made by the planner (``planner.ScanPlanner``) with everything it
needs already known (the instant read, the schema's types, how log records merge, which
instants committed), so it does no I/O but the slice's own files and pickles small: an
engine's tasks hold one.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from fedcore import properties as P
from fedcore.exceptions import UnsupportedTableError
from fedcore.files.file_slice import VIRTUAL_META_COLUMNS, FileSlice
from fedcore.io.filesystems import open_sized, read_object
from fedcore.io.parquet import open_parquet, read_parquet, read_row_groups
from fedcore.log.blocks import LogBlock, read_blocks
from fedcore.log.merge import IS_DELETED, LogRecords, MergeRules, applicable_blocks, merge
from fedcore.read.filters import Filter, filter_rows, matching_row_groups
from fedcore.schema.evolution import conform_to
from fedcore.schema.meta import COMMIT_TIME, FILE_NAME, META_COLUMNS, PARTITION_PATH, RECORD_KEY

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

_READ_THREADS: Final = 8


@functools.cache
def _read_pool() -> ThreadPoolExecutor:
    """The threads every read in this process shares: starting eight threads per query cost
    more than a selective query's reads (about 10 ms of 20 on 36 small files)."""
    return ThreadPoolExecutor(_READ_THREADS, thread_name_prefix="fed-read")


@functools.cache
def _log_pool() -> ThreadPoolExecutor:
    """Threads that fetch a slice's log files while its base file is read (a pool of their
    own: the slices' reads run on ``_read_pool`` and wait for these)."""
    return ThreadPoolExecutor(_READ_THREADS, thread_name_prefix="fed-log")


# A forked child (a PySpark worker) inherits the pools but not their threads: it starts its own.
os.register_at_fork(after_in_child=_read_pool.cache_clear)
os.register_at_fork(after_in_child=_log_pool.cache_clear)


@dataclass(frozen=True)
class Committed:
    """Which instants a log block may come from: completed, or older than the active timeline
    (archived) and not pending, as Hudi's log scanner decides."""

    completed: frozenset[str]
    pending: frozenset[str]
    first: str  # the active timeline's oldest write or compaction

    def __call__(self, instant: str) -> bool:
        return instant in self.completed or (instant < self.first and instant not in self.pending)


class SliceReader:
    """Reads the file slices of one snapshot of ``table`` (the write ``instant``).

    Args:
        types: the data columns' Arrow types, from the snapshot's schema.
        rules: how log records merge (merge-on-read snapshots); None reads base files only.
        committed: which instants' log blocks count.
        computed: columns a read computes rather than takes from files (virtual meta
            columns, dropped partition columns).
    """

    def __init__(
        self,
        table: TableHandle,
        instant: str | None,
        types: Mapping[str, pa.DataType],
        rules: MergeRules | None,
        committed: Committed,
        computed: frozenset[str],
    ) -> None:
        self.table = table
        self.instant = instant
        self.types = dict(types)
        self.rules = rules
        self.committed = committed
        self.computed = computed
        #: False for tables written with hoodie.populate.meta.fields=false (virtual keys).
        self.meta_fields = P.POPULATE_META_FIELDS.of(table.config)
        self.dropped_partition_columns = P.DROP_PARTITION_COLUMNS.of(table.config)

    def read(
        self, file_slice: FileSlice, columns: Sequence[str] | None, row_filters: list[Filter]
    ) -> pa.Table:
        """The rows of one file slice (log files merged onto its base file), filtered.

        Filters are applied after the merge: a log record may change the value a filter
        tests, so filtering a base file's rows first could keep a row's old version. A base
        file read alone skips the row groups whose statistics prove no row matches."""
        wanted = None
        if columns is not None:
            wanted = list(dict.fromkeys([*columns, *(f.column for f in row_filters)]))
        pieces = (
            self._merged(file_slice, wanted)
            if file_slice.log_files
            else self._base(file_slice, wanted, row_filters)
        )
        tables = [
            self._with_computed_columns(data, file_slice, instant, name, wanted)
            for data, instant, name in pieces
        ]
        if len(tables) == 1:
            data = tables[0]
        else:  # pieces written in different schemas (the table's evolved): the widest of each
            schema = pa.unify_schemas([t.schema for t in tables], promote_options="permissive")
            data = pa.concat_tables([conform_to(t, schema) for t in tables])
        # A column added after the slice's files were written is null in their rows (the
        # scan's schema gives it to every row; filters must see it here already).
        absent = [c for c in wanted or () if c not in data.column_names and c in self.types]
        for name in absent:
            data = data.append_column(
                pa.field(name, self.types[name]), pa.nulls(data.num_rows, self.types[name])
            )
        data = filter_rows(data, row_filters)
        return data.select(list(columns)) if columns is not None else data

    def _stored(self, wanted: list[str] | None, extra: Sequence[str] = ()) -> list[str] | None:
        """The columns to read from files for ``wanted`` (all when None): computed columns
        (virtual meta columns, dropped partition columns) come from elsewhere, and what
        computing them or merging needs is read too."""
        if wanted is None:
            return None
        needs: list[str] = list(extra)
        if not self.meta_fields and RECORD_KEY in wanted:
            needs.extend(self.table.config.record_key_fields)
        return [c for c in dict.fromkeys([*wanted, *needs]) if c not in self.computed]

    def _base(
        self, file_slice: FileSlice, wanted: list[str] | None, row_filters: Sequence[Filter]
    ) -> list[tuple[pa.Table, str, str]]:
        assert file_slice.base_file_name is not None
        prune = [f for f in row_filters if f.column not in self.computed]
        data = self._read_base_file(file_slice, self._stored(wanted), prune)
        return [(data, file_slice.base_instant, file_slice.base_file_name)]

    def _read_base_file(
        self, file_slice: FileSlice, stored: list[str] | None, prune: Sequence[Filter] = ()
    ) -> pa.Table:
        """The base file's ``stored`` columns, without the row groups whose statistics prove no
        row satisfies ``prune`` (its other rows are filtered by the caller)."""
        fs = self.table.fs
        target = fs.resolve(file_slice.path)
        if isinstance(target.fs, LocalFileSystem):  # arrow's own file: its threads may decode
            with (
                fs.errors(file_slice.path, target),
                pa.OSFile(target.fs._strip_protocol(target.path)) as local,
            ):
                parquet = open_parquet(local)
                return read_row_groups(parquet, self._row_groups(parquet, prune), stored, native=True)
        with fs.errors(file_slice.path), open_sized(fs, file_slice.path, file_slice.size) as handle:
            if not prune:
                return read_parquet(handle, stored)
            parquet = open_parquet(handle)
            return read_row_groups(parquet, self._row_groups(parquet, prune), stored)

    @staticmethod
    def _row_groups(parquet: pq.ParquetFile, prune: Sequence[Filter]) -> Sequence[int]:
        """The row groups whose statistics do not prove that no row satisfies ``prune``."""
        if not prune:
            return range(parquet.metadata.num_row_groups)
        return matching_row_groups(parquet.metadata, prune)

    def _merged(self, file_slice: FileSlice, wanted: list[str] | None) -> list[tuple[pa.Table, str, str]]:
        """A merge-on-read slice: the base rows that stay and the latest log records, each
        with the instant and file it comes from."""
        assert self.rules is not None
        assert self.instant is not None
        rules = self.rules
        key_columns = self.table.stored_key_columns
        merging = [*key_columns, *([rules.ordering_field] if rules.ordering_field else [])]
        if IS_DELETED in self.types:
            merging.append(IS_DELETED)
        stored = self._stored(wanted, merging)
        fs = self.table.fs

        def fetch(path: str) -> bytes:
            with fs.errors(path):
                return read_object(fs, path)

        # One request per log file, all at once and beside the base file's reads (on an
        # object store each is a round trip).
        fetched = [_log_pool().submit(fetch, path) for path in file_slice.log_paths]
        base = self._read_base_file(file_slice, stored) if file_slice.base_file_name else None
        blocks: list[LogBlock] = []
        for path, data in zip(file_slice.log_paths, fetched, strict=True):
            blocks.extend(read_blocks(data.result(), path))
        records = [LogRecords.of(block) for block in applicable_blocks(blocks, self.instant, self.committed)]
        if stored is not None:
            records = [
                LogRecords(r.block, r.data.select([c for c in stored if c in r.data.column_names]), None)
                if r.data is not None
                else r
                for r in records
            ]
        ordering_type = self.types.get(rules.ordering_field) if rules.ordering_field else None
        base_keys = self._keys(base) if base is not None else None
        log_keys = [self._keys(r.data) if r.data is not None else None for r in records]
        kept, updates = merge(base, base_keys, records, log_keys, rules, ordering_type)
        pieces: list[tuple[pa.Table, str, str]] = []
        if kept is not None:
            pieces.append((kept, file_slice.base_instant, file_slice.base_file_name or ""))
        for source, update in updates:
            pieces.append((update, source.block.instant, file_slice.file_id))
        if not pieces:  # every record of the slice deleted, and no base file
            pieces.append((self._empty(), self.instant, ""))
        return pieces

    def _keys(self, data: pa.Table) -> pa.Array:
        """The record keys of stored rows: the meta column, or computed (virtual keys)."""
        return self.table.stored_keys(data)

    def _with_computed_columns(
        self, data: pa.Table, file_slice: FileSlice, instant: str, file_name: str, wanted: list[str] | None
    ) -> pa.Table:
        if not self.meta_fields:
            data = self._with_virtual_meta_columns(data, file_slice, instant, file_name, wanted)
        if self.dropped_partition_columns:
            data = self._with_partition_columns(data, file_slice)
        return data

    def _with_virtual_meta_columns(
        self, data: pa.Table, file_slice: FileSlice, instant: str, file_name: str, wanted: list[str] | None
    ) -> pa.Table:
        """Meta columns of a table written without them, computed as a read returns them: the
        instant and file the row was read from, its partition path and its record key; only
        those ``wanted`` (all: None). A key is a string made from every row's key columns:
        a read of other columns makes none."""
        rows = data.num_rows
        constant = {COMMIT_TIME: instant, PARTITION_PATH: file_slice.partition_path, FILE_NAME: file_name}
        out: dict[str, Any] = {
            name: pa.repeat(pa.scalar(value, pa.string()), rows)
            for name, value in constant.items()
            if wanted is None or name in wanted
        }
        keyed = all(f in data.column_names for f in self.table.config.record_key_fields)
        if keyed and (wanted is None or RECORD_KEY in wanted):
            out[RECORD_KEY] = self._keys(data)
        stored = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
        if not out:
            return stored  # (a table of no columns still knows its rows; one built of none would not)
        ordered = {name: out[name] for name in VIRTUAL_META_COLUMNS if name in out}
        return pa.table({**ordered, **{name: stored.column(name) for name in stored.column_names}})

    def _with_partition_columns(self, data: pa.Table, file_slice: FileSlice) -> pa.Table:
        """Partition columns the writer left out of the files (Hudi's
        ``drop.partition.columns``), taken from the path as Hudi's readers take them."""
        for column in self.table.partition_scheme.fields:
            if column in data.column_names:
                continue
            if column not in file_slice.partition_values:
                raise UnsupportedTableError(
                    f"table {self.table.name} keeps {column!r} only in its partition paths, and its "
                    "key generator does not say how to read a value back from a path"
                )
            arrow_type = self.types.get(column, pa.string())
            value = file_slice.partition_values[column]
            data = data.append_column(column, pa.array([value] * data.num_rows, arrow_type))
        return data

    def read_all(
        self, slices: Sequence[FileSlice], columns: Sequence[str] | None, row_filters: Sequence[Filter]
    ) -> Iterator[pa.Table]:
        """The rows of each slice, in order, read in parallel (a consumer that stops early
        leaves no read queued)."""
        pool = _read_pool()
        reads = [pool.submit(self.read, s, columns, list(row_filters)) for s in slices]
        try:
            for read in reads:
                yield read.result()
        finally:  # a consumer that stops early (a limit) leaves no read queued
            for read in reads:
                read.cancel()

    def _empty(self) -> pa.Table:
        """No rows, in the snapshot's columns (a merge-on-read slice all of whose records
        were deleted)."""
        meta = META_COLUMNS if self.meta_fields else VIRTUAL_META_COLUMNS
        fields = [pa.field(name, pa.string()) for name in meta]
        return pa.schema(fields + [pa.field(c, t) for c, t in self.types.items()]).empty_table()
