"""fedcore: the federated (object-store-optimised) storage layout for Hudi-style tables."""

from fedcore.io.federated import FederatedFileSystem
from fedcore.storage import (
    HiveStorageStrategy,
    ObjectStoreStorageStrategy,
    PartitionMapStorageStrategy,
    StorageLocation,
    StorageStrategy,
    load_storage_strategy,
)
from fedcore.table import Table, create_table, load_table
from fedcore.table_config import TableConfig

__version__ = "0.1.0"

__all__ = [
    "FederatedFileSystem",
    "HiveStorageStrategy",
    "ObjectStoreStorageStrategy",
    "PartitionMapStorageStrategy",
    "StorageLocation",
    "StorageStrategy",
    "Table",
    "TableConfig",
    "create_table",
    "load_table",
    "load_storage_strategy",
]
