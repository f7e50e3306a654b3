"""Structured Streaming: ``writeStream.format("fed")`` and ``readStream.format("fed")``.

The sink commits each micro-batch exactly once. Its tasks stage their rows under the table's
``.hoodie/.fed/staging/stream-<writer>/``; the batch's commit runs fedcore's ``WriteClient``
over them as one instant whose commit metadata records the batch id and the writer (the
query's id, from its checkpoint: ``fedcore.write.checkpoints``). Spark replays a batch after a
crash when its checkpoint does not record the batch's completion; the replay first
resolves what a dead run of the same query left pending (rolled back, or forward where its
commit was decided), then finds the batch among the table's commits and commits nothing
twice. Table services (cleaning, archival, inline compaction) run after each batch's
commit, as after a batch write. Spark creates a sink's writer anew for every micro-batch,
in whichever Python worker runs it: nothing is kept between batches but the table.

The source's offsets are completed instants (``{"instant": "<time>"}``). A micro-batch
returns what an incremental query from the last offset to the new one returns: the latest
version, as of the new offset, of every record the instants in between wrote (deleted
records are not returned, as in Hudi). An offset never passes a write still pending, so an
instant that completes after later ones is never skipped (Hudi's ``BLOCK`` policy for such
timeline holes).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, DataSourceStreamReader, InputPartition

from fed_spark.errors import one_line_errors
from fed_spark.input_partitions import pack
from fed_spark.options import EARLIEST, LATEST, SessionSettings, StreamReadOptions, StreamWriteOptions
from fed_spark.write import FedCommitMessage, task_ids, task_rows
from fedcore import Table, WriteClient
from fedcore.engine import (
    Operation,
    ScanPlan,
    Staging,
    filesystem_for,
    last_committed_batch,
    recover_writer,
    sink_checkpoint,
)
from fedcore.exceptions import ConfigError, FedError

log = logging.getLogger(__name__)

#: The offset before the first instant (Hudi's initial instant): a stream from ``earliest``.
BEFORE_FIRST: Final = "000"


def query_id(options: StreamWriteOptions, settings: SessionSettings) -> str:
    """Who the sink's batches are recorded as: the identifier given, else the streaming
    query's id, which Spark writes to ``<checkpointLocation>/metadata`` when the query first
    starts and keeps across restarts."""
    if options.identifier:
        return options.identifier
    location = options.checkpoint_location
    assert location is not None
    if location.startswith(("s3a://", "s3n://")):
        location = "s3://" + location[len("s3a://") :]
    path = f"{location.rstrip('/')}/metadata"
    try:
        fs = filesystem_for(location, settings.storage(options.write.storage))
        with fs.open(path, "rb") as source:
            found = json.loads(source.read())["id"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            "checkpointLocation",
            f"{path} gives no query id ({exc}); name the writer with the identifier option",
        ) from exc
    return str(found)


@one_line_errors
class FedStreamWriter(DataSourceStreamArrowWriter):
    """One micro-batch of a streaming write: made on the driver side per batch, pickled to its
    tasks, made again where the batch commits."""

    def __init__(self, table: Table, operation: Operation, schema: pa.Schema, writer: str) -> None:
        self.table = table
        self.operation = operation
        self.schema = schema
        self.writer = writer
        # One folder per query: a batch's commit clears it, leftovers of a dead run included.
        self.staging = Staging(table, f"stream-{writer}")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FedCommitMessage:
        data = task_rows(iterator)
        return (
            FedCommitMessage()
            if data is None
            else FedCommitMessage(staged=self.staging.put(data, *task_ids()))
        )

    def commit(self, messages: Sequence[FedCommitMessage | None], batchId: int) -> None:
        table = self.table
        try:
            recover_writer(table, self.writer)
            last = last_committed_batch(table, self.writer)
            if last is not None and batchId <= last:
                log.warning(
                    "%s: batch %d of %s already committed (a replay after a restart): nothing written",
                    table.path,
                    batchId,
                    self.writer,
                )
                return
            staged = (m.staged for m in messages if m is not None and m.staged is not None)
            rows = self.staging.rows(staged, self.schema)
            result = WriteClient(table).write(
                rows, self.operation, extra_metadata=sink_checkpoint(batchId, self.writer)
            )
            for warning in result.warnings:  # a table service failed after the commit
                log.warning("%s: batch %d: %s", table.path, batchId, warning)
        finally:
            self.staging.drop()

    def abort(self, messages: Sequence[FedCommitMessage | None], batchId: int) -> None:
        self.staging.drop()


class StreamPartition(InputPartition):
    """Slices one task of a micro-batch reads, with the plan they were planned in."""

    def __init__(self, plan: ScanPlan) -> None:
        super().__init__(None)
        self.plan = plan


@one_line_errors
class FedStreamReader(DataSourceStreamReader):
    """Micro-batches of the records each completed instant wrote."""

    def __init__(
        self, table: Table, options: StreamReadOptions, arrow_schema: pa.Schema, settings: SessionSettings
    ) -> None:
        self.table = table
        self.options = options
        self.arrow_schema = arrow_schema
        self.settings = settings

    def initialOffset(self) -> dict[str, str]:
        start = self.options.start
        if start == EARLIEST:
            return {"instant": BEFORE_FIRST}
        if start == LATEST:
            return {"instant": self._frontier() or BEFORE_FIRST}
        # Inclusive, as Hudi's: the offset just before the instant (instant times compare as
        # equal-length digit strings, so one less sorts right before it).
        return {"instant": f"{int(start) - 1:0{len(start)}d}"}

    def latestOffset(self, start: dict[str, str], limit: object) -> dict[str, str]:
        frontier = self._frontier()
        return {"instant": frontier} if frontier is not None and frontier > start["instant"] else start

    def _frontier(self) -> str | None:
        """The newest completed write before the oldest pending one (None: no write yet)."""
        timeline = self.table.timeline()
        actions = self.table.write_actions
        pending = [i.time for i in timeline.pending() if i.action in actions]
        completed = [i.time for i in timeline.completed(actions) if not pending or i.time < min(pending)]
        return completed[-1] if completed else None

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[StreamPartition]:
        if start["instant"] >= end["instant"]:
            return []
        scan = self.table.scan(as_of=end["instant"]).update(changed_after=start["instant"])
        plan = scan.plan()
        return [
            StreamPartition(dataclasses.replace(plan, slices=group))
            for group in pack(plan.slices, self.settings)
        ]

    def read(self, partition: StreamPartition) -> Iterator[pa.RecordBatch]:
        plan = partition.plan
        for file_slice in plan.slices:
            yield from plan.read(file_slice).cast(self.arrow_schema).to_batches()


@one_line_errors
class FailedStreamReader(DataSourceStreamReader):
    """A streaming read that could not be opened: its first call raises why."""

    def __init__(self, error: FedError) -> None:
        self.error = error

    def initialOffset(self) -> dict[str, str]:
        raise self.error

    def latestOffset(self, start: dict[str, str], limit: object) -> dict[str, str]:
        raise self.error

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        raise self.error

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise self.error
