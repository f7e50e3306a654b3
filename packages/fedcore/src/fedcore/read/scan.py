"""``table.scan(...)``: an immutable description of a read, planned and read on demand.

A scan holds what to read (filters, columns, an instant, a row limit, whether to
include Hudi's meta columns) and, once first planned, the snapshot it reads: its first
call lists the timeline (the latest snapshot, or the one as of ``as_of``), and every later
call of the scan, and of the scans ``update`` derives from it with the same table, instant
and query type, reads that snapshot, as a PyIceberg scan reads the snapshot it was bound
to. So an engine's schema and its plan agree even when a commit lands in between; a new
``table.scan()`` sees the commit. ``plan_files()`` is what an engine calls: the latest committed file
slice of every file group the partition filters keep, found through the metadata
table, never by listing. The ``to_*`` methods read those slices with Arrow and
hand the rows over to the library a user works in; pandas, polars and duckdb are
optional extras, each fed from Arrow.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from fedcore.exceptions import InvalidColumnsError, MissingDependencyError, UnsupportedTableError
from fedcore.files.file_slice import FileSlice, QueryType
from fedcore.io.filesystems import open_sized
from fedcore.io.parquet import read_parquet_metadata
from fedcore.read.filters import Filter, FilterSpec, parse_where
from fedcore.read.planner import ScanPlan, ScanPlanner
from fedcore.schema.evolution import conform_to, widens
from fedcore.schema.meta import META_COLUMNS

if TYPE_CHECKING:
    from fedcore.handle import TableHandle


@dataclass(frozen=True)
class DataScan:
    """A read of ``table``: build it with ``Table.scan``, refine it with ``update``.

    Args:
        table: the table to read.
        filters: ``(column, op, value)`` triples (or ``Filter``), joined by AND.
            Filters on partition columns prune partitions before any file is
            opened; every filter is applied to the rows.
        columns: the columns to return, in order; None for all.
        as_of: an instant time (``yyyyMMddHHmmssSSS``): the table as it was then.
        limit: at most this many rows; None for all.
        with_meta_fields: include Hudi's ``_hoodie_*`` columns (as Hudi's own
            readers do); False returns the data columns only.
        query_type: ``"snapshot"`` (log files merged onto base files on merge-on-read
            tables) or ``"read_optimized"`` (base files only: faster, as of the last
            compaction); Hudi's ``hoodie.datasource.query.type``.
        changed_after: an incremental query (``Table.changes``): the latest version, as of
            ``as_of``, of every record that instants after this one wrote.
    """

    table: TableHandle
    filters: tuple[Filter, ...] = ()
    columns: tuple[str, ...] | None = None
    as_of: str | None = None
    limit: int | None = None
    with_meta_fields: bool = True
    query_type: QueryType = "snapshot"
    changed_after: str | None = None
    #: The snapshot, once planned (see the module docstring); not part of what the scan is.
    _snapshot: ScanPlanner | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 0):
            raise InvalidColumnsError(f"limit must be a non-negative whole number, not {self.limit!r}")
        if self.columns is not None and not self.with_meta_fields:
            meta = [c for c in self.columns if c in META_COLUMNS]
            if meta:
                raise InvalidColumnsError(f"{meta[0]!r} is a meta column, and with_meta_fields is False")

    @classmethod
    def of(
        cls,
        table: TableHandle,
        filters: Sequence[FilterSpec] | str | None = (),
        columns: Sequence[str] | None = None,
        as_of: str | None = None,
        limit: int | None = None,
        with_meta_fields: bool = True,
        query_type: QueryType = "snapshot",
        changed_after: str | None = None,
    ) -> DataScan:
        if filters is None:
            filters = ()
        elif isinstance(filters, str):  # the CLI's --where: "a = 'x' AND b IN (1, 2)"
            filters = parse_where(filters)
        if isinstance(columns, str):
            raise InvalidColumnsError(f"columns must be a list of names, not the string {columns!r}")
        return cls(
            table,
            tuple(Filter.of(f) for f in filters),
            None if columns is None else tuple(columns),
            as_of,
            limit,
            with_meta_fields,
            query_type,
            changed_after,
        )

    def update(self, **changes: Any) -> DataScan:
        """A new scan with some of its settings changed (``filters``, ``columns``, ...); it
        reads this scan's snapshot unless the table, instant or query type changed."""
        settings = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "_snapshot"}
        settings.update(changes)
        scan = DataScan.of(**settings)
        same = all(getattr(scan, name) == getattr(self, name) for name in _SNAPSHOT_SETTINGS)
        if same and self._snapshot is not None:
            object.__setattr__(scan, "_snapshot", self._snapshot)
        return scan

    # --- planning ------------------------------------------------------------------------

    def _planner(self) -> ScanPlanner:
        if self._snapshot is not None:
            return self._snapshot
        planner = ScanPlanner.open(self.table, self.as_of, self.query_type, self.changed_after)
        if self.changed_after is not None and not planner.meta_fields:
            raise UnsupportedTableError(
                f"table {self.table.name} was written without meta fields: its records carry no "
                "commit time, so an incremental query cannot tell which changed"
            )
        object.__setattr__(self, "_snapshot", planner)  # frozen: the snapshot is a cache
        return planner

    def _plan(self, planner: ScanPlanner) -> ScanPlan:
        """The slices and row filters to read. An incremental query reads the snapshot as of
        its end, where every record's latest version carries the instant that wrote it: the
        rows the window's instants wrote are exactly those (``planner.Changes``), in the file
        groups whose slice began in it (or that have log files). Nothing it needs is archived
        or cleaned while the snapshot itself is readable."""
        columns = self._columns(planner)
        changes = planner.changes
        if changes is None:
            return planner.plan(self.filters, columns)
        kept = changes.row_filter()
        plan = planner.plan([*self.filters, *([kept] if kept is not None else [])], columns)
        slices = [s for s in plan.slices if kept is not None and changes.keeps(s)]
        return dataclasses.replace(plan, slices=slices)

    def _columns(self, planner: ScanPlanner) -> list[str] | None:
        if self.columns is not None:
            return list(self.columns)
        if self.with_meta_fields:
            return None
        return [name for name in planner.column_names() if name not in META_COLUMNS]

    def plan_files(self) -> list[FileSlice]:
        """The file slices this scan reads: one per file group the partition filters keep."""
        return self._plan(self._planner()).slices

    def schema(self) -> pa.Schema:
        """The schema of the rows this scan returns (the newest base file's, as of ``as_of``)."""
        planner = self._planner()
        return planner.schema(planner.check_columns(self._columns(planner)))

    def plan(self) -> ScanPlan:
        """The scan planned once, with the schema of its rows, for an engine whose tasks read
        its slices (see ``ScanPlan``)."""
        planner = self._planner()
        plan = self._plan(planner)
        return dataclasses.replace(plan, schema=planner.schema(plan.columns))

    def parquet_files(self) -> list[str]:
        """The physical paths of the files this scan reads, for an engine whose own Parquet
        reader reads them with this scan's schema (and applies the filters and the limit
        itself).

        Only where such a reader returns exactly this scan's rows: every column is stored in
        the files (none computed on read: meta fields populated, partition columns kept), no
        slice has log files to merge, and the scan is not incremental. Otherwise
        ``UnsupportedTableError`` says why."""
        planner = self._planner()
        why = ""
        if self.changed_after is not None:
            why = "an incremental query keeps only the records written after an instant"
        elif planner.reader.computed:
            why = f"its files do not hold {', '.join(sorted(planner.reader.computed))} (computed on read)"
        slices = [] if why else self.plan_files()
        if any(s.log_files for s in slices):
            why = "merge-on-read slices have log files to merge"
        if why:
            raise UnsupportedTableError(f"a Parquet read of table {self.table.name} is not exact: {why}")
        return [self.table.fs.to_physical(s.path) for s in slices]

    # --- reading -------------------------------------------------------------------------

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        """The rows as a stream of record batches, one file slice at a time.

        The stream's schema is that of the newest file slice the scan reads, which is read
        first: as in Hudi, rows of files written before a column was added get nulls there."""
        planner = self._planner()
        plan = self._plan(planner)
        plan = dataclasses.replace(
            plan, slices=sorted(plan.slices, key=lambda s: s.base_instant, reverse=True)
        )
        tables = plan.read_all()
        first = next(tables, None) if self.limit != 0 else None
        if first is None:
            return pa.RecordBatchReader.from_batches(planner.schema(plan.columns), iter(()))
        schema = _with_newer_columns(first.schema, plan.reader.types, plan.columns)
        return pa.RecordBatchReader.from_batches(
            schema, self._batches(itertools.chain([first], tables), schema)
        )

    def _batches(self, tables: Iterator[pa.Table], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        remaining = self.limit
        for table in tables:
            if remaining is not None and table.num_rows >= remaining:
                table = table.slice(0, remaining)
            yield from conform_to(table, schema).to_batches()
            if remaining is not None:
                remaining -= table.num_rows
                if remaining <= 0:
                    return

    def to_arrow(self) -> pa.Table:
        """All the rows as one ``pyarrow.Table``."""
        return self.to_arrow_batch_reader().read_all()

    def count(self) -> int:
        """How many rows the scan returns. Without row filters and log files to merge, from
        file footers alone."""
        planner = self._planner()
        plan = self._plan(planner)
        total = 0
        if plan.row_filters or any(s.log_files for s in plan.slices):
            columns = list(dict.fromkeys(f.column for f in plan.row_filters)) or planner.column_names()[:1]
            total = sum(int(t.num_rows) for t in dataclasses.replace(plan, columns=columns).read_all())
        else:
            fs = self.table.fs
            for file_slice in plan.slices:
                with fs.errors(file_slice.path), open_sized(fs, file_slice.path, file_slice.size) as handle:
                    total += int(read_parquet_metadata(handle).num_rows)
        return total if self.limit is None else min(total, self.limit)

    def to_pandas(self, **kwargs: Any) -> Any:
        """The rows as a ``pandas.DataFrame`` (needs ``fedcore[pandas]``); ``kwargs`` go to
        ``pyarrow.Table.to_pandas``."""
        _require("pandas")
        return self.to_arrow().to_pandas(**kwargs)

    def to_polars(self) -> Any:
        """The rows as a ``polars.DataFrame`` (needs ``fedcore[polars]``)."""
        polars = _require("polars")
        return polars.from_arrow(self.to_arrow())

    def to_duckdb(self, table_name: str, connection: Any = None) -> Any:
        """The rows registered as ``table_name`` in a DuckDB connection (a new in-memory one
        unless given); returns the connection (needs ``fedcore[duckdb]``)."""
        duckdb = _require("duckdb")
        con = connection if connection is not None else duckdb.connect()
        con.register(table_name, self.to_arrow())
        return con

    def __repr__(self) -> str:
        parts = [f"table={self.table.name!r}"]
        if self.filters:
            parts.append(f"filters={[(f.column, f.op, f.value) for f in self.filters]!r}")
        if self.columns is not None:
            parts.append(f"columns={list(self.columns)!r}")
        if self.as_of is not None:
            parts.append(f"as_of={self.as_of!r}")
        if self.limit is not None:
            parts.append(f"limit={self.limit}")
        if not self.with_meta_fields:
            parts.append("with_meta_fields=False")
        if self.query_type != "snapshot":
            parts.append(f"query_type={self.query_type!r}")
        if self.changed_after is not None:
            parts.append(f"changed_after={self.changed_after!r}")
        return f"DataScan({', '.join(parts)})"


#: What a snapshot depends on: a scan that keeps them reads the same one.
_SNAPSHOT_SETTINGS = ("table", "as_of", "query_type", "changed_after")


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(f"this needs {module}: pip install 'fedcore[{module}]' ({exc})") from exc


def _with_newer_columns(
    schema: pa.Schema, types: Mapping[str, pa.DataType], columns: Sequence[str] | None
) -> pa.Schema:
    """The newest slice's schema, with what the newest commit's schema (``types``) has beyond
    it: a merge-on-read table's log files may hold columns added, or types widened, since its
    newest base file was written."""
    fields = []
    for field in schema:
        newer = types.get(field.name)
        widened = newer is not None and widens(field.type, newer)  # as the write that widened it
        fields.append(field.with_type(newer) if widened else field)
    wanted = types if columns is None else [c for c in columns if c in types]
    fields.extend(pa.field(name, types[name]) for name in wanted if name not in schema.names)
    return pa.schema(fields, metadata=schema.metadata)
