"""The file index plug point: which files each partition holds as of an instant."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fedcore.files.file_group import FileGroup, LogSlicing, SliceFiles, file_groups
from fedcore.files.filenames import LogFileNaming


@dataclass
class PartitionFiles:
    """The data files of one partition, and the file groups a replace commit retired.

    Its file groups are read from its file names, so each method that groups them takes the
    table's log file naming (``TableHandle.layout.log_files``): what a log file's name says
    is the table version's to decide."""

    files: dict[str, int] = field(default_factory=dict)  # file name -> size in bytes
    replaced: dict[str, str] = field(default_factory=dict)  # file id -> replacing instant
    #: file name -> its column statistics (``io.parquet.file_stats``), where recorded
    stats: dict[str, str] = field(default_factory=dict)

    def groups(
        self, log_files: LogFileNaming, slicing: LogSlicing | None = None, partition: str = ""
    ) -> dict[str, FileGroup]:
        """Its live file groups (``fedcore.files.file_group``), by file id: those no replace commit
        retired (``slicing``: what places a Hudi 1.x log file in its slice; ``partition``: this
        partition's path, for the later slices ``slicing`` knows of)."""
        return {
            fid: group
            for fid, group in file_groups(self.files, log_files, slicing, partition).items()
            if fid not in self.replaced
        }

    def latest_base_files(
        self, log_files: LogFileNaming, as_of: str | None = None
    ) -> dict[str, tuple[str, str]]:
        """file id -> (base instant, file name) of the newest base file of each live file group."""
        found = ((fid, group.latest_base(as_of)) for fid, group in self.groups(log_files).items())
        return {fid: base for fid, base in found if base is not None}

    def overwritten(self, log_files: LogFileNaming) -> list[tuple[str, str]]:
        """(file id, base instant) of each live file group's newest base file, by file id:
        what an overwrite of the partition replaces (the groups) and supersedes (the
        versions, claimed against a racing writer)."""
        return sorted((fid, base[0]) for fid, base in self.latest_base_files(log_files).items())

    def logs_by_slice(
        self, log_files: LogFileNaming, slicing: LogSlicing | None = None
    ) -> dict[tuple[str, str], list[tuple[int, str]]]:
        """(file id, slice start) -> (place, name) of the log files written onto each slice
        (``FileGroup.logs_onto``; ``slicing``: what places a Hudi 1.x log file)."""
        return {
            (fid, start): group.logs_onto(start)
            for fid, group in file_groups(self.files, log_files, slicing).items()
            for start in sorted({log.start or "" for log in group.logs})
        }

    def latest_file_slices(
        self,
        log_files: LogFileNaming,
        as_of: str | None,
        committed: Callable[[str], bool],
        slicing: LogSlicing | None = None,
        partition: str = "",
    ) -> dict[str, SliceFiles]:
        """file id -> the latest slice of each live file group, log files included
        (``FileGroup.latest_slice``; ``slicing``: what places a Hudi 1.x log file;
        ``partition``: this partition's path)."""
        found = (
            (fid, group.latest_slice(as_of, committed))
            for fid, group in sorted(self.groups(log_files, slicing, partition).items())
        )
        return {fid: files for fid, files in found if files is not None}


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
