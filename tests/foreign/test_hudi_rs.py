"""hudi-rs (the ``hudi`` package) reads a Hive-layout fed table exactly and refuses every other
layout: it lists the table path, where a federated table keeps no data file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import hudi
import pyarrow as pa
import pytest
from foreign.layouts import COUNTRY, FEDERATED, Written, as_before_federated_types, write_sample

from fedcore import properties as P
from fedcore.table import load_table

#: What hudi-rs says of a federated table: the type it cannot parse (lower-cased).
REFUSAL = "Config value 'federated_copy_on_write' is not valid"


def hudi_rs_read(path: str, filters: list[tuple[str, str, str]] | None = None) -> pa.Table:
    built = hudi.HudiTableBuilder.from_base_uri(path).build()
    batches = built.read(hudi.HudiReadOptions(filters=filters)) if filters else built.read()
    return pa.Table.from_batches(batches) if batches else built.get_schema().empty_table()


def rows_of(table: pa.Table) -> list[tuple[int, str, float]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "country", "fare")), strict=True))


def assert_refused(path: str) -> None:
    with pytest.raises(Exception, match=REFUSAL) as refused:  # hudi does not export its error class
        hudi_rs_read(path)
    assert type(refused.value).__name__ == "HudiCoreError"


def test_a_hive_layout_table_is_read_exactly(layout_tables: dict[str, Written]) -> None:
    written = layout_tables["hive"]
    assert rows_of(hudi_rs_read(written.path)) == written.rows
    assert hudi_rs_read(written.path, [("country", "=", COUNTRY)]).num_rows == written.pruned > 0


@pytest.mark.parametrize("name", ["hive_mor", "hive_mor_avro"])
def test_a_hive_layout_merge_on_read_table_is_read_exactly(
    layout_tables: dict[str, Written], name: str
) -> None:
    """Data blocks (Parquet, or Avro) and delete blocks fed appended, a deleted key written
    again, a compaction and a delta commit after it."""
    written = layout_tables[name]
    assert rows_of(hudi_rs_read(written.path)) == written.rows
    assert written.read_optimized is not None
    assert written.rows != written.read_optimized, "the updates are in log files"
    assert {(1, "bra", 1.5), (8, COUNTRY, 8.5), (101, "chn", 101.0)} <= set(written.rows)
    assert (1, "bra", 1.5) in written.read_optimized, "compacted"
    assert hudi_rs_read(written.path, [("country", "=", COUNTRY)]).num_rows == written.pruned


@pytest.mark.parametrize("layout", FEDERATED)
def test_a_federated_table_is_refused(layout_tables: dict[str, Written], layout: str) -> None:
    assert_refused(layout_tables[layout].path)
    assert len(layout_tables[layout].rows) == 100  # fedcore reads it as ever


def test_fed_upgrade_makes_a_table_from_before_federated_types_refused(
    layout_tables: dict[str, Written],
) -> None:
    """The failure fed's federated types prevent, and ``fed upgrade``, which prevents it for an
    existing table without touching a data file."""
    written = layout_tables["legacy"]
    assert hudi_rs_read(written.path).num_rows == 0  # silently empty, as before federated types

    fed = [sys.executable, "-m", "fedcore", "upgrade", written.path]
    upgraded = subprocess.run(fed, capture_output=True, text=True, check=True)
    assert (
        upgraded.stdout.strip()
        == f"table trips_object_store: {P.TABLE_TYPE} COPY_ON_WRITE -> FEDERATED_COPY_ON_WRITE"
    )
    assert_refused(written.path)
    again = subprocess.run(fed, capture_output=True, text=True, check=True)
    assert again.stdout.strip() == "table trips_object_store is up to date"
    table = load_table(written.path)
    assert table.config.federated
    assert table.config.table_type == P.TABLE_TYPE_COW
    assert rows_of(table.read()) == written.rows


def test_the_next_write_upgrades_a_table_from_before_federated_types(tmp_path: Path) -> None:
    table = write_sample(f"file://{tmp_path}/trips", "object_store", tmp_path / "storage")
    as_before_federated_types(table)
    stale = load_table(table.path)
    stale.upsert(pa.table({"id": [5], "country": ["bra"], "ts": [3], "fare": [5.5]}))
    assert stale.config.federated
    assert load_table(table.path).config.federated
    assert_refused(table.path)
