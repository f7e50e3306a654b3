"""Hudi's rules for records, on every write: an upsert's ordering values are never null, and
complex record keys never collide."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from fed_dev.testing import Backend, rows, trips
from fedcore import properties as P
from fedcore.exceptions import InvalidRecordsError
from fedcore.log.merge import IS_DELETED
from fedcore.table import Table, create_table, load_table

from ..write.test_writes import make_table


def test_an_upsert_refuses_null_or_missing_ordering_values(backend: Backend) -> None:
    """Apache Hudi refuses them ("Ordering value is null", "field not found"); a null would
    otherwise rank below every value, or win as the later row, by nothing Hudi defines."""
    table = make_table(backend)
    table.bulk_insert(trips(range(3)))
    late = trips([1, 2], ts=5).set_column(2, "ts", pa.array([5, None], pa.int64()))
    with pytest.raises(InvalidRecordsError, match=r"record 1 has a null value in 'ts'.*ordering"):
        table.upsert(late)
    with pytest.raises(InvalidRecordsError, match=r"no column 'ts'"):
        table.with_options({"hoodie.datasource.write.reconcile.schema": "true"}).upsert(
            trips([1]).drop_columns(["ts"])
        )
    after = load_table(backend.table_path, storage_options=backend.storage_options)
    assert len(after.timeline().completed()) == 1, "nothing was written"
    assert rows(after) == {0: ("us", 10.0), 1: ("us", 11.0), 2: ("us", 12.0)}
    # Operations that order nothing take them, as Hudi's do.
    table.insert(trips([7]).set_column(2, "ts", pa.array([None], pa.int64())))
    table.delete(late.select(["trip_id", "country", "ts"]))
    assert rows(table) == {0: ("us", 10.0), 7: ("us", 17.0)}


@pytest.mark.parametrize("operation", ["upsert", "insert", "bulk_insert", "delete"])
def test_complex_key_values_that_would_collide_are_refused(tmp_path: Path, operation: str) -> None:
    """Hudi joins a complex key's parts as ``a:v1,b:v2`` without escaping: ('x,b:y', 'z') and
    ('x', 'y,b:z') would both be ``a:x,b:y,b:z``, and the second write would replace the
    first. A part holding a comma (or Hudi's placeholder for a null or empty part) is refused,
    naming the field and the value."""
    table = create_table(f"file://{tmp_path}/pairs", name="pairs", record_key_fields=["a", "b"])
    table.bulk_insert(pa.table({"a": ["p"], "b": ["q"], "v": [0]}))
    refused = (("x,b:y", "z", "a", "x,b:y"), ("x", "y,b:z", "b", "y,b:z"), ("__null__", "z", "a", "__null__"))
    for a, b, field, value in refused:
        with pytest.raises(InvalidRecordsError, match=rf"field '{field}' has the value '{value}'"):
            table.write(pa.table({"a": [a], "b": [b], "v": [1]}), operation)  # type: ignore[arg-type]
    assert table.read(columns=["_hoodie_record_key", "a", "b", "v"]).to_pylist() == [
        {"_hoodie_record_key": "a:p,b:q", "a": "p", "b": "q", "v": 0}
    ]
    # A colon alone is no ambiguity: the parts still split one way.
    table.upsert(pa.table({"a": ["x:1"], "b": ["z"], "v": [2]}))
    keys = sorted(table.read(columns=["_hoodie_record_key"]).column(0).to_pylist())
    assert keys == ["a:p,b:q", "a:x:1,b:z"]


def payload_table(backend: Backend, table_type: str, payload: str) -> Table:
    return create_table(
        backend.table_path,
        name="events",
        record_key_fields=["id"],
        partition_fields=["p"],
        precombine_field="ts",
        table_type=table_type,  # type: ignore[arg-type]
        properties={
            P.PAYLOAD_CLASS: payload,
            P.STORAGE_STRATEGY_CLASS: "object_store",
            P.STORAGE_PATH: backend.storage_path,
        },
        storage_options=backend.storage_options,
    )


def events(ids: list[int], ts: list[int], v: str, deleted: list[bool] | None = None) -> pa.Table:
    columns = {"id": ids, "p": ["a"] * len(ids), "ts": ts, "v": [f"{v}{i}" for i in ids]}
    return pa.table({**columns, IS_DELETED: deleted or [False] * len(ids)})


def table_rows(table: Table) -> list[tuple[int, int, str]]:
    data = table.read(columns=["id", "ts", "v"])
    return sorted(zip(*(data.column(c).to_pylist() for c in ("id", "ts", "v")), strict=True))


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_the_ordering_payload_keeps_a_stored_record_newer_than_its_update(
    backend: Backend, table_type: str
) -> None:
    """DefaultHoodieRecordPayload, as Hudi's merge handle (copy-on-write) and its log merge
    (merge-on-read) apply it: an update or a delete marker (``_hoodie_is_deleted``) older
    than the stored record is dropped; a tie or a newer one wins. An insert marked deleted is
    not written."""
    table = payload_table(backend, table_type, P.DEFAULT_HOODIE_PAYLOAD)
    table.bulk_insert(events([1, 2, 3, 4, 5], [10] * 5, "first"))
    table.upsert(
        pa.concat_tables(
            [
                events([1], [5], "older"),
                events([2], [10], "tie"),
                events([3], [20], "newer"),
                events([4], [5], "x", [True]),  # an older delete: ignored
                events([5], [15], "x", [True]),  # a newer delete
                events([6], [1], "x", [True]),  # an insert marked deleted
                events([7], [1], "new"),
            ]
        )
    )
    expected = [(1, 10, "first1"), (2, 10, "tie2"), (3, 20, "newer3"), (4, 10, "first4"), (7, 1, "new7")]
    assert table_rows(table) == expected
    if table_type == P.TABLE_TYPE_MOR:
        table.compact()
        assert table_rows(table) == expected
    table.insert(events([8, 9], [1, 1], "ins", [True, False]))
    assert table_rows(table) == [*expected, (9, 1, "ins9")]


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_the_latest_payload_applies_every_update_and_delete_marker(backend: Backend, table_type: str) -> None:
    table = payload_table(backend, table_type, P.OVERWRITE_WITH_LATEST_PAYLOAD)
    table.bulk_insert(events([1, 2, 3], [10] * 3, "first"))
    table.upsert(
        pa.concat_tables(
            [events([1], [5], "older"), events([2], [5], "x", [True]), events([4], [1], "x", [True])]
        )
    )
    assert table_rows(table) == [(1, 5, "older1"), (3, 10, "first3")]
