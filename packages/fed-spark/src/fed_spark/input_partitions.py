"""Spark input partitions of a fed read: the file slices one task reads, packed as Spark
packs files (``spark.sql.files.maxPartitionBytes`` / ``openCostInBytes``)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.datasource import InputPartition

from fed_spark.options import SessionSettings
from fedcore.engine import FileSlice


class FedPartition(InputPartition):
    """The file slices one Spark task reads."""

    def __init__(self, slices: list[FileSlice]) -> None:
        super().__init__(None)
        self.slices = slices


def pack(slices: Sequence[FileSlice], settings: SessionSettings) -> list[list[FileSlice]]:
    """File slices in input partitions as Spark packs files: biggest first, each partition up
    to a split size (smaller when there is little to read, so every core gets work), each
    file counting an open cost."""
    if not slices:
        return []
    cost = settings.open_cost_bytes

    def size(s: FileSlice) -> int:
        return s.size + sum(n for _, n in s.log_files) + cost

    total = sum(size(s) for s in slices)
    split = min(settings.max_partition_bytes, max(cost, total // max(1, settings.parallelism)))
    groups: list[list[FileSlice]] = []
    current: list[FileSlice] = []
    filled = 0
    for file_slice in sorted(slices, key=size, reverse=True):
        if current and filled + size(file_slice) > split:
            groups.append(current)
            current, filled = [], 0
        current.append(file_slice)
        filled += size(file_slice)
    groups.append(current)
    return groups
