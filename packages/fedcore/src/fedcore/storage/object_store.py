"""The object-store layout: data spread over hashed prefixes of a separate storage path."""

from __future__ import annotations

from collections.abc import Mapping

from fedcore import properties as P
from fedcore.storage.base import StorageLocation, StorageStrategy, storage_uri, table_folder
from fedcore.storage.hashing import PrefixHasher


class ObjectStoreStorageStrategy(StorageStrategy):
    """``<storage_path>/<hash>/<table folder>/<partition>/<file>``.

    The hash comes first so that consecutive writes land in different key ranges;
    the table's folder (``<table name>-<table id>``: ``storage.base.table_folder``) follows
    it so that many tables, even of one name, share one storage path and never a folder.
    """

    name = P.STORAGE_STRATEGY_OBJECT_STORE
    accepted_keys = frozenset(
        {
            P.STORAGE_PATH,
            P.STORAGE_HASH_FUNCTION,
            P.STORAGE_HASH_INPUT,
            P.STORAGE_PREFIX_COUNT,
            P.STORAGE_TABLE_FOLDER,
        }
    )

    def __init__(self, table_path: str, properties: Mapping[str, str]) -> None:
        super().__init__(table_path, properties)
        self.storage_path = storage_uri(properties, P.STORAGE_PATH, self.table_path)
        self.table_folder = table_folder(properties)
        self.hasher = PrefixHasher.from_properties(properties)
        self._head = self.storage_path + "/"
        self._tail = "/" + self.table_folder
        self._prefix = self.hasher.prefix
        self._bucket = self.hasher.bucket
        # With a bounded prefix count there are at most N locations: build each once.
        self._by_bucket: dict[int, StorageLocation] = {}

    def locate(self, partition_path: str, file_id: str) -> StorageLocation:
        if self._bucket is None:
            return StorageLocation(
                self._head + self._prefix(partition_path, file_id) + self._tail, self.storage_path
            )
        bucket = self._bucket(partition_path, file_id)
        location = self._by_bucket.get(bucket)
        if location is None:
            uri = self._head + self.hasher.format_bucket(bucket) + self._tail
            location = self._by_bucket[bucket] = StorageLocation(uri, self.storage_path)
        return location

    def place(self, partition_path: str, file_id: str, relative_path: str) -> tuple[str, str]:
        if self._bucket is None:
            return self.storage_path, (
                f"{self._head}{self._prefix(partition_path, file_id)}{self._tail}/{relative_path}"
            )
        return self.storage_path, f"{self.locate(partition_path, file_id).uri}/{relative_path}"

    def roots(self) -> tuple[str, ...]:
        return (self.storage_path,)

    def properties(self) -> dict[str, str]:
        folder = self._properties.get(P.STORAGE_TABLE_FOLDER)
        return {
            P.STORAGE_PATH: self.storage_path,
            **self.hasher.properties(),
            **({P.STORAGE_TABLE_FOLDER: folder} if folder else {}),
        }
