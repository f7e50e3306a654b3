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
from fedcore.timeline.instant import COMMIT, COMPACTION, COMPLETED, INFLIGHT, Instant


class InstantNaming(ABC):
    """The file names of instants, and the folders a timeline is listed from."""

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
