"""fedcore and Apache Hudi read each other's tables (hudi-rs, the `hudi` package, as the other side)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import hudi
import pyarrow as pa
import pytest

from fedcore.exceptions import UnsupportedTableVersionError
from fedcore.table import create_table, load_table
from fedcore.write.client import WriteClient

V6_TABLES = ["v6_complexkeygen_hivestyle", "v6_nonpartitioned", "v6_simplekeygen_nonhivestyle"]


def unpack(hudi_rs_tables: Path, name: str, into: Path) -> str:
    with zipfile.ZipFile(hudi_rs_tables / f"{name}.zip") as archive:
        archive.extractall(into)
    return f"file://{into / name}"


def sorted_rows(table: pa.Table, columns: list[str]) -> list[tuple[object, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True), key=repr)


def hudi_rs_read(path: str, filters: list[tuple[str, str, str]] | None = None) -> pa.Table:
    built = hudi.HudiTableBuilder.from_base_uri(path).build()
    batches = built.read(hudi.HudiReadOptions(filters=filters)) if filters else built.read()
    return pa.Table.from_batches(batches)


@pytest.mark.parametrize("name", V6_TABLES)
def test_fedcore_reads_hudi_written_tables_like_hudi_rs(
    hudi_rs_tables: Path, tmp_path: Path, name: str
) -> None:
    path = unpack(hudi_rs_tables, name, tmp_path)
    ours = load_table(path).read()
    theirs = hudi_rs_read(path)
    columns = ["_hoodie_record_key", "_hoodie_commit_time", "_hoodie_file_name", "id", "name"]
    assert ours.num_rows == theirs.num_rows > 0
    assert sorted_rows(ours, columns) == sorted_rows(theirs, columns)


def test_partition_filters_agree_with_hudi_rs(hudi_rs_tables: Path, tmp_path: Path) -> None:
    path = unpack(hudi_rs_tables, "v6_complexkeygen_hivestyle", tmp_path)
    ours = load_table(path).read([("byteField", "=", "10")])
    theirs = hudi_rs_read(path, [("byteField", "=", "10")])
    assert 0 < ours.num_rows < load_table(path).read().num_rows
    assert sorted_rows(ours, ["_hoodie_record_key"]) == sorted_rows(theirs, ["_hoodie_record_key"])


@pytest.mark.parametrize("name", ["v8_complexkeygen_hivestyle", "v8_nonpartitioned"])
def test_table_version_8_is_refused_clearly(hudi_rs_tables: Path, tmp_path: Path, name: str) -> None:
    with pytest.raises(UnsupportedTableVersionError, match="version 8"):
        load_table(unpack(hudi_rs_tables, name, tmp_path))


def test_hudi_rs_reads_a_table_fedcore_wrote(tmp_path: Path) -> None:
    path = f"file://{tmp_path}/trips"
    table = create_table(
        path, name="trips", record_key_fields=["id"], partition_fields=["country"], precombine_field="ts"
    )
    writer = WriteClient(table)
    writer.upsert(
        pa.table({"id": [1, 2, 3, 4], "country": ["us", "de", "us", "fr"], "ts": [1] * 4, "v": list("abcd")})
    )
    writer.upsert(pa.table({"id": [1, 5], "country": ["us", "us"], "ts": [2, 2], "v": ["A", "e"]}))
    writer.delete(pa.table({"id": [2], "country": ["de"]}))
    writer.insert_overwrite(pa.table({"id": [7], "country": ["fr"], "ts": [1], "v": ["g"]}))

    theirs = hudi_rs_read(path)
    ours = table.read()
    assert sorted_rows(theirs, ["id", "v", "_hoodie_commit_time"]) == sorted_rows(
        ours, ["id", "v", "_hoodie_commit_time"]
    )
    assert sorted(theirs.column("id").to_pylist()) == [1, 3, 5, 7]
    built = hudi.HudiTableBuilder.from_base_uri(path).build()
    assert {s.base_file_name for s in built.get_file_slices()} == {
        s.base_file_name for s in table.file_slices()
    }
