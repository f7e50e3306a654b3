"""What tests share: where a test's table and its storage live (asked of the store itself),
and the trips tables the suites write."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.table import Table


@dataclass
class Backend:
    """Where a test's table and its storage live, and the options that reach them."""

    name: str
    table_path: str
    storage_path: str
    storage_options: StorageOptions | None

    def exists(self, uri: str) -> bool:
        """Whether a physical object exists, asked of the store directly (no listing cache)."""
        fs = filesystem_for(uri, self.storage_options)
        fs.invalidate_cache()
        return bool(fs.exists(uri))

    def read(self, uri: str) -> bytes:
        return bytes(filesystem_for(uri, self.storage_options).cat_file(uri))

    def data_files(self) -> set[str]:
        """The names of every Parquet file under the storage path, asked of the store itself."""
        fs = filesystem_for(self.storage_path, self.storage_options)
        fs.invalidate_cache()
        return {str(p).rpartition("/")[2] for p in fs.find(self.storage_path) if str(p).endswith(".parquet")}


def trips(
    ids: range | list[int], country: str | list[str] = "us", ts: int = 1, fare: float = 10.0
) -> pa.Table:
    """Trips with ids ``ids``: their country, timestamp ``ts`` and a fare of ``fare + id``."""
    ids = list(ids)
    countries = country if isinstance(country, list) else [country] * len(ids)
    return pa.table(
        {
            "trip_id": pa.array(ids, pa.int64()),
            "country": countries,
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": pa.array([fare + i for i in ids], pa.float64()),
        }
    )


def rows(table: Table, **kwargs: Any) -> dict[int, tuple[str, float]]:
    """A trips table's rows as {trip_id: (country, fare)}."""
    data = table.read(**kwargs).to_pylist()
    return {r["trip_id"]: (r["country"], r["fare"]) for r in data}
