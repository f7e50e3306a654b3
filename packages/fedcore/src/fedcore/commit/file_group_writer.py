"""The file-group writer: a batch of an instant's new data files, marked and written.

The write side of ``fedcore.read.slice_reader``: where a ``SliceReader`` turns a file slice
into rows, a ``FileGroupWriter`` puts the new files of file groups (base files, log files,
a migration's copies) under an instant. Every writer of data files goes through it (a
write's tasks, a compaction, a migration), so the protocol's order holds for all of them
the same way: one marker batch names every file of the batch before any is written (a
rollback finds whatever a dead writer left, with one request on the table's hot prefix:
``markers.mark_files``), then the files are written on threads (they go to many prefixes,
often many buckets) and what each says comes back in the batch's order. What a file holds
and how it is put (a transaction's "data" step, a copy) is the caller's ``write_one``.

An engine's task writes beside a driver that may give up on the job while the task still
runs (Spark fails a job when one task fails, and lets the others run on): the driver's
rollback decides the instant's outcome first, then deletes what the markers name, so a
task that marks after that listing would leave its files behind. Such a task is *fenced*:
once its batch is written (or has failed), it asks whether the instant was decided; if so
its files and its marker batch are deleted here. Either the rollback listed its marker
(and deletes its files), or the task sees the outcome (and deletes them itself).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final, Literal, NamedTuple, Protocol, TypeAlias, TypeVar

from fedcore.commit.file_writer import (
    FileGroupWrite,
    FileName,
    InputChunk,
    PutFile,
    relative_path,
    write_group,
    write_partition_metadata,
)
from fedcore.commit.markers import mark_files, marker_token, unmark_files
from fedcore.exceptions import CommitConflictError
from fedcore.handle import TableHandle
from fedcore.timeline.commit_metadata import WriteStat

#: Threads a process writes files on: reads and uploads overlap on these, while encoding
#: runs on one thread per core (more only contend, each with an allocator heap of its own).
IO_THREADS: Final = 8

#: Hudi's marker types: a new file group's base file, a base file's rewrite, a log file.
MarkerKind: TypeAlias = Literal["CREATE", "MERGE", "APPEND"]

Item = TypeVar("Item")
Result = TypeVar("Result")


class NewFile(NamedTuple):
    """A data file a batch writes: its logical path (relative to the table) and its marker type."""

    path: str
    kind: MarkerKind


class MarkedWrite(Protocol):
    """What decides a file's marker type: a file group's write."""

    @property
    def base(self) -> tuple[str, str] | None: ...
    @property
    def log_version(self) -> int | None: ...


def marker_kind(group: MarkedWrite) -> MarkerKind:
    """Hudi's marker type: a new file group's base file, a rewrite, or a log file."""
    if group.log_version is not None:
        return "APPEND"
    return "MERGE" if group.base else "CREATE"


class FileGroupWriter:
    """Writes batches of ``instant``'s data files of ``table`` on ``threads`` threads."""

    def __init__(self, table: TableHandle, instant: str, threads: int) -> None:
        self.table = table
        self.instant = instant
        self.threads = threads

    def write(
        self,
        files: Sequence[NewFile],
        items: Sequence[Item],
        write_one: Callable[[Item], Result],
        token: str,
        *,
        marked: Callable[[], None] | None = None,
        done: Callable[[Result], None] | None = None,
        fence: Callable[[], bool] | None = None,
    ) -> list[Result]:
        """Mark ``files`` in one batch, then write each (``write_one`` of the item at its place
        in ``items``) and return the results in order.

        Args:
            token: starts the batch's name (``markers.marker_token``): unique per task attempt
                among the instant's writers (a retry's random suffix is added here).
            marked: called once the batch is marked, before any file is written (a step a
                caller reaches for the whole batch); not when there are no files.
            done: called with each result, in order, as it is collected (progress).
            fence: for a writer that does not decide the instant's outcome itself (an engine's
                task): asked once the batch is written or has failed, True when the outcome
                was decided meanwhile; the batch's files and marker are then deleted and
                ``CommitConflictError`` is raised (see the module's docstring).
        """
        if len(files) != len(items):
            raise ValueError(f"{len(files)} files named for {len(items)} to write")
        if not files:
            return []
        batch = marker_token(token)
        mark_files(self.table, self.instant, [(f.path, f.kind) for f in files], batch)
        if marked is not None:
            marked()
        results: list[Result] = []
        try:
            with ThreadPoolExecutor(self.threads) as pool:
                futures = [pool.submit(write_one, item) for item in items]
                try:
                    for future in futures:
                        results.append(future.result())
                        if done is not None:
                            done(results[-1])
                except BaseException:
                    for future in futures:  # the batch fails: files not begun are not written
                        future.cancel()
                    raise
        except BaseException:
            if fence is not None and fence():
                self._unwrite(files, batch)
            raise
        if fence is not None and fence():
            self._unwrite(files, batch)
            raise CommitConflictError(
                f"instant {self.instant} of table {self.table.name} was rolled back or committed while "
                f"this task wrote {len(files)} file(s) for it; they are deleted (the job had failed, "
                "or this task attempt lost to another)"
            )
        return results

    def _unwrite(self, files: Sequence[NewFile], batch: str) -> None:
        for file in files:
            with contextlib.suppress(FileNotFoundError):  # never written, or the rollback got it
                self.table.fs.rm_file(file.path)
        unmark_files(self.table, self.instant, batch)


def write_file_groups(
    table: TableHandle,
    instant: str,
    groups: Sequence[FileGroupWrite],
    source: InputChunk,
    names: Sequence[FileName],
    put: PutFile,
    threads: int,
    *,
    done: Callable[[WriteStat], None] | None = None,
    fence: Callable[[], bool] | None = None,
) -> list[WriteStat]:
    """Write file groups of rows in parallel (files go to many prefixes, often many buckets),
    after one marker batch naming them all and the partition metadata files of partitions
    that may be new; ``done(stat)`` is called as each is written. A write's tasks and a
    migration's rewrites both write rows this way (``fence``: see ``FileGroupWriter.write``)."""
    new = sorted({group.partition for group in groups if group.new_partition})
    write_partition_metadata(table, new, source.instant)
    files = [
        NewFile(relative_path(table, group, name, source.instant), marker_kind(group))
        for group, name in zip(groups, names, strict=True)
    ]
    # Encoding runs on one thread per core (more only contend); reads and uploads on ``threads``.
    with ThreadPoolExecutor(os.cpu_count() or 1) as encoder:

        def write_one(job: tuple[FileGroupWrite, FileName]) -> WriteStat:
            return write_group(table, job[0], source, job[1], encoder, put)

        writer = FileGroupWriter(table, instant, threads)
        token = names[0].token if names else ""
        return writer.write(
            files, list(zip(groups, names, strict=True)), write_one, token, done=done, fence=fence
        )
