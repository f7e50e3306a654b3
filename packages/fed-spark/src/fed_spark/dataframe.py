"""``fed_spark.write(df, path, ...)``: every operation distributed, upserts and deletes too.

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
from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from fed_spark.options import WriteOptions
from fed_spark.session import settings_of
from fed_spark.write import DISTRIBUTED, arrow_schema, open_for_write, operation_of
from fedcore.commit_metadata import WriteStat
from fedcore.io.filesystems import StorageOptions
from fedcore.records import META_COLUMNS, partition_rows
from fedcore.write_client import WriteClient
from fedcore.write_job import WriteJob, WriteResult

_PARTITION = "_fed_partition_path"
_STATS_SCHEMA = "stat string"


def write(
    df: DataFrame,
    path: str,
    options: Mapping[str, str] | None = None,
    mode: Literal["append", "overwrite"] = "append",
    storage_options: StorageOptions | None = None,
) -> WriteResult:
    """Write ``df`` to the table at ``path`` as one instant, in Spark tasks.

    Args:
        df: the rows (for ``delete``, the record key and partition columns are enough).
        path: the table path; created from ``options`` (Hudi's keys, as ``format("fed")``
            takes them) when there is no table yet.
        options: ``hoodie.*`` keys; ``hoodie.datasource.write.operation`` defaults to upsert.
        mode: ``append``, or ``overwrite`` (replace every file group of the table).
        storage_options: fsspec options for the table's storage (as ``fedcore.load_table``).

    Returns:
        What was committed (``fedcore.WriteResult``).
    """
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', not {mode!r}")
    spark = df.sparkSession
    given = WriteOptions.of({**(options or {}), "path": path})
    rows = arrow_schema(df.schema)
    table = open_for_write(given, settings_of(spark, storage_options), rows)
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
