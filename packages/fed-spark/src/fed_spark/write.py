"""``df.write.format("fed")`` and SQL ``INSERT``: Spark tasks write, the driver commits.

Operations that write new file groups only (``bulk_insert``, ``insert_overwrite``,
``insert_overwrite_table``) run distributed on fedcore's write
protocol (``fedcore.write.job``): the driver side begins the instant; each task writes its
rows as new file groups through the federated filesystem, marker first, and returns write
stats; the driver side commits the stats of the tasks that succeeded, after deleting
whatever failed or duplicate task attempts left behind (their markers name it), or rolls
the instant back when the job fails.

``upsert`` and ``delete`` must see every record of a file group in one place (and
``insert`` tops up the small ones), and a Python data source cannot ask Spark to shuffle its
input: tasks stage their rows (``fedcore.engine.Staging``), and the commit runs fedcore's
``WriteClient`` over them in one process (correct, not distributed).

A Python data source's driver-side calls run in Spark's Python worker processes, which may
be reused for other work: the instant's heartbeat is refreshed by the tasks while they
write, and by the commit, never by a thread left behind in a worker.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from fed_spark.errors import one_line_errors
from fed_spark.options import (
    PARTITION_PATH_FIELD,
    PRECOMBINE_FIELD,
    RECORD_KEY_FIELD,
    TABLE_NAME,
    TABLE_TYPE,
    SessionSettings,
    WriteOptions,
)
from fedcore import Table, WriteClient, create_table, load_table
from fedcore import properties as P
from fedcore.engine import (
    BULK_INSERT,
    INSERT,
    INSERT_OVERWRITE,
    INSERT_OVERWRITE_TABLE,
    META_COLUMNS,
    OPERATIONS,
    UPSERT,
    Operation,
    Staging,
    WriteJob,
    WriteStat,
)
from fedcore.exceptions import ConfigError, TableNotFoundError

#: A task's result row: one JSON write stat per file written.
STATS_SCHEMA = "stat string"


def task_ids() -> tuple[int, int]:
    """(task, attempt) of the Spark task running this: they name its files."""
    context = TaskContext.get()
    return (context.partitionId(), context.attemptNumber()) if context is not None else (0, 0)


def stat_batch(stats: Sequence[WriteStat]) -> pa.RecordBatch:
    described = pa.array([json.dumps(s.to_json()) for s in stats], pa.string())
    return pa.RecordBatch.from_arrays([described], ["stat"])


def stats_from(rows: Sequence[Any]) -> list[WriteStat]:
    return [WriteStat.from_json(json.loads(row[0])) for row in rows]


#: Operations whose tasks write new file groups (distributed); the others are staged.
DISTRIBUTED = (BULK_INSERT, INSERT, INSERT_OVERWRITE, INSERT_OVERWRITE_TABLE)


@dataclass
class FedCommitMessage(WriterCommitMessage):
    """What one task did: the files it wrote (their write stats), or the file it staged."""

    stats: list[dict[str, Any]] = field(default_factory=list)
    staged: str | None = None


def open_for_write(options: WriteOptions, settings: SessionSettings, schema: pa.Schema) -> Table:
    """The table a write goes to, created from Hudi's options when there is none yet; options
    that contradict the table's config are refused, storage keys included
    (``StorageStrategyMismatchError``)."""
    storage = settings.storage(options.storage)
    try:
        table = load_table(options.path, storage_options=storage)
    except TableNotFoundError:
        if not options.record_key_fields:
            raise ConfigError(RECORD_KEY_FIELD, f"is needed to create a table at {options.path}") from None
        missing = [
            c
            for c in [*options.record_key_fields, *(options.partition_fields or ())]
            if c not in schema.names
        ]
        if missing:  # named by the option that names it, so the user knows which to fix
            key = RECORD_KEY_FIELD if missing[0] in options.record_key_fields else PARTITION_PATH_FIELD
            raise ConfigError(
                key, f"names {missing[0]!r}, which is not a column of the data ({', '.join(schema.names)})"
            ) from None
        # The write's settings are checked before the table exists; its other keys become the
        # new table's config, where create_table refuses any key fed would not read.
        runtime = {k: v for k, v in options.hoodie.items() if k in P.RUNTIME_KEYS}
        P.check_options(runtime)
        table = create_table(
            options.path,
            name=options.table_name or options.path.rstrip("/").rpartition("/")[2],
            record_key_fields=options.record_key_fields,
            partition_fields=options.partition_fields or (),
            precombine_field=options.precombine_field,
            hive_style_partitioning=True if options.hive_style is None else options.hive_style,
            table_type=options.table_type,
            properties={k: v for k, v in options.hoodie.items() if k not in P.RUNTIME_KEYS},
            storage_options=storage,
        )
        return table.with_options(runtime)
    config = table.config
    checks: list[tuple[str, object, object]] = [
        (TABLE_NAME, options.table_name, config.name),
        (PRECOMBINE_FIELD, options.precombine_field, config.precombine_field),
        (
            RECORD_KEY_FIELD,
            options.record_key_fields or None,
            tuple(config.record_key_fields),
        ),
        (
            PARTITION_PATH_FIELD,
            options.partition_fields,
            tuple(config.partition_fields),
        ),
    ]
    checks.append((TABLE_TYPE, options.table_type, config.table_type))
    for key, given, actual in checks:
        if given is not None and given != actual:
            raise ConfigError(key, f"is {given!r}, but table {config.name} has {actual!r}")
    return table.with_options(options.hoodie)


def operation_of(options: WriteOptions, overwrite: bool, from_sql: bool) -> Operation:
    """Hudi's rules: the operation option, else upsert (``INSERT INTO`` in SQL: insert);
    Spark's Overwrite save mode (SQL ``INSERT OVERWRITE``) replaces the whole table unless
    the operation says ``insert_overwrite`` (the partitions written only)."""
    chosen = options.operation
    if chosen is not None and chosen not in OPERATIONS:
        raise ConfigError(P.OPERATION, f"unknown operation {chosen!r}; one of {', '.join(OPERATIONS)}")
    if overwrite:
        if chosen not in (None, INSERT_OVERWRITE, INSERT_OVERWRITE_TABLE):
            raise ConfigError(
                P.OPERATION,
                f"{chosen!r} cannot run in Overwrite mode: use mode('append'), or insert_overwrite",
            )
        return INSERT_OVERWRITE if chosen == INSERT_OVERWRITE else INSERT_OVERWRITE_TABLE
    if chosen is None:
        return INSERT if from_sql else UPSERT
    return chosen


def arrow_schema(schema: StructType) -> pa.Schema:
    """The rows' schema as the tasks' Arrow batches have it, meta columns dropped (a SQL
    ``INSERT`` into a fed table fills them with nulls; fedcore computes them)."""
    fields = [f for f in to_arrow_schema(schema, timezone="UTC") if f.name not in META_COLUMNS]
    return pa.schema(fields)


@one_line_errors
class FedWriter(DataSourceArrowWriter):
    """Made on the driver side by ``FedDataSource.writer``, pickled to every task."""

    def __init__(self, table: Table, operation: Operation, schema: pa.Schema) -> None:
        self.table = table
        self.operation = operation
        self.schema = schema
        self.job: WriteJob | None = None
        self.staging: Staging | None = None
        # An insert tops up small file groups first, as WriteClient's and Hudi's do, so its
        # rows are staged like an upsert's (a SQL INSERT of a few rows adds no file group).
        if operation in DISTRIBUTED and operation != INSERT:
            job = WriteJob.open(table, operation, schema)
            job.begin()
            try:
                job.inflight()  # its tasks decide the file groups
            except BaseException:
                job.abort()
                raise
            job.detach()  # tasks beat from here on
            self.job = job
        else:
            self.staging = Staging(table, str(uuid.uuid4()))

    # --- tasks ---------------------------------------------------------------------------------

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FedCommitMessage:
        data = task_rows(iterator)
        if data is None:
            return FedCommitMessage()
        if self.job is not None:
            task, attempt = task_ids()
            stats = self.job.write_new(data, task, attempt)
            return FedCommitMessage(stats=[s.to_json() for s in stats])
        assert self.staging is not None
        return FedCommitMessage(staged=self.staging.put(data, *task_ids()))

    # --- driver side ---------------------------------------------------------------------------

    def commit(self, messages: Sequence[FedCommitMessage | None]) -> None:
        done = [m for m in messages if m is not None]
        if self.job is not None:
            stats = [WriteStat.from_json(s) for m in done for s in m.stats]
            self.job.commit(stats, distributed=True)
            return
        assert self.staging is not None
        try:
            # No rows: an empty instant, as the distributed writes make.
            staged = self.staging.rows((m.staged for m in done if m.staged is not None), self.schema)
            WriteClient(self.table).write(staged, self.operation)
        finally:
            self._drop_staging()

    def abort(self, messages: Sequence[FedCommitMessage | None]) -> None:
        if self.job is not None:
            self.job.abort()
        else:
            self._drop_staging()

    def _drop_staging(self) -> None:
        if self.staging is not None:
            self.staging.drop()


def task_rows(iterator: Iterator[pa.RecordBatch]) -> pa.Table | None:
    """A task's rows without Hudi's meta columns (fedcore computes them); None: no rows."""
    batches = [b for b in iterator if b.num_rows]
    if not batches:
        return None
    return pa.Table.from_batches(batches).drop_columns(
        [c for c in META_COLUMNS if c in batches[0].schema.names]
    )
