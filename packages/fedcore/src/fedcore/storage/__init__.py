"""Storage strategies: where each data file of a table lives."""

from fedcore.storage.base import StorageLocation, StorageStrategy
from fedcore.storage.hashing import PrefixHasher
from fedcore.storage.hive import HiveStorageStrategy
from fedcore.storage.loader import BUILTIN_STRATEGIES, load_storage_strategy, strategy_class
from fedcore.storage.object_store import ObjectStoreStorageStrategy
from fedcore.storage.partition_map import PartitionMapStorageStrategy

__all__ = [
    "BUILTIN_STRATEGIES",
    "HiveStorageStrategy",
    "ObjectStoreStorageStrategy",
    "PartitionMapStorageStrategy",
    "PrefixHasher",
    "StorageLocation",
    "StorageStrategy",
    "load_storage_strategy",
    "strategy_class",
]
