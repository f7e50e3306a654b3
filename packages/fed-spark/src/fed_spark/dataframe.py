"""``fed_spark.write(df, path, ...)`` (every operation distributed, upserts and deletes too)
and ``fed_spark.read(spark, path, ...)`` (Spark's own Parquet reader over a planned file list).

Reads: ``format("fed")`` decodes rows in Python workers and hands them to the JVM, which
works for any filesystem fsspec reaches but costs a copy per row and reads every column.
Where the JVM has a filesystem for the storage's scheme (``file:``; ``s3a:`` with
``hadoop-aws`` on the classpath), ``read`` plans the pruned file list with fedcore on the
driver and gives it to ``spark.read.parquet``: no listing (an explicit file list is not
listed), Spark's column pruning and row-group skipping, the same rows. It falls back to the
Python source where that is not exact: merge-on-read slices with log files, tables
without meta fields or with partition columns left out of the files.

``format("fed")`` cannot have Spark shuffle its input, so its upserts and deletes run in
one process. This entry point builds the job from the DataFrame instead: the driver (the
caller's process, which holds the instant's heartbeat) begins the instant; a first map
adds each row's partition path (fedcore's vectorised partitioning); Spark shuffles the rows
by partition path, so that every record of a partition reaches one task; each task looks
its partitions' keys up in their base files, routes each record to the file group holding
its key (inserts fill small file groups first, then new ones), rewrites the touched groups
only and returns their write stats; the driver commits them (files of failed or duplicate
task attempts deleted first) or rolls back. ``bulk_insert``, ``insert`` and the overwrites
skip the shuffle: each task writes its rows as new file groups.

A partition is the unit of parallelism of a lookup: a table with few, very large
partitions gets few tasks (a shuffle by file group is the next step for those).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Literal

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from fed_spark.options import WriteOptions
from fed_spark.session import registered
from fed_spark.source import spark_schema
from fed_spark.write import DISTRIBUTED, arrow_schema, open_for_write, operation_of
from fedcore import properties as P
from fedcore.commit_metadata import WriteStat
from fedcore.exceptions import InvalidFilterError, UnsupportedTableError
from fedcore.filters import Filter, parse_where
from fedcore.records import META_COLUMNS, partition_rows
from fedcore.scan import DataScan
from fedcore.table import Table, load_table
from fedcore.write_client import WriteClient
from fedcore.write_job import WriteJob, WriteResult

_PARTITION = "_fed_partition_path"
ScanWay = Literal["auto", "native", "python"]
#: Storage schemes and the scheme the JVM reads them with (hadoop-aws's S3A for S3).
_JVM_SCHEMES = {"file": "file", "s3": "s3a"}


def read(
    spark: SparkSession,
    path: str,
    where: str | None = None,
    *,
    as_of: str | None = None,
    scan: ScanWay = "auto",
) -> DataFrame:
    """The table at ``path`` as a DataFrame, ``where`` (Spark SQL) applied.

    Args:
        where: a filter; its conjuncts on partition columns (``=``, ``IN``, comparisons,
            ``IS [NOT] NULL`` joined by ``AND``) prune partitions before any file is planned,
            and Spark applies the whole of it to the rows.
        as_of: time travel to an instant.
        scan: ``native`` (Spark's Parquet reader over the planned files), ``python`` (the
            ``fed`` source), or ``auto``: native when it is exact and the JVM can read the
            storage's scheme.
    """
    if scan not in ("auto", "native", "python"):
        raise ValueError(f"scan must be 'auto', 'native' or 'python', not {scan!r}")
    table = load_table(path, storage_options=registered(spark).storage_options)
    found = table.scan(_pruning(where), as_of=as_of)
    files: list[str] | None = None
    if scan != "python":
        files, why = _native_files(spark, table, found)
        if files is None and scan == "native":
            raise UnsupportedTableError(f"a native scan of table {table.name} is not exact: {why}")
    if files is None:
        reader = spark.read.format("fed")  # registered with the same storage options
        frame = reader.options(**({"as.of.instant": as_of} if as_of else {})).load(path)
    else:
        schema = spark_schema(found.schema())
        frame = spark.read.schema(schema).parquet(*files) if files else spark.createDataFrame([], schema)
    return frame.where(where) if where else frame


def _pruning(where: str | None) -> list[Filter]:
    """The conjuncts fedcore can prune with; an expression it cannot read prunes nothing
    (Spark still applies it to every row)."""
    if not where:
        return []
    try:
        return parse_where(where)
    except InvalidFilterError:
        return []


def _native_files(spark: SparkSession, table: Table, found: DataScan) -> tuple[list[str] | None, str]:
    """The physical files of the scan, as the JVM addresses them; None (and why) when
    Spark's Parquet reader would not return exactly the rows fedcore does."""
    if not P.POPULATE_META_FIELDS.of(table.config):
        return None, "its files hold no meta fields"
    if P.DROP_PARTITION_COLUMNS.of(table.config):
        return None, "its files leave the partition columns out"
    slices = found.plan_files()
    if any(s.log_files for s in slices):
        return None, "merge-on-read slices have log files to merge"
    physical = [table.fs.to_physical(s.path) for s in slices]
    out = []
    for uri in physical:
        scheme, _, rest = uri.partition("://")
        jvm = _JVM_SCHEMES.get(scheme)
        if jvm is None or not _jvm_reads(spark, jvm):
            return None, f"the JVM has no filesystem for {scheme}:// (add hadoop-aws for s3a)"
        out.append(f"{jvm}://{rest}")
    return out, ""


def _jvm_reads(spark: SparkSession, scheme: str) -> bool:
    """Whether Hadoop, as Spark's readers use it, has a filesystem for ``scheme``."""
    try:
        jvm = spark._jvm
        hadoop = spark._jsc.hadoopConfiguration()
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, hadoop)
    except Exception:
        return False
    return True


_STATS_SCHEMA = "stat string"


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
    with job:
        job.begin()
        job.inflight(json.dumps({"operationType": operation.upper(), "engine": "spark"}).encode())
        if operation in DISTRIBUTED:

            def new_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                task, attempt = _task_ids()
                found = [b for b in batches if b.num_rows]
                yield _stat_batch(job.write_new(pa.Table.from_batches(found), task, attempt) if found else [])

            written = data.mapInArrow(new_groups, _STATS_SCHEMA)
        else:
            scheme = table.partition_scheme
            keyed_schema = StructType([*data.schema.fields, StructField(_PARTITION, StringType())])

            def with_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                for batch in batches:
                    found = partition_rows(pa.Table.from_batches([batch]), scheme)
                    paths = pa.array(found.paths, pa.string()).take(pa.array(found.codes))
                    yield pa.RecordBatch.from_arrays(
                        [*batch.columns, paths], [*batch.schema.names, _PARTITION]
                    )

            client = WriteClient(table)

            def rewrite(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                task, attempt = _task_ids()
                found = [b for b in batches if b.num_rows]
                if not found:
                    yield _stat_batch([])
                    return
                chunk = pa.Table.from_batches(found).drop_columns([_PARTITION])
                yield _stat_batch(client.write_task(job, chunk, task, attempt))

            parallelism = max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
            keyed = data.mapInArrow(with_partition, keyed_schema).repartition(parallelism, _PARTITION)
            written = keyed.mapInArrow(rewrite, _STATS_SCHEMA)
        stats = [WriteStat.from_json(json.loads(row[0])) for row in written.collect()]
        return job.commit(stats, distributed=True)


def _task_ids() -> tuple[int, int]:
    context = TaskContext.get()
    return (context.partitionId(), context.attemptNumber()) if context is not None else (0, 0)


def _stat_batch(stats: list[WriteStat]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([json.dumps(s.to_json()) for s in stats], pa.string())], ["stat"]
    )
