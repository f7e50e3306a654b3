"""Rows put aside by an engine's tasks for a write that commits them all at once.

An engine whose tasks cannot each write file groups (an insert that tops up small file
groups, a streaming micro-batch) has every task stage its rows, and the commit runs
``WriteClient`` over what the tasks that succeeded staged. The rows stay under the table's
``.hoodie/.fed/staging/<name>/`` (never under the storage path: they are not data files of
the table), one Parquet file per task attempt, until the write ends.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterable
from typing import Final

import pyarrow as pa
import pyarrow.parquet as pq

from fedcore import properties as P
from fedcore.handle import HasHandle, handle_of
from fedcore.io.atomic import create_exclusive
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import read_objects, remove_tree

#: Staging folders, under the table's ``.hoodie``.
STAGING_FOLDER: Final = ".fed/staging"


class Staging:
    """One write's staged rows (``name``: the write's, unique among the table's live writes).

    Pickles to tasks: each ``put``s its rows; the committer reads them back (``rows``) and
    ``drop``s the folder, whether the write committed or not."""

    def __init__(self, table: HasHandle, name: str) -> None:
        handle = handle_of(table)
        self._table = handle  # (a handle pickles without its filesystem objects)
        self.folder = f"{handle.path}/{P.HOODIE_FOLDER}/{STAGING_FOLDER}/{name}"

    def put(self, rows: pa.Table, task: int, attempt: int) -> str:
        """A task's rows as one Parquet file (named by the task, its attempt and a random
        part, so no two attempts or batches share one); returns its path."""
        path = f"{self.folder}/part-{task:05d}-{attempt}-{uuid.uuid4().hex[:12]}.parquet"
        sink = io.BytesIO()
        pq.write_table(rows, sink)
        create_exclusive(self._table.fs.table_fs, path, sink.getvalue(), owned=True)
        return path

    def rows(self, paths: Iterable[str], schema: pa.Schema) -> pa.Table:
        """The rows staged at ``paths`` (those the tasks that succeeded reported), as one
        table; none: an empty table of ``schema``."""
        wanted = list(paths)
        parts = []
        for path, data in zip(wanted, read_objects(self._table.fs.table_fs, wanted), strict=True):
            with storage_errors(path, data=True):
                parts.append(pq.read_table(pa.BufferReader(data)))
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def drop(self) -> None:
        """Delete the folder and all in it (gone already is fine)."""
        remove_tree(self._table.fs.table_fs, self.folder)
