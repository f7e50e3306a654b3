"""Hudi data file names: the only thing a storage location is derived from.

A physical path is computed from the logical path's file name, so the file id must
be recoverable from every data file name, base or log, and the two kinds must
agree on it; that is what keeps a file group's files under one storage prefix.
Names are validated strictly because a name that parses loosely could be mapped
to two different locations by two versions of the code.
"""

from __future__ import annotations

import re
import uuid
from abc import ABC, abstractmethod
from typing import ClassVar, Final, NamedTuple

from fedcore.exceptions import InvalidFileNameError
from fedcore.properties import PARTITION_METADATA_FILE

BASE_FILE_EXTENSIONS: Final = ("parquet", "orc", "hfile")

_FILE_ID = r"[A-Za-z0-9][A-Za-z0-9-]*"  # unbounded: a bounded repeat is slower in re
# \d, not [0-9]: with re.ASCII they match alike, and a category test is faster than a set.
_WRITE_TOKEN = r"\d+-\d+-\d+"
_INSTANT = r"\d{14}(?:\d{3})?"  # Hudi's millisecond instants, and its older second ones

# Group 1 is the file id (for both patterns), then instant and write token: positional
# groups match measurably faster than named ones, and this runs on every path conversion.
BASE_FILE_RE: Final = re.compile(
    rf"({_FILE_ID})_({_WRITE_TOKEN})_({_INSTANT})\.(?:{'|'.join(BASE_FILE_EXTENSIONS)})", re.ASCII
)
#: Groups: file id, base instant, version, write token, ``.cdc`` (change-data-capture logs).
LOG_FILE_RE: Final = re.compile(
    rf"\.({_FILE_ID})_({_INSTANT})\.log\.(\d+)_({_WRITE_TOKEN})(\.cdc)?", re.ASCII
)
_FILE_ID_RE: Final = re.compile(_FILE_ID, re.ASCII)
_WRITE_TOKEN_RE: Final = re.compile(_WRITE_TOKEN, re.ASCII)
_INSTANT_RE: Final = re.compile(_INSTANT, re.ASCII)


def data_file_id(name: str) -> str | None:
    """The file id of a data file name, or None for any other name (metadata, folders)."""
    # Log file names start with a dot, base file names never do: one regex per call.
    match = (LOG_FILE_RE if name.startswith(".") else BASE_FILE_RE).fullmatch(name)
    return None if match is None else match[1]


def file_instant(name: str) -> str | None:
    """The instant a data file name carries (a base file's commit, a log file's base
    instant); None for any other name."""
    match = (LOG_FILE_RE if name.startswith(".") else BASE_FILE_RE).fullmatch(name)
    if match is None:
        return None
    return match[2] if name.startswith(".") else match[3]


def is_partition_metadata(name: str) -> bool:
    """Partition metadata (plain or with a format suffix) always lives under the table path."""
    return name == PARTITION_METADATA_FILE or name.startswith(PARTITION_METADATA_FILE + ".")


def new_file_id() -> str:
    """A fresh file group id in Hudi's form: a UUID and the index of the file in its group."""
    return f"{uuid.uuid4()}-0"


def base_file_name(file_id: str, write_token: str, instant: str, extension: str = "parquet") -> str:
    _check_parts(file_id, write_token, instant)
    if extension not in BASE_FILE_EXTENSIONS:
        raise InvalidFileNameError(f"base file extension {extension!r} is not one of {BASE_FILE_EXTENSIONS}")
    return f"{file_id}_{write_token}_{instant}.{extension}"


def log_file_name(file_id: str, base_instant: str, version: int, write_token: str) -> str:
    _check_parts(file_id, write_token, base_instant)
    if version < 1:
        raise InvalidFileNameError(f"log file version must be at least 1, got {version}")
    return f".{file_id}_{base_instant}.log.{version}_{write_token}"


def _check_parts(file_id: str, write_token: str, instant: str) -> None:
    if not _FILE_ID_RE.fullmatch(file_id):
        raise InvalidFileNameError(f"file id {file_id!r} must be letters, digits and '-'")
    if not _WRITE_TOKEN_RE.fullmatch(write_token):
        raise InvalidFileNameError(f"write token {write_token!r} must look like 0-12-34")
    if not _INSTANT_RE.fullmatch(instant):
        raise InvalidFileNameError(f"instant {instant!r} must be yyyyMMddHHmmss[SSS]")


class LogFileName(NamedTuple):
    """What a log file's name says: its file group, the instant it is named after (the base
    instant of its slice in table version 6, the delta commit that wrote it in versions 8 and
    9), its version, its write token, and whether it holds change-data-capture records."""

    file_id: str
    instant: str
    version: int
    write_token: str
    cdc: bool


class LogFileNaming(ABC):
    """How a table version names a merge-on-read slice's log files.

    Every log file a write names goes through the table's ``LogFileNaming``
    (``TableHandle.layout.log_files``, picked by ``fedcore.timeline.layout``). A name carries
    the file id at the same place in every Hudi version, so the storage layer's mapping of a
    name to a location (``data_file_id``) does not depend on the version; which instant a name
    carries does (the slice's base instant up to version 6, the writing delta commit's from
    Hudi 1.x), so a writer gives both and the version picks."""

    #: Whether a name's instant is the writing delta commit's (Hudi 1.x), so that the slice a
    #: log file belongs to follows from when that commit completed (``files.file_group``),
    #: rather than the slice's base instant itself (up to version 6).
    names_delta_commit: ClassVar[bool] = False

    @abstractmethod
    def name(self, file_id: str, *, base_instant: str, instant: str, place: int, write_token: str) -> str:
        """The name of the log file ``instant`` writes onto the slice at ``base_instant``, the
        ``place``-th of that slice (``FileGroup.logs_onto``)."""

    @abstractmethod
    def parse(self, name: str) -> LogFileName | None:
        """What a log file name says; None for any other name."""


class LogFileNamingV6(LogFileNaming):
    """Table version 6: ``.<file id>_<base instant>.log.<version>_<write token>[.cdc]``."""

    def name(self, file_id: str, *, base_instant: str, instant: str, place: int, write_token: str) -> str:
        return log_file_name(file_id, base_instant, place, write_token)  # its place is its version

    def parse(self, name: str) -> LogFileName | None:
        match = LOG_FILE_RE.fullmatch(name)
        if match is None:
            return None
        return LogFileName(match[1], match[2], int(match[3]), match[4], match[5] is not None)


class LogFileNamingV8(LogFileNamingV6):
    """Table versions 8 and 9 (Hudi 1.x): the same pattern, carrying the time of the delta
    commit that wrote the file (each delta commit writes files of its own, version 1 on), so
    a file's slice is found from that commit's completion time. A file is version 1 whatever
    its place in its slice (Hudi's writer starts each delta commit's file at 1, and takes a
    higher one only if that name exists: fed's write tokens are unique per attempt)."""

    names_delta_commit = True

    def name(self, file_id: str, *, base_instant: str, instant: str, place: int, write_token: str) -> str:
        return log_file_name(file_id, instant, 1, write_token)
