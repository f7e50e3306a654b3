"""Tables whose files hold no meta values (``hoodie.populate.meta.fields=false``: virtual keys)
or leave their partition columns out (``hoodie.datasource.write.drop.partition.columns``),
written as Hudi writes them: fedcore's reads, filters, upserts, deletes and compactions stay
exact, and hudi-rs reads the tables with virtual keys as fedcore does (it refuses dropped
partition columns; Apache Hudi's readers read both, ``tests/foreign/hudi_spark``)."""

from __future__ import annotations

from pathlib import Path

import hudi
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fed_dev.testing import Backend, rows, trips
from fedcore import properties as P
from fedcore.exceptions import InvalidTableConfigError, UnsupportedTableError
from fedcore.files.file_slice import VIRTUAL_META_COLUMNS
from fedcore.schema.meta import META_COLUMNS
from fedcore.table import Table, create_table

from .test_writes import make_table

SHAPES = {
    "virtual_keys": {str(P.POPULATE_META_FIELDS): "false"},
    "dropped_partition_columns": {str(P.DROP_PARTITION_COLUMNS): "true"},
    "both": {str(P.POPULATE_META_FIELDS): "false", str(P.DROP_PARTITION_COLUMNS): "true"},
}


def shaped(backend: Backend, shape: str, table_type: str) -> Table:
    """On local files in the Hive layout (which hudi-rs reads), on S3 in the object-store one."""
    layout = "hive" if backend.name == "local" else "object_store"
    return make_table(backend, layout, **SHAPES[shape], **{P.TABLE_TYPE: table_type})


def stored_files(table: Table) -> list[pa.Table]:
    return [pq.read_table(table.fs.open(s.path)) for s in table.file_slices() if s.base_file_name]


#: Virtual keys are for copy-on-write tables (Hudi's merge-on-read readers merge by meta fields).
CASES = [
    (shape, table_type)
    for shape in sorted(SHAPES)
    for table_type in P.TABLE_TYPES
    if table_type == P.TABLE_TYPE_COW or shape == "dropped_partition_columns"
]


@pytest.mark.parametrize(("shape", "table_type"), CASES)
def test_writes_reads_and_filters_are_exact(backend: Backend, shape: str, table_type: str) -> None:
    table = shaped(backend, shape, table_type)
    table.bulk_insert(trips(range(12), ["us", "de", "fr"] * 4))
    model = {i: (["us", "de", "fr"][i % 3], 10.0 + i) for i in range(12)}
    table.upsert(trips([0, 1, 20], ["us", "de", "jp"], ts=2, fare=100.0))
    model |= {0: ("us", 100.0), 1: ("de", 101.0), 20: ("jp", 120.0)}
    table.delete(trips([2, 3], ["fr", "us"]).select(["trip_id", "country"]))
    del model[2], model[3]
    table.insert(trips([30], "de", ts=3, fare=0.0))
    model[30] = ("de", 30.0)
    assert rows(table) == model
    names = table.read().schema.names
    meta = META_COLUMNS if shape == "dropped_partition_columns" else VIRTUAL_META_COLUMNS
    assert names[: len(meta)] == list(meta)
    assert sorted(names[len(meta) :]) == ["country", "fare", "trip_id", "ts"]
    got = table.read([("country", "=", "de")], ["trip_id", "country", "fare"]).sort_by("trip_id")
    assert got.to_pylist() == [
        {"trip_id": i, "country": "de", "fare": fare} for i, (c, fare) in sorted(model.items()) if c == "de"
    ]
    one = table.read([("_hoodie_record_key", "=", "20")], ["trip_id", "country"])
    assert one.to_pylist() == [{"trip_id": 20, "country": "jp"}]
    assert table.read([("trip_id", ">=", 20)], ["trip_id"]).num_rows == 2
    for stored in stored_files(table):
        if shape != "dropped_partition_columns":
            for column in META_COLUMNS[:4]:
                assert stored.column(column).null_count == stored.num_rows, column
            assert stored.column("_hoodie_file_name").null_count == 0
        assert ("country" in stored.column_names) == (shape == "virtual_keys")
    if table_type == P.TABLE_TYPE_MOR:
        assert any(s.log_files for s in table.file_slices())
        table.compact()
        assert rows(table) == model
        assert not any(s.log_files for s in table.file_slices())
    if backend.name == "local" and shape == "virtual_keys":  # hudi-rs reads no dropped columns
        theirs = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(table.path).build().read())
        pairs = sorted(
            zip(theirs.column("trip_id").to_pylist(), theirs.column("country").to_pylist(), strict=True)
        )
        assert pairs == sorted((i, c) for i, (c, _) in model.items()), "hudi-rs reads them as fedcore does"


def test_virtual_keys_that_fedcore_cannot_spell_are_refused_before_writing(tmp_path: Path) -> None:
    table = create_table(
        f"file://{tmp_path}/t",
        name="t",
        record_key_fields=["at"],
        properties={str(P.POPULATE_META_FIELDS): "false"},
    )
    with pytest.raises(UnsupportedTableError, match=r"'at' is timestamp.*keep meta fields"):
        table.bulk_insert(pa.table({"at": pa.array([1], pa.timestamp("us")), "v": [1]}))
    assert table.timeline().completed() == []


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        (
            {
                str(P.POPULATE_META_FIELDS): "false",
                P.KEY_GENERATOR_CLASS: "org.apache.hudi.keygen.CustomKeyGenerator",
            },
            "simple, complex or non-partitioned key generator",
        ),
        (
            {
                str(P.DROP_PARTITION_COLUMNS): "true",
                P.KEY_GENERATOR_CLASS: "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
            },
            "partition paths that spell the columns' values",
        ),
    ],
)
def test_file_shapes_that_cannot_be_read_back_are_refused_at_create(
    tmp_path: Path, properties: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidTableConfigError, match=message):
        create_table(
            f"file://{tmp_path}/t",
            name="t",
            record_key_fields=["id"],
            partition_fields=["p"],
            properties=properties,
        )
    with pytest.raises(InvalidTableConfigError, match="false is for copy-on-write tables"):
        create_table(
            f"file://{tmp_path}/v",
            name="v",
            record_key_fields=["id"],
            table_type="MERGE_ON_READ",
            properties={str(P.POPULATE_META_FIELDS): "false"},
        )
    with pytest.raises(InvalidTableConfigError, match="ordering field 'p'"):
        create_table(
            f"file://{tmp_path}/u",
            name="u",
            record_key_fields=["id"],
            partition_fields=["p"],
            precombine_field="p",
            properties={str(P.DROP_PARTITION_COLUMNS): "true"},
        )
