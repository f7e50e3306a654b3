"""Planning: a snapshot's metadata in, the file slices a read needs out (partitions pruned by
the filters, file slices skipped by their column statistics), never by listing storage.

``ScanPlanner.open`` lists the timeline once and learns the snapshot (the instant read, its
schema, how log records merge); ``plan`` looks the partitions up in the file index (the
metadata table) and returns a ``ScanPlan``: the slices, the filters still to apply to their
rows, and the ``SliceReader`` (``slice_reader``) that reads them, here or in an engine's tasks.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from fedcore import properties as P
from fedcore.exceptions import (
    InvalidColumnsError,
    InvalidFilterError,
    InvalidInstantError,
    InvalidPartitionValueError,
    UnsupportedTableError,
)
from fedcore.files.file_group import LogSlicing
from fedcore.files.file_slice import QUERY_TYPES, VIRTUAL_META_COLUMNS, FileSlice, QueryType
from fedcore.io.parquet import ColumnStats, read_file_stats
from fedcore.log.merge import merge_rules
from fedcore.metadata import FileIndex, MetadataTable
from fedcore.read.filters import UNARY, Filter, FilterSpec, may_match, stats_may_match, typed
from fedcore.read.slice_reader import Committed, SliceReader
from fedcore.schema.avro import field_types
from fedcore.schema.evolution import conform_to
from fedcore.schema.meta import COMMIT_TIME, META_COLUMNS
from fedcore.timeline import (
    COMPACTION,
    DELTA_COMMIT,
    WRITE_ACTIONS,
    Timeline,
    parse_instant_time,
)
from fedcore.timeline.retention import check_not_archived

if TYPE_CHECKING:
    from fedcore.handle import TableHandle


@dataclass(frozen=True)
class ScanPlan:
    """A scan planned on one machine and read on one or many: the slices, the filters applied
    to their rows, the columns returned and the reader of the snapshot.

    It pickles small (never the file index or the timeline): an engine (Spark) hands it to its
    tasks, which read slices of the same snapshot whatever commits meanwhile. ``schema``: the
    rows' schema when the scan asked for it (``DataScan.plan``): every slice is returned in it
    (rows of files written before a column was added get nulls there, as in Hudi)."""

    slices: list[FileSlice]
    row_filters: tuple[Filter, ...]
    reader: SliceReader
    columns: list[str] | None
    schema: pa.Schema | None = None

    @property
    def instant(self) -> str | None:
        """The instant read (the last write completed as of the scan); None before the first."""
        return self.reader.instant

    def read(self, file_slice: FileSlice) -> pa.Table:
        """The rows of one slice: log files merged, the scan's filters and columns applied."""
        rows = self.reader.read(file_slice, self.columns, list(self.row_filters))
        return rows if self.schema is None else conform_to(rows, self.schema)

    def read_all(self) -> Iterator[pa.Table]:
        """The rows of every slice, in order, read in parallel."""
        return self.reader.read_all(self.slices, self.columns, self.row_filters)


@dataclass(frozen=True)
class Changes:
    """What an incremental query keeps of its snapshot: the records the instants after
    ``after`` wrote (each record's latest version carries the instant that wrote it).

    ``instants``: on a table whose instants are ordered by completion time (Hudi 1.x), the
    requested times of those that completed after ``after`` (a completion time) and by the
    query's end; None on one ordered by requested time, where every instant after ``after``
    counts."""

    after: str
    instants: frozenset[str] | None = None

    def row_filter(self) -> Filter | None:
        """The filter on ``_hoodie_commit_time`` that keeps those records; None: none can."""
        if self.instants is None:
            return Filter(COMMIT_TIME, ">", self.after)
        return Filter(COMMIT_TIME, "IN", sorted(self.instants)) if self.instants else None

    def keeps(self, file_slice: FileSlice) -> bool:
        """Whether a slice may hold such a record: its base file was written in the window,
        or it has log files."""
        if file_slice.log_files:
            return True
        if self.instants is None:
            return file_slice.base_instant > self.after
        return file_slice.base_instant in self.instants


def _completion_window(
    table_name: str, timeline: Timeline, actions: frozenset[str], after: str, end: str | None
) -> tuple[Changes, str | None]:
    """An incremental query on a table ordered by completion time, as Hudi 1.x answers it: the
    writes completed after ``after`` and by ``end`` (completion times; ``after`` all zeros:
    from the start), and the snapshot that holds them, as the requested time to read as of.

    That snapshot is exact only if no write requested by then completed after ``end``: one
    that did is refused (``InvalidInstantError``), never read into the answer."""
    done = timeline.completed(actions)
    start = after if after.strip("0") else ""
    inside = [i for i in done if end is None or i.completed_at <= end]
    fresh = frozenset(i.time for i in inside if i.completed_at > start)
    if end is None:
        return Changes(after, fresh), None
    if not inside:
        return Changes(after, frozenset()), "0" * 17
    as_of = max(i.time for i in inside)
    for instant in done:
        if instant.time <= as_of and instant.completed_at > end:
            raise InvalidInstantError(
                f"table {table_name}: the {instant.action} requested at {instant.time} completed at "
                f"{instant.completed_at}, after the incremental query's end {end}, though requested before "
                f"a write that completed by then: fedcore reads no state of the table that holds one "
                f"and not the other; end the query before {instant.time}'s completion or after it"
            )
    return Changes(after, fresh), as_of


def _check_settled(table_name: str, timeline: Timeline, as_of: str) -> None:
    """Refuse time travel to ``as_of`` on a Hudi 1.x table while a write requested by then is
    pending, as Hudi 1.x does: such a write may still complete and change what ``as_of`` reads
    (a time travel there selects instants by requested time; log files, by completion time)."""
    for instant in timeline.pending():
        if instant.action in WRITE_ACTIONS | {DELTA_COMMIT} and instant.time <= as_of:
            raise InvalidInstantError(
                f"table {table_name}: time travel to {as_of} is refused while the {instant.action} "
                f"requested at {instant.time} is pending (it may still complete and change what "
                f"{as_of} reads); read as of an earlier instant, or once it has completed or been rolled back"
            )


class ScanPlanner:
    """Plans reads of one snapshot of a table (the latest, or ``as_of``); made by ``open``."""

    def __init__(
        self,
        table: TableHandle,
        as_of: str | None,
        timeline: Timeline,
        index: FileIndex,
        reader: SliceReader,
        slicing: LogSlicing | None = None,
        changes: Changes | None = None,
    ) -> None:
        self.table = table
        #: An incremental query's window (``open``'s ``changed_after``); None for a snapshot.
        self.changes = changes
        #: What places log files named after their delta commits (Hudi 1.x) in their slices.
        self.slicing = slicing
        self.as_of = as_of
        self._timeline = timeline
        self._index = index
        self.reader = reader
        #: Whether log files are merged: merge-on-read snapshots only (those have merge rules).
        self.merging = reader.rules is not None
        self.instant = reader.instant
        self._types = reader.types
        self._computed = reader.computed
        self.meta_fields = reader.meta_fields

    @classmethod
    def open(
        cls,
        table: TableHandle,
        as_of: str | None = None,
        query_type: QueryType = "snapshot",
        changed_after: str | None = None,
    ) -> ScanPlanner:
        """List the timeline once (it gives both the snapshot and its schema) and learn the
        snapshot: the instant read, its schema's types, how its log records merge.

        ``changed_after``: an incremental query (``changes``) of the instants after it, up to
        ``as_of``; on a table ordered by completion time (Hudi 1.x) both are completion
        times, as there."""
        if query_type not in QUERY_TYPES:
            raise InvalidColumnsError(f"query type {query_type!r} is not one of {', '.join(QUERY_TYPES)}")
        if as_of is not None:
            parse_instant_time(as_of)
            check_not_archived(table.fs.table_fs, table.path, table.layout.instants, as_of)
        if changed_after is not None and changed_after.strip("0"):  # "000": from the start
            parse_instant_time(changed_after)
        merge_on_read = table.config.merge_on_read
        timeline = table.timeline(latest_read=as_of is None)
        timeline.check_readable(table.name, merge_on_read)
        actions = table.write_actions
        by_completion = table.layout.log_files.names_delta_commit
        changes = None if changed_after is None else Changes(changed_after)
        if changed_after is not None and by_completion:
            changes, as_of = _completion_window(table.name, timeline, actions, changed_after, as_of)
        elif as_of is not None and by_completion:
            _check_settled(table.name, timeline, as_of)
        writes = timeline.completed(actions, as_of=as_of)
        index = table.file_index_at(timeline)
        # The instant read: the last write completed as of ``as_of``; None before the first
        # (the table is then empty, with the schema it was created with).
        instant = writes[-1].time if writes else None
        if writes:
            schema_json = (
                _schema_json(table, index, writes[-1].time, as_of) or table.commit_metadata(writes[-1]).schema
            )
        else:
            schema_json = table.config.get(P.CREATE_SCHEMA)
        types = {k: v for k, v in field_types(schema_json).items() if k not in META_COLUMNS}
        committed = Committed(
            frozenset(i.time for i in timeline.completed(actions)),
            frozenset(i.time for i in timeline.pending()),
            min((i.time for i in timeline if i.action in actions or i.action == COMPACTION), default=""),
        )
        meta_fields = P.POPULATE_META_FIELDS.of(table.config)
        # Columns a read computes rather than takes from files: a file's statistics, if it has
        # any for them, say nothing of them.
        computed = frozenset(
            [
                *(table.partition_scheme.fields if P.DROP_PARTITION_COLUMNS.of(table.config) else ()),
                *(() if meta_fields else META_COLUMNS),
            ]
        )
        merging = merge_on_read and query_type == "snapshot"
        rules = merge_rules(table.name, table.config, types) if merging else None
        if changes is not None and by_completion and rules is not None and rules.payload == "ordering":
            # Hudi 1.x merges only the window's log records onto a base record here, and
            # returns the merged record even where an older-ordered base record won: rows
            # that are not the records' latest versions, nor all written in the window.
            raise UnsupportedTableError(
                f"table {table.name} merges records by event time: an incremental query of its "
                "merge-on-read slices is answered by Hudi 1.x with records written before the window "
                "where they outrank the window's, which fedcore does not reproduce; read a snapshot "
                "or time travel instead"
            )
        reader = SliceReader(table, instant, types, rules, committed, computed)
        # Hudi 1.x: a log file's slice follows from when its delta commit completed, on the
        # whole timeline: later compactions' slices too, whose base files a listing as of an
        # earlier instant lacks (``LogSlicing.compacted``).
        slicing = table.log_slicing(timeline, as_of) if merging else None
        return cls(table, as_of, timeline, index, reader, slicing, changes)

    def plan(self, filters: Sequence[FilterSpec] = (), columns: Sequence[str] | None = None) -> ScanPlan:
        """The file slices to read and the filters to apply to their rows (``columns``: what a
        read of them returns; None for every column).

        Every filter is applied to the rows. Filters on partition columns also prune
        partitions, but only where the partition path provably holds the values (see
        ``PartitionScheme.encodes_values`` and ``may_match``), so pruning can drop a file
        only when none of its rows could match."""
        checked = self.check_columns(columns)  # bad input fails before any lookup
        parsed = [self._typed(Filter.of(f)) for f in filters]
        for f in parsed:
            self._check_column(f.column, "filter on")
        fields = set(self.table.partition_scheme.fields)
        partition_filters = [f for f in parsed if f.column in fields]
        if self.instant is None:
            return ScanPlan([], tuple(parsed), self.reader, checked)
        candidates = self._candidate_partitions(partition_filters)
        files = self._index.files(candidates, as_of=self.as_of)
        skipping = [f for f in parsed if f.column not in self._computed]
        slices = []
        for partition, partition_files in files.items():
            values = self.partition_values(partition)
            if not may_match(values, partition_filters):
                continue
            sizes, stats = partition_files.files, partition_files.stats
            if self.merging:
                for file_id, found in partition_files.latest_file_slices(
                    self.table.layout.log_files, self.as_of, self.reader.committed, self.slicing, partition
                ).items():
                    base = found.base_file
                    logs = tuple((name, sizes[name]) for name in found.log_files)
                    if not logs and base is not None and not self._may_match(stats.get(base), skipping):
                        continue  # a base file alone, none of whose rows can match
                    size = sizes[base] if base is not None else 0
                    slices.append(
                        FileSlice(partition, file_id, found.base_instant, base, size, values or {}, logs)
                    )
                continue
            for file_id, (instant, name) in sorted(
                partition_files.latest_base_files(self.table.layout.log_files, self.as_of).items()
            ):
                if self._may_match(stats.get(name), skipping):
                    slices.append(FileSlice(partition, file_id, instant, name, sizes[name], values or {}))
        return ScanPlan(slices, tuple(parsed), self.reader, checked)

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

    def partition_values(self, partition: str) -> dict[str, Any] | None:
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

    def _candidate_partitions(self, filters: list[Filter]) -> list[str] | None:
        """Partitions to look up: computed when filters pin every partition column, else listed."""
        scheme = self.table.partition_scheme
        if not scheme.fields:
            return [""]
        pinned: dict[str, list[Any]] = {}
        for f in filters:
            if f.op in ("=", "IN"):
                values = f.value if f.op == "IN" else [f.value]
                pinned[f.column] = [v for v in values if v in pinned.get(f.column, values)]
        if scheme.encodes_values and set(pinned) == set(scheme.fields):
            combos = itertools.product(*(pinned[field] for field in scheme.fields))
            try:
                return sorted({scheme.path_of(combo) for combo in combos})
            except InvalidPartitionValueError:
                pass  # a value no writer could have made a path of: look at every partition
        partitions = self._index.partitions(self.as_of)
        return [p for p in partitions if may_match(self.partition_values(p), filters)]

    def check_columns(self, columns: Sequence[str] | None) -> list[str] | None:
        """A projection names existing columns, each once (``InvalidColumnsError``)."""
        if columns is None:
            return None
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
        return list(columns)

    def column_names(self) -> list[str]:
        """Every column a read returns, meta columns first."""
        if not self._types:
            return []
        return [*(META_COLUMNS if self.meta_fields else VIRTUAL_META_COLUMNS), *self._types]

    def schema(self, columns: Sequence[str] | None) -> pa.Schema:
        """The schema a read of ``columns`` returns: the newest base file's, else the newest
        commit's or the table's creation schema (a table nothing was written to)."""
        schema = self.table.schema(self._timeline, as_of=self.as_of)
        if schema is None:
            return pa.schema([])
        meta = META_COLUMNS if self.meta_fields else VIRTUAL_META_COLUMNS
        full = pa.schema([pa.field(name, pa.string()) for name in meta] + list(schema))
        return pa.schema([full.field(c) for c in columns]) if columns is not None else full


def _schema_json(table: TableHandle, index: FileIndex, write: str, as_of: str | None) -> str | None:
    """The newest write's Avro schema from the metadata table's lookup state, when that holds
    it (fetched anyway to plan, so no extra request); None: read its commit metadata."""
    if isinstance(index, MetadataTable):
        return index.write_schema(write, as_of)
    return None
