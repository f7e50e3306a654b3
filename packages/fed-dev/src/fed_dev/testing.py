"""What tests share: where a test's table and its storage live (asked of the store itself),
and the trips tables the suites write."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from fed_dev.servers import S3Endpoint
from fedcore import properties as P
from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.table import Table, create_table


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
    """A trips table's rows as {trip_id: (country, fare)}, after checking what a dict would
    hide: no trip is in the table twice (the same key in one partition, or a key moved to
    another partition without its old record going), and each row's Hudi key columns say
    what its values say (``_hoodie_record_key`` its ``trip_id``, ``_hoodie_partition_path``
    its country). A failed check is an ``AssertionError`` naming the rows."""
    found = table.read(**kwargs).to_pylist()
    scheme = table.handle.partition_scheme
    for row in found:
        path = row.get("_hoodie_partition_path")
        checked = path is not None and "country" in row and scheme.fields == ("country",)
        if checked and path != scheme.path_of([row["country"]]):
            raise AssertionError(f"row {row} has partition path {path!r}, not its country's")
    return keyed_rows(found, "trip_id", lambda r: (r["country"], r["fare"]))


def keyed_rows(found: list[dict[str, Any]], key: str, value: Any) -> dict[Any, Any]:
    """``{row[key]: value(row)}`` of rows that hold each key once (``AssertionError`` naming
    every key held twice), whose record-key meta column, where read, spells the key."""
    seen: dict[Any, list[dict[str, Any]]] = {}
    for row in found:
        seen.setdefault(row[key], []).append(row)
        spelled = row.get("_hoodie_record_key")
        if spelled is not None and spelled != str(row[key]):
            raise AssertionError(f"row {row} has record key {spelled!r}, not its {key} {row[key]!r}")
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    if twice:
        raise AssertionError(f"{len(twice)} keys are in the table more than once: {twice}")
    return {k: value(v[0]) for k, v in seen.items()}


# --- what the engine suites (Trino, Hive) share -------------------------------------------

#: The layouts the engine suites run on: hashed prefixes, hashed over 4 prefixes, Hive's.
ENGINE_LAYOUTS: dict[str, dict[str, str]] = {
    "object_store": {P.STORAGE_STRATEGY_CLASS: "object_store"},
    "bounded_prefix": {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PREFIX_COUNT: "4"},
    "hive": {},
}


def trips_table(
    s3: S3Endpoint, layout: str, buckets: str, properties: dict[str, str] | None = None
) -> tuple[Table, str]:
    """A trips table (key ``trip_id``, partitioned by ``country``, ``ts`` the precombine field)
    in buckets of its own named after ``buckets``, on ``layout``; and the bucket its data
    files are in."""
    tables, storage = s3.create_bucket(f"{buckets}-tables"), s3.create_bucket(f"{buckets}-storage")
    layout_properties = dict(ENGINE_LAYOUTS[layout])
    if layout_properties:
        layout_properties[P.STORAGE_PATH] = storage
    table = create_table(
        f"{tables}/trips",
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={**layout_properties, **(properties or {})},
        storage_options=s3.storage_options(),
    )
    return table, storage if layout_properties else tables


def query(connection: Any, sql: str) -> list[tuple[Any, ...]]:
    """A DB-API connection's rows for ``sql``, as sorted tuples."""
    cursor = connection.cursor()
    cursor.execute(sql)
    return sorted(tuple(row) for row in cursor.fetchall())


def trips_rows(table: Table, **kwargs: Any) -> list[tuple[Any, ...]]:
    """A trips table's rows as fedcore reads them (``read``'s options), as sorted tuples."""
    data = table.read(columns=["trip_id", "country", "ts", "fare"], **kwargs)
    return sorted(tuple(row.values()) for row in data.to_pylist())
