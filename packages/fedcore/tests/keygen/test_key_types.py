"""Key and partition columns never change type through a write: an input whose key or
partition column has another type is cast only when every value converts exactly and its
record key and partition path stay what they were; anything else is refused, naming the
column and both types, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from fed_dev.testing import Backend, rows, trips
from fedcore import properties as P
from fedcore.cli.main import main
from fedcore.exceptions import SchemaMismatchError
from fedcore.table import Table, create_table, load_table

from ..write.test_writes import make_table


def with_column(data: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return data.set_column(data.schema.get_field_index(name), name, values)


def test_a_key_that_pandas_made_float_updates_the_records_it_names(backend: Backend) -> None:
    """pandas turns an integer column holding a null into float64; after dropna() the frame
    still has float keys. They are the table's int64 keys, so an upsert updates them."""
    table = make_table(backend)
    table.bulk_insert(trips(range(4)))
    frame = pd.DataFrame({"trip_id": [1, 2, None], "country": ["us", "us", "us"], "ts": [2, 2, 2]})
    frame["fare"] = [100.0, 200.0, 300.0]
    assert frame["trip_id"].dtype == "float64"
    result = table.upsert(frame.dropna())
    assert (result.updated, result.inserted) == (2, 0)
    assert rows(table) == {0: ("us", 10.0), 1: ("us", 100.0), 2: ("us", 200.0), 3: ("us", 13.0)}
    data = table.read()
    assert data.schema.field("trip_id").type == pa.int64()
    assert sorted(data.column("_hoodie_record_key").to_pylist()) == ["0", "1", "2", "3"]
    # A later int64 upsert still finds them: nothing was inserted twice.
    assert table.upsert(trips([1], ts=3, fare=1000.0)).updated == 1
    assert rows(table)[1] == ("us", 1001.0)


def test_a_float_partition_value_goes_to_the_integer_partition(backend: Backend) -> None:
    table = create_table(
        backend.table_path,
        name="buckets",
        record_key_fields=["id"],
        partition_fields=["bucket"],
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: backend.storage_path},
        storage_options=backend.storage_options,
    )
    table.bulk_insert(pa.table({"id": [1, 2], "bucket": [1, 2], "v": ["a", "b"]}))
    table.upsert(pa.table({"id": [1], "bucket": [1.0], "v": ["a2"]}))
    got = table.read(columns=["_hoodie_partition_path", "id", "bucket", "v"]).sort_by("id").to_pylist()
    assert got == [
        {"_hoodie_partition_path": "bucket=1", "id": 1, "bucket": 1, "v": "a2"},
        {"_hoodie_partition_path": "bucket=2", "id": 2, "bucket": 2, "v": "b"},
    ]
    assert {s.partition_path for s in table.file_slices()} == {"bucket=1", "bucket=2"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (pa.array([1.5]), r"'trip_id' is int64 in the table.*do not all convert"),
        (pa.array([float("nan")]), r"'trip_id' is int64 in the table.*do not all convert"),
        (pa.array([2.0**60]), r"'trip_id'.*beyond the whole numbers a float holds exactly"),
        (pa.array(["1"]), r"'trip_id' is int64 in the table; the input's string is not cast"),
        (pa.array([True]), r"'trip_id' is int64 in the table; the input's bool is not cast"),
        (pa.array([1], pa.decimal128(10, 0)), r"'trip_id' is int64 .* decimal128\(10, 0\) is not cast"),
    ],
)
def test_a_key_value_that_would_change_is_refused_before_anything_is_written(
    backend: Backend, values: pa.Array, message: str
) -> None:
    table = make_table(backend)
    table.bulk_insert(trips(range(3)))
    before = table.timeline()
    for operation in ("upsert", "insert", "bulk_insert", "delete"):
        with pytest.raises(SchemaMismatchError, match=message):
            table.write(with_column(trips([1]), "trip_id", values), operation)  # type: ignore[arg-type]
    after = load_table(backend.table_path, storage_options=backend.storage_options)
    assert [i.time for i in after.timeline()] == [i.time for i in before]
    assert rows(after) == {i: ("us", 10.0 + i) for i in range(3)}


def test_exact_casts_of_keys_and_partitions(tmp_path: Path) -> None:
    """Narrower integers, other string and timestamp encodings, dictionaries: the same keys."""
    table = create_table(
        f"file://{tmp_path}/events",
        name="events",
        record_key_fields=["id", "name"],
        partition_fields=["at"],
    )
    first = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "name": pa.array(["a", "b"], pa.string()),
            "at": pa.array([0, 1_000_000], pa.timestamp("us")),
            "v": [1, 2],
        }
    )
    table.bulk_insert(first)
    keys = sorted(table.read().column("_hoodie_record_key").to_pylist())
    second = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "name": pa.array(["a", "b"], pa.large_string()).dictionary_encode(),
            "at": pa.array([0, 1_000_000_000], pa.timestamp("ns")),
            "v": [10, 20],
        }
    )
    result = table.upsert(second)
    assert (result.updated, result.inserted) == (2, 0)
    data = table.read()
    assert sorted(data.column("_hoodie_record_key").to_pylist()) == keys
    assert data.schema.field("id").type == pa.int64()
    assert data.schema.field("at").type == pa.timestamp("us")
    assert sorted(data.column("v").to_pylist()) == [10, 20]
    lossy = with_column(second, "at", pa.array([1, 1_000_000_001], pa.timestamp("ns")))
    with pytest.raises(SchemaMismatchError, match=r"'at' is timestamp\[us\].*would lose data"):
        table.upsert(lossy)
    zoned = with_column(second, "at", pa.array([0, 1_000_000], pa.timestamp("us", "UTC")))
    with pytest.raises(SchemaMismatchError, match=r"'at' is timestamp\[us\] in the table.*UTC"):
        table.upsert(zoned)
    too_big = with_column(second, "id", pa.array([1, 2**40], pa.int64()).cast(pa.uint64()))
    assert table.upsert(too_big).inserted == 1  # any integer width, range checked
    with pytest.raises(SchemaMismatchError, match="'id'"):
        table.upsert(with_column(second, "id", pa.array([1, 2**64 - 1], pa.uint64())))


def test_data_columns_keep_their_evolution_rules(tmp_path: Path) -> None:
    """A data column still widens (int -> double) as Hudi evolves it: only keys are fixed."""
    table = create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["id"])
    table.bulk_insert(pa.table({"id": [1], "n": pa.array([1], pa.int32())}))
    table.upsert(pa.table({"id": [2.0], "n": [2.5]}))
    data = table.read(columns=["id", "n"]).sort_by("id")
    assert data.schema.field("id").type == pa.int64()
    assert data.schema.field("n").type == pa.float64()
    assert data.to_pylist() == [{"id": 1, "n": 1.0}, {"id": 2, "n": 2.5}]


def test_fed_write_of_a_csv_with_float_keys_updates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = f"file://{tmp_path}/trips"
    assert (
        main(["create", path, "--name", "trips", "--record-key", "trip_id", "--partition-by", "country"]) == 0
    )
    table: Table = load_table(path)
    table.bulk_insert(trips(range(3)))
    csv = tmp_path / "fix.csv"
    csv.write_text("trip_id,country,ts,fare\n1.0,us,2,99.5\n5.0,us,2,5.5\n")
    assert main(["write", path, str(csv)]) == 0, capsys.readouterr().err
    assert rows(load_table(path)) == {0: ("us", 10.0), 1: ("us", 99.5), 2: ("us", 12.0), 5: ("us", 5.5)}
    csv.write_text("trip_id,country,ts,fare\n1.25,us,2,99.5\n")
    assert main(["write", path, str(csv)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "'trip_id' is int64 in the table" in line
