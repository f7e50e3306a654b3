"""Snapshot reads: prune partitions, take the latest committed slice of each file group, read.

The files come from the table's file index (the metadata table), never from
globbing storage, so a read touches only the partitions its filters allow and
never sees an uncommitted, rolled-back, replaced or cleaned file. Engines use
``file_slices`` and read the physical paths themselves.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from fedcore import properties as P
from fedcore.avro_schema import field_types
from fedcore.exceptions import (
    InvalidColumnsError,
    InvalidFilterError,
    InvalidPartitionValueError,
    UnsupportedTableError,
)
from fedcore.filters import (
    UNARY,
    Filter,
    filter_rows,
    matching_row_groups,
    may_match,
    stats_may_match,
    typed,
)
from fedcore.io.filesystems import open_sized, read_object
from fedcore.io.parquet import ColumnStats, open_parquet, read_file_stats, read_parquet, read_row_groups
from fedcore.log_format import LogBlock, read_blocks
from fedcore.log_merge import IS_DELETED, PAYLOADS, LogRecords, MergeRules, applicable_blocks, merge
from fedcore.metadata import MetadataTable
from fedcore.records import (
    COMMIT_TIME,
    FILE_NAME,
    META_COLUMNS,
    PARTITION_PATH,
    RECORD_KEY,
    conform_to,
    record_key_array,
)
from fedcore.retention import check_not_archived
from fedcore.timeline import (
    COMPACTION,
    MERGE_ON_READ_WRITE_ACTIONS,
    WRITE_ACTIONS,
    Instant,
    parse_instant_time,
)

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

FilterSpec = Filter | Sequence[Any]
#: Hudi's query types: a merge-on-read snapshot merges log files onto base files; a
#: read-optimized query reads base files only (on copy-on-write tables both are the same).
QueryType = Literal["snapshot", "read_optimized"]
QUERY_TYPES: tuple[QueryType, ...] = ("snapshot", "read_optimized")
_READ_THREADS = 8


@functools.cache
def _read_pool() -> ThreadPoolExecutor:
    """The threads every read in this process shares: starting eight threads per query cost
    more than a selective query's reads (about 10 ms of 20 on 36 small files)."""
    return ThreadPoolExecutor(_READ_THREADS, thread_name_prefix="fed-read")


# A forked child (a PySpark worker) inherits the pool but not its threads: it starts its own.
os.register_at_fork(after_in_child=_read_pool.cache_clear)
#: The meta columns a read computes for tables written without them (virtual keys);
#: ``_hoodie_commit_seqno`` has no source, so it is not offered.
VIRTUAL_META_COLUMNS = (COMMIT_TIME, RECORD_KEY, PARTITION_PATH, FILE_NAME)


@dataclass(frozen=True)
class FileSlice:
    """The version of one file group a read uses: what an engine reads.

    Attributes:
        partition_path: the partition (``country=usa``; ``""`` when not partitioned).
        file_id: the file group.
        base_instant: the instant that started this version (wrote its base file).
        base_file_name: the base file's name (None for a merge-on-read slice of log files
            only); its physical location comes from ``table.fs.to_physical(slice.path)``.
        size: the base file's bytes, from the file index (no request needed to learn it).
        partition_values: the partition columns' values, typed.
        log_files: merge-on-read log files to merge onto the base file, in order, with
            their sizes; empty for copy-on-write tables and read-optimized queries.
    """

    partition_path: str
    file_id: str
    base_instant: str
    base_file_name: str | None
    size: int
    partition_values: dict[str, Any]
    log_files: tuple[tuple[str, int], ...] = ()

    @property
    def path(self) -> str:
        """The base file's logical path, relative to the table ("" when it has none)."""
        return self._relative(self.base_file_name or "")

    @property
    def log_paths(self) -> list[str]:
        """The log files' logical paths, in merge order."""
        return [self._relative(name) for name, _ in self.log_files]

    def files(self) -> list[tuple[str, int]]:
        """Logical path and size of each file of the slice: the base file, then the log files."""
        base = [(self.path, self.size)] if self.base_file_name else []
        return base + [(self._relative(name), size) for name, size in self.log_files]

    def _relative(self, name: str) -> str:
        return f"{self.partition_path}/{name}" if self.partition_path and name else name


@dataclass
class ReadPlan:
    slices: list[FileSlice]
    row_filters: list[Filter]
    partitions_total: int | None  # partitions considered; None when pinned without a listing


class Reader:
    def __init__(
        self, table: TableHandle, as_of: str | None = None, query_type: QueryType = "snapshot"
    ) -> None:
        self.table = table
        self.as_of = as_of
        if query_type not in QUERY_TYPES:
            raise InvalidColumnsError(f"query type {query_type!r} is not one of {', '.join(QUERY_TYPES)}")
        if as_of is not None:
            parse_instant_time(as_of)
            check_not_archived(table.fs.table_fs, table.path, as_of)
        self.merge_on_read = table.config.table_type == P.TABLE_TYPE_MOR
        #: Whether log files are merged: merge-on-read snapshots only.
        self.merging = self.merge_on_read and query_type == "snapshot"
        # Listed once: it gives both the snapshot and its schema.
        timeline = table.timeline(latest_read=as_of is None)
        timeline.check_readable(table.name, self.merge_on_read)
        actions = MERGE_ON_READ_WRITE_ACTIONS if self.merge_on_read else WRITE_ACTIONS
        writes = timeline.completed(actions, as_of=as_of)
        #: The instant read: the last write completed as of ``as_of``; None before the first
        #: (the table is then empty, with the schema it was created with).
        self.instant = writes[-1].time if writes else None
        self._index = table.file_index_at(timeline)
        schema_json = self._schema_json(writes[-1]) if writes else table.config.get(P.CREATE_SCHEMA)
        self._types = {k: v for k, v in field_types(schema_json).items() if k not in META_COLUMNS}
        self._timeline = timeline
        self._completed = frozenset(i.time for i in timeline.completed(actions))
        self._pending = frozenset(i.time for i in timeline.pending())
        self._first = min(
            (i.time for i in timeline if i.action in actions or i.action == COMPACTION), default=""
        )
        #: False for tables written with hoodie.populate.meta.fields=false (virtual keys): their
        #: files hold no meta values, so reads compute ``VIRTUAL_META_COLUMNS`` from the key
        #: fields and the file slice, and refuse ``_hoodie_commit_seqno``.
        self.meta_fields = P.POPULATE_META_FIELDS.of(table.config)
        self._dropped_partition_columns = P.DROP_PARTITION_COLUMNS.of(table.config)
        #: Columns a read computes rather than takes from files (virtual meta columns, dropped
        #: partition columns): a file's statistics, if it has any for them, say nothing of them.
        self._computed: frozenset[str] = frozenset(
            [
                *(table.partition_scheme.fields if self._dropped_partition_columns else ()),
                *(() if self.meta_fields else META_COLUMNS),
            ]
        )
        self._rules = self._merge_rules() if self.merging else None

    def _committed(self, instant: str) -> bool:
        """Whether a log block's instant committed: completed, or older than the active
        timeline (archived), as Hudi's log scanner decides."""
        return instant in self._completed or (instant < self._first and instant not in self._pending)

    def __getstate__(self) -> dict[str, Any]:
        """A planned reader travels to an engine's tasks (pickled), which read slices only:
        the file index and the timeline stay with the planner."""
        state = dict(self.__dict__)
        state.pop("_index")
        state.pop("_timeline")
        return state

    def plan(self, filters: Sequence[FilterSpec] = ()) -> ReadPlan:
        """The file slices to read and the filters to apply to their rows.

        Every filter is applied to the rows. Filters on partition columns also prune
        partitions, but only where the partition path provably holds the values (see
        ``PartitionScheme.encodes_values`` and ``may_match``), so pruning can drop a file
        only when none of its rows could match."""
        parsed = [self._typed(Filter.of(f)) for f in filters]
        for f in parsed:
            self._check_column(f.column, "filter on")
        fields = set(self.table.partition_scheme.fields)
        partition_filters = [f for f in parsed if f.column in fields]
        if self.instant is None:
            return ReadPlan([], parsed, 0)
        candidates, total = self._candidate_partitions(partition_filters)
        files = self._index.files(candidates, as_of=self.as_of)
        skipping = [f for f in parsed if f.column not in self._computed]
        slices = []
        for partition, partition_files in files.items():
            values = self._partition_values(partition)
            if not may_match(values, partition_filters):
                continue
            sizes, stats = partition_files.files, partition_files.stats
            if self.merging:
                for file_id, found in partition_files.merged_slices(self.as_of, self._committed).items():
                    base = found.base_file
                    logs = tuple((name, sizes[name]) for name in found.log_files)
                    if not logs and base is not None and not self._may_match(stats.get(base), skipping):
                        continue  # a base file alone, none of whose rows can match
                    size = sizes[base] if base is not None else 0
                    slices.append(
                        FileSlice(partition, file_id, found.base_instant, base, size, values or {}, logs)
                    )
                continue
            for file_id, (instant, name) in sorted(partition_files.latest_slices(self.as_of).items()):
                if self._may_match(stats.get(name), skipping):
                    slices.append(FileSlice(partition, file_id, instant, name, sizes[name], values or {}))
        return ReadPlan(slices, parsed, total)

    def _may_match(self, file_stats: str | None, filters: Sequence[Filter]) -> bool:
        """Whether a base file whose column statistics (as the metadata table recorded them)
        are ``file_stats`` may hold a row matching every filter. Statistics are typed by the
        table's schema; a column whose values no longer fit it proves nothing."""
        if file_stats is None or not filters:
            return True
        found: dict[str, ColumnStats] = {}
        try:
            rows, recorded = read_file_stats(file_stats)
            for column in {f.column for f in filters} & recorded.keys():
                arrow_type = self._types.get(column)
                if arrow_type is None:
                    continue
                low, high, nulls = recorded[column]
                with contextlib.suppress(InvalidFilterError):
                    found[column] = ColumnStats(
                        typed(low, arrow_type, column), typed(high, arrow_type, column), int(nulls), rows
                    )
        except (ValueError, KeyError, TypeError):
            return True  # statistics that do not parse prove nothing: the file is read
        return stats_may_match(found, filters)

    def _schema_json(self, write: Instant) -> str | None:
        """The newest write's Avro schema: from the metadata table's lookup state when that
        holds it (fetched anyway to plan, so no extra request), else its commit metadata."""
        if isinstance(self._index, MetadataTable):
            recorded = self._index.write_schema(write.time, self.as_of)
            if recorded is not None:
                return recorded
        return self.table.commit_metadata(write).schema

    def _merge_rules(self) -> MergeRules:
        """How log records merge, or ``UnsupportedTableError`` for a merge fedcore cannot reproduce."""
        config = self.table.config
        strategy = config.get(P.RECORD_MERGER_STRATEGY, P.DEFAULT_RECORD_MERGER_STRATEGY).strip()
        payload = (
            config.get(P.PAYLOAD_CLASS, "").strip()
            or "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
        )
        if strategy != P.DEFAULT_RECORD_MERGER_STRATEGY or payload not in PAYLOADS:
            raise UnsupportedTableError(
                f"table {self.table.name} merges log records with {payload} (merger strategy {strategy}); "
                f"fedcore merges only with {' and '.join(sorted(PAYLOADS))}, so it refuses a snapshot "
                "read (a read-optimized query reads base files only)"
            )
        ordering = config.precombine_field
        if ordering is not None and self._types and ordering not in self._types:
            raise UnsupportedTableError(
                f"table {self.table.name}'s precombine field {ordering!r} is not a column"
            )
        return MergeRules(ordering, PAYLOADS[payload])

    def _check_column(self, column: str, use: str) -> None:
        if column in META_COLUMNS:
            if not self.meta_fields and column not in VIRTUAL_META_COLUMNS:
                raise InvalidColumnsError(
                    f"cannot {use} {column!r}: table {self.table.name} was written with "
                    f"{P.POPULATE_META_FIELDS}=false, so its files hold no meta values, and "
                    f"{column} cannot be computed (the others are: {', '.join(VIRTUAL_META_COLUMNS)})"
                )
            return
        if self._types and column not in self._types:
            error = InvalidFilterError if use == "filter on" else InvalidColumnsError
            raise error(f"unknown column {column!r}; the table has {', '.join(self.column_names())}")

    def _typed(self, f: Filter) -> Filter:
        if f.op in UNARY:
            return f
        arrow_type = self._types.get(f.column, pa.string())
        value = (
            [typed(v, arrow_type, f.column) for v in f.value]
            if f.op == "IN"
            else typed(f.value, arrow_type, f.column)
        )
        return Filter(f.column, f.op, value)

    def _partition_values(self, partition: str) -> dict[str, Any] | None:
        """Typed partition values of a path; None when the path does not provably hold them."""
        texts = self.table.partition_scheme.values_of(partition)
        if texts is None:
            return None
        try:
            return {
                column: typed(text, self._types.get(column, pa.string()), column)
                for column, text in texts.items()
            }
        except InvalidFilterError:
            return None  # a path that is no value of the column's type: prove nothing by it

    def _candidate_partitions(self, filters: list[Filter]) -> tuple[list[str] | None, int | None]:
        """Partitions to look up: computed when filters pin every partition column, else listed."""
        scheme = self.table.partition_scheme
        if not scheme.fields:
            return [""], 1
        pinned: dict[str, list[Any]] = {}
        for f in filters:
            if f.op in ("=", "IN"):
                values = f.value if f.op == "IN" else [f.value]
                pinned[f.column] = [v for v in values if v in pinned.get(f.column, values)]
        if scheme.encodes_values and set(pinned) == set(scheme.fields):
            combos = itertools.product(*(pinned[field] for field in scheme.fields))
            try:
                return sorted({scheme.path_of(combo) for combo in combos}), None
            except InvalidPartitionValueError:
                pass  # a value no writer could have made a path of: look at every partition
        partitions = self._index.partitions(self.as_of)
        return [p for p in partitions if may_match(self._partition_values(p), filters)], len(partitions)

    # --- reading -----------------------------------------------------------------------------

    def read_slice(
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
            self._with_computed_columns(data, file_slice, instant, name) for data, instant, name in pieces
        ]
        data = (
            tables[0]
            if len(tables) == 1
            else pa.concat_tables([conform_to(t, tables[0].schema) for t in tables])
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
        return [c for c in dict.fromkeys([*wanted, *needs]) if c not in self._computed]

    def _base(
        self, file_slice: FileSlice, wanted: list[str] | None, row_filters: Sequence[Filter]
    ) -> list[tuple[pa.Table, str, str]]:
        assert file_slice.base_file_name is not None
        prune = [f for f in row_filters if f.column not in self._computed]
        data = self._read_base_file(file_slice, self._stored(wanted), prune)
        return [(data, file_slice.base_instant, file_slice.base_file_name)]

    def _read_base_file(
        self, file_slice: FileSlice, stored: list[str] | None, prune: Sequence[Filter] = ()
    ) -> pa.Table:
        """The base file's ``stored`` columns, without the row groups whose statistics prove no
        row satisfies ``prune`` (its other rows are filtered by the caller)."""
        fs = self.table.fs
        with fs.errors(file_slice.path), open_sized(fs, file_slice.path, file_slice.size) as handle:
            if not prune:
                return read_parquet(handle, stored)
            parquet = open_parquet(handle)
            return read_row_groups(parquet, matching_row_groups(parquet.metadata, prune), stored)

    def _merged(self, file_slice: FileSlice, wanted: list[str] | None) -> list[tuple[pa.Table, str, str]]:
        """A merge-on-read slice: the base rows that stay and the latest log records, each
        with the instant and file it comes from."""
        assert self._rules is not None
        assert self.instant is not None
        rules = self._rules
        key_columns = [RECORD_KEY] if self.meta_fields else list(self.table.config.record_key_fields)
        merging = [*key_columns, *([rules.ordering_field] if rules.ordering_field else [])]
        if IS_DELETED in self._types:
            merging.append(IS_DELETED)
        stored = self._stored(wanted, merging)
        base = self._read_base_file(file_slice, stored) if file_slice.base_file_name else None
        blocks: list[LogBlock] = []
        fs = self.table.fs
        for path in file_slice.log_paths:
            with fs.errors(path):
                blocks.extend(read_blocks(read_object(fs, path), path))
        records = [LogRecords.of(block) for block in applicable_blocks(blocks, self.instant, self._committed)]
        if stored is not None:
            records = [
                LogRecords(r.block, r.data.select([c for c in stored if c in r.data.column_names]), None)
                if r.data is not None
                else r
                for r in records
            ]
        ordering_type = self._types.get(rules.ordering_field) if rules.ordering_field else None
        base_keys = self._keys(base) if base is not None else None
        log_keys = [self._keys(r.data) if r.data is not None else None for r in records]
        kept, updates = merge(base, base_keys, records, log_keys, rules, ordering_type)
        pieces: list[tuple[pa.Table, str, str]] = []
        if kept is not None:
            pieces.append((kept, file_slice.base_instant, file_slice.base_file_name or ""))
        for source, update in updates:
            pieces.append((update, source.block.instant, file_slice.file_id))
        if not pieces:  # every record of the slice deleted, and no base file
            pieces.append((self.empty(None), self.instant, ""))
        return pieces

    def _keys(self, data: pa.Table) -> pa.Array:
        """The record keys of stored rows: the meta column, or computed (virtual keys)."""
        if self.meta_fields:
            return data.column(RECORD_KEY).combine_chunks()
        config = self.table.config
        fields = config.record_key_fields
        complex_keys = (
            len(fields) > 1 or config.get(P.KEY_GENERATOR_CLASS, "").strip() == P.COMPLEX_KEY_GENERATOR
        )
        return record_key_array(data, fields, complex_keys)

    def _with_computed_columns(
        self, data: pa.Table, file_slice: FileSlice, instant: str, file_name: str
    ) -> pa.Table:
        if not self.meta_fields:
            data = self._with_virtual_meta_columns(data, file_slice, instant, file_name)
        if self._dropped_partition_columns:
            data = self._with_partition_columns(data, file_slice)
        return data

    def _with_virtual_meta_columns(
        self, data: pa.Table, file_slice: FileSlice, instant: str, file_name: str
    ) -> pa.Table:
        """Meta columns of a table written without them, computed as a read returns them: the
        instant and file the row was read from, its partition path and its record key."""
        rows = data.num_rows
        constant = {COMMIT_TIME: instant, PARTITION_PATH: file_slice.partition_path, FILE_NAME: file_name}
        out: dict[str, Any] = {
            name: pa.repeat(pa.scalar(value, pa.string()), rows) for name, value in constant.items()
        }
        if all(f in data.column_names for f in self.table.config.record_key_fields):
            out[RECORD_KEY] = self._keys(data)
        stored = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
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
            arrow_type = self._types.get(column, pa.string())
            value = file_slice.partition_values[column]
            data = data.append_column(column, pa.array([value] * data.num_rows, arrow_type))
        return data

    def check_columns(self, columns: Sequence[str] | None) -> None:
        """A projection names existing columns, each once (``InvalidColumnsError``)."""
        if columns is None:
            return
        if isinstance(columns, str):
            raise InvalidColumnsError(f"columns must be a list of names, not the string {columns!r}")
        seen: set[str] = set()
        for column in columns:
            if column in seen:
                raise InvalidColumnsError(f"column {column!r} is asked for twice")
            seen.add(column)
            if not self._types and column not in META_COLUMNS:
                why = (
                    "nothing was written yet"
                    if self.instant is None
                    else f"the newest write ({self.instant}) records no schema fedcore can read"
                )
                raise InvalidColumnsError(f"unknown column {column!r}: {why}")
            self._check_column(column, "read")

    def read_plan(self, plan: ReadPlan, columns: Sequence[str] | None) -> Iterator[pa.Table]:
        """The rows of each slice of ``plan``, in its order, read in parallel."""
        pool = _read_pool()
        reads = [pool.submit(self.read_slice, s, columns, plan.row_filters) for s in plan.slices]
        try:
            for read in reads:
                yield read.result()
        finally:  # a consumer that stops early (a limit) leaves no read queued
            for read in reads:
                read.cancel()

    def column_names(self) -> list[str]:
        """Every column a read returns, meta columns first."""
        if not self._types:
            return []
        return [*(META_COLUMNS if self.meta_fields else VIRTUAL_META_COLUMNS), *self._types]

    def empty(self, columns: Sequence[str] | None) -> pa.Table:
        """No rows, with the schema a read of ``columns`` returns: the newest base file's, else
        the newest commit's or the table's creation schema (a table nothing was written to)."""
        schema = self.table.schema(self._timeline, as_of=self.as_of)
        if schema is None:
            return pa.table({})
        meta = META_COLUMNS if self.meta_fields else VIRTUAL_META_COLUMNS
        full = pa.schema([pa.field(name, pa.string()) for name in meta] + list(schema))
        empty = full.empty_table()
        return empty.select(list(columns)) if columns is not None else empty
