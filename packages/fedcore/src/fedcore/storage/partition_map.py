"""Partitions mapped to locations of their own, e.g. one bucket per country.

Users ask for this when partitions have different owners: data residency (EU
rows in an EU bucket), a KMS key per tenant, or a bucket per business unit for
cost reports. Each location is a root of its own, so the federated filesystem
gives each one its own storage options (endpoint, profile, encryption key).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from fedcore import properties as P
from fedcore.exceptions import InvalidPathError, InvalidStorageConfigError, UnmappedPartitionError
from fedcore.io.uris import check_relative_path
from fedcore.storage.base import StorageLocation, StorageStrategy, storage_uri, table_folder


class PartitionMapStorageStrategy(StorageStrategy):
    """``<location>/<table folder>/<partition>/<file>``, the location chosen by partition
    (the folder: ``<table name>-<table id>``, ``storage.base.table_folder``).

    ``hoodie.storage.partition.locations`` is a JSON object from a partition path
    prefix (whole segments: ``country=us`` covers ``country=us/day=2026-01-01``)
    to a location URI; the longest matching prefix wins. ``hoodie.storage.path``,
    if set, takes every partition the map does not name; without it such a
    partition is an error rather than a silent default.
    """

    name = P.STORAGE_STRATEGY_PARTITION_MAP
    accepted_keys = frozenset({P.STORAGE_PARTITION_LOCATIONS, P.STORAGE_PATH, P.STORAGE_TABLE_FOLDER})

    def __init__(self, table_path: str, properties: Mapping[str, str]) -> None:
        super().__init__(table_path, properties)
        self.table_folder = table_folder(properties)
        self.default_location: str | None = (
            storage_uri(properties, P.STORAGE_PATH, self.table_path)
            if properties.get(P.STORAGE_PATH)
            else None
        )
        self.partition_locations = self._parse_map(properties.get(P.STORAGE_PARTITION_LOCATIONS, ""))
        tail = "/" + self.table_folder
        self._by_prefix = {
            prefix: StorageLocation(root + tail, root) for prefix, root in self.partition_locations.items()
        }
        self._default = (
            StorageLocation(self.default_location + tail, self.default_location)
            if self.default_location
            else None
        )

    def _parse_map(self, raw: str) -> dict[str, str]:
        key = P.STORAGE_PARTITION_LOCATIONS
        if not raw:
            raise InvalidStorageConfigError(key, "is required: a JSON object of partition -> location URI")
        try:
            mapping = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidStorageConfigError(key, f"is not valid JSON ({exc.msg})") from None
        if not isinstance(mapping, dict) or not mapping:
            raise InvalidStorageConfigError(key, "must be a non-empty JSON object")
        parsed: dict[str, str] = {}
        for prefix, location in mapping.items():
            if not isinstance(location, str):
                raise InvalidStorageConfigError(key, f"location of {prefix!r} must be a string URI")
            try:
                check_relative_path(prefix)
            except InvalidPathError as exc:
                raise InvalidStorageConfigError(key, str(exc)) from None
            parsed[prefix.strip("/")] = storage_uri({key: location}, key, self.table_path)
        return parsed

    def locate(self, partition_path: str, file_id: str) -> StorageLocation:
        prefix = partition_path
        while True:
            location = self._by_prefix.get(prefix)
            if location is not None:
                return location
            if not prefix:
                break
            prefix = prefix.rpartition("/")[0]
        if self._default is None:
            raise UnmappedPartitionError(
                f"partition {partition_path!r} matches no entry of {P.STORAGE_PARTITION_LOCATIONS} "
                f"and {P.STORAGE_PATH} (the default location) is not set"
            )
        return self._default

    def roots(self) -> tuple[str, ...]:
        roots = dict.fromkeys(self.partition_locations.values())
        if self.default_location:
            roots[self.default_location] = None
        return tuple(roots)

    def properties(self) -> dict[str, str]:
        props = {P.STORAGE_PARTITION_LOCATIONS: json.dumps(self.partition_locations, sort_keys=True)}
        if self.default_location:
            props[P.STORAGE_PATH] = self.default_location
        if P.STORAGE_TABLE_FOLDER in self._properties:
            props[P.STORAGE_TABLE_FOLDER] = self._properties[P.STORAGE_TABLE_FOLDER]
        return props
