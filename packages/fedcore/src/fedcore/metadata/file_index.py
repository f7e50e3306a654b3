"""The file index plug point: which files each partition holds as of an instant."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fedcore.filenames import BASE_FILE_RE, LOG_FILE_RE


@dataclass(frozen=True)
class SliceFiles:
    """The files of a merge-on-read file slice: a base file (None for a slice of log files
    only) and the log files to merge onto it, in Hudi's order (base instant, version, write
    token)."""

    base_instant: str
    base_file: str | None
    log_files: tuple[str, ...]


@dataclass
class PartitionFiles:
    """The data files of one partition, and the file groups a replace commit retired."""

    files: dict[str, int] = field(default_factory=dict)  # file name -> size in bytes
    replaced: dict[str, str] = field(default_factory=dict)  # file id -> replacing instant
    #: file name -> its column statistics (``io.parquet.file_stats``), where recorded
    stats: dict[str, str] = field(default_factory=dict)

    def latest_slices(self, as_of: str | None = None) -> dict[str, tuple[str, str]]:
        """file id -> (base instant, file name) of the newest base file of each live file group."""
        latest: dict[str, tuple[str, str]] = {}
        for name in self.files:
            match = BASE_FILE_RE.fullmatch(name)
            if match is None:
                continue
            file_id, instant = match[1], match[3]
            if file_id in self.replaced or (as_of is not None and instant > as_of):
                continue
            if file_id not in latest or instant > latest[file_id][0]:
                latest[file_id] = (instant, name)
        return latest

    def slice_logs(self) -> dict[tuple[str, str], list[tuple[int, str]]]:
        """(file id, base instant) -> (version, name) of the log files written onto that
        slice, by version (merge-on-read; change-data-capture logs are no part of a slice)."""
        logs: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for name in self.files:
            if name.startswith("."):
                match = LOG_FILE_RE.fullmatch(name)
                if match is not None and match[5] is None:
                    logs.setdefault((match[1], match[2]), []).append((int(match[3]), name))
        for found in logs.values():
            found.sort()
        return logs

    def merged_slices(self, as_of: str | None, committed: Callable[[str], bool]) -> dict[str, SliceFiles]:
        """file id -> the latest slice of each live file group, log files included.

        A slice starts at a committed instant: its base file's, or the instant of its first
        log file when it has no base file. Log files that start at a later, uncommitted
        instant (written while a compaction was pending) are merged onto the latest slice,
        as Hudi's file-system view merges them; which of their blocks apply is decided per
        block, by instant."""
        bases: dict[str, dict[str, str]] = {}
        logs: dict[str, list[tuple[str, int, str, str]]] = {}
        for name in self.files:
            if name.startswith("."):
                match = LOG_FILE_RE.fullmatch(name)
                if match is not None and match[5] is None:  # change-data-capture logs are no slice
                    logs.setdefault(match[1], []).append((match[2], int(match[3]), match[4], name))
            else:
                match = BASE_FILE_RE.fullmatch(name)
                if match is not None and (as_of is None or match[3] <= as_of):
                    bases.setdefault(match[1], {})[match[3]] = name
        out: dict[str, SliceFiles] = {}
        for file_id in sorted(set(bases) | set(logs)):
            if file_id in self.replaced:
                continue
            group_logs = sorted(logs.get(file_id, []))
            starts = set(bases.get(file_id, {})) | {
                log[0] for log in group_logs if committed(log[0]) and (as_of is None or log[0] <= as_of)
            }
            if not starts:
                continue
            start = max(starts)
            merged = tuple(
                log[3] for log in group_logs if log[0] == start or (log[0] > start and log[0] not in starts)
            )
            out[file_id] = SliceFiles(start, bases.get(file_id, {}).get(start), merged)
        return out


class FileIndex(ABC):
    """Answers "which files does partition P hold as of instant T" for readers and writers.

    ``as_of`` is an instant time; None means the latest completed state. Only
    instants that completed are ever reflected.
    """

    @abstractmethod
    def partitions(self, as_of: str | None = None) -> list[str]:
        """Every partition path holding files, sorted."""

    @abstractmethod
    def files(
        self, partitions: Iterable[str] | None = None, as_of: str | None = None
    ) -> dict[str, PartitionFiles]:
        """Files of the given partitions (all when None); partitions without files are left out."""
