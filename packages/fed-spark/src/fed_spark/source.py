"""The ``fed`` Spark data source: ``spark.read.format("fed").load(TABLE_PATH)`` and SQL tables.

Reads are planned once, on the driver, by fedcore: the partitions the pushed filters
allow are looked up in the metadata table (never listed in storage), and the latest
committed slice of each file group there becomes part of a Spark input partition. The
plan (slices, schema and what reading a slice needs) is pickled to the Python workers,
which read their slices with Arrow and hand Spark record batches.

What the data source is told by the session (storage options, parallelism, split size)
is bound to it by ``fed_spark.register``, which registers a subclass carrying them: a
Python data source is instantiated in Spark's worker processes and sees only its options.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, Filter
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from fed_spark.errors import one_line_errors
from fed_spark.filters import pruning_filters
from fed_spark.input_partitions import FedPartition, pack
from fed_spark.options import (
    PATH,
    START_OFFSET,
    STORAGE_PREFIX,
    ReadOptions,
    SessionSettings,
    StreamReadOptions,
    StreamWriteOptions,
    WriteOptions,
)
from fed_spark.stream import FailedStreamReader, FedStreamReader, FedStreamWriter, query_id
from fed_spark.write import FedWriter, arrow_schema, open_for_write, operation_of
from fedcore import Table, load_table
from fedcore.engine import DataScan, ScanPlan
from fedcore.exceptions import FedError, SchemaMismatchError

#: Where a SQL table's read options are kept: its first column's metadata in the catalog.
_OPTIONS_KEY = "fed.options"


@one_line_errors
class FedDataSource(DataSource):
    """``format("fed")``: a federated (or any Hudi copy-on-write / merge-on-read) table."""

    settings: ClassVar[SessionSettings] = SessionSettings()

    @classmethod
    def name(cls) -> str:
        return "fed"

    def _open(self, schema: StructType | None = None, ignored: str = "") -> tuple[Table, ReadOptions]:
        options = {k: v for k, v in self.options.items() if k.lower() != ignored.lower()}
        if schema is not None and PATH not in {k.lower() for k in options}:
            # A SQL table's reads get no options (Spark passes only the query's): its options
            # were recorded in the schema Spark stored in its catalog when it was created.
            options = _recorded(schema)
        read = ReadOptions.of(options)
        return load_table(read.path, storage_options=self.settings.storage(read.storage)), read

    def schema(self) -> StructType:
        # A streaming read's start is checked by streamReader; the schema is the table's.
        table, read = self._open(ignored=START_OFFSET)
        out = spark_schema(_scan(table, read).schema())
        if out.fields:
            out.fields[0].metadata = {**out.fields[0].metadata, _OPTIONS_KEY: json.dumps(read.given)}
        return out

    def reader(self, schema: StructType) -> FedReader:
        table, read = self._open(schema)
        scan = _scan(table, read)
        table_schema = scan.schema()
        own = spark_schema(table_schema)
        if not _recorded(schema) and _shape(schema) != _shape(own):
            raise SchemaMismatchError(
                f"table {table.name} has schema {own.simpleString()}, not {schema.simpleString()}: "
                "a fed read returns the table's own schema, so do not pass one"
            )
        # A SQL table reads in the schema its catalog entry has (as Spark's own tables do: a
        # column added since shows after the table is created again); others in the table's.
        return FedReader(scan, table_schema, to_arrow_schema(schema, timezone="UTC"), self.settings)

    def writer(self, schema: StructType, overwrite: bool) -> FedWriter:
        options = dict(self.options)
        from_sql = PATH not in {k.lower() for k in options}
        if from_sql:
            # A SQL INSERT into a catalog table: no options, but the table's schema, with the
            # options recorded when the table was created (its path and storage options).
            recorded = _recorded(schema)
            options = {k: v for k, v in recorded.items() if k == PATH or k.startswith(STORAGE_PREFIX)}
        write = WriteOptions.of(options)
        rows = arrow_schema(schema)
        table = open_for_write(write, self.settings, rows)
        return FedWriter(table, operation_of(write, overwrite, from_sql), rows)

    def streamWriter(self, schema: StructType, overwrite: bool) -> FedStreamWriter:
        """``writeStream.format("fed")``: each micro-batch one instant, exactly once
        (``fed_spark.stream``); Complete output mode replaces the table every batch."""
        stream = StreamWriteOptions.of(dict(self.options))
        rows = arrow_schema(schema)
        table = open_for_write(stream.write, self.settings, rows)
        operation = operation_of(stream.write, overwrite, from_sql=False)
        return FedStreamWriter(table, operation, rows, query_id(stream, self.settings))

    def streamReader(self, schema: StructType) -> FedStreamReader | FailedStreamReader:
        """``readStream.format("fed")``: micro-batches of what each completed instant wrote."""
        try:
            stream = StreamReadOptions.of(dict(self.options))
            table = load_table(stream.path, storage_options=self.settings.storage(stream.storage))
        except FedError as error:
            # PySpark 4.3's streaming source runner loses an error raised here (its cleanup
            # stops a reader it never got, and reports that): the reader's first call raises it.
            return FailedStreamReader(error)
        return FedStreamReader(table, stream, to_arrow_schema(schema, timezone="UTC"), self.settings)


def _scan(table: Table, read: ReadOptions) -> DataScan:
    scan = table.scan(as_of=read.as_of, query_type=read.query_type)
    return scan if read.changed_after is None else scan.update(changed_after=read.changed_after)


def _recorded(schema: StructType) -> dict[str, str]:
    """The options a SQL table was created with, as ``schema()`` recorded them in the schema
    Spark keeps in its catalog (empty for a schema from anywhere else)."""
    if not schema.fields or _OPTIONS_KEY not in schema.fields[0].metadata:
        return {}
    return dict(json.loads(schema.fields[0].metadata[_OPTIONS_KEY]))


def _shape(schema: StructType) -> list[tuple[str, Any]]:
    return [(f.name, f.dataType) for f in schema.fields]


@one_line_errors
class FedReader(DataSourceReader):
    def __init__(
        self, scan: DataScan, table_schema: pa.Schema, arrow_schema: pa.Schema, settings: SessionSettings
    ) -> None:
        self.scan: DataScan | None = scan
        self.table_schema = table_schema
        self.arrow_schema = arrow_schema
        self.settings = settings
        self.pruning: list[Any] = []
        self.plan: ScanPlan | None = None

    def pushFilters(self, filters: list[Filter]) -> Sequence[Filter]:
        """Filters prune partitions and skip files (``fed_spark.filters``); Spark still
        applies every filter."""
        self.pruning = pruning_filters(filters, self.table_schema)
        return filters

    def partitions(self) -> list[FedPartition]:
        plan = self._plan()
        # Never none: Spark reads a source that plans none through a partition of its own.
        return [FedPartition(group) for group in pack(plan.slices, self.settings)] or [FedPartition([])]

    def _plan(self) -> ScanPlan:
        if self.plan is None:
            assert self.scan is not None
            self.plan = self.scan.update(filters=tuple(self.pruning)).plan()
            self.scan = None  # the tasks need the plan only
        return self.plan

    def read(self, partition: FedPartition) -> Iterator[pa.RecordBatch]:
        plan = self._plan()
        for file_slice in partition.slices:
            rows = plan.read(file_slice)
            yield from rows.cast(self.arrow_schema).to_batches()


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of a table's Arrow schema (Spark timestamps are microseconds)."""
    fields = [
        field.with_type(pa.timestamp("us", field.type.tz)) if pa.types.is_timestamp(field.type) else field
        for field in schema
    ]
    return from_arrow_schema(pa.schema(fields), prefer_timestamp_ntz=True)
