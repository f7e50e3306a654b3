"""File groups and their slices, from data file names: Hudi's rules for which files make up
which version of a file group, written once for readers, writers and table services.

A file group is every file sharing a file id in one partition. Each version of it, a file
slice, starts at an instant: the instant of its base file, or, for a merge-on-read group
whose first write went to log files, the base instant its log files name. A slice's log
files are those written onto it (their base instant is the slice's start). The latest slice
as of an instant is the one with the greatest start not after it; a replace commit retires
a whole group. Change-data-capture log files (``.cdc``) belong to no slice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fedcore.files.filenames import BASE_FILE_RE, LogFileNaming


@dataclass(frozen=True)
class SliceFiles:
    """The files of a file slice: its base file (None for a slice of log files only) and the
    log files to merge onto it, in Hudi's order (base instant, version, write token)."""

    base_instant: str
    base_file: str | None
    log_files: tuple[str, ...]


@dataclass
class FileGroup:
    """One file group of a partition: its base files by instant, and its log files (slice
    start, version, write token, name), in Hudi's order."""

    file_id: str
    bases: dict[str, str] = field(default_factory=dict)
    logs: list[tuple[str, int, str, str]] = field(default_factory=list)

    def starts(self) -> list[str]:
        """The instants its slices start at, oldest first."""
        return sorted(set(self.bases) | {log[0] for log in self.logs})

    def slice_names(self, start: str) -> list[str]:
        """The names of the files of the slice that starts at ``start``: base, then logs."""
        base = self.bases.get(start)
        return ([base] if base else []) + [log[3] for log in self.logs if log[0] == start]

    def latest_base(self, as_of: str | None = None) -> tuple[str, str] | None:
        """(instant, name) of its newest base file not after ``as_of``; None when it has none."""
        instants = [t for t in self.bases if as_of is None or t <= as_of]
        return (max(instants), self.bases[max(instants)]) if instants else None

    def logs_onto(self, start: str) -> list[tuple[int, str]]:
        """(version, name) of the log files written onto the slice starting at ``start``."""
        return [(log[1], log[3]) for log in self.logs if log[0] == start]

    def latest_slice(self, as_of: str | None, committed: Callable[[str], bool]) -> SliceFiles | None:
        """The latest slice as of ``as_of`` (None: the newest), log files included.

        A slice starts at a committed instant: its base file's, or the instant of its first
        log file when it has no base file. Log files that start at a later, uncommitted
        instant (written while a compaction was pending) are merged onto the latest slice,
        as Hudi's file-system view merges them; which of their blocks apply is decided per
        block, by instant."""
        bases = {t: name for t, name in self.bases.items() if as_of is None or t <= as_of}
        starts = set(bases) | {
            log[0] for log in self.logs if committed(log[0]) and (as_of is None or log[0] <= as_of)
        }
        if not starts:
            return None
        start = max(starts)
        merged = tuple(
            log[3] for log in self.logs if log[0] == start or (log[0] > start and log[0] not in starts)
        )
        return SliceFiles(start, bases.get(start), merged)


def file_groups(names: Iterable[str], log_files: LogFileNaming) -> dict[str, FileGroup]:
    """The file groups of a partition's data files, by file id (names that are not data
    files, and change-data-capture logs, are left out). ``log_files`` is the table's log file
    naming (``TableHandle.layout.log_files``): what a log file's name says is the table
    version's to decide."""
    groups: dict[str, FileGroup] = {}
    for name in names:
        if name.startswith("."):
            log = log_files.parse(name)
            if log is None or log.cdc:
                continue
            group = groups.get(log.file_id) or groups.setdefault(log.file_id, FileGroup(log.file_id))
            group.logs.append((log.instant, log.version, log.write_token, name))
        else:
            match = BASE_FILE_RE.fullmatch(name)
            if match is None:
                continue
            group = groups.get(match[1]) or groups.setdefault(match[1], FileGroup(match[1]))
            group.bases[match[3]] = name
    for group in groups.values():
        group.logs.sort()
    return groups
