"""Snapshot reads: prune partitions, take the latest committed slice of each file group, read.

The files come from the table's file index (the metadata table), never from
globbing storage, so a read touches only the partitions its filters allow and
never sees an uncommitted, rolled-back, replaced or cleaned file. Engines use
``file_slices`` and read the physical paths themselves.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from fedcore import properties as P
from fedcore.avro_schema import field_types
from fedcore.exceptions import (
    InvalidColumnsError,
    InvalidFilterError,
    InvalidInstantError,
    InvalidPartitionValueError,
    UnsupportedTableError,
)
from fedcore.filters import UNARY, Filter, may_match, row_expression, typed
from fedcore.io.filesystems import open_sized
from fedcore.io.parquet import read_parquet
from fedcore.records import META_COLUMNS, with_meta_fields
from fedcore.retention import check_not_archived
from fedcore.timeline import WRITE_ACTIONS, parse_instant_time

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

FilterSpec = Filter | Sequence[Any]
_READ_THREADS = 8


@dataclass(frozen=True)
class FileSlice:
    """The version of one file group a read uses: what an engine reads.

    Attributes:
        partition_path: the partition (``country=usa``; ``""`` when not partitioned).
        file_id: the file group.
        base_instant: the instant that wrote this version.
        base_file_name: the base file's name; its physical location comes from
            ``table.fs.to_physical(slice.path)``.
        size: bytes, from the metadata table (no request needed to learn it).
        partition_values: the partition columns' values, typed.
    """

    partition_path: str
    file_id: str
    base_instant: str
    base_file_name: str
    size: int
    partition_values: dict[str, Any]

    @property
    def path(self) -> str:
        """Logical path, relative to the table."""
        return f"{self.partition_path}/{self.base_file_name}" if self.partition_path else self.base_file_name


@dataclass
class ReadPlan:
    slices: list[FileSlice]
    row_filters: list[Filter]
    partitions_total: int | None  # partitions considered; None when pinned without a listing


class Reader:
    def __init__(self, table: TableHandle, as_of: str | None = None) -> None:
        self.table = table
        self.as_of = as_of
        if as_of is not None:
            parse_instant_time(as_of)
            check_not_archived(table.fs.table_fs, table.path, as_of)
        timeline = table.timeline()  # listed once: it gives both the snapshot and its schema
        timeline.check_readable(table.name)
        writes = timeline.completed(WRITE_ACTIONS, as_of=as_of)
        if as_of is not None and not writes:
            raise InvalidInstantError(f"no write had completed as of {as_of}")
        self.instant = writes[-1].time if writes else None
        self._types = field_types(table.commit_metadata(writes[-1]).schema) if writes else {}
        self._index = table.file_index_at(timeline)
        self._timeline = timeline
        #: False for tables written with hoodie.populate.meta.fields=false: their files hold the
        #: meta columns empty, so reads leave them out (as hudi-rs does) and refuse to filter on them.
        self.meta_fields = P.POPULATE_META_FIELDS.of(table.config)
        self._dropped_partition_columns = P.DROP_PARTITION_COLUMNS.of(table.config)

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
        slices = []
        for partition, partition_files in files.items():
            values = self._partition_values(partition)
            if not may_match(values, partition_filters):
                continue
            for file_id, (instant, name) in sorted(partition_files.latest_slices(self.as_of).items()):
                slices.append(
                    FileSlice(partition, file_id, instant, name, partition_files.files[name], values or {})
                )
        return ReadPlan(slices, parsed, total)

    def _check_column(self, column: str, use: str) -> None:
        if column in META_COLUMNS:
            if not self.meta_fields:
                raise InvalidColumnsError(
                    f"cannot {use} {column!r}: table {self.table.name} was written with "
                    f"{P.POPULATE_META_FIELDS}=false, so its files hold no meta columns"
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
        wanted = None
        fields = self.table.partition_scheme.fields
        if columns is not None:
            wanted = list(dict.fromkeys([*columns, *(f.column for f in row_filters)]))
            if self._dropped_partition_columns:
                wanted = [c for c in wanted if c not in fields]
        fs = self.table.fs
        with fs.errors(file_slice.path), open_sized(fs, file_slice.path, file_slice.size) as handle:
            data = read_parquet(handle, wanted)
        if not self.meta_fields:
            data = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
        if self._dropped_partition_columns:
            data = self._with_partition_columns(data, file_slice)
        expression = row_expression(row_filters)
        if expression is not None:
            data = data.filter(expression)
        return data.select(list(columns)) if columns is not None else data

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
                raise InvalidColumnsError(f"unknown column {column!r}: nothing was written yet")
            self._check_column(column, "read")

    def read_plan(self, plan: ReadPlan, columns: Sequence[str] | None) -> Iterator[pa.Table]:
        """The rows of each slice of ``plan``, in its order, read in parallel."""
        with ThreadPoolExecutor(_READ_THREADS) as pool:
            yield from pool.map(lambda s: self.read_slice(s, columns, plan.row_filters), plan.slices)

    def column_names(self) -> list[str]:
        """Every column a read returns, meta columns first."""
        if not self._types:
            return []
        return [*META_COLUMNS, *self._types] if self.meta_fields else list(self._types)

    def empty(self, columns: Sequence[str] | None) -> pa.Table:
        """No rows, with the schema a read of ``columns`` returns (the newest base file's)."""
        schema = self.table.schema(self._timeline)
        full = with_meta_fields(schema) if self.meta_fields and schema is not None else schema
        if full is None:
            return pa.table({})
        empty = full.empty_table()
        return empty.select(list(columns)) if columns is not None else empty
