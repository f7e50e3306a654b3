"""fedcore: the federated (object-store-optimised) storage layout for Hudi-style tables."""

from fedcore.files.file_slice import FileSlice
from fedcore.handle import TableHandle
from fedcore.handle.config import TableConfig
from fedcore.read.planner import ScanPlan
from fedcore.read.scan import DataScan
from fedcore.services.cleaning import CleanResult
from fedcore.services.migrate import MigrationReport, migrate
from fedcore.services.repair import RepairReport, repair_metadata
from fedcore.services.verify import VerifyReport, verify_table
from fedcore.storage import (
    HiveStorageStrategy,
    ObjectStoreStorageStrategy,
    PartitionMapStorageStrategy,
    StorageLocation,
    StorageStrategy,
    load_storage_strategy,
)
from fedcore.storage.federated import FederatedFileSystem
from fedcore.storage.layout import LayoutReport
from fedcore.table import Table, create_table, load_table, table_layout
from fedcore.write.client import WriteClient, WriteResult

__version__ = "0.1.0"

__all__ = [
    "CleanResult",
    "DataScan",
    "FederatedFileSystem",
    "FileSlice",
    "HiveStorageStrategy",
    "LayoutReport",
    "MigrationReport",
    "ObjectStoreStorageStrategy",
    "PartitionMapStorageStrategy",
    "RepairReport",
    "ScanPlan",
    "StorageLocation",
    "StorageStrategy",
    "Table",
    "TableConfig",
    "TableHandle",
    "VerifyReport",
    "WriteClient",
    "WriteResult",
    "create_table",
    "load_table",
    "load_storage_strategy",
    "migrate",
    "table_layout",
    "repair_metadata",
    "verify_table",
]
