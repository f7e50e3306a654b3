"""Copy-on-write writes and snapshot reads, on local files and on S3 (moto on loopback): any input
that exports an Arrow stream, one result per commit."""

from __future__ import annotations

from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend, rows, trips
from fedcore import properties as P
from fedcore.exceptions import (
    ConfigError,
    InstantNotRetainedError,
    InvalidPartitionValueError,
    InvalidRecordsError,
    MetadataTableRequiredError,
    RollbackError,
    SchemaMismatchError,
)
from fedcore.io.filesystems import filesystem_for
from fedcore.schema.meta import META_COLUMNS
from fedcore.services.rollback import rollback
from fedcore.services.verify import verify_table
from fedcore.table import Table, create_table, load_table
from fedcore.write import client as write_client
from fedcore.write.client import OPERATIONS, WriteClient, WriteResult

FAST_HEARTBEAT = {P.HEARTBEAT_INTERVAL_MS: "100", P.HEARTBEAT_TOLERABLE_MISSES: "2"}


def make_table(backend: Backend, layout: str = "object_store", **extra: str) -> Table:
    props: dict[str, str] = {**FAST_HEARTBEAT, **extra}
    if layout == "object_store":
        props |= {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: backend.storage_path}
    return create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties=props,
        storage_options=backend.storage_options,
    )


def physical_files(backend: Backend, root: str) -> list[str]:
    fs = filesystem_for(root, backend.storage_options)
    try:
        found = fs.find(root, detail=False)
    except FileNotFoundError:
        return []
    return sorted(str(p) for p in found if str(p).endswith(".parquet"))


def test_round_trip_puts_data_under_hashed_prefixes_and_metadata_under_the_table(backend: Backend) -> None:
    table = make_table(backend)
    writer = WriteClient(table)
    writer.upsert(trips(range(10), ["us", "de"] * 5))
    assert rows(table) == {i: (["us", "de"][i % 2], 10.0 + i) for i in range(10)}

    data_files = physical_files(backend, backend.storage_path)
    assert len(data_files) == 2
    for path in data_files:
        prefix, table_name, partition, _ = path.split("/")[-4:]
        assert len(prefix) == 8
        assert int(prefix, 16) >= 0
        # The table's folder: its name and its id, so no other table ever shares it.
        assert table_name == f"trips-{table.config[P.TABLE_ID]}"
        assert partition in ("country=us", "country=de")
    table_files = physical_files(backend, backend.table_path)
    assert all("/.hoodie/" in p for p in table_files), "no data file under the table path"
    fs = filesystem_for(backend.table_path, backend.storage_options)
    root = fs._strip_protocol(backend.table_path)
    assert fs.exists(f"{root}/country=us/.hoodie_partition_metadata")

    base = table.file_slices()[0]
    with table.fs.open(base.path, "rb") as handle:
        data = pq.read_table(handle)
    assert data.column_names[:5] == list(META_COLUMNS)
    first = data.slice(0, 1).to_pylist()[0]
    assert first["_hoodie_file_name"] == base.base_file_name
    assert first["_hoodie_partition_path"] == base.partition_path
    assert first["_hoodie_commit_time"] == base.base_instant
    assert first["_hoodie_commit_seqno"].startswith(base.base_instant + "_")


def test_upsert_rewrites_only_the_file_group_holding_the_key(backend: Backend) -> None:
    table = make_table(backend)
    writer = WriteClient(table)
    writer.upsert(trips(range(6), ["us", "de", "fr"] * 2))
    before = {s.partition_path: s for s in table.file_slices()}
    second = writer.upsert(trips([0, 100], "us", ts=2, fare=50.0)).instant  # one update, one insert
    after = {s.partition_path: s for s in table.file_slices()}
    assert after["country=de"] == before["country=de"]
    assert after["country=fr"] == before["country=fr"]
    assert after["country=us"].file_id == before["country=us"].file_id  # insert went to the small group
    assert after["country=us"].base_instant == second
    got = rows(table)
    assert got[0] == ("us", 50.0)
    assert got[100] == ("us", 150.0)
    assert got[3] == ("us", 13.0)
    assert len(got) == 7

    metadata = table.commit_metadata(table.timeline().find(second))  # type: ignore[arg-type]
    (stat,) = metadata.stats
    assert (stat.num_update_writes, stat.num_inserts, stat.num_writes) == (1, 1, 3)
    assert stat.prev_commit == before["country=us"].base_instant


def test_batch_duplicates_keep_the_greatest_precombine_value(backend: Backend) -> None:
    table = make_table(backend)
    batch = pa.concat_tables(
        [trips([1], ts=5, fare=1.0), trips([1], ts=9, fare=2.0), trips([1], ts=7, fare=3.0)]
    )
    WriteClient(table).upsert(batch)
    assert rows(table) == {1: ("us", 3.0)}  # fare + id with ts 9


def test_delete_removes_only_the_named_keys(backend: Backend) -> None:
    table = make_table(backend)
    writer = WriteClient(table)
    writer.upsert(trips(range(4), ["us", "de"] * 2))
    writer.delete(pa.table({"trip_id": [1, 2, 99], "country": ["de", "us", "us"]}))
    assert sorted(rows(table)) == [0, 3]


def test_insert_overwrite_replaces_partitions_and_time_travel_sees_the_past(backend: Backend) -> None:
    table = make_table(backend)
    writer = WriteClient(table)
    first = writer.upsert(trips(range(4), ["us", "de"] * 2)).instant
    writer.insert_overwrite(trips([50, 51], "us"))
    assert sorted(rows(table)) == [1, 3, 50, 51]
    assert sorted(rows(table, as_of=first)) == [0, 1, 2, 3]
    assert table.timeline().instants[-1].action == "replacecommit"


def test_inserts_fill_small_file_groups_then_open_new_ones(backend: Backend) -> None:
    table = make_table(backend, **{P.MAX_FILE_SIZE: "20000", P.SMALL_FILE_LIMIT: "15000"})
    writer = WriteClient(table, {P.RECORD_SIZE_ESTIMATE: "100"})
    writer.bulk_insert(trips(range(450)))  # 200 records per file at 100 bytes
    assert sorted(len(pq.read_table(table.fs.open(s.path, "rb"))) for s in table.file_slices()) == [
        50,
        200,
        200,
    ]
    writer.insert(trips(range(1000, 1010)))
    slices = table.file_slices()
    assert len(slices) == 3, "the new records went into the small file group"
    assert len(table.read()) == 460


def test_partition_pruning_reads_only_matching_partitions(backend: Backend) -> None:
    table = make_table(backend)
    countries = ["us", "de", "fr", "br", "in"]
    WriteClient(table).upsert(trips(range(50), countries * 10))
    assert {s.partition_path for s in table.file_slices([("country", "IN", ["de", "fr"])])} == {
        "country=de",
        "country=fr",
    }
    assert {s.partition_path for s in table.file_slices([("country", ">=", "fr")])} == {
        "country=fr",
        "country=in",
        "country=us",
    }
    got = table.read([("country", "=", "br"), ("fare", ">", 40.0)], columns=["trip_id", "fare"])
    assert got.column_names == ["trip_id", "fare"]
    assert sorted(got.column("trip_id").to_pylist()) == [33, 38, 43, 48]
    reader = table.read_batches([("country", "=", "us")])
    assert sum(batch.num_rows for batch in reader) == 10


def test_partition_values_are_escaped_as_hudi_does(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2, 3], ["a/b", "..", "x:y"]))
    assert {s.partition_path for s in table.file_slices()} == {"country=a%2Fb", "country=..", "country=x%3Ay"}
    assert rows(table, filters=[("country", "=", "a/b")]) == {1: ("a/b", 11.0)}


def test_unescaped_partition_values_cannot_escape_their_folder(backend: Backend) -> None:
    table = create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        hive_style_partitioning=False,
        properties={P.URL_ENCODE_PARTITIONING: "false"},
        storage_options=backend.storage_options,
    )
    for bad in ("..", "a/b"):
        with pytest.raises(InvalidPartitionValueError):
            WriteClient(table).upsert(trips([1], bad))
    assert table.timeline().instants == ()


def test_bad_input_gets_typed_errors_and_writes_nothing(backend: Backend) -> None:
    table = make_table(backend)
    writer = WriteClient(table)
    writer.upsert(trips([1]))
    with pytest.raises(SchemaMismatchError):
        writer.upsert(trips([2]).set_column(3, "fare", pa.array(["eleven"])))
    with pytest.raises(InvalidRecordsError):
        writer.upsert(pa.table({"trip_id": [None], "country": ["us"], "ts": [1], "fare": [1.0]}))
    with pytest.raises(InvalidRecordsError):
        writer.upsert(trips([2]).drop_columns(["trip_id"]))
    assert len(table.timeline()) == 1
    assert rows(table) == {1: ("us", 11.0)}


def test_object_store_layout_requires_the_metadata_table(backend: Backend) -> None:
    with pytest.raises(MetadataTableRequiredError) as raised:
        make_table(backend, **{P.METADATA_ENABLE: "false"})
    assert raised.value.key == P.METADATA_ENABLE


def test_hive_layout_without_metadata_table_reads_by_listing(backend: Backend) -> None:
    table = make_table(backend, layout="hive", **{P.METADATA_ENABLE: "false"})
    writer = WriteClient(table)
    writer.upsert(trips(range(4), ["us", "de"] * 2))
    writer.upsert(trips([0], "us", fare=100.0))
    assert rows(table) == {0: ("us", 100.0), 1: ("de", 11.0), 2: ("us", 12.0), 3: ("de", 13.0)}


def test_clean_keeps_the_latest_commits_and_deletes_older_slices(backend: Backend) -> None:
    table = make_table(backend, **{P.CLEANER_COMMITS_RETAINED: "2"})
    writer = WriteClient(table)
    first = writer.upsert(trips([1, 2])).instant
    for fare in (20.0, 30.0, 40.0):
        writer.upsert(trips([1], fare=fare))
    assert rows(table) == {1: ("us", 41.0), 2: ("us", 12.0)}
    assert len(physical_files(backend, backend.storage_path)) == 3  # two retained + the one before them
    assert [i.action for i in table.timeline()].count("clean") >= 1
    with pytest.raises(InstantNotRetainedError):
        table.read(as_of=first)


def test_rollback_of_the_latest_commit_restores_the_previous_state(backend: Backend) -> None:
    table = make_table(backend)
    writer = WriteClient(table)
    first = writer.upsert(trips([1, 2])).instant
    second = writer.upsert(trips([1, 3], fare=100.0)).instant
    with pytest.raises(RollbackError):
        rollback(table.handle, first)
    rollback(table.handle, second)
    assert rows(table) == {1: ("us", 11.0), 2: ("us", 12.0)}
    assert table.timeline().find(second) is None
    assert len(physical_files(backend, backend.storage_path)) == 1
    writer.upsert(trips([1], fare=7.0))  # the file group can be superseded again
    assert rows(table)[1] == ("us", 8.0)


def test_metadata_compaction_keeps_lookups_equal(backend: Backend) -> None:
    table = make_table(backend, **{P.METADATA_COMPACT_DELTAS: "3"})
    writer = WriteClient(table)
    for i in range(7):
        writer.upsert(trips([i, 100 + i], ["us", "de"]))
    index = table.handle.metadata_table_or_none()
    assert index is not None
    assert index.deltas_since_compaction() < 3
    expected = {i: ("us", 10.0 + i) for i in range(7)} | {100 + i: ("de", 110.0 + i) for i in range(7)}
    assert rows(table) == expected
    fresh = load_table(backend.table_path, storage_options=backend.storage_options)
    assert rows(fresh) == expected


def test_tables_reopen_with_their_options(backend: Backend) -> None:
    make_table(backend)
    table = load_table(backend.table_path, options=FAST_HEARTBEAT, storage_options=backend.storage_options)
    WriteClient(table).upsert(trips([1]))
    assert table.handle.heartbeat_interval_ms == 100
    assert rows(table) == {1: ("us", 11.0)}


def test_stale_listing_caches_never_hide_a_commit(backend: Backend) -> None:
    table = make_table(backend)
    other = load_table(backend.table_path, storage_options=backend.storage_options)
    assert other.read().num_rows == 0
    WriteClient(table).upsert(trips([1]))
    assert rows(other) == {1: ("us", 11.0)}


def test_an_upsert_and_a_read_on_s3_spend_requests_where_they_must(s3_server: LoopbackS3) -> None:
    """The table prefix is the one every reader and writer shares: a commit lists the
    timeline once to plan, once to pick its instant and once for its table services,
    and no data file is HEADed before it is read (the file index knows its size)."""
    tables, storage = s3_server.create_bucket("budget"), s3_server.create_bucket("budget-data")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    table = make_table(backend)
    countries = ["us", "fr", "de"]
    WriteClient(table).insert(trips(range(30), [countries[i % 3] for i in range(30)]))
    timeline_prefix = f"{tables.removeprefix('s3://')}/trips/.hoodie/"

    s3_server.requests.reset()
    WriteClient(table).upsert(trips(range(0, 30, 2), [countries[i % 3] for i in range(0, 30, 2)], ts=2))
    assert s3_server.requests.listed[timeline_prefix] == 3, s3_server.requests.listed
    assert s3_server.requests.by_method["HEAD"] <= 1, s3_server.requests.by_method  # the marker folder's

    s3_server.requests.reset()
    assert rows(table, filters=[("country", "in", ["us", "fr"])]) == {
        i: (countries[i % 3], 10.0 + i) for i in range(30) if i % 3 != 2
    }
    assert s3_server.requests.by_method["HEAD"] == 0, s3_server.requests.by_method
    assert s3_server.requests.listed[timeline_prefix] == 1, s3_server.requests.listed


@pytest.mark.parametrize(
    ("codec", "stored"), [("GZIP", "GZIP"), ("zstd", "ZSTD"), ("uncompressed", "UNCOMPRESSED")]
)
def test_base_files_follow_hudis_parquet_settings(backend: Backend, codec: str, stored: str) -> None:
    table = make_table(backend)
    options = {P.PARQUET_COMPRESSION_CODEC: codec, P.PARQUET_BLOCK_SIZE: "4096", P.RECORD_SIZE_ESTIMATE: "64"}
    WriteClient(table, options).insert(trips(range(500)))
    [piece] = table.file_slices()
    with table.fs.open(piece.path, "rb") as handle:
        metadata = pq.ParquetFile(handle).metadata
    assert metadata.num_row_groups == 8  # 4,096 bytes / 64 bytes a record: row groups of 64 rows
    columns = {
        metadata.row_group(0).column(i).path_in_schema: metadata.row_group(0).column(i) for i in range(8)
    }
    assert {c.compression for c in columns.values()} == {stored}
    # Sequence numbers carry no statistics (no reader filters on them); keys and data do.
    assert not columns["_hoodie_commit_seqno"].is_stats_set
    assert columns["_hoodie_record_key"].statistics.min == "0"
    assert columns["trip_id"].statistics.max == 63
    assert sorted(rows(table)) == list(range(500))


def test_a_first_write_sizes_files_by_its_rows(backend: Backend) -> None:
    """With no commit to learn a record size from and no estimate set, a table's first write
    measures its rows as its files encode them: files and row groups come near the sizes
    configured (the 1 KB default estimate would make files of a few percent of them)."""
    table = make_table(backend, **{P.MAX_FILE_SIZE: "100000", P.PARQUET_BLOCK_SIZE: "25000"})
    WriteClient(table).bulk_insert(trips(range(20_000), "us"))
    sizes = sorted(s.size for s in table.file_slices())
    # Measured on a sample: within a few percent of the size set, and few of them.
    assert all(size <= 110_000 for size in sizes), sizes
    assert 2 <= len(sizes) <= 8, sizes  # at 1 KB a record: 205 files
    assert sizes[-2] >= 80_000, sizes
    largest = max(table.file_slices(), key=lambda s: s.size)
    with table.fs.open(largest.path, "rb") as handle:
        groups = pq.ParquetFile(handle).metadata.num_row_groups
    assert 3 <= groups <= 6, groups  # 25,000 bytes each
    assert sorted(rows(table)) == list(range(20_000))


def test_a_small_commit_teaches_no_record_size(backend: Backend) -> None:
    """As in Hudi, only a commit past ``hoodie.record.size.estimation.threshold`` times the
    small file limit teaches the record size: ten rows' bytes per record are mostly footer,
    and would make the next write's files a few percent of the size set."""
    table = make_table(backend, **{P.MAX_FILE_SIZE: "100000"})
    WriteClient(table).bulk_insert(trips(range(10), "us"))
    # Told to learn from any commit, the ten rows teach their footer-heavy size.
    taught = WriteClient(table, {P.RECORD_SIZE_ESTIMATION_THRESHOLD: "0"})
    taught.bulk_insert(trips(range(30_000, 32_000), "fr"))
    assert len([s for s in table.file_slices() if s.partition_path == "country=fr"]) >= 5  # measured: 1
    WriteClient(table).bulk_insert(trips(range(100, 20_100), "de"))
    sizes = sorted(s.size for s in table.file_slices() if s.partition_path == "country=de")
    assert 2 <= len(sizes) <= 8, sizes


def test_a_record_size_estimate_set_sizes_a_first_write(backend: Backend) -> None:
    table = make_table(backend, **{P.MAX_FILE_SIZE: "100000"})
    WriteClient(table, {P.RECORD_SIZE_ESTIMATE: "1000"}).bulk_insert(trips(range(2_000), "us"))
    assert len(table.file_slices()) == 20  # 100 rows a file, as the estimate set says


def test_new_files_store_one_value_columns_as_the_strings_they_hold(backend: Backend) -> None:
    """A new file's commit time, partition path and file name columns are written from one
    value each (no per-row copy): the file's Arrow schema, statistics and values are those of
    string columns, as they were when written from strings, and so are a rewrite's."""
    table = make_table(backend)
    first = WriteClient(table).bulk_insert(trips(range(100), ["us", "de"] * 50))
    WriteClient(table).upsert(trips([0, 1], ["us", "de"], fare=99.0))
    for piece in table.file_slices():
        with table.fs.open(piece.path, "rb") as handle:
            stored = pq.read_table(handle)
        name = piece.path.rpartition("/")[2]
        assert stored.schema.field("_hoodie_file_name").type == pa.string()
        assert stored.schema.field("_hoodie_commit_time").type == pa.string()
        assert set(stored.column("_hoodie_file_name").to_pylist()) == {name}
        assert set(stored.column("_hoodie_partition_path").to_pylist()) == {piece.partition_path}
        times = {first.instant, table.timeline().instants[-1].time}
        assert set(stored.column("_hoodie_commit_time").to_pylist()) <= times
        keys = stored.column("_hoodie_record_key")
        assert stored.schema.metadata[b"hoodie_min_record_key"] == pc.min(keys).as_py().encode()
        with table.fs.open(piece.path, "rb") as handle:
            column = pq.ParquetFile(handle).metadata.row_group(0).column(4)
        assert column.path_in_schema == "_hoodie_file_name"
        assert (column.statistics.min, column.statistics.max) == (name, name)
    assert sorted(rows(table)) == list(range(100))


def test_an_unknown_codec_is_refused_before_anything_is_written(backend: Backend) -> None:
    table = make_table(backend)
    with pytest.raises(ConfigError, match=r"hoodie\.parquet\.compression\.codec"):
        WriteClient(table, {P.PARQUET_COMPRESSION_CODEC: "lzo"})
    assert table.timeline().instants == ()


def test_a_bulk_insert_streams_its_input_a_chunk_at_a_time(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RecordBatchReader is read as the write goes: the first chunk's files are in storage
    before the last batches are pulled, and the chunks commit as one instant."""
    monkeypatch.setattr(write_client, "_STREAM_CHUNK_BYTES", 2_000)  # about 2 batches a chunk
    table = make_table(backend)
    batches = [trips(range(start, start + 25), ["us", "de"] * 12 + ["fr"]) for start in range(0, 250, 25)]
    written_when_pulled: list[int] = []

    def produce() -> Any:
        for batch in batches:
            written_when_pulled.append(len(physical_files(backend, backend.storage_path)))
            yield from batch.to_batches()

    reader = pa.RecordBatchReader.from_batches(batches[0].schema, produce())
    result = WriteClient(table).bulk_insert(reader)
    assert result.rows_written == result.inserted == 250
    assert written_when_pulled[0] == 0, written_when_pulled
    assert written_when_pulled[-1] > 0, "the first chunk was written before the last batch was read"
    assert sorted(rows(table)) == list(range(250))
    assert len([i for i in table.timeline() if i.action == "commit"]) == 1
    data = table.read()
    seqnos = data.column("_hoodie_commit_seqno").to_pylist()
    assert len(set(seqnos)) == 250, "sequence numbers are unique across chunks"
    assert len(set(data.column("_hoodie_file_name").to_pylist())) == result.files_written > 3


def test_a_bad_record_late_in_a_stream_leaves_the_table_as_it_was(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write_client, "_STREAM_CHUNK_BYTES", 2_000)
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2]))
    before, files = rows(table), physical_files(backend, backend.storage_path)
    good = [trips(range(start, start + 25)) for start in range(100, 300, 25)]
    bad = pa.table(
        {**{n: good[0].column(n) for n in good[0].column_names}, "trip_id": pa.nulls(25, pa.int64())}
    )
    reader = pa.RecordBatchReader.from_batches(
        good[0].schema, (b for t in [*good, bad] for b in t.to_batches())
    )
    with pytest.raises(InvalidRecordsError, match="null or empty record key"):
        WriteClient(table).bulk_insert(reader)
    assert rows(table) == before
    assert physical_files(backend, backend.storage_path) == files, "the chunks written before are gone"
    assert table.timeline().pending() == []


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_empty_input_commits_an_empty_instant_and_changes_nothing(tmp_path: Any, table_type: str) -> None:
    """As Hudi does by default (``hoodie.allow.empty.commit``): streaming sends empty batches."""
    table = create_table(
        f"file://{tmp_path}/t",
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        table_type=table_type,  # type: ignore[arg-type]
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: f"file://{tmp_path}/s"},
    )
    empty = trips([])
    first = table.upsert(empty)  # a first write may be empty too: it records the schema
    assert (first.files_written, first.rows_written) == (0, 0)
    table.bulk_insert(trips([1, 2]))
    before = rows(table)
    for operation in write_client.OPERATIONS:
        data = empty.select(["trip_id", "country"]) if operation == "delete" else empty
        result = table.write(data, operation)
        assert (result.files_written, result.rows_written, result.deleted) == (0, 0, 0), operation
        if operation != "insert_overwrite_table":  # an empty table overwrites every row
            assert rows(table) == before, operation
    assert rows(table) == {}
    assert table.bulk_insert(pa.RecordBatchReader.from_batches(empty.schema, [])).files_written == 0
    assert len(table.timeline().completed()) == 2 + len(write_client.OPERATIONS) + 1
    assert verify_table(table).ok


def test_fed_write_of_an_empty_file_succeeds_and_says_so(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from fedcore.cli.main import main

    path = f"file://{tmp_path}/t"
    created = ["create", path, "--name", "t", "--record-key", "trip_id", "--partition-by", "country"]
    assert main(created) == 0
    pq.write_table(trips([]), tmp_path / "empty.parquet")
    for operation in ("upsert", "insert", "bulk_insert", "delete"):
        capsys.readouterr()
        assert main(["write", path, str(tmp_path / "empty.parquet"), "--operation", operation]) == 0
        out = capsys.readouterr()
        assert f": an empty {operation} (the input has no rows)" in out.out, out
        assert "Traceback" not in out.err
    assert load_table(path).read().num_rows == 0


def test_every_arrow_shaped_input_is_written(backend: Backend) -> None:
    table = make_table(backend)
    first = table.bulk_insert(trips([1, 2]))
    assert isinstance(first, WriteResult)
    assert (first.operation, first.inserted, first.files_written, first.warnings) == ("bulk_insert", 2, 1, ())
    table.upsert(trips([3]).to_batches()[0])  # a RecordBatch
    table.upsert(pa.RecordBatchReader.from_batches(trips([4]).schema, trips([4]).to_batches()))
    table.upsert(pl.from_arrow(trips([5])))  # polars: __arrow_c_stream__
    table.upsert(pd.DataFrame({"trip_id": [6], "country": ["us"], "ts": [1], "fare": [16.0]}))
    updated = table.upsert(trips([1], fare=100.0), options={"hoodie.parquet.max.file.size": "1000000"})
    assert (updated.updated, updated.inserted) == (1, 0)
    assert rows(table) == {1: ("us", 101.0)} | {i: ("us", 10.0 + i) for i in range(2, 7)}
    table.delete(pa.table({"trip_id": [2], "country": ["us"]}))
    table.insert_overwrite(trips([50], "de"))
    assert set(rows(table)) == {1, 3, 4, 5, 6, 50}
    table.insert_overwrite_table(trips([60, 61], "fr"))  # every file group replaced
    assert rows(table) == {60: ("fr", 70.0), 61: ("fr", 71.0)}
    assert set(OPERATIONS) == {
        "bulk_insert",
        "insert",
        "upsert",
        "delete",
        "insert_overwrite",
        "insert_overwrite_table",
    }


def test_input_that_is_not_records_is_refused(backend: Backend) -> None:
    table = make_table(backend)
    with pytest.raises(InvalidRecordsError, match="export an Arrow stream"):
        table.upsert([{"trip_id": 1}])
    with pytest.raises(ConfigError, match="unknown operation"):
        table.write(trips([1]), "merge")  # type: ignore[arg-type]
    assert rows(table) == {}
