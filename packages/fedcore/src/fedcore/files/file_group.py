"""File groups and their slices, from data file names: Hudi's rules for which files make up
which version of a file group, written once for readers, writers and table services.

A file group is every file sharing a file id in one partition. Each version of it, a file
slice, starts at an instant: the instant of its base file, or, for a merge-on-read group
whose first write went to log files, the instant of its first log file. Which slice a log
file belongs to depends on the table version: up to version 6 its name carries the slice's
start; from version 8 (Hudi 1.x) its name carries the delta commit that wrote it, and the
file belongs to the slice with the greatest start not after that commit's completion time
(``LogSlicing``), so a delta commit that completed after a compaction was planned lands on
the compaction's slice. The latest slice as of an instant is the one with the greatest start
not after it; a replace commit retires a whole group. Change-data-capture log files
(``.cdc``) belong to no slice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from fedcore.exceptions import UnsupportedTableError
from fedcore.files.filenames import BASE_FILE_RE, LogFileNaming


@dataclass(frozen=True)
class SliceFiles:
    """The files of a file slice: its base file (None for a slice of log files only) and the
    log files to merge onto it, in Hudi's order (instant, version, write token)."""

    base_instant: str
    base_file: str | None
    log_files: tuple[str, ...]


@dataclass(frozen=True)
class LogSlicing:
    """What places a Hudi 1.x log file in its slice: the completion times of the delta
    commits on the timeline, the compactions still pending (each starts a slice, with no base
    file yet, that the delta commits completing after it was planned write onto), where the
    active timeline starts, the completion times of instants archived before it
    (``archived``: looked up only for those, from Hudi's archived timeline), and the slices
    completed compactions began after the instant a listing shows the files as of, whose base
    files it therefore lacks (``compacted``).

    ``completion_times``: requested time -> completion time of each completed write.
    ``compacted``: (partition, file id) -> the starts of those later slices of the group. A
    log file whose delta commit was requested by that instant, but completed after such a
    compaction began, is on the compaction's slice, which had not begun then (time travel
    leaves it out, as Hudi 1.x's does); placed without it, the file would land on the slice
    read then."""

    completion_times: Mapping[str, str]
    pending_compactions: Collection[str] = ()
    timeline_start: str = ""
    archived: Callable[[str], str | None] | None = None
    compacted: Mapping[tuple[str, str], Collection[str]] = field(default_factory=dict)

    def completion_time(self, instant: str) -> str | None:
        """When the delta commit ``instant`` completed; None if that is not known: it did not
        complete (pending, failed), or was archived with no completion time found."""
        found = self.completion_times.get(instant)
        if found is None and instant < self.timeline_start and self.archived is not None:
            found = self.archived(instant)
        return found


class GroupLog(NamedTuple):
    """A log file of a file group: the instant its name carries, its version, write token and
    name, and the start of the slice it belongs to (None: not known without the timeline, see
    ``LogSlicing``). Sorted, log files are in Hudi's merge order, the order of a slice's and
    of a slice merged with the files written onto a pending compaction's alike."""

    instant: str
    version: int
    write_token: str
    name: str
    start: str | None


@dataclass
class FileGroup:
    """One file group of a partition: its base files by instant, and its log files in
    Hudi's order."""

    file_id: str
    bases: dict[str, str] = field(default_factory=dict)
    logs: list[GroupLog] = field(default_factory=list)
    #: Whether its log files are named after the delta commits that wrote them (Hudi 1.x):
    #: each is version 1 of a file of its own, so a file's place in its slice is its rank
    #: there, not its version (``logs_onto``).
    by_commit: bool = False

    def _sliced(self) -> list[tuple[str, GroupLog]]:
        """Each log file with its slice's start; refused where the start is not known."""
        out = []
        for log in self.logs:
            if log.start is None:
                raise UnsupportedTableError(
                    f"log file {log.name} is named after the delta commit that wrote it (Hudi 1.x); "
                    "which file slice it belongs to follows from when that commit completed, which "
                    "this operation does not look up"
                )
            out.append((log.start, log))
        return out

    def starts(self) -> list[str]:
        """The instants its slices start at, oldest first."""
        return sorted(set(self.bases) | {start for start, _ in self._sliced()})

    def slice_names(self, start: str) -> list[str]:
        """The names of the files of the slice that starts at ``start``: base, then logs."""
        base = self.bases.get(start)
        return ([base] if base else []) + [log.name for at, log in self._sliced() if at == start]

    def latest_base(self, as_of: str | None = None) -> tuple[str, str] | None:
        """(instant, name) of its newest base file not after ``as_of``; None when it has none."""
        instants = [t for t in self.bases if as_of is None or t <= as_of]
        return (max(instants), self.bases[max(instants)]) if instants else None

    def logs_onto(self, start: str) -> list[tuple[int, str]]:
        """(place, name) of the log files written onto the slice starting at ``start``, in
        Hudi's order: a file's place in its slice, which the next file written onto it
        follows (``commit.transaction.log_slot``): its version where the version numbers a
        slice's files (up to table version 6), its rank in the slice where each file is
        version 1 of its own (Hudi 1.x)."""
        onto = [log for at, log in self._sliced() if at == start]
        if self.by_commit:
            return [(rank, log.name) for rank, log in enumerate(onto, 1)]
        return [(log.version, log.name) for log in onto]

    def latest_slice(self, as_of: str | None, committed: Callable[[str], bool]) -> SliceFiles | None:
        """The latest slice as of ``as_of`` (None: the newest), log files included.

        A slice starts at a committed instant: its base file's, or the instant of its first
        log file when it has no base file. Log files that start at a later, uncommitted
        instant (written while a compaction was pending) are merged onto the latest slice,
        as Hudi's file-system view merges them; which of their blocks apply is decided per
        block, by instant. Those of a later committed slice are not: as of an earlier
        instant that slice was not there (a Hudi 1.x log file may be on it for completing
        after it began, though its delta commit was requested before ``as_of``)."""
        logs = self._sliced()
        bases = {t: name for t, name in self.bases.items() if as_of is None or t <= as_of}
        starts = set(bases) | {at for at, _ in logs if committed(at) and (as_of is None or at <= as_of)}
        if not starts:
            return None
        start = max(starts)
        merged = tuple(log.name for at, log in logs if at == start or (at > start and not committed(at)))
        return SliceFiles(start, bases.get(start), merged)


def file_groups(
    names: Iterable[str], log_files: LogFileNaming, slicing: LogSlicing | None = None, partition: str = ""
) -> dict[str, FileGroup]:
    """The file groups of a partition's data files, by file id (names that are not data
    files, and change-data-capture logs, are left out). ``log_files`` is the table's log file
    naming (``TableHandle.layout.log_files``): what a log file's name says is the table
    version's to decide. ``slicing``: where a log file's name does not say its slice (Hudi
    1.x), what does; without it such a group's bases are known, its slices are not.
    ``partition``: the partition's path, where ``slicing`` knows later slices of its groups
    (``LogSlicing.compacted``)."""
    groups: dict[str, FileGroup] = {}
    by_commit = log_files.names_delta_commit
    for name in names:
        if name.startswith("."):
            log = log_files.parse(name)
            if log is None or log.cdc:
                continue
            group = groups.get(log.file_id) or groups.setdefault(log.file_id, FileGroup(log.file_id))
            group.by_commit = by_commit
            start = None if by_commit else log.instant
            group.logs.append(GroupLog(log.instant, log.version, log.write_token, name, start))
        else:
            match = BASE_FILE_RE.fullmatch(name)
            if match is None:
                continue
            group = groups.get(match[1]) or groups.setdefault(match[1], FileGroup(match[1]))
            group.bases[match[3]] = name
    for group in groups.values():
        if by_commit and slicing is not None and group.logs:
            later = slicing.compacted.get((partition, group.file_id), ())
            group.logs = _sliced_by_completion(group, slicing, later)
        group.logs.sort()
    return groups


def _sliced_by_completion(group: FileGroup, slicing: LogSlicing, later: Collection[str]) -> list[GroupLog]:
    """A group's log files placed as Hudi 1.x's file-system view places them, in Hudi's
    order: in the slice with the greatest start not after their delta commit's completion
    time; a file whose commit completed before every start begins a slice of its own (log
    files only); one whose commit's completion is not known goes onto the latest slice (its
    blocks apply only if the commit completed, archived: see ``read.slice_reader.Committed``).
    The slices are those its base files begin, and ``later``: those of compactions after the
    files listed (``LogSlicing.compacted``).

    A file named after one of the group's base instants is a version-6 file of that slice,
    left by an upgrade (a Hudi 1.x delta commit never writes a base file and a log file into
    one group): it stays in that slice, even where that instant was archived before the
    upgrade and its completion time is not known."""
    starts = set(group.bases) | set(later)
    bases = set(starts)
    placed = []
    for log in sorted(group.logs):
        if log.instant in bases:
            placed.append(log._replace(start=log.instant))
            continue
        # A pending compaction starts a slice of the groups it plans, which were there
        # before it: of a group with a slice before it (a group begun after it was planned
        # is not in its plan). Which groups it planned beyond that does not change which
        # files a read merges: its slice has not started, so its log files go onto the
        # latest started slice either way.
        first = min(starts, default=None)
        planned = {t for t in slicing.pending_compactions if first is not None and first < t}
        keys = starts | planned
        completed = slicing.completion_time(log.instant)
        before = keys if completed is None else {start for start in keys if start <= completed}
        if before:
            placed.append(log._replace(start=max(before)))
        else:
            placed.append(log._replace(start=log.instant))
            starts.add(log.instant)
    return placed
