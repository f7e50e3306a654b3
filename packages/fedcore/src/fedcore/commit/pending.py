"""Writers beside pending table services: each waited for, a bounded time, and named if it outlasts it.

A compaction reads a file slice's base and log files and writes the slice that replaces
them; a clustering rewrites whole file groups. A write that changed those file groups
meanwhile would be lost once the service completes, and a clean must keep the slices the
service reads. So while a service is pending:

- a **write** (and a rollback) waits for it to complete, listing the timeline again with
  growing pauses, for at most ``hoodie.fed.write.compaction.wait.ms``. A service another fed
  writer runs (an inline compaction) completes within its run; one whose writer died is
  rolled back once its heartbeat expires (``transaction.roll_back_failed_writes``), and the
  write goes on. A service another writer scheduled (Apache Hudi's compaction or clustering
  scheduler: it has no heartbeat of fed's) completes when Hudi's job runs it. Past the bound
  the write fails with ``CommitConflictError`` naming the instant and whose it is (for
  Hudi's: run it with Hudi's job); retry it then.
- a **compaction** or **clean** does not wait: ``refuse_beside_services`` fails it at once
  (the table services a writer runs after its commit skip it instead, and run again after
  the next write).

Who began a pending instant is told by its heartbeat: fed creates it before the instant and
removes it only after completing or rolling it back. In the moment between a heartbeat's
removal and its instant's completion (or rollback) a fed service looks like another writer's,
so such a service is listed again before it is named in an error (``_SETTLE``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NoReturn

from fedcore import properties as P
from fedcore.commit.transaction import last_beat, roll_back_failed_writes
from fedcore.exceptions import CommitConflictError
from fedcore.io.filesystems import read_object
from fedcore.timeline import REPLACE_COMMIT, REQUESTED, Instant, Timeline
from fedcore.timeline.service_plans import SERVICE_ACTIONS, service_kind

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

log = logging.getLogger("fedcore.commit.pending")

#: Listings again (and the pause before each) before a pending service without a heartbeat of
#: fed's is taken for another writer's.
_SETTLE: Final = (0.2, 0.5, 1.0)
#: The longest pause between two looks at a service being waited for.
_MAX_POLL_SECONDS: Final = 2.0


@dataclass(frozen=True)
class PendingService:
    instant: Instant
    #: "compaction", "log compaction" or "clustering" (``timeline.service_plans``).
    kind: str
    #: Begun by a fed writer (it beats fed's heartbeat); else by another writer (Apache Hudi).
    by_fed: bool

    def __str__(self) -> str:
        return f"{self.kind} {self.instant.time}"


def pending_services(table: TableHandle, timeline: Timeline) -> list[PendingService]:
    """The table services pending on ``timeline``, oldest first."""
    found = []
    for instant in timeline.pending():
        if instant.action not in SERVICE_ACTIONS:
            continue
        by_fed = last_beat(table, instant) is not None
        if instant.action == REPLACE_COMMIT and by_fed:
            continue  # fed never clusters: a replace commit of fed's is an insert overwrite
        requested = _requested(table, instant) if instant.action == REPLACE_COMMIT else b""
        kind = service_kind(instant.action, requested)
        if kind is not None:
            found.append(PendingService(instant, kind, by_fed))
    return found


def _requested(table: TableHandle, instant: Instant) -> bytes:
    try:
        return read_object(table.fs.table_fs, table.layout.instants.path(table.path, instant, REQUESTED))
    except FileNotFoundError:
        return b""  # completed or rolled back since the listing


def settled_services(table: TableHandle, timeline: Timeline) -> tuple[Timeline, list[PendingService]]:
    """The timeline and its pending services, listed again (up to ``_SETTLE``) while one looks
    like another writer's: it may be a fed service completing or rolled back this moment."""
    services = pending_services(table, timeline)
    for pause in _SETTLE:
        if all(service.by_fed for service in services):
            break
        time.sleep(pause)
        timeline = table.timeline()
        services = pending_services(table, timeline)
    return timeline, services


def wait_for_services(table: TableHandle, timeline: Timeline, doing: str) -> Timeline:
    """The timeline once no table service is pending on it (see the module docstring);
    ``doing`` names what waits, for the error (``CommitConflictError``) when it cannot."""
    bound = P.COMPACTION_WAIT_MS.of(table.options) / 1000
    start = time.monotonic()
    poll = 0.1
    while True:
        if not pending_services(table, timeline):
            return timeline
        waited = time.monotonic() - start
        if waited >= bound:
            timeline, services = settled_services(table, timeline)  # whose it is, made sure of
            if not services:
                return timeline
            refuse(
                table,
                services,
                doing,
                f" after {waited:.0f} s ({P.COMPACTION_WAIT_MS} is {bound * 1000:.0f} ms)",
            )
        log.info("%s: %s waits for a pending table service to complete", table.path, doing)
        time.sleep(min(poll, bound - waited))
        poll = min(poll * 2, _MAX_POLL_SECONDS)
        timeline = table.timeline()
        if roll_back_failed_writes(table, timeline):  # a service whose writer died
            timeline = table.timeline()


def refuse_beside_services(table: TableHandle, timeline: Timeline, doing: str) -> None:
    """Fail ``doing`` (a compaction, a clean) at once while a table service is pending."""
    _, services = settled_services(table, timeline)
    if services:
        refuse(table, services, doing)


def refuse(table: TableHandle, services: list[PendingService], doing: str, after: str = "") -> NoReturn:
    """Fail ``doing`` beside pending ``services`` (``CommitConflictError``), naming another
    writer's (Apache Hudi's) first, and what to run; ``after``: how long ``doing`` waited."""
    other = next((service for service in services if not service.by_fed), None)
    if other is None:
        raise CommitConflictError(
            f"table {table.name}: {services[0]}, which another fed writer is running, is "
            f"{'still ' if after else ''}pending{after}: retry {doing} once it completes"
        )
    raise CommitConflictError(
        f"table {table.name}: {other} is pending{after} and was scheduled by another writer than fed "
        f"(it has no heartbeat of fed's: Apache Hudi's {other.kind} scheduler), and fed does not "
        f"change the file groups it reads: run it with Apache Hudi's {other.kind} job, then retry "
        f"{doing}"
    )
