"""The storage strategy plug point.

A strategy answers one question: in which folder does the data file of this file
group live? fedcore appends the lower-level structure (``<partition>/<file>``)
itself, so a strategy cannot break the rule that a file group's base and log
files share a folder, and the inverse mapping (physical path -> logical path)
can be derived for any strategy without its help.

Strategies are constructed from the table config, ``cls(table_path, properties)``;
every key a strategy reads must be listed in ``accepted_keys`` so that it is
persisted with the table and checked when the table is opened again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar, NamedTuple, overload

from fedcore import properties as P
from fedcore.exceptions import (
    InvalidPathError,
    InvalidStorageConfigError,
    InvalidTableConfigError,
    UnmappedPartitionError,
)
from fedcore.files.filenames import data_file_id
from fedcore.io.uris import check_relative_path, is_within, normalize_uri


class StorageLocation(NamedTuple):
    """The folder a data file lives in, and the root whose filesystem serves it.

    ``root`` is one of the strategy's ``roots()``; the federated filesystem keeps
    one underlying filesystem per root, each with its own storage options.
    """

    uri: str
    root: str

    def join(self, relative_path: str) -> str:
        """Physical path of a file given as ``<partition>/<file>`` (or ``<file>``) below the location."""
        return f"{self.uri}/{relative_path}"


class StorageStrategy(ABC):
    #: Short name under which fedcore persists the strategy; None for classes loaded by path.
    name: ClassVar[str | None] = None
    #: Storage keys this strategy reads; any other key of ``properties.STORAGE_KEYS`` is an error.
    accepted_keys: ClassVar[frozenset[str]] = frozenset()
    #: True when every location is the table path itself, so listing a table folder lists its data.
    data_under_table_path: ClassVar[bool] = False

    def __init__(self, table_path: str, properties: Mapping[str, str]) -> None:
        self.table_path = normalize_uri(table_path)
        for key in P.STORAGE_KEYS:
            if key != P.STORAGE_STRATEGY_CLASS and key in properties and key not in self.accepted_keys:
                raise InvalidStorageConfigError(
                    key, f"is not used by the {self.display_name()} storage strategy"
                )
        self._properties = {k: str(properties[k]) for k in self.accepted_keys if k in properties}
        self._source = dict(properties)

    @abstractmethod
    def locate(self, partition_path: str, file_id: str) -> StorageLocation:
        """Location of the file group ``file_id`` in ``partition_path`` ("" when non-partitioned).

        Called on every path conversion: keep it to string work, no I/O.
        """

    def place(self, partition_path: str, file_id: str, relative_path: str) -> tuple[str, str]:
        """``(root, physical path)`` of the data file ``relative_path`` (``<partition>/<file>``).

        What the federated filesystem calls on every conversion. The default goes
        through ``locate``; a built-in strategy overrides it to skip building a
        ``StorageLocation``, and must then place every file exactly as ``locate`` does.
        """
        location = self.locate(partition_path, file_id)
        return location.root, f"{location.uri}/{relative_path}"

    @abstractmethod
    def roots(self) -> tuple[str, ...]:
        """Every root a location can fall under; rebuilding the file list from storage would list these."""

    @property
    def folders_of_its_own(self) -> bool:
        """Whether every folder this strategy puts files in is the table's alone: its table path,
        or a folder named with its id (``STORAGE_TABLE_FOLDER``). Not so for a table created
        before tables had ids (its folder is its bare name: another table of that name on the
        same storage may share it), nor for a custom strategy that does not take that key."""
        return self.data_under_table_path or P.STORAGE_TABLE_FOLDER in self._properties

    def properties(self) -> dict[str, str]:
        """The storage keys that define this layout, as persisted in the table config.

        Two strategies of one class with equal properties place every file alike.
        """
        return dict(self._properties)

    @overload
    def storage_location(self, file_id: str, /) -> StorageLocation: ...
    @overload
    def storage_location(self, partition_path: str, file_id: str, /) -> StorageLocation: ...
    def storage_location(self, first: str, second: str | None = None, /) -> StorageLocation:
        """Location of a file group: ``(file_id)`` unpartitioned, else ``(partition_path, file_id)``."""
        partition_path, file_id = ("", first) if second is None else (first, second)
        if partition_path:
            check_relative_path(partition_path)
        return self.locate(partition_path, file_id)

    def split_physical(self, physical_path: str) -> tuple[str, str]:
        """``(partition_path, file_name)`` of a physical data file path; the inverse of placement.

        Derived from ``locate`` alone: each way of splitting the path into
        location / partition / file is tried and kept only if placing that file
        gives back the very same path, so it is right for any strategy.
        """
        physical = normalize_uri(physical_path)
        name = physical.rpartition("/")[2]
        file_id = data_file_id(name)
        if file_id is not None:
            for root in self.roots():
                if not physical.startswith(root + "/"):
                    continue
                segments = physical[len(root) + 1 :].split("/")
                for start in range(len(segments)):
                    partition = "/".join(segments[start:-1])
                    tail = f"{partition}/{name}" if partition else name
                    try:
                        location = self.locate(partition, file_id)
                    except UnmappedPartitionError:
                        continue  # this split names a partition the table cannot have
                    if location.join(tail) == physical:
                        return partition, name
        raise InvalidPathError(
            f"{physical_path!r} is not a data file placed by this table's storage strategy"
        )

    @classmethod
    def display_name(cls) -> str:
        return cls.name or f"{cls.__module__}.{cls.__qualname__}"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, StorageStrategy)
            and other.table_path == self.table_path
            and other.properties() == self.properties()
        )

    def __hash__(self) -> int:
        return hash((type(self), self.table_path, tuple(sorted(self.properties().items()))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.table_path!r}, {self.properties()!r})"

    def __reduce__(self) -> tuple[type[StorageStrategy], tuple[str, dict[str, str]]]:
        # Rebuilt from its config on the other side: engines ship strategies to workers,
        # and what a strategy precomputes (hash closures) does not pickle.
        return (type(self), (self.table_path, self._source))


def table_folder(properties: Mapping[str, str]) -> str:
    """The folder holding the table's partitions under each location, for strategies that
    place files by table (they list ``STORAGE_TABLE_FOLDER`` among their ``accepted_keys``):
    ``<table name>-<table id>`` as fed set it at creation, so that two tables never share a
    folder; the bare table name for a table created before fed set one. Checked to be one
    path segment."""
    folder = properties.get(P.STORAGE_TABLE_FOLDER, "")
    key = P.STORAGE_TABLE_FOLDER if folder else P.TABLE_NAME
    folder = folder or properties.get(P.TABLE_NAME, "")
    if not folder:
        raise InvalidTableConfigError(P.TABLE_NAME, "is required by this storage strategy")
    if "/" in folder or folder in (".", "..") or not folder.isprintable():
        raise InvalidTableConfigError(key, f"{folder!r} cannot be used as a folder name")
    return folder


def storage_uri(properties: Mapping[str, str], key: str, table_path: str) -> str:
    """A storage URI from the config, normalised and checked not to lie inside the table path."""
    value = properties.get(key, "")
    if not value:
        raise InvalidStorageConfigError(key, "is required by this storage strategy")
    try:
        uri = normalize_uri(value)
    except InvalidPathError as exc:
        raise InvalidStorageConfigError(key, str(exc)) from exc
    if is_within(uri, table_path):
        raise InvalidStorageConfigError(
            key, f"{uri} is inside the table path {table_path}; data must live outside it"
        )
    return uri
