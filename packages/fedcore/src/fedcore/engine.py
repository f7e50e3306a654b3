"""The engine API: what an engine adapter (fed-spark; Trino's and Hive's to come) builds on.

An adapter imports ``fedcore`` (tables: ``load_table``, ``create_table``, ``Table``,
``WriteClient``), this module, ``fedcore.exceptions`` and ``fedcore.properties``, and no
other part of fedcore (import-linter holds adapters to it).

Writing, where an engine runs tasks of its own::

    job = WriteJob.open(table, "upsert", schema)     # recovers failed writes, learns the schema
    job.begin()                                      # the instant, its heartbeat beating
    planner = WritePlanner(job)                      # latest base files, keys, insert targets
    ...                                              # tasks: planner.routed_groups(...) and
    stats = job.write_task(groups, rows, keys, task, attempt)   # (or job.write_new(rows, ...))
    result = job.commit(stats, distributed=True)     # then the table services (never raise);
                                                     # or job.abort(): a with-block aborts on error

Staged writes: where tasks cannot each write file groups, each puts its rows aside
(``Staging(table, name).put(rows, task, attempt)``) and the commit runs ``WriteClient`` over
``Staging.rows(paths, schema)``, then ``drop``s them.

Streaming sinks: each micro-batch's instant carries ``sink_checkpoint(batch_id, query_id)``
(``WriteClient.write(..., extra_metadata=...)``); a restarted query resolves what its dead
run left pending (``recover_writer``) and skips a batch ``last_committed_batch`` has seen.

Reading: ``table.scan(filters, columns, as_of=...)`` is a ``DataScan``; ``plan_files()``
gives the pruned ``FileSlice`` list (metadata table, partition pruning and column
statistics; no listing), ``to_arrow()`` reads them; ``Filter`` and ``parse_where`` are the
filters both understand.

What else an adapter needs of a table, the ``Table`` it holds answers: ``timeline()``
and ``write_actions`` (its writes among the instants: a stream's offsets),
``commit_metadata(instant)``, ``partitions()`` (from the metadata table, no listing),
``schema()``, ``fs`` and ``storage_options``. An adapter never reaches for
``Table.handle``: that is fedcore's own.
"""

from __future__ import annotations

from fedcore.files.file_slice import QUERY_TYPES, FileSlice, QueryType
from fedcore.io.filesystems import StorageOptions, filesystem_for, storage_options_of
from fedcore.read.filters import Filter, parse_where
from fedcore.read.planner import ScanPlan
from fedcore.read.scan import DataScan
from fedcore.schema.meta import META_COLUMNS
from fedcore.timeline.commit_metadata import WriteStat
from fedcore.write.checkpoints import last_committed_batch, recover_writer, sink_checkpoint
from fedcore.write.job import (
    BULK_INSERT,
    DELETE,
    INSERT,
    INSERT_OVERWRITE,
    INSERT_OVERWRITE_TABLE,
    OPERATIONS,
    UPSERT,
    Operation,
    WriteJob,
    WriteResult,
)
from fedcore.write.planner import BaseFile, InsertTarget, WritePlanner
from fedcore.write.staging import Staging

__all__ = [
    "BULK_INSERT",
    "DELETE",
    "INSERT",
    "INSERT_OVERWRITE",
    "INSERT_OVERWRITE_TABLE",
    "META_COLUMNS",
    "OPERATIONS",
    "QUERY_TYPES",
    "UPSERT",
    "BaseFile",
    "DataScan",
    "FileSlice",
    "Filter",
    "InsertTarget",
    "Operation",
    "QueryType",
    "ScanPlan",
    "Staging",
    "StorageOptions",
    "WriteJob",
    "WritePlanner",
    "WriteResult",
    "WriteStat",
    "filesystem_for",
    "last_committed_batch",
    "parse_where",
    "recover_writer",
    "sink_checkpoint",
    "storage_options_of",
]
