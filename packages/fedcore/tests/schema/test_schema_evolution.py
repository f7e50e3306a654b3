"""Schema evolution on write, as Hudi's Spark writer allows it: new nullable columns, widened
types, dropped columns when asked; anything else refused by name. Readers and the Iceberg
view follow the table's schema."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import SchemaMismatchError
from fedcore.iceberg import publish
from fedcore.table import Table, create_table, load_table

from ..iceberg.test_iceberg_view import iceberg
from ..write.test_writes import FAST_HEARTBEAT


def make(backend: Backend, table_type: str = "COPY_ON_WRITE", **extra: str) -> Table:
    return create_table(
        backend.table_path,
        name="rides",
        record_key_fields=["id"],
        partition_fields=["city"],
        precombine_field="ts",
        table_type=table_type,  # type: ignore[arg-type]
        properties={
            **FAST_HEARTBEAT,
            P.STORAGE_STRATEGY_CLASS: "object_store",
            P.STORAGE_PATH: backend.storage_path,
            **extra,
        },
        storage_options=backend.storage_options,
    )


def rides(ids: list[int], city: str = "sfo", ts: int = 1, **columns: pa.Array) -> pa.Table:
    base = {
        "id": pa.array(ids, pa.int64()),
        "city": [city] * len(ids),
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "seats": pa.array([2] * len(ids), pa.int32()),
        "fare": pa.array([float(i) for i in ids], pa.float32()),
    }
    return pa.table({**base, **columns})


def by_id(table: Table, *columns: str) -> dict[int, tuple[object, ...]]:
    data = table.read(columns=["id", *columns]).to_pylist()
    return {r["id"]: tuple(r[c] for c in columns) for r in data}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_new_column_widened_types_and_older_files_read_in_the_new_schema(
    backend: Backend, table_type: str
) -> None:
    table = make(backend, table_type)
    table.bulk_insert(rides([1, 2], "sfo"))
    table.bulk_insert(rides([3], "nyc"))  # a file group no later write touches
    tip = pa.array([1.5], pa.float64())
    # A new column, seats widened int -> long, fare float -> double; id 1 updated in place.
    widened = rides([1], ts=2, tip=tip).set_column(3, "seats", pa.array([4], pa.int64()))
    widened = widened.set_column(4, "fare", pa.array([9.25], pa.float64()))
    table.upsert(widened)

    table = load_table(backend.table_path, storage_options=backend.storage_options)
    schema = table.schema()
    assert schema is not None
    assert (schema.field("seats").type, schema.field("fare").type) == (pa.int64(), pa.float64())
    assert schema.field("tip").type == pa.float64()
    assert schema.field("tip").nullable
    assert by_id(table, "seats", "fare", "tip") == {
        1: (4, 9.25, 1.5),
        2: (2, 2.0, None),  # the group's other record: written before the column existed
        3: (2, 3.0, None),  # a file group written before, untouched
    }
    read = table.read()
    assert read.schema.field("seats").type == pa.int64()
    newest = table.timeline().completed(table.write_actions)[-1]
    avro = json.loads(table.commit_metadata(newest).schema or "{}")
    assert "tip" in [f["name"] for f in avro["fields"]]  # the table's schema history

    # A narrower input into the widened table is cast up; the table keeps its schema.
    table.upsert(rides([4], ts=1, tip=pa.array([None], pa.float64())))
    assert by_id(load_table(backend.table_path, storage_options=backend.storage_options), "seats")[4] == (2,)
    assert load_table(backend.table_path, storage_options=backend.storage_options).schema() == schema
    if table_type == "MERGE_ON_READ":
        table.compact()
        compacted = load_table(backend.table_path, storage_options=backend.storage_options)
        assert compacted.schema() == schema
        assert by_id(compacted, "seats", "fare", "tip")[1] == (4, 9.25, 1.5)


def test_a_dropped_column_is_refused_unless_the_table_reconciles_it(backend: Backend) -> None:
    table = make(backend)
    table.bulk_insert(rides([1, 2]))
    without_seats = rides([2, 5], ts=2).drop_columns(["seats"])
    with pytest.raises(
        SchemaMismatchError,
        match=r"no column 'seats' of the table: set hoodie\.datasource\.write\.reconcile\.schema=true",
    ):
        table.upsert(without_seats)
    assert len(table.timeline()) == 1, "nothing written"
    table.upsert(without_seats, {str(P.RECONCILE_SCHEMA): "true"})
    table = load_table(backend.table_path, storage_options=backend.storage_options)
    assert by_id(table, "seats", "ts") == {1: (2, 1), 2: (None, 2), 5: (None, 2)}
    assert "seats" in table.schema().names  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("column", "values", "message"),
    [
        (
            "seats",
            pa.array(["two"]),
            "column 'seats' is int32 in the table; the input's string neither is nor widens",
        ),
        ("fare", pa.array([True]), "column 'fare' is float in the table; the input's bool"),
        ("id", pa.array([None], pa.int64()), "record key"),
    ],
)
def test_other_changes_are_refused_by_name_and_write_nothing(
    backend: Backend, column: str, values: pa.Array, message: str
) -> None:
    table = make(backend)
    table.bulk_insert(rides([1]))
    bad = rides([2])
    bad = bad.set_column(bad.schema.get_field_index(column), column, values)
    with pytest.raises(Exception, match=message) as raised:
        table.upsert(bad)
    assert raised.type.__module__ == "fedcore.exceptions"
    assert len(table.timeline()) == 1
    assert table.schema() == make_schema()


def make_schema() -> pa.Schema:
    return rides([1]).schema


def test_the_iceberg_view_follows_the_schema(backend: Backend) -> None:
    table = make(backend)
    table.bulk_insert(rides([1, 2]))
    publish(table)
    table.upsert(
        rides([3], tip=pa.array([0.5], pa.float64())).set_column(3, "seats", pa.array([7], pa.int64()))
    )
    publish(table)
    view = iceberg(table)
    names = [f.name for f in view.schema().fields]
    assert "tip" in names
    assert str(view.schema().find_field("seats").field_type) == "long"
    ids = {f.name: f.field_id for f in view.schema().fields}
    first = view.metadata.schemas[0]
    assert all(ids[f.name] == f.field_id for f in first.fields), "a column keeps its id"
    got = view.scan().to_arrow().select(["id", "seats", "tip"]).sort_by("id").to_pylist()
    assert got == [
        {"id": 1, "seats": 2, "tip": None},
        {"id": 2, "seats": 2, "tip": None},
        {"id": 3, "seats": 7, "tip": 0.5},
    ]
