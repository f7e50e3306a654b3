"""An instant: one action on a table's timeline at one time, in one state.

What an instant is does not depend on the table version; how its files are named and where
they are listed does (``fedcore.timeline.naming``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from typing import Final

from fedcore.exceptions import InvalidInstantError

COMMIT: Final = "commit"
REPLACE_COMMIT: Final = "replacecommit"
CLEAN: Final = "clean"
ROLLBACK: Final = "rollback"
#: Actions that add or replace data files: the ones a snapshot is made of.
WRITE_ACTIONS: Final = frozenset({COMMIT, REPLACE_COMMIT})
ACTIONS: Final = (COMMIT, REPLACE_COMMIT, CLEAN, ROLLBACK)
#: Merge-on-read writes: log blocks (and new base files) that a snapshot merges.
DELTA_COMMIT: Final = "deltacommit"
#: Compaction, pending: completed, it is a ``commit``.
COMPACTION: Final = "compaction"
#: Hudi 1.x's clustering, pending: completed, it is a ``replacecommit`` (Hudi 0.x names the
#: pending one ``replacecommit`` too).
CLUSTERING: Final = "clustering"
#: Hudi 1.x's log compaction, pending: completed, it is a ``deltacommit``.
LOG_COMPACTION: Final = "logcompaction"
#: Hudi's asynchronous indexing: it builds its metadata table's indexes and changes no data.
INDEXING: Final = "indexing"
#: Every action whose files make up a merge-on-read snapshot.
MERGE_ON_READ_WRITE_ACTIONS: Final = WRITE_ACTIONS | {DELTA_COMMIT}

REQUESTED: Final = "requested"
INFLIGHT: Final = "inflight"
COMPLETED: Final = "completed"

_INSTANT_FORMAT = "%Y%m%d%H%M%S%f"
SAVEPOINT: Final = "savepoint"
#: Completed actions a reader understands (and ``deltacommit`` on merge-on-read tables); any
#: other (restore, log compaction, an action of a newer Hudi) makes the table unreadable for
#: fedcore, never silently skipped. Indexing changes only Hudi's metadata table.
READABLE_ACTIONS: Final = frozenset({*ACTIONS, SAVEPOINT, INDEXING})


def instant_time(moment: datetime, zone: tzinfo | None = timezone.utc) -> str:
    """Hudi's instant time: ``yyyyMMddHHmmssSSS`` in the table's timeline zone (``zone``;
    None: this process's local zone, Hudi's ``LOCAL``)."""
    return moment.astimezone(zone).strftime(_INSTANT_FORMAT)[:-3]


def parse_instant_time(value: str, zone: tzinfo | None = timezone.utc) -> datetime:
    """The moment an instant time stands for, read in the table's timeline zone (``zone``;
    None: this process's local zone)."""
    if not re.fullmatch(r"\d{17}|\d{14}", value or ""):
        raise InvalidInstantError(f"{value!r} is not an instant time (yyyyMMddHHmmssSSS)")
    try:
        if len(value) == 14:
            naive = datetime.strptime(value, "%Y%m%d%H%M%S")
        else:
            naive = datetime.strptime(value + "000", _INSTANT_FORMAT)
    except ValueError:
        raise InvalidInstantError(f"{value!r} is not a valid date and time") from None
    return naive.replace(tzinfo=zone) if zone is not None else naive.astimezone()


@dataclass(frozen=True, order=True)
class Instant:
    """An action at its requested ``time``, in ``state``.

    ``completion_time`` is when a completed instant became visible, where its file name says
    so (Hudi 1.x names a completed instant ``<time>_<completion time>.<action>``); None where
    it does not (table version 6, and every pending instant). It takes no part in equality,
    hashing or ordering: an instant is the same instant whether or not its completion time is
    known, and the timeline's order stays by requested time, as callers rely on."""

    time: str
    action: str
    state: str
    completion_time: str | None = field(default=None, compare=False)

    @property
    def is_completed(self) -> bool:
        return self.state == COMPLETED

    @property
    def completed_at(self) -> str:
        """When it became visible: its completion time, or where its name gives none (table
        version 6, a legacy Hudi 1.x file), its requested time."""
        return self.completion_time or self.time

    def __str__(self) -> str:
        return f"{self.time} {self.action} ({self.state})"
