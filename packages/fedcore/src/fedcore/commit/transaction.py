"""The commit protocol: one instant from request to completion, and its undoing.

Steps of a write, in order (each is a ``Step`` name a crash-injection test can
stop at):

1. ``requested``: ``<t>.<action>.requested`` created exclusively (unique instant);
   a heartbeat file starts being refreshed so others can tell a live writer
   from a dead one;
2. ``inflight``: the plan;
3. ``data``: for each write task, first one marker object under ``.hoodie/.temp/<t>/``
   naming every file it is about to write (``markers.mark_files``), then the files
   (through the storage strategy). Markers let a rollback delete exactly what was
   written without listing storage;
4. ``metadata``: the metadata-table delta of the instant;
5. ``claims``: one exclusive file per file-group version the write supersedes (and,
   merge-on-read, per log file place it fills: ``log_slot``); of two writers
   claiming the same one exactly one gets it, the other gets ``CommitConflictError``
   and rolls back;
6. ``outcome``: an exclusive "commit" decision (a rollback of this instant
   races for the same file, so a writer presumed dead can never complete after
   it was rolled back);
7. ``completed``: ``<t>.<action>``, the commit point readers go by.

Readers only ever look at completed instants, so a crash anywhere before step 7
leaves nothing visible; a crash between 6 and 7 is rolled forward by the next
writer, which finds the decision and the commit metadata in the outcome file.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Final

from fedcore.commit.file_writer import put_data_file
from fedcore.commit.markers import mark_claim, marked, remove_markers
from fedcore.commit.upgrade import upgrade_config
from fedcore.exceptions import CommitConflictError, InstantConflictError, RollbackError
from fedcore.io.atomic import create_exclusive
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import read_object, remove_files
from fedcore.metadata.format import Op
from fedcore.timeline import (
    CLEAN,
    COMPLETED,
    INFLIGHT,
    REQUESTED,
    ROLLBACK,
    Instant,
    Timeline,
    completion_time,
    heartbeat_path,
    new_instant,
    parse_instant_time,
    transition,
)
from fedcore.timeline.commit_metadata import WriteStat

if TYPE_CHECKING:
    from fedcore.handle import TableHandle
    from fedcore.steps import StepObserver

log = logging.getLogger("fedcore.commit.transaction")

STEPS: Final = ("requested", "inflight", "data", "metadata", "claims", "outcome", "completed")
_COMMIT: Final = b"commit"
_ROLLBACK_OUTCOME: Final = b"rollback\n"


def _commit_outcome(completion: str | None, body: bytes) -> bytes:
    """A commit decision: ``commit[ <completion time>]\n`` then the completed file's bytes. The
    completion time (versions 8 and 9 name the completed file by it) is decided with the commit,
    so whoever writes the completed file, this writer or one rolling it forward, names it alike."""
    head = _COMMIT if completion is None else _COMMIT + b" " + completion.encode()
    return head + b"\n" + body


def _decided_commit(outcome: bytes) -> tuple[str | None, bytes] | None:
    """The (completion time, completed file's bytes) of a commit decision; None for a rollback."""
    head, _, body = outcome.partition(b"\n")
    words = head.split()
    if not words or words[0] != _COMMIT:
        return None
    return (words[1].decode() if len(words) > 1 else None), body


def _now_ms() -> int:
    return int(time.time() * 1000)


def log_slot(base_instant: str, version: int) -> str:
    """The "version" a merge-on-read write claims for the ``version``-th log file of the slice
    starting at ``base_instant``: two writers appending onto one slice at once pick the same
    version and conflict, as two rewrites of one base file do; a later writer sees the
    file and takes the next. A rewrite of a slice's base file claims the slice's next log
    place too, so it conflicts with an append racing it."""
    return f"{base_instant}.log.{version}"


def stat_claims(stat: WriteStat, merge_on_read: bool) -> list[tuple[str, str]]:
    """The (file id, version) claims a written file takes: the base version a new base file
    supersedes (and, merge-on-read, that slice's next log place: the first for a rewrite,
    which fed makes of slices without log files only; the one after the log files folded in
    for a compaction), or a log file's place in its slice; nothing for a new file group."""
    if stat.is_log:
        return [(stat.file_id, log_slot(stat.prev_commit, stat.log_version))]
    if stat.prev_commit in ("", "null"):
        return []
    claims = [(stat.file_id, stat.prev_commit)]
    if merge_on_read:
        claims.append((stat.file_id, log_slot(stat.prev_commit, stat.last_log_version + 1)))
    return claims


class Heartbeat:
    """``.hoodie/.heartbeat/<t>``: proof of life, refreshed by a daemon thread."""

    def __init__(self, table: TableHandle, instant: str, interval_ms: int) -> None:
        self._fs = table.fs.table_fs
        self.path = heartbeat_path(table.path, instant)
        self._interval = interval_ms / 1000
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Keep beating; the first beat was written when the instant was requested."""
        self._thread = threading.Thread(target=self._run, name=f"fed-heartbeat-{self.path}", daemon=True)
        self._thread.start()

    def beat(self) -> None:
        with storage_errors(self.path):
            self._fs.pipe_file(self.path, str(_now_ms()).encode())

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            # A missed beat; enough of them and others may roll this write back.
            with contextlib.suppress(OSError):
                self.beat()

    def stop(self, remove: bool = False) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if remove:
            with contextlib.suppress(FileNotFoundError), storage_errors(self.path):  # one request
                self._fs.rm_file(self.path)


class Transaction:
    """The protocol state of one instant of this process.

    Use it as a context manager: entering begins the instant (requested, heartbeat);
    an ordinary exception in the block rolls the instant back at once; leaving always
    stops the heartbeat, so no caller writes that by hand. A ``BaseException`` (a
    crash stand-in, ``KeyboardInterrupt``) only stops the heartbeat, as the death of
    the process would, and the next writer recovers the instant.
    """

    def __init__(self, table: TableHandle, action: str, hook: StepObserver | None = None) -> None:
        """``hook``: called with each step's name (for writes and compactions, the observers
        of the context that began them: ``fedcore.steps.observers_now``, which also sees the
        "data" steps of pool threads; the cleans and rollbacks a write runs are not observed)."""
        self.table = table
        self.action = action
        self._hook = hook or (lambda step: None)
        self._fs = table.fs.table_fs
        self.instant: Instant | None = None
        self.heartbeat: Heartbeat | None = None
        self.claims: list[str] = []

    @property
    def time(self) -> str:
        assert self.instant is not None, "transaction not started"
        return self.instant.time

    def __enter__(self) -> Transaction:
        try:
            self.begin()
        except BaseException as error:  # a crash at "requested": as if inside the block
            self.end(error)
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.end(error)

    def end(self, error: BaseException | None = None) -> None:
        """Leave the transaction: an ordinary exception (``error``) rolls the instant back at
        once; a ``BaseException`` leaves it to the next writer's recovery; the heartbeat
        stops either way."""
        try:
            if isinstance(error, Exception):
                try:
                    self.abort()
                except Exception as failure:  # the original error matters more; recovery retries
                    log.warning("%s: rolling back %s failed: %s", self.table.path, self.instant, failure)
        finally:
            self.stop_heartbeat()

    def begin(self, requested: bytes = b"") -> str:
        """Request the instant, with ``requested`` as its requested file's content (a
        compaction's plan: Hudi reads it there). The table is first brought up to what
        this fedcore writes (``fedcore.commit.upgrade``): every instant fed makes, whatever its action."""
        upgrade_config(self.table)
        self.instant = new_instant(
            self._fs,
            self.table.path,
            self.table.layout.instants,
            self.action,
            requested,
            self.table.config.timeline_zone,
        )
        self.heartbeat = Heartbeat(self.table, self.instant.time, self.table.heartbeat_interval_ms)
        self.heartbeat.start()
        self._hook("requested")
        return self.instant.time

    def inflight(self, plan: bytes) -> None:
        assert self.instant is not None
        self.instant = transition(
            self._fs, self.table.path, self.table.layout.instants, self.instant, INFLIGHT, plan
        )
        self._hook("inflight")

    @classmethod
    def resume(cls, table: TableHandle, action: str, instant_time: str) -> Transaction:
        """The transaction of an instant another process began (an engine's driver began it,
        this process completes it): it must still be pending, its writer's heartbeat is
        refreshed now, and no heartbeat thread is started."""
        transaction = cls(table, action)
        found = table.timeline().find(instant_time)
        if found is None or found.is_completed or found.action != action:
            raise CommitConflictError(
                f"instant {instant_time} is no longer a pending {action} (rolled back by another "
                "writer after its heartbeat expired?); nothing of this write is visible"
            )
        transaction.instant = found
        transaction.heartbeat = Heartbeat(table, instant_time, table.heartbeat_interval_ms)
        transaction.heartbeat.beat()
        return transaction

    def write_file(self, relative_path: str, data: bytes) -> None:
        """A data file whose marker batch is written (``markers.mark_files``); the "data"
        step comes between the two."""
        self._hook("data")
        put_data_file(self.table, relative_path, data)

    def remove_unreferenced(self, written: Iterable[str]) -> list[str]:
        """Delete the data files this instant's markers name that ``written`` (logical paths)
        does not: those of task attempts that failed or lost to a retry. Returns them."""
        keep = set(written)
        stray = [logical for logical in marked(self.table, self.time)[0] if logical not in keep]
        for logical in stray:
            with contextlib.suppress(FileNotFoundError):  # its task died before writing it
                self.table.fs.rm_file(logical)
        return stray

    def commit(
        self,
        body: bytes,
        ops: Iterable[Op],
        supersedes: Iterable[tuple[str, str]] = (),
        schema: str | None = None,
    ) -> str:
        """Steps 4-7: ``body`` is the completed instant's content (commit, clean or rollback
        metadata); ``supersedes`` the (file id, base instant) of every file-group version
        replaced; ``schema`` a write's Avro schema, recorded in its metadata-table delta too."""
        assert self.instant is not None
        index = self.table.metadata_table_or_none()
        if index is not None:
            index.write_delta(self.time, ops, schema)
        self._hook("metadata")
        for file_id, base in sorted(set(supersedes)):
            self._claim(f"{file_id}_{base}")
        self._hook("claims")
        naming = self.table.layout.instants
        # Listed here, after the claims, not taken from the listing that requested the instant:
        # that one showed no time later than the instant's own (``new_instant``), so it would
        # give "now" and nothing more. A compaction planned without this instant since then
        # conflicts with it on a claim only if it is fed's (Apache Hudi's scheduler takes
        # none), and an instant that completed since (named by a clock ahead of this one, or
        # past "now" by its own listing) must also come before it by completion time, or an
        # incremental query that read up to it would never see this one. This listing leaves
        # only the moment between the claims and the completion to the clocks.
        completion = (
            completion_time(self._fs, self.table.path, naming, self.instant, self.table.config.timeline_zone)
            if naming.completion_times
            else None
        )
        try:
            # Owned: a rollback writes other bytes, so identical bytes are this commit's own.
            create_exclusive(
                self._fs, self.table.outcome_path(self.time), _commit_outcome(completion, body), owned=True
            )
        except FileExistsError:
            raise CommitConflictError(
                f"instant {self.time} was rolled back by another process while it was being written"
            ) from None
        self._hook("outcome")
        try:
            self.instant = transition(
                self._fs, self.table.path, naming, self.instant, COMPLETED, body, completion
            )
        except InstantConflictError:
            # Another process found the commit decision and rolled this instant forward.
            self.instant = Instant(
                self.instant.time, self.instant.action, COMPLETED, completion_time=completion
            )
        self._hook("completed")
        self.finish()
        return self.time

    def _claim(self, name: str) -> None:
        # Recorded among the markers first, so a rollback knows which claims to release.
        mark_claim(self.table, self.time, name)
        path = self.table.claim_path(name)
        for attempt in (1, 2, 3):
            try:
                create_exclusive(self._fs, path, self.time.encode())
                self.claims.append(name)
                return
            except FileExistsError:
                try:
                    holder = read_object(self._fs, path).decode()
                except FileNotFoundError:
                    continue  # released since (its holder rolled back): take it again
                if holder == self.time:  # this instant's own: a create retried after its answer was lost
                    self.claims.append(name)
                    return
                if is_rolled_back(self.table, holder):
                    # Its holder can never complete, yet its claim was left behind (see ``abort``):
                    # released now, as its rollback should have.
                    release_claim(self.table, name, holder)
                    continue
                if attempt < 3 and roll_back_if_failed(self.table, holder):
                    continue  # the holder was a dead writer: its claim is released now
                raise CommitConflictError(
                    f"instant {self.time} conflicts with instant {holder}: both change file group "
                    f"version {name}; retry the write on the new table state"
                ) from None
        raise CommitConflictError(
            f"instant {self.time} could not claim file group version {name}: other writers took and "
            "released it meanwhile; retry the write on the new table state"
        )

    def finish(self) -> None:
        """Housekeeping after completion; a crash here leaves only garbage that readers ignore,
        and a failure here never fails the instant, which is already complete."""
        try:
            if self.heartbeat is not None:
                self.heartbeat.stop(remove=True)
            remove_markers(self.table, self.time)
        except OSError as exc:
            log.warning(
                "%s: cleaning up after instant %s failed (harmless): %s", self.table.path, self.time, exc
            )

    def stop_heartbeat(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()

    def abort(self) -> None:
        """Undo this transaction now (an ordinary error, not a crash)."""
        if self.heartbeat is not None:
            self.heartbeat.stop()
        if self.instant is not None and not self.instant.is_completed:
            roll_back_pending(self.table, self.instant)
            if is_rolled_back(self.table, self.time):
                # A rollback by another process (it took this writer for dead) may have listed
                # this instant's markers before a claim was marked and deleted them after: the
                # claims this process took itself are released here, or none would ever be.
                for name in self.claims:
                    release_claim(self.table, name, self.time)


def is_failed(table: TableHandle, instant: Instant) -> bool:
    """A pending instant whose writer stopped beating its heartbeat.

    The instant's own time counts as its first beat: a writer creates the requested
    file a moment before its heartbeat file, and an instant just requested must never
    look dead to another writer in that moment. An instant time is the clock when it
    was requested (or later), so a writer that died before its first beat still
    expires after the same interval as any other."""
    last = last_beat(table, instant) or 0
    requested_ms = int(parse_instant_time(instant.time, table.config.timeline_zone).timestamp() * 1000)
    expiry = table.heartbeat_interval_ms * (table.heartbeat_tolerable_misses + 1)
    return _now_ms() - max(last, requested_ms) > expiry


def last_beat(table: TableHandle, instant: Instant) -> int | None:
    """The last beat (epoch ms) fed's heartbeat of a pending instant holds; None when it has
    none of fed's: Apache Hudi's writers beat an empty file, or none at all."""
    path = heartbeat_path(table.path, instant.time)
    try:
        with storage_errors(path):
            return int(table.fs.table_fs.cat_file(path).decode())
    except (FileNotFoundError, ValueError):
        return None


def check_begun_by_fed(table: TableHandle, instant: Instant) -> None:
    """Refuse to roll back a pending instant fed did not begin (``RollbackError``).

    fed's writers create an instant's heartbeat, holding its first beat, before its requested
    file, and remove it only once the instant is completed or rolled back, so a pending
    instant of fed's always has one. Another writer's (Apache Hudi's) has none or an empty
    one: fed cannot tell whether that writer is alive (Hudi's single-writer default beats
    no heartbeat at all), nor undo it exactly (its markers may be kept by Hudi's timeline
    server; on merge-on-read it may have appended to log files). Hudi rolls back its own
    failed writes on its next write."""
    if last_beat(table, instant) is None:
        raise RollbackError(
            f"{instant} of table {table.name} was begun by another writer (it has no heartbeat of "
            "fed's): fed does not roll it back. Apache Hudi's writers roll back their failed writes "
            "on their next write (or use hudi-cli's `commit rollback`)"
        )


def _outcome(table: TableHandle, instant_time: str) -> bytes | None:
    """``instant_time``'s outcome object (one GET; an existence check may also list), or
    None while it is undecided. Outcomes are created exclusively and never removed."""
    path = table.outcome_path(instant_time)
    try:
        with storage_errors(path):
            return read_object(table.fs.table_fs, path)
    except FileNotFoundError:
        return None


def is_rolled_back(table: TableHandle, instant_time: str) -> bool:
    """Whether ``instant_time``'s outcome is a rollback: it can never complete."""
    outcome = _outcome(table, instant_time)
    return outcome is not None and outcome.startswith(_ROLLBACK_OUTCOME)


def is_decided(table: TableHandle, instant_time: str) -> bool:
    """Whether ``instant_time``'s outcome (commit or rollback) is decided: a write task that
    sees it may no longer add files to the instant (``FileGroupWriter``'s fence)."""
    return _outcome(table, instant_time) is not None


def roll_back_if_failed(table: TableHandle, instant_time: str) -> bool:
    """Roll back ``instant_time`` if it is pending and its writer is dead; True if it was."""
    instant = table.timeline().find(instant_time)
    if instant is None or instant.is_completed or last_beat(table, instant) is None:
        return False
    if not is_failed(table, instant):
        return False
    roll_back_pending(table, instant)
    return True


def roll_back_pending(table: TableHandle, instant: Instant) -> str | None:
    """Roll back a pending instant (or roll it forward if it had decided to commit).

    Returns the rollback instant's time, or None if the instant was rolled forward
    (or was itself a clean or rollback, which are dropped rather than rolled back).
    """
    fs = table.fs.table_fs
    outcome = table.outcome_path(instant.time)
    try:
        create_exclusive(fs, outcome, _ROLLBACK_OUTCOME)
    except FileExistsError:
        decided = _decided_commit(read_object(fs, outcome))
        if decided is not None:
            completion, body = decided
            naming = table.layout.instants
            if completion is None and naming.completion_times:
                # Decided on version 6 by a writer the table's upgrade to 8 or 9 overtook.
                completion = completion_time(fs, table.path, naming, instant, table.config.timeline_zone)
            with contextlib.suppress(InstantConflictError):  # completed meanwhile
                transition(fs, table.path, table.layout.instants, instant, COMPLETED, body, completion)
            remove_markers(table, instant.time)
            return None
    if instant.action in (ROLLBACK, CLEAN):
        # Neither changed anything visible before completing, and the outcome now taken
        # stops it from ever completing: drop it; the next run redoes its work.
        _abandon(table, instant)
        return None
    start = time.monotonic()
    with Transaction(table, ROLLBACK) as rollback:
        deleted = _delete_written_files(table, instant.time)
        index = table.metadata_table_or_none()
        if index is not None:
            index.discard_delta(instant.time)
        body = rollback_body(rollback, instant, deleted, start)
        rollback.inflight(b"")
        rollback.commit(body, [])
    remove_instant_files(table, instant, (INFLIGHT, REQUESTED))
    remove_markers(table, instant.time)
    return rollback.time


def rollback_body(
    rollback: Transaction, undone: Instant, deleted: dict[str, list[str]], start: float
) -> bytes:
    """The completed rollback instant's metadata; ``start`` is the ``time.monotonic()`` it began."""
    return rollback.table.layout.services.rollback(
        start=rollback.time,
        rolled_back=undone.time,
        action=undone.action,
        deleted=deleted,
        took_ms=int((time.monotonic() - start) * 1000),
    )


def _delete_written_files(table: TableHandle, instant: str) -> dict[str, list[str]]:
    """Delete the data files and claims the markers of ``instant`` name."""
    files, claims = marked(table, instant)
    for claim in claims:
        release_claim(table, claim, instant)
    deleted: dict[str, list[str]] = {}
    for logical in files:
        with contextlib.suppress(FileNotFoundError):  # never written, or another roller got it
            table.fs.rm_file(logical)
        partition, _, name = logical.rpartition("/")
        deleted.setdefault(partition, []).append(name)
    return deleted


def roll_back_failed_writes(table: TableHandle, timeline: Timeline | None = None) -> list[str]:
    """The eager rollback every writer runs first: undo pending instants whose writers died
    (or complete those that had decided to commit). Returns the instants resolved either
    way: the timeline changed if any."""
    timeline = table.timeline() if timeline is None else timeline
    done = []
    for instant in timeline.pending():
        if last_beat(table, instant) is None:
            # Another writer's (Apache Hudi's: a write, a clustering or compaction plan): it
            # finishes or rolls back its own (see check_begun_by_fed).
            continue
        if is_failed(table, instant):
            roll_back_pending(table, instant)
            done.append(instant.time)
    return done


def remove_instant_files(table: TableHandle, instant: Instant, states: Iterable[str | None]) -> None:
    """Delete an undone instant's timeline files (None: the completed one) and its heartbeat."""
    paths = [table.layout.instants.path(table.path, instant, state) for state in states]
    # Idempotent: two writers may roll back the same dead instant at once.
    remove_files(table.fs.table_fs, [*paths, heartbeat_path(table.path, instant.time)])


def release_claim(table: TableHandle, name: str, holder: str) -> None:
    """Delete a claim, but only if ``holder`` holds it."""
    fs = table.fs.table_fs
    path = table.claim_path(name)
    with contextlib.suppress(FileNotFoundError), storage_errors(path):  # released already (a racing roller)
        if read_object(fs, path).decode() == holder:
            fs.rm_file(path)


def _abandon(table: TableHandle, instant: Instant) -> None:
    remove_instant_files(table, instant, (INFLIGHT, REQUESTED))
    index = table.metadata_table_or_none()
    if index is not None:
        index.discard_delta(instant.time)
