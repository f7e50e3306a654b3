"""How a table version names its instants' files and where they are listed.

The one place an instant's file name is built or parsed: every caller asks the table's
``InstantNaming`` (``TableHandle.layout.instants``, picked by ``fedcore.timeline.layout``), so a
table version that names or places instant files otherwise (Hudi 1.x: completed instants as
``<requested time>_<completion time>.<action>`` under ``.hoodie/timeline/``) is one more
implementation here, not a condition in each caller.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Final

from fedcore import properties as P
from fedcore.timeline.instant import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    COMPLETED,
    DELTA_COMMIT,
    INFLIGHT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    Instant,
)


class InstantNaming(ABC):
    """The file names of instants, and the folders a timeline is listed from."""

    #: Whether a completed instant's name carries its completion time, which the writer that
    #: completes it must then choose (``fedcore.timeline.completion_time``).
    completion_times: bool = False

    @abstractmethod
    def folder(self, table_path: str) -> str:
        """The folder whose listing holds the active timeline's instant files."""

    def pointer_folder(self, table_path: str) -> str:
        """The folder whose listing holds fed's own files that a timeline's load reads beside
        the instants: the metadata table's manifest pointers, archival's markers and the
        archive folder (``fedcore.timeline``). ``.hoodie/`` whatever the version: Hudi 1.x
        parses every name in its timeline folder, so fed keeps its files out of it. Where it
        is the instants' folder (version 6), one listing gives both."""
        return f"{table_path}/{P.HOODIE_FOLDER}"

    def history_folder(self, table_path: str) -> str | None:
        """The folder of Hudi 1.x's archived timeline (``fedcore.timeline.lsm``); None for a
        version whose archived instants go elsewhere (fed's archive, Hudi 0.x's log)."""
        return None

    @abstractmethod
    def file_name(self, instant: Instant, state: str | None = None) -> str:
        """The file name of ``instant`` in ``state`` (None: its own state)."""

    @abstractmethod
    def parse(self, name: str) -> Instant | None:
        """The instant a listed file name stands for (its completion time too, where the name
        carries one); None for any other file in the folder."""

    def path(self, table_path: str, instant: Instant, state: str | None = None) -> str:
        return f"{self.folder(table_path)}/{self.file_name(instant, state)}"


# Any action name parses, so that an action fedcore does not know is seen and refused.
_V6_FILE_RE: Final = re.compile(r"(\d{17}|\d{14})\.([a-z]+)(?:\.(requested|inflight))?")


class InstantNamingV6(InstantNaming):
    """Table version 6 (timeline layout 1): ``.hoodie/<time>.<action>[.<state>]``; a commit's
    inflight file is ``<time>.inflight``, and a compaction completes as a ``commit``. Its
    names carry no completion time: a parsed instant's is None."""

    def folder(self, table_path: str) -> str:
        return f"{table_path}/{P.HOODIE_FOLDER}"

    def file_name(self, instant: Instant, state: str | None = None) -> str:
        state = state or instant.state
        if state == COMPLETED:  # a compaction completes as a commit (Hudi's timeline)
            return f"{instant.time}.{COMMIT if instant.action == COMPACTION else instant.action}"
        if state == INFLIGHT and instant.action == COMMIT:
            return f"{instant.time}.inflight"
        return f"{instant.time}.{instant.action}.{state}"

    def parse(self, name: str) -> Instant | None:
        match = _V6_FILE_RE.fullmatch(name)
        if match is None:
            return None
        time, action, state = match.groups()
        if action == INFLIGHT:
            return Instant(time, COMMIT, INFLIGHT)
        return Instant(time, action, state or COMPLETED)


#: Timeline layout 2's names: ``<requested>[_<completion>].<action>[.<state>]``.
_V8_FILE_RE: Final = re.compile(r"(\d{17}|\d{14})(?:_(\d{17}|\d{14}))?\.([a-z]+)(?:\.(requested|inflight))?")
#: Actions that complete as another: a compaction as a commit, a clustering as a replace
#: commit, a log compaction as a delta commit (their pending files keep their own name).
_COMPLETES_AS: Final = {COMPACTION: COMMIT, CLUSTERING: REPLACE_COMMIT, LOG_COMPACTION: DELTA_COMMIT}


class InstantNamingV8(InstantNaming):
    """Table versions 8 and 9 (Hudi 1.x, timeline layout 2): instant files in
    ``.hoodie/timeline/`` (``hoodie.timeline.path``; its ``history/`` folder holds the archived
    instants), a completed instant as ``<requested time>_<completion time>.<action>``, pending
    ones as ``<requested time>.<action>.<state>`` (a commit's inflight file is
    ``<time>.inflight``). Every state is a file of its own that stays. A completed file
    without a completion time is one a 6 -> 8 upgrade or a 0.x writer left ("legacy"): its
    instant's completion time is not known from its name (None)."""

    completion_times = True

    def folder(self, table_path: str) -> str:
        return f"{table_path}/{P.HOODIE_FOLDER}/{P.DEFAULT_TIMELINE_FOLDER}"

    def history_folder(self, table_path: str) -> str | None:
        return f"{self.folder(table_path)}/{P.DEFAULT_HISTORY_FOLDER}"

    def file_name(self, instant: Instant, state: str | None = None) -> str:
        state = state or instant.state
        if state == COMPLETED:
            action = _COMPLETES_AS.get(instant.action, instant.action)
            if instant.completion_time is None:  # a legacy file: read or removed, never made
                return f"{instant.time}.{action}"
            return f"{instant.time}_{instant.completion_time}.{action}"
        if state == INFLIGHT and instant.action == COMMIT:
            return f"{instant.time}.inflight"
        return f"{instant.time}.{instant.action}.{state}"

    def parse(self, name: str) -> Instant | None:
        match = _V8_FILE_RE.fullmatch(name)
        if match is None:
            return None
        time, completion, action, state = match.groups()
        if completion is not None and state is not None:
            return None  # not a name Hudi makes: a pending instant has no completion time
        if action == INFLIGHT:
            return Instant(time, COMMIT, INFLIGHT)
        if state is None:
            return Instant(time, action, COMPLETED, completion_time=completion)
        return Instant(time, action, state)
