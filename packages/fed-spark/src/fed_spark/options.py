"""What a ``format("fed")`` read is told, checked once: Hudi's option names where Hudi has one.

Spark hands a data source its options as strings, case-insensitively. Every key a read
accepts is bound here to its parser; any other key is refused (``ConfigError``) rather
than ignored, so a misspelt ``as.of.instant`` can never silently read the latest data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from fedcore.exceptions import ConfigError, InvalidPathError
from fedcore.reader import QUERY_TYPES, QueryType

PATH: Final = "path"
LOCATION: Final = "location"
#: Properties Spark's catalog keeps for every table and passes with a SQL table's options.
CATALOG_PROPERTIES: Final = ("provider", "owner", "comment", "external", "is_managed_location", "collation")
#: Hudi's time travel: the table as of this instant (``yyyyMMddHHmmss[SSS]``,
#: ``yyyy-MM-dd HH:mm:ss[.SSS]`` or ``yyyy-MM-dd``).
AS_OF_INSTANT: Final = "as.of.instant"
QUERY_TYPE: Final = "hoodie.datasource.query.type"
#: fsspec options of the storage (``fed.storage.endpoint_url``, ``fed.storage.key``, ...), as
#: ``fed ... --storage-option``; what ``fed_spark.register`` was given comes first.
STORAGE_PREFIX: Final = "fed.storage."

_GLOB = re.compile(r"[*?\[\]{}]")
_INSTANT_FORMATS: Final = (
    (re.compile(r"\d{17}"), ""),
    (re.compile(r"\d{14}"), "000"),
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}"), ""),
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"), "000"),
    (re.compile(r"\d{4}-\d{2}-\d{2}"), "000000000"),
)


@dataclass(frozen=True)
class ReadOptions:
    path: str
    as_of: str | None
    query_type: QueryType
    storage: dict[str, str]
    #: The options as given (without the catalog's properties), to be recorded with a SQL table.
    given: dict[str, str]

    @classmethod
    def of(cls, options: Mapping[str, str]) -> ReadOptions:
        given = {str(k).lower(): str(v) for k, v in options.items()}
        for reserved in CATALOG_PROPERTIES:  # a SQL table's catalog entry, not read options
            given.pop(reserved, None)
        # A SQL table (CREATE TABLE ... USING fed OPTIONS (path ...)) passes its path as location.
        located = given.pop(LOCATION, None)
        recorded = {k: v for k, v in given.items() if k != LOCATION}
        path = given.pop(PATH, None) or located
        if located is not None and located != path:
            raise ConfigError(LOCATION, f"{located!r} differs from path {path!r}: give one table path")
        path = table_path(path)
        as_of = given.pop(AS_OF_INSTANT, None)
        query_type = given.pop(QUERY_TYPE, "snapshot").strip().lower()
        if query_type not in QUERY_TYPES:
            raise ConfigError(QUERY_TYPE, f"{query_type!r} is not one of {', '.join(QUERY_TYPES)}")
        storage = {k[len(STORAGE_PREFIX) :]: v for k, v in given.items() if k.startswith(STORAGE_PREFIX)}
        unknown = sorted(k for k in given if not k.startswith(STORAGE_PREFIX))
        if unknown:
            raise ConfigError(
                unknown[0],
                f"is not an option of a fed read (it would be ignored); the options are {PATH}, "
                f"{AS_OF_INSTANT}, {QUERY_TYPE} and {STORAGE_PREFIX}<fsspec option>",
            )
        recorded[PATH] = path
        instant = None if as_of is None else instant_of(as_of)
        return cls(path, instant, query_type, storage, recorded)


def table_path(path: str | None) -> str:
    """The table path a read or write names: one path, never a glob (the files come from the
    metadata table, so a pattern would match nothing meaningful)."""
    if path is None or not path.strip():
        raise InvalidPathError("no table path: pass it to load(...) or save(...), or as option 'path'")
    if _GLOB.search(path):
        raise InvalidPathError(
            f"{path!r} is a glob; pass the table path (the folder holding .hoodie): a fed table's "
            "files come from its metadata table, and partition filters select partitions"
        )
    return path.strip()


def instant_of(text: str) -> str:
    """Hudi's accepted time-travel formats as an instant time (``yyyyMMddHHmmssSSS``)."""
    text = text.strip()
    for pattern, suffix in _INSTANT_FORMATS:
        if pattern.fullmatch(text):
            return re.sub(r"\D", "", text) + suffix
    raise ConfigError(
        AS_OF_INSTANT,
        f"{text!r} is not an instant: use yyyyMMddHHmmssSSS, yyyyMMddHHmmss, "
        "'yyyy-MM-dd HH:mm:ss[.SSS]' or yyyy-MM-dd",
    )
