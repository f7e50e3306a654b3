"""Where a table's files are known from: the metadata table, or (Hive layout only) listing."""

from fedcore.metadata.file_index import FileIndex, PartitionFiles
from fedcore.metadata.listing import ListingFileIndex
from fedcore.metadata.table import MetadataTable

__all__ = ["FileIndex", "ListingFileIndex", "MetadataTable", "PartitionFiles"]
