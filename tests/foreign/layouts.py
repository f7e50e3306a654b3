"""One table per storage layout, written by fedcore, for the readers that do not know fed.

Each table gets the same writes (a bulk insert of 100 rows over four countries, an upsert,
a delete), so a reader's answer can be held against fedcore's own: a Hive-layout table must
be read exactly, every other layout refused (``tests/foreign/test_hudi_rs.py`` with hudi-rs;
``tests/foreign/hudi_spark`` with Apache Hudi's own Spark reader, in ``tox -e hudi``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from fedcore import properties as P
from fedcore.handle.config import TableConfig
from fedcore.table import Table, create_table, load_table

#: The layouts a user can create, by name: the storage keys of each.
LAYOUTS: dict[str, dict[str, str]] = {
    "hive": {P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_HIVE},
    "object_store": {P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE},
    "bounded_prefixes": {
        P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE,
        P.STORAGE_PREFIX_COUNT: "16",
    },
    "partition_map": {P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_PARTITION_MAP},
}
FEDERATED = [name for name in LAYOUTS if name != "hive"]
#: The pruned query each reader runs beside the full read.
COUNTRY = "usa"


@dataclass(frozen=True)
class Written:
    """A table fedcore wrote, and what fedcore reads from it."""

    path: str
    rows: list[tuple[int, str, float]]  # (id, country, fare), sorted
    pruned: int  # rows with country = COUNTRY
    #: Merge-on-read tables: the rows of the base files alone (a read-optimized query).
    read_optimized: list[tuple[int, str, float]] | None = None

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "rows": self.rows, "pruned": self.pruned}


def write_sample(
    path: str,
    layout: str,
    storage: Path,
    table_type: P.TableType = "COPY_ON_WRITE",
    options: dict[str, str] | None = None,
) -> Table:
    """The table at ``path`` in ``layout``, data under ``storage``, after three writes (and,
    merge-on-read, a fourth, the deleted key written again, all onto log files; then a
    compaction, and a delta commit after it: an update in a log file onto a compacted slice,
    an insert rewriting another). ``options``: the writes' Hudi keys."""
    properties = dict(LAYOUTS[layout])
    if layout in ("object_store", "bounded_prefixes"):
        properties[P.STORAGE_PATH] = f"file://{storage}"
    if layout == "partition_map":
        properties[P.STORAGE_PARTITION_LOCATIONS] = json.dumps(
            {f"country={COUNTRY}": f"file://{storage}/americas", "country=ind": f"file://{storage}/asia"}
        )
        properties[P.STORAGE_PATH] = f"file://{storage}/rest"
    table = create_table(
        path,
        name=f"trips_{layout}",
        record_key_fields=["id"],
        partition_fields=["country"],
        precombine_field="ts",
        table_type=table_type,
        properties=properties,
    ).with_options(options)
    countries = [COUNTRY, "bra", "ind", "chn"]
    table.bulk_insert(
        pa.table(
            {
                "id": list(range(100)),
                "country": [countries[i % 4] for i in range(100)],
                "ts": [1] * 100,
                "fare": [float(i) for i in range(100)],
            }
        )
    )
    table.upsert(pa.table({"id": [0, 100], "country": [COUNTRY, "bra"], "ts": [2, 2], "fare": [0.5, 100.0]}))
    table.delete(pa.table({"id": [1], "country": ["bra"]}))
    if table_type == P.TABLE_TYPE_MOR:
        table.upsert(pa.table({"id": [1, 4], "country": ["bra", COUNTRY], "ts": [3, 3], "fare": [1.5, 4.5]}))
        table.compact()
        after = {"id": [8, 101], "country": [COUNTRY, "chn"], "ts": [4, 4], "fare": [8.5, 101.0]}
        table.upsert(pa.table(after))
    return table


def fedcore_reads(table: Table) -> Written:
    columns = ["id", "country", "fare"]

    def rows_of(data: pa.Table) -> list[tuple[int, str, float]]:
        return sorted(zip(*(data.column(c).to_pylist() for c in columns), strict=True))

    optimized = None
    if table.config.merge_on_read:
        optimized = rows_of(table.scan(columns=columns, query_type="read_optimized").to_arrow())
    rows = rows_of(table.read(columns=columns))
    return Written(table.path, rows, table.scan([("country", "=", COUNTRY)]).count(), optimized)


def as_before_federated_types(table: Table) -> None:
    """Give a federated table the config tables had before fed stored federated types (an
    existing table that no write has upgraded yet)."""
    config = table.config
    legacy = TableConfig({**config, P.TABLE_TYPE: config.table_type})
    legacy.save_replacing(table.fs.table_fs, table.path)
    assert not load_table(table.path).config.federated
