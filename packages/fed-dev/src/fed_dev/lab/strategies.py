"""Other systems' object-store layouts, as fedcore storage strategies, for the throttling lab.

Loaded through the plug-in point by class path (``hoodie.storage.strategy.class =
fed_dev.lab.strategies.BinaryEntropyStrategy``), as a user's own strategy would be.
Both keep the table's metadata on the table path and place data under
``hoodie.storage.path``; like every fedcore strategy they derive the folder from the
file id, so a path is computed, never stored.

- ``BinaryEntropyStrategy``: Apache Iceberg's object-storage location provider (1.7 and
  later) puts 20 bits of a hash in front of the data path as binary directories of 4,
  4, 4 and 8 bits: ``<storage>/0110/1010/0101/10101011/<table>/<partition>/<file>``.
- ``RandomPrefixStrategy``: Delta Lake's ``delta.randomizeFilePrefixes`` puts a random
  prefix of ``delta.randomPrefixLength`` (default 2) alphanumeric characters in front of
  each file; here the characters come from a hash of the file id (fedcore computes
  paths), over Delta's alphabet: ``<storage>/k7/<table>/<partition>/<file>``.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Final

import xxhash

from fedcore import properties as P
from fedcore.storage.base import StorageLocation, StorageStrategy, storage_uri, table_folder

_ALPHABET: Final = string.ascii_lowercase + string.digits


class _HashedUnderStoragePath(StorageStrategy):
    accepted_keys = frozenset({P.STORAGE_PATH, P.STORAGE_TABLE_FOLDER})

    def __init__(self, table_path: str, properties: Mapping[str, str]) -> None:
        super().__init__(table_path, properties)
        self.storage_path = storage_uri(properties, P.STORAGE_PATH, self.table_path)
        self.table_folder = table_folder(properties)

    def _prefix(self, file_id: str) -> str:
        raise NotImplementedError

    def locate(self, partition_path: str, file_id: str) -> StorageLocation:
        return StorageLocation(
            f"{self.storage_path}/{self._prefix(file_id)}/{self.table_folder}", self.storage_path
        )

    def roots(self) -> tuple[str, ...]:
        return (self.storage_path,)


class BinaryEntropyStrategy(_HashedUnderStoragePath):
    """Iceberg-style binary entropy directories (see the module docstring)."""

    def _prefix(self, file_id: str) -> str:
        bits = format(xxhash.xxh32_intdigest(file_id.encode()) & 0xFFFFF, "020b")
        return f"{bits[0:4]}/{bits[4:8]}/{bits[8:12]}/{bits[12:20]}"


class RandomPrefixStrategy(_HashedUnderStoragePath):
    """Delta-style two-character prefixes (see the module docstring)."""

    length: Final = 2

    def _prefix(self, file_id: str) -> str:
        value = xxhash.xxh32_intdigest(file_id.encode())
        chars = []
        for _ in range(self.length):
            value, index = divmod(value, len(_ALPHABET))
            chars.append(_ALPHABET[index])
        return "".join(chars)
