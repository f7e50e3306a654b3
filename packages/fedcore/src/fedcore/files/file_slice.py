"""A file slice: the version of one file group a read uses, what an engine reads; and the query
types that decide which files make up a slice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fedcore.schema.meta import COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY

#: Hudi's query types: a merge-on-read snapshot merges log files onto base files; a
#: read-optimized query reads base files only (on copy-on-write tables both are the same).
QueryType = Literal["snapshot", "read_optimized"]
QUERY_TYPES: tuple[QueryType, ...] = ("snapshot", "read_optimized")
#: The meta columns a read computes for tables written without them (virtual keys);
#: ``_hoodie_commit_seqno`` has no source, so it is not offered.
VIRTUAL_META_COLUMNS = (COMMIT_TIME, RECORD_KEY, PARTITION_PATH, FILE_NAME)


@dataclass(frozen=True)
class FileSlice:
    """The version of one file group a read uses: what an engine reads.

    Attributes:
        partition_path: the partition (``country=usa``; ``""`` when not partitioned).
        file_id: the file group.
        base_instant: the instant that started this version (wrote its base file).
        base_file_name: the base file's name (None for a merge-on-read slice of log files
            only); its physical location comes from ``table.fs.to_physical(slice.path)``.
        size: the base file's bytes, from the file index (no request needed to learn it).
        partition_values: the partition columns' values, typed.
        log_files: merge-on-read log files to merge onto the base file, in order, with
            their sizes; empty for copy-on-write tables and read-optimized queries.
    """

    partition_path: str
    file_id: str
    base_instant: str
    base_file_name: str | None
    size: int
    partition_values: dict[str, Any]
    log_files: tuple[tuple[str, int], ...] = ()

    @property
    def path(self) -> str:
        """The base file's logical path, relative to the table ("" when it has none)."""
        return self._relative(self.base_file_name or "")

    @property
    def log_paths(self) -> list[str]:
        """The log files' logical paths, in merge order."""
        return [self._relative(name) for name, _ in self.log_files]

    def files(self) -> list[tuple[str, int]]:
        """Logical path and size of each file of the slice: the base file, then the log files."""
        base = [(self.path, self.size)] if self.base_file_name else []
        return base + [(self._relative(name), size) for name, size in self.log_files]

    def _relative(self, name: str) -> str:
        return f"{self.partition_path}/{name}" if self.partition_path and name else name
