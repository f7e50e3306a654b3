"""``table.scan(...)``: one immutable read, planned through the metadata table, handed to Arrow,
pandas, polars or DuckDB."""

from __future__ import annotations

import dataclasses
import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import InvalidColumnsError, UnsupportedTableError
from fedcore.io.filesystems import filesystem_for
from fedcore.read.scan import DataScan
from fedcore.schema.meta import META_COLUMNS
from fedcore.write.client import WriteClient

from ..write.test_merge_on_read_writes import mor_table
from ..write.test_writes import make_table, trips


def filled(backend: Backend):  # type: ignore[no-untyped-def]
    table = make_table(backend)
    WriteClient(table).upsert(trips(range(12), ["us", "de", "fr"] * 4))
    return table


def test_a_scan_is_immutable_and_reads_what_read_reads(backend: Backend) -> None:
    table = filled(backend)
    scan = table.scan([("country", "IN", ["us", "de"]), ("fare", ">", 12.0)], ["trip_id", "fare"])
    assert isinstance(scan, DataScan)
    with pytest.raises(dataclasses.FrozenInstanceError):
        scan.limit = 1  # type: ignore[misc]
    got = scan.to_arrow().sort_by("trip_id")
    assert got.column_names == ["trip_id", "fare"]
    assert got.column("trip_id").to_pylist() == [3, 4, 6, 7, 9, 10]
    assert got == table.read(scan.filters, ["trip_id", "fare"]).sort_by("trip_id")
    assert len(scan.plan_files()) == 2  # one file group in each of the two partitions kept
    narrower = scan.update(limit=2)
    assert narrower.limit == 2
    assert scan.limit is None
    assert narrower.to_arrow().num_rows == 2
    assert "limit=2" in repr(narrower)


def test_meta_fields_are_an_explicit_choice(backend: Backend) -> None:
    table = filled(backend)
    with_meta = table.scan().to_arrow()
    without = table.scan(with_meta_fields=False).to_arrow()
    assert with_meta.column_names[:5] == list(META_COLUMNS)
    assert without.column_names == ["trip_id", "country", "ts", "fare"]
    assert table.handle.schema_with_meta_fields().names == with_meta.column_names  # type: ignore[union-attr]
    assert table.schema().names == without.column_names  # type: ignore[union-attr]
    with pytest.raises(InvalidColumnsError, match="meta column"):
        table.scan(columns=["_hoodie_record_key"], with_meta_fields=False)


def test_count_reads_footers_without_filters_and_rows_with_them(backend: Backend) -> None:
    table = filled(backend)
    assert table.scan().count() == 12
    assert table.scan([("country", "=", "us")]).count() == 4
    assert table.scan([("fare", ">=", 20.0)]).count() == 2
    assert table.scan(limit=5).count() == 5


def test_the_batch_reader_streams_one_slice_at_a_time(backend: Backend) -> None:
    table = filled(backend)
    reader = table.scan(with_meta_fields=False).to_arrow_batch_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema.names == ["trip_id", "country", "ts", "fare"]
    batches = list(reader)
    assert len(batches) == 3  # one file slice per partition
    assert sorted(r["trip_id"] for b in batches for r in b.to_pylist()) == list(range(12))
    limited = list(table.scan(limit=5).to_arrow_batch_reader())
    assert sum(b.num_rows for b in limited) == 5


def test_pandas_polars_and_duckdb_get_the_same_rows(backend: Backend) -> None:
    table = filled(backend)
    scan = table.scan([("country", "=", "de")], ["trip_id", "fare"])
    expected = sorted(scan.to_arrow().to_pylist(), key=lambda r: r["trip_id"])
    frame = scan.to_pandas()
    assert sorted(frame.to_dict("records"), key=lambda r: r["trip_id"]) == expected
    assert sorted(scan.to_polars().to_dicts(), key=lambda r: r["trip_id"]) == expected
    con = scan.to_duckdb("trips")
    assert con.execute("select sum(fare), count(*) from trips").fetchone() == (
        sum(r["fare"] for r in expected),
        4,
    )


def test_an_empty_scan_has_the_table_schema(backend: Backend) -> None:
    table = filled(backend)
    empty = table.scan([("country", "=", "nowhere")], ["trip_id", "fare"]).to_arrow()
    assert empty.num_rows == 0
    assert empty.schema.names == ["trip_id", "fare"]
    assert table.scan(limit=0).to_arrow().num_rows == 0
    with pytest.raises(InvalidColumnsError):
        table.scan(limit=-1)


def test_null_and_empty_partition_values_filter_as_the_rows_values_do(backend: Backend) -> None:
    table = make_table(backend)
    data = pa.table(
        {
            "trip_id": pa.array([1, 2, 3], pa.int64()),
            "country": pa.array(["usa", "", None], pa.string()),
            "ts": pa.array([1, 1, 1], pa.int64()),
            "fare": pa.array([1.0, 2.0, 3.0]),
        }
    )
    table.upsert(data)
    assert {s.partition_path for s in table.file_slices()} == {
        "country=usa",
        "country=__HIVE_DEFAULT_PARTITION__",
    }

    def ids(where: str) -> list[int]:
        from fedcore.read.filters import parse_where

        return sorted(table.read(parse_where(where), ["trip_id"]).column("trip_id").to_pylist())

    assert ids("country = ''") == [2]
    assert ids("country IS NULL") == [3]
    assert ids("country IS NOT NULL") == [1, 2]
    assert ids("country != 'usa'") == [2]  # SQL: null != 'usa' is not true
    assert ids("country = '__HIVE_DEFAULT_PARTITION__'") == []  # no row holds that value
    assert ids("country IN ('usa', '')") == [1, 2]
    assert ids("country < 'b'") == [2]
    assert ids("country = 'usa'") == [1]


def test_a_plan_travels_to_other_processes_and_reads_its_snapshot(backend: Backend) -> None:
    """What an engine does: plan once, pickle the plan to tasks, each reads its slices."""
    table = filled(backend)
    scan = table.scan([("country", "IN", ["us", "de"]), ("fare", ">", 12.0)], ["trip_id", "fare"])
    plan = scan.plan()
    assert plan.schema == scan.schema() == scan.to_arrow().schema
    payload = pickle.dumps(plan)
    assert len(payload) < 20_000  # the slices and what reading needs; no file index, no timeline
    WriteClient(table).upsert(trips(range(12, 24), ["us"] * 12))  # a commit after the plan
    task = pickle.loads(payload)
    assert len(task.slices) == 2
    read = pa.concat_tables(task.read(s) for s in task.slices).sort_by("trip_id")
    assert read.schema == plan.schema
    assert read.column("trip_id").to_pylist() == [3, 4, 6, 7, 9, 10]  # the planned snapshot
    assert task.instant == plan.instant


def test_changes_are_the_latest_versions_of_records_written_in_the_range(backend: Backend) -> None:
    table = make_table(backend)
    client = WriteClient(table)
    t1 = client.bulk_insert(trips(range(30), ["us", "de", "fr"] * 10)).instant
    t2 = client.upsert(trips([1, 2, 40], ["de", "fr", "us"], ts=2, fare=100.0)).instant  # 2 updates, 1 insert
    t3 = client.delete(trips([2], "fr")).instant
    t4 = client.upsert(trips([1, 5], ["de", "fr"], ts=3, fare=200.0)).instant

    def got(scan: DataScan) -> dict[int, tuple[str, float]]:
        rows = scan.to_arrow().to_pylist()
        return {r["trip_id"]: (r["_hoodie_commit_time"], r["fare"]) for r in rows}

    assert got(table.changes(t1)) == {1: (t4, 201.0), 5: (t4, 205.0), 40: (t2, 140.0)}
    assert got(table.changes(t1, end=t2)) == {1: (t2, 101.0), 2: (t2, 102.0), 40: (t2, 140.0)}
    assert got(table.changes(t2, end=t3)) == {}  # a delete writes no record
    assert got(table.changes(t3)) == {1: (t4, 201.0), 5: (t4, 205.0)}
    assert got(table.changes(t4)) == {}
    assert table.changes("000").count() == table.scan().count()
    # Only the file groups an instant in the range wrote are read: t4 rewrote two of three.
    assert len(table.changes(t3).plan_files()) == 2 < len(table.scan().plan_files())
    assert got(table.changes(t1, filters=[("country", "=", "fr")])) == {5: (t4, 205.0)}
    assert "changed_after" in repr(table.changes(t1))


def test_a_scan_reads_one_snapshot_whatever_commits_meanwhile(backend: Backend) -> None:
    """An engine asks a scan for its schema, then (its filters pushed) for its plan: both come
    from the snapshot the scan first listed, even if a commit adding a column and rows lands
    in between; a new scan sees that commit."""
    table = make_table(backend)
    WriteClient(table).upsert(trips(range(4), ["us", "de"] * 2))
    scan = table.scan(with_meta_fields=False)
    schema = scan.schema()
    files = scan.plan_files()
    wider = trips([10, 11], "us").append_column("tip", pa.array([1.0, 2.0]))
    WriteClient(table).upsert(wider)
    pushed = scan.update(filters=[("country", "=", "us")])
    assert pushed.plan().schema == schema, "the schema of the snapshot the scan listed"
    assert {f.path for f in pushed.plan_files()} <= {f.path for f in files}
    assert sorted(pushed.to_arrow().column("trip_id").to_pylist()) == [0, 2]
    assert scan.count() == 4
    fresh = table.scan(with_meta_fields=False, filters=[("country", "=", "us")])
    assert "tip" in fresh.schema().names
    assert sorted(fresh.to_arrow().column("trip_id").to_pylist()) == [0, 2, 10, 11]
    assert pushed == fresh.update(with_meta_fields=False), "a scan is what it reads, not its snapshot"


def test_parquet_files_are_offered_only_where_a_plain_parquet_read_is_exact(backend: Backend) -> None:
    table = filled(backend)
    scan = table.scan([("country", "=", "us")])
    files = scan.parquet_files()
    assert files == [table.fs.to_physical(s.path) for s in scan.plan_files()]
    assert len(files) == 1
    fs = filesystem_for(files[0], backend.storage_options)
    assert pq.read_table(pa.BufferReader(fs.cat_file(files[0]))) == scan.to_arrow()
    with pytest.raises(UnsupportedTableError, match="incremental"):
        table.changes("000").parquet_files()


def test_parquet_files_are_refused_for_virtual_keys(backend: Backend) -> None:
    virtual = make_table(backend, **{P.POPULATE_META_FIELDS: "false"})
    virtual.upsert(trips(range(4)))
    with pytest.raises(UnsupportedTableError, match="do not hold _hoodie_commit_seqno"):
        virtual.scan().parquet_files()


def test_parquet_files_are_refused_while_log_files_wait_to_be_merged(backend: Backend) -> None:
    table = mor_table(backend)
    table.upsert(trips(range(4)))
    table.upsert(trips([1], fare=50.0))  # a log file on the slice
    with pytest.raises(UnsupportedTableError, match="log files to merge"):
        table.scan().parquet_files()
    assert len(table.scan(query_type="read_optimized").parquet_files()) == 1


def test_a_virtual_key_table_computes_the_meta_columns_a_scan_asks_for(backend: Backend) -> None:
    """Keys are made from the key columns only for the reads that need them: asked for, or
    filtered on; a read of other columns returns just those."""
    virtual = make_table(backend, **{P.POPULATE_META_FIELDS: "false"})
    virtual.upsert(trips(range(6), ["us", "de"] * 3))
    plain = virtual.scan(columns=["trip_id", "fare"]).to_arrow().sort_by("trip_id")
    assert plain.column_names == ["trip_id", "fare"]
    assert plain.column("trip_id").to_pylist() == list(range(6))
    keyed = virtual.scan(columns=["_hoodie_record_key", "_hoodie_partition_path"]).to_arrow()
    assert sorted(keyed.to_pylist(), key=lambda r: int(r["_hoodie_record_key"])) == [
        {"_hoodie_record_key": str(n), "_hoodie_partition_path": ["country=us", "country=de"][n % 2]}
        for n in range(6)
    ]
    filtered = virtual.scan([("_hoodie_record_key", "IN", ["2", "3"])], ["trip_id"]).to_arrow()
    assert sorted(filtered.column("trip_id").to_pylist()) == [2, 3]


def test_a_count_of_a_computed_column_counts_every_row(backend: Backend) -> None:
    """Virtual keys and partition columns kept out of the files: a filter on the partition
    column reads no stored column at all, and still counts each row."""
    table = make_table(backend, **{P.POPULATE_META_FIELDS: "false", P.DROP_PARTITION_COLUMNS: "true"})
    table.upsert(trips(range(6), ["us", "de", "us"] * 2))
    assert table.scan([("country", "=", "us")]).count() == 4
    assert table.scan([("country", "=", "us")], ["country"]).to_arrow().num_rows == 4
    assert table.scan(columns=["country"]).to_arrow().column("country").to_pylist().count("de") == 2
