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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, NamedTuple, Protocol, TypeAlias, TypeVar

from fedcore.commit.markers import mark_files, marker_token
from fedcore.handle import TableHandle

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
    ) -> list[Result]:
        """Mark ``files`` in one batch, then write each (``write_one`` of the item at its place
        in ``items``) and return the results in order.

        Args:
            token: starts the batch's name (``markers.marker_token``): unique per task attempt
                among the instant's writers (a retry's random suffix is added here).
            marked: called once the batch is marked, before any file is written (a step a
                caller reaches for the whole batch); not when there are no files.
            done: called with each result, in order, as it is collected (progress).
        """
        if len(files) != len(items):
            raise ValueError(f"{len(files)} files named for {len(items)} to write")
        if not files:
            return []
        mark_files(self.table, self.instant, [(f.path, f.kind) for f in files], marker_token(token))
        if marked is not None:
            marked()
        results: list[Result] = []
        with ThreadPoolExecutor(self.threads) as pool:
            for future in [pool.submit(write_one, item) for item in items]:
                results.append(future.result())
                if done is not None:
                    done(results[-1])
        return results
