"""The timeline: Hudi's ``.hoodie/<instant>.<action>[.<state>]`` files, read and advanced.

An instant moves requested -> inflight -> completed, each step a new file. The
completed file is created exclusively and atomically (``io.atomic``), so two
writers can never both complete one instant and a reader sees either the whole
completed instant or none of it: that one file is the commit point of every
operation in fedcore.

How instant files are named and where they are listed depends on the table version: every
function here takes the table's ``InstantNaming`` (``fedcore.timeline.naming``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Final

from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.exceptions import InstantConflictError, UnsupportedTableError
from fedcore.io.atomic import create_exclusive
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import list_names_after
from fedcore.properties import HOODIE_FOLDER
from fedcore.timeline.instant import (
    ACTIONS,
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    COMPLETED,
    DELTA_COMMIT,
    INFLIGHT,
    LOG_COMPACTION,
    MERGE_ON_READ_WRITE_ACTIONS,
    READABLE_ACTIONS,
    REPLACE_COMMIT,
    REQUESTED,
    ROLLBACK,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    instant_time,
    parse_instant_time,
)
from fedcore.timeline.naming import InstantNaming

__all__ = [
    "ACTIONS",
    "ARCHIVED_MARKER_PREFIX",
    "ARCHIVE_FOLDER",
    "CLEAN",
    "COMMIT",
    "COMPACTION",
    "COMPLETED",
    "DELTA_COMMIT",
    "INFLIGHT",
    "MANIFEST_POINTER_PREFIX",
    "MERGE_ON_READ_WRITE_ACTIONS",
    "READABLE_ACTIONS",
    "REPLACE_COMMIT",
    "REQUESTED",
    "ROLLBACK",
    "SAVEPOINT",
    "WRITE_ACTIONS",
    "Instant",
    "InstantNaming",
    "Timeline",
    "completion_time",
    "heartbeat_path",
    "instant_time",
    "new_instant",
    "parse_instant_time",
    "transition",
]

#: Pending actions whose instants complete as another action.
_COMPLETES_AS: Final = {COMPACTION: COMMIT, CLUSTERING: REPLACE_COMMIT, LOG_COMPACTION: DELTA_COMMIT}
#: The actions fedcore's own instants have (a delta commit only on merge-on-read tables).
_OWN_ACTIONS: Final = (*ACTIONS, DELTA_COMMIT)
#: Actions whose new instants only add to what a listed timeline shows (see ``Timeline.load``).
_APPENDED: Final = frozenset({COMMIT, REPLACE_COMMIT, DELTA_COMMIT, CLEAN})
#: ``.hoodie/fed-manifest-<instant>``: an empty file naming a metadata-table manifest, so the
#: timeline's listing also says where lookups start (no listing of manifests/). Hudi's
#: timeline ignores files without an instant's extension.
MANIFEST_POINTER_PREFIX: Final = "fed-manifest-"
_POINTER_RE = re.compile(re.escape(MANIFEST_POINTER_PREFIX) + r"(\d{17})")
#: ``.hoodie/fed-archived-<instant>``: an empty file archival creates before it moves the
#: instants up to ``<instant>`` out, so a listing says how far they went (a long-lived
#: handle's cached metadata-table view from before that point lacks them).
ARCHIVED_MARKER_PREFIX: Final = "fed-archived-"
#: The archive folder in ``.hoodie/`` (``hoodie.archivelog.folder``): fed's archival and
#: Hudi's both move instants there.
ARCHIVE_FOLDER: Final = "archived"
_ARCHIVED_RE = re.compile(re.escape(ARCHIVED_MARKER_PREFIX) + r"(\d{17})")


class Timeline:
    """The instants of a table, each in its most advanced state, oldest first, the
    metadata-table manifests the listing named (``manifests``, oldest first) and the
    newest instant archival has moved out or is moving out (``archived_through``, from
    its markers; None when none was seen)."""

    def __init__(
        self,
        instants: Iterable[Instant],
        manifests: Iterable[str] = (),
        archived_through: str | None = None,
        has_archive: bool = False,
        upgraded: bool = False,
    ) -> None:
        self.manifests: tuple[str, ...] = tuple(sorted(manifests))
        self.archived_through = archived_through
        #: Whether the listing showed an archive folder (fed's archival or Hudi's wrote one), or
        #: of version 8 and later the archived timeline's folder.
        self.has_archive = has_archive
        #: Whether a version-6 listing of ``.hoodie/`` showed the ``timeline/`` folder of table
        #: version 8 and later: an upgrade (Hudi 1.x's writer at its defaults, or ``fed
        #: upgrade``) has begun or ended, and the config says which (``TableHandle.timeline``).
        self.upgraded = upgraded
        latest: dict[tuple[str, str], Instant] = {}
        rank = {REQUESTED: 0, INFLIGHT: 1, COMPLETED: 2}
        for instant in instants:
            key = (instant.time, instant.action)
            if key not in latest or rank[instant.state] > rank[latest[key].state]:
                latest[key] = instant
        # A compaction's requested and inflight files stay beside the commit it completed as
        # (a clustering's beside its replace commit, a log compaction's beside its delta commit).
        done = {(time, action) for (time, action), i in latest.items() if i.is_completed}
        self.instants: tuple[Instant, ...] = tuple(
            sorted(
                i
                for (time, action), i in latest.items()
                if action not in _COMPLETES_AS or (time, _COMPLETES_AS[action]) not in done
            )
        )

    @classmethod
    def load(
        cls, fs: AbstractFileSystem, table_path: str, naming: InstantNaming, since: Timeline | None = None
    ) -> Timeline:
        """The timeline as listed now.

        ``since``: a timeline of the same table listed earlier, for reads of the latest
        snapshot (a long-lived reader planning query after query). On an object store only
        the names from its earliest pending instant on (else from its last instant) are
        listed, with the store skipping the rest, so the listing stays a few keys long
        however many instants the active timeline holds. That is exact because fedcore's
        writers never complete an instant requested after a later one was visible
        (``new_instant``), and the one thing it cannot see, instants that went from before
        that point, is caught by what accompanies it: archival adds a marker (and drops a
        manifest pointer; compaction adds one) and a rollback adds a rollback instant;
        either makes it list the whole timeline again. Timelines of tables without
        fedcore's metadata table (their writers follow no such rule) are always listed
        whole. ``naming``: the table version's names of instant files and the folders they
        and fed's pointer files are listed from (one listing where that is one folder)."""
        folders = naming.folder(table_path), naming.pointer_folder(table_path)
        if since is not None and since.manifests and since.instants:
            pending = since.pending()
            mark = pending[0].time if pending else since.instants[-1].time
            # fed's pointer files and the archive folder are named with letters, which sort
            # after every instant time: a listing after ``mark`` holds all of them.
            after = {folder: list_names_after(fs, folder, mark) for folder in dict.fromkeys(folders)}
            instant_names, pointer_names = after[folders[0]], after[folders[1]]
            if instant_names is not None and pointer_names is not None:
                listed = cls._from_names(instant_names, pointer_names, naming)
                kept = [i for i in since.instants if i.time < mark]
                known = set(since.instants)
                news = [i for i in listed.instants if i not in known]
                unchanged = (listed.manifests, listed.archived_through, listed.has_archive) == (
                    since.manifests,
                    since.archived_through,
                    since.has_archive,
                )
                # A ``timeline/`` folder (``upgraded``) changes nothing here: while the config
                # says version 6 the old folder is the table's timeline, which fed's upgrade
                # leaves as it is until it has switched the config (the handle then lists the
                # new folder whole: ``TableHandle.timeline``).
                if unchanged and all(i.action in _APPENDED for i in news):
                    return cls(
                        kept + list(listed.instants),
                        listed.manifests,
                        listed.archived_through,
                        listed.has_archive,
                        listed.upgraded,
                    )
        listed_now = {folder: _names_in(fs, folder) for folder in dict.fromkeys(folders)}
        return cls._from_names(listed_now[folders[0]], listed_now[folders[1]], naming)

    @classmethod
    def _from_names(
        cls, instant_names: Iterable[str], pointer_names: Iterable[str], naming: InstantNaming
    ) -> Timeline:
        """The timeline of the names listed in the instants' folder and in fed's pointer
        files' folder (``InstantNaming.pointer_folder``)."""
        names = list(pointer_names)
        pointers = [match[1] for match in map(_POINTER_RE.fullmatch, names) if match is not None]
        archived = [match[1] for match in map(_ARCHIVED_RE.fullmatch, names) if match is not None]
        instant_names = list(instant_names)
        instants = (instant for instant in map(naming.parse, instant_names) if instant is not None)
        # A version-8 timeline folder is listed for its instants, and holds no folder of that name.
        upgraded = P.DEFAULT_TIMELINE_FOLDER in instant_names
        # Hudi's archived timeline: its log in ``.hoodie/archived/``, or from version 8 on the
        # history in the timeline folder (fed's archival of such tables writes there too).
        has_archive = ARCHIVE_FOLDER in names or (
            naming.history_folder("") is not None and P.DEFAULT_HISTORY_FOLDER in instant_names
        )
        return cls(instants, pointers, max(archived, default=None), has_archive, upgraded)

    def __iter__(self) -> Iterator[Instant]:
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def completed(self, actions: Iterable[str] = _OWN_ACTIONS, as_of: str | None = None) -> list[Instant]:
        wanted = set(actions)
        return [
            i
            for i in self.instants
            if i.is_completed and i.action in wanted and (as_of is None or i.time <= as_of)
        ]

    def check_readable(self, table_name: str, merge_on_read: bool = False) -> None:
        """Raise UnsupportedTableError if a completed instant is of an action fedcore cannot
        apply: reading past it would silently miss (or misread) what it wrote."""
        readable = READABLE_ACTIONS | {DELTA_COMMIT} if merge_on_read else READABLE_ACTIONS
        for instant in self.instants:
            if instant.is_completed and instant.action not in readable:
                raise UnsupportedTableError(
                    f"table {table_name} has a completed {instant.action} instant ({instant.time}); "
                    f"fedcore applies only {', '.join(sorted(readable))} instants, so it "
                    "refuses to read or write this table rather than miss what that instant did"
                )

    def pending(self) -> list[Instant]:
        return [i for i in self.instants if not i.is_completed]

    def latest_completed(self, actions: Iterable[str] = WRITE_ACTIONS) -> Instant | None:
        done = self.completed(actions)
        return done[-1] if done else None

    def find(self, time: str) -> Instant | None:
        for instant in self.instants:
            if instant.time == time and instant.action in _OWN_ACTIONS:
                return instant
        return None

    def last_time(self) -> str | None:
        """The latest time on the timeline: an instant's requested time or, where names carry
        them (versions 8 and 9), its completion time, which is later."""
        return max((i.completed_at for i in self.instants), default=None)


def _names_in(fs: AbstractFileSystem, folder: str) -> list[str]:
    """The names ``folder`` lists now (refresh: s3fs caches listings, and a stale timeline
    would hide commits)."""
    try:
        with storage_errors(folder):
            return [entry.rsplit("/", 1)[-1] for entry in fs.ls(folder, detail=False, refresh=True)]
    except FileNotFoundError:
        # A version-8/9 table's timeline folder before its first instant, on a store without
        # folders: the table's existence is its hoodie.properties, read before this.
        return []


def _listed(fs: AbstractFileSystem, table_path: str, naming: InstantNaming) -> Timeline:
    """The instants as listed now, from the instants' folder alone: fed's pointer files say
    nothing of instants, so on versions 8 and 9, whose instants are listed from a folder of
    their own, one listing where ``Timeline.load`` makes two."""
    names = _names_in(fs, naming.folder(table_path))
    return Timeline(instant for instant in map(naming.parse, names) if instant is not None)


def heartbeat_path(table_path: str, time: str) -> str:
    return f"{table_path}/{HOODIE_FOLDER}/.heartbeat/{time}"


def new_instant(
    fs: AbstractFileSystem,
    table_path: str,
    naming: InstantNaming,
    action: str,
    plan: bytes = b"",
    zone: tzinfo | None = timezone.utc,
) -> Instant:
    """Request a new instant, strictly later than any on the timeline and unique among writers.

    An instant time must be unique across actions, not only per action: a commit and a
    clean with the same time would share a metadata-table delta, a marker folder and an
    outcome. Hudi's timeline file names differ by action, so the time is reserved by
    creating the instant's heartbeat file exclusively (it holds the first beat, so the
    instant never exists without proof of life), and only then its requested file. Two
    writers that pick the same time both see the reservation, and one moves on to the
    next millisecond. A heartbeat goes when its instant ends, so the listing below also
    refuses a time another instant on the timeline has.

    The timeline is listed after the requested file exists, not before: if any instant
    later than ours is on it, ours is withdrawn (requested file, then heartbeat) and a
    later time tried. So no instant ever completes that was requested after a later one
    was visible, whatever a writer's clock or pauses: what a reader has listed stays
    listed, and ``Timeline.load(since=...)`` may list only from its earliest pending instant.

    ``zone``: the table's timeline zone (``TableConfig.timeline_zone``; None: local time, as
    Hudi's writers make instant times on a ``LOCAL`` table).
    """
    moment = datetime.now(timezone.utc)
    for _ in range(100):
        instant = Instant(instant_time(moment, zone), action, REQUESTED)
        moment += timedelta(milliseconds=1)
        beat = str(int(datetime.now(timezone.utc).timestamp() * 1000)).encode()
        beating = heartbeat_path(table_path, instant.time)
        try:
            create_exclusive(fs, beating, beat)
        except FileExistsError:
            continue  # another writer's instant (running, or finished and not yet cleaned up)
        try:
            create_exclusive(fs, naming.path(table_path, instant), plan)
        except FileExistsError:
            # An instant of this time whose heartbeat is already gone: not ours to touch.
            with storage_errors(beating):
                fs.rm_file(beating)
            continue
        listed = _listed(fs, table_path, naming)
        last = listed.last_time()
        if last == instant.time and [i for i in listed.instants if i.time == instant.time] == [instant]:
            return instant
        # A later instant is there, or another of this time whose heartbeat had gone (it
        # completed: instant times run ahead of the clock when writers contend, so the clock
        # can reach a completed instant's time): withdraw ours, go past it.
        with storage_errors(beating):
            fs.rm_file(naming.path(table_path, instant))
            fs.rm_file(beating)
        if last is not None:
            moment = max(moment, parse_instant_time(last, zone) + timedelta(milliseconds=1))
    raise InstantConflictError(f"could not request a new {action} instant on {table_path}")


def completion_time(
    fs: AbstractFileSystem,
    table_path: str,
    naming: InstantNaming,
    instant: Instant,
    zone: tzinfo | None = timezone.utc,
) -> str:
    """The completion time of ``instant``, about to complete (versions 8 and 9 name a completed
    instant by it): now, but later than every time on the timeline as listed now, this
    instant's own included. Hudi orders a log file by its delta commit's completion time against
    the requested times of compactions: a completion time at or before a compaction that was
    planned without this instant would put its log file under the compaction's new base, which
    lacks its records. What could still be planned without it after this listing conflicts with
    it on a claim (``fedcore.commit.transaction``). The time is chosen once, recorded with the
    commit decision, and a writer that rolls the instant forward uses it, so the instant has one
    completed file whoever writes it."""
    last = _listed(fs, table_path, naming).last_time() or instant.time
    later = parse_instant_time(max(last, instant.time), zone) + timedelta(milliseconds=1)
    return instant_time(max(datetime.now(timezone.utc), later), zone)


def transition(
    fs: AbstractFileSystem,
    table_path: str,
    naming: InstantNaming,
    instant: Instant,
    state: str,
    content: bytes,
    completion: str | None = None,
) -> Instant:
    """Move an instant to ``state``; completing it is the exclusive, atomic commit point.
    ``completion``: the completion time a completed instant's name carries (versions 8, 9)."""
    if state == COMPLETED and naming.completion_times and completion is None:
        raise ValueError(f"completing {instant} needs its completion time")
    moved = Instant(instant.time, instant.action, state, completion_time=completion)
    try:
        create_exclusive(fs, naming.path(table_path, moved), content)
    except FileExistsError:
        raise InstantConflictError(
            f"instant {naming.file_name(moved)} already exists on {table_path}"
        ) from None
    return moved
