"""The default layout: data files under the table path, one folder per partition."""

from __future__ import annotations

from collections.abc import Mapping

from fedcore import properties as P
from fedcore.storage.base import StorageLocation, StorageStrategy


class HiveStorageStrategy(StorageStrategy):
    """``<table_path>/<partition>/<file>``: what Hudi, Hive and Spark write by default.

    Every file shares the table prefix, which is what makes it throttle on object
    stores at scale; it stays the default because every engine can read it.
    """

    name = P.STORAGE_STRATEGY_HIVE
    data_under_table_path = True

    def __init__(self, table_path: str, properties: Mapping[str, str]) -> None:
        super().__init__(table_path, properties)
        self._location = StorageLocation(self.table_path, self.table_path)

    def locate(self, partition_path: str, file_id: str) -> StorageLocation:
        return self._location

    def roots(self) -> tuple[str, ...]:
        return (self.table_path,)
