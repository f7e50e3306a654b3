"""``fed_spark.write(df, path, ...)`` (every operation distributed, upserts and deletes too)
and ``fed_spark.read(spark, path, ...)`` (Spark's own Parquet reader over a planned file list).

Writes: ``format("fed")`` cannot have Spark shuffle its input, so its upserts and deletes
run in one process. ``write`` builds the job from the DataFrame instead: the driver (the
caller's process, which keeps the instant's heartbeat) begins the instant; ``bulk_insert``,
``insert`` and the overwrites have each task write its rows as new file groups; upserts
and deletes are routed to file groups and shuffled by them (``fed_spark.upsert``); the
driver commits the tasks' stats (files of failed or duplicate attempts deleted first) or
rolls back.

Reads: ``format("fed")`` decodes rows in Python workers and hands them to the JVM, which
works for any filesystem fsspec reaches but costs a copy per row and reads every column.
Where the JVM has a filesystem for the storage's scheme (``file:``; ``s3a:`` with
``hadoop-aws`` on the classpath), ``read`` plans the pruned file list with fedcore on the
driver and gives it to ``spark.read.parquet``: no listing (an explicit file list is not
listed), Spark's column pruning and row-group skipping, the same rows. It falls back to the
Python source where that is not exact: merge-on-read slices with log files (a
read-optimized query of a merge-on-read table reads its base files natively), tables
without meta fields or with partition columns left out of the files.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Literal

import pyarrow as pa
from pyspark.sql import DataFrame

from fed_spark.errors import one_line
from fed_spark.filters import exact
from fed_spark.options import AS_OF_INSTANT, QUERY_TYPE, WriteOptions
from fed_spark.session import AnySession, registered
from fed_spark.source import spark_schema
from fed_spark.upsert import rewrite_by_file_group
from fed_spark.write import (
    DISTRIBUTED,
    STATS_SCHEMA,
    arrow_schema,
    open_for_write,
    operation_of,
    stat_batch,
    stats_from,
    task_ids,
)
from fedcore import load_table
from fedcore.engine import META_COLUMNS, DataScan, Filter, QueryType, WriteJob, WriteResult, parse_where
from fedcore.exceptions import InvalidFilterError, UnsupportedTableError

ScanWay = Literal["auto", "native", "python"]
#: Storage schemes and the scheme the JVM reads them with (hadoop-aws's S3A for S3).
_JVM_SCHEMES = {"file": "file", "s3": "s3a"}


def read(
    spark: AnySession,
    path: str,
    where: str | None = None,
    *,
    as_of: str | None = None,
    query_type: QueryType = "snapshot",
    scan: ScanWay = "auto",
) -> DataFrame:
    """The table at ``path`` as a DataFrame, ``where`` (Spark SQL) applied.

    Args:
        where: a filter; its conjuncts on partition columns (``=``, ``IN``, comparisons,
            ``IS [NOT] NULL`` joined by ``AND``) prune partitions before any file is planned,
            and Spark applies the whole of it to the rows.
        as_of: time travel to an instant.
        query_type: ``snapshot``, or ``read_optimized`` (a merge-on-read table's base files
            alone, read natively as a copy-on-write table's are).
        scan: ``native`` (Spark's Parquet reader over the planned files), ``python`` (the
            ``fed`` source), or ``auto``: native when it is exact and the JVM can read the
            storage's scheme.
    """
    if scan not in ("auto", "native", "python"):
        raise ValueError(f"scan must be 'auto', 'native' or 'python', not {scan!r}")
    table = load_table(path, storage_options=registered(spark).storage_options)
    found = table.scan(as_of=as_of, query_type=query_type)
    found = found.update(filters=tuple(_pruning(where, found.schema())))
    frame = None
    if scan != "python":
        try:
            frame = _native_scan(spark, found)
        except UnsupportedTableError:
            if scan == "native":
                raise
    if frame is None:
        reader = spark.read.format("fed").option(QUERY_TYPE, query_type)  # the same storage options
        frame = reader.options(**({AS_OF_INSTANT: as_of} if as_of else {})).load(path)
    return frame.where(where) if where else frame


def _pruning(where: str | None, schema: pa.Schema) -> list[Filter]:
    """The conjuncts fedcore can prune and skip files with, on columns that compare as in
    Spark (``fed_spark.filters.exact``); an expression it cannot read prunes nothing (Spark
    still applies it to every row)."""
    if not where:
        return []
    try:
        return exact(parse_where(where), schema)
    except InvalidFilterError:
        return []


def _native_scan(spark: AnySession, found: DataScan) -> DataFrame:
    """Spark's Parquet reader over the scan's files, where it returns exactly the rows
    fedcore does (``DataScan.parquet_files``) and Hadoop, as Spark's readers use it, has a
    filesystem for their scheme; else ``UnsupportedTableError`` says why.

    Whether it has one is asked of Spark itself: the frame is analysed here (which a classic
    session does as it is made, and a Spark Connect client on asking its schema), and Spark
    resolves the files' filesystem as it analyses a file source. Nothing of the JVM is
    touched from Python, so a Spark Connect client takes the same way."""
    schema = spark_schema(found.schema())
    files = []
    for uri in found.parquet_files():
        scheme, _, rest = uri.partition("://")
        jvm = _JVM_SCHEMES.get(scheme)
        if jvm is None:
            raise UnsupportedTableError(f"a native scan of table {found.table.name} cannot read {scheme}://")
        files.append(f"{jvm}://{rest}")
    if not files:
        return spark.createDataFrame([], schema)
    try:
        frame = spark.read.schema(schema).parquet(*files)
        frame.schema  # noqa: B018 - analysed now, so a missing filesystem is told here
    except Exception as error:
        if not any(sign in str(error) for sign in _NO_FILESYSTEM):
            raise
        scheme = files[0].partition("://")[0]
        raise UnsupportedTableError(
            f"a native scan of table {found.table.name} is not possible: the JVM has no filesystem "
            f"for {scheme}:// (add hadoop-aws for s3a)"
        ) from None
    return frame


#: How Hadoop says it has no filesystem for a scheme (or not the class configured for it).
_NO_FILESYSTEM = ("No FileSystem for scheme", "UnsupportedFileSystemException", "S3AFileSystem not found")


def write(
    df: DataFrame,
    path: str,
    options: Mapping[str, str] | None = None,
    mode: Literal["append", "overwrite"] = "append",
) -> WriteResult:
    """Write ``df`` to the table at ``path`` as one instant, in Spark tasks (storage options:
    those ``fed_spark.register`` was given).

    Args:
        df: the rows (for ``delete``, the record key and partition columns are enough).
        path: the table path; created from ``options`` (Hudi's keys, as ``format("fed")``
            takes them) when there is no table yet.
        options: ``hoodie.*`` keys; ``hoodie.datasource.write.operation`` defaults to upsert.
        mode: ``append``, or ``overwrite`` (replace every file group of the table).

    Returns:
        What was committed (``fedcore.WriteResult``).
    """
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', not {mode!r}")
    spark = df.sparkSession
    given = WriteOptions.of({**(options or {}), "path": path})
    rows = arrow_schema(df.schema)
    table = open_for_write(given, registered(spark), rows)
    operation = operation_of(given, mode == "overwrite", from_sql=False)
    data = df.drop(*[c for c in META_COLUMNS if c in df.columns])
    job = WriteJob.open(table, operation, rows)

    def begin() -> None:
        job.begin()
        job.inflight()  # its tasks decide the file groups

    with job:
        if operation in DISTRIBUTED:
            _check_key_values(data, job, rows)
            begin()

            @one_line
            def new_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                task, attempt = task_ids()
                found = [b for b in batches if b.num_rows]
                yield stat_batch(job.write_new(pa.Table.from_batches(found), task, attempt) if found else [])

            stats = stats_from(data.mapInArrow(new_groups, STATS_SCHEMA).collect())
        else:
            # ``data`` reads the caller's cache when ``df`` is cached: its rows stay put
            level = df.storageLevel
            stats = rewrite_by_file_group(spark, data, job, begin, cached=level.useMemory or level.useDisk)
        return job.commit(stats, distributed=True)


def _check_key_values(data: DataFrame, job: WriteJob, rows: pa.Schema) -> None:
    """Where the rows' key or partition columns are of another type than the table's (a
    double key Spark read from a CSV, say), a Spark job conforms the rows first, so values
    that do not convert exactly are refused before the write begins; rows of the table's
    types need no such pass."""
    schema = job.schema if job.table_schema is not None else None
    config = job.table.config
    keys = [*config.record_key_fields, *config.partition_fields]
    if schema is None or all(
        c not in rows.names or c not in schema.names or rows.field(c).type == schema.field(c).type
        for c in keys
    ):
        return

    @one_line
    def conformed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            job.conform(pa.Table.from_batches([batch]))
        yield from ()

    data.mapInArrow(conformed, "x int").collect()
