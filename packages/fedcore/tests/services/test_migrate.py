"""fed migrate: existing tables re-bootstrapped onto another layout, rows unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import hudi
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import ConfigError, FedError, TableAlreadyExistsError, TableNotFoundError
from fedcore.schema.meta import META_COLUMNS
from fedcore.services.migrate import migrate
from fedcore.services.verify import verify_table
from fedcore.table import Table, create_table, load_table
from fedcore.write.client import WriteClient

# HUDI_WRITTEN_ZIPS: merge-on-read tables Hudi 0.15 wrote, whose reads by fedcore match Hudi's
# Spark reader (hudi-rs 0.5 misses a pending compaction's log files).
from ..hudi.test_hudi_conformance import HUDI_RS_TABLES, HUDI_WRITTEN_ZIPS, ZIPS, unpack, zip_properties
from ..write.test_writes import FAST_HEARTBEAT, make_table, rows, trips


def migrates(archive: Path) -> bool:
    """What migrate reads (what fedcore reads): tables of versions 6, 8 and 9 with Parquet base
    files."""
    return zip_properties(archive).get("hoodie.table.base.file.format", "PARQUET").upper() == "PARQUET"


SHARED_ZIPS = [z for z in ZIPS if migrates(z)]
REFUSED_ZIPS = [z for z in ZIPS if not migrates(z)]


def object_store(storage_path: str) -> dict[str, str]:
    return {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: storage_path}


def data_rows(data: pa.Table | None, columns: list[str]) -> list[str]:
    """Rows of ``columns`` as comparable text, sorted (complex values included)."""
    if data is None or data.num_rows == 0:
        return []
    return sorted(repr(row) for row in data.select(columns).to_pylist())


def hudi_rs(path: str) -> pa.Table | None:
    batches = hudi.HudiTableBuilder.from_base_uri(path.removeprefix("file://")).build().read()
    return pa.Table.from_batches(batches) if batches else None


def label(archive: Path) -> str:
    return (
        archive.stem
        if archive in HUDI_WRITTEN_ZIPS
        else str(archive.relative_to(HUDI_RS_TABLES)).removesuffix(".zip")
    )


def test_the_shared_tables_are_all_here() -> None:
    assert len(SHARED_ZIPS) == 27
    assert len(REFUSED_ZIPS) == 1, "Lance base files"
    assert len(HUDI_WRITTEN_ZIPS) == 5


@pytest.mark.parametrize("archive", REFUSED_ZIPS, ids=label)
def test_a_hudi_table_migrate_cannot_read_is_refused_before_any_write(archive: Path, tmp_path: Path) -> None:
    source = unpack(archive, tmp_path / "source")
    with pytest.raises(FedError):  # a typed error naming the version or the table type
        migrate(source, f"file://{tmp_path}/target", storage=object_store(f"file://{tmp_path}/storage"))
    assert not (tmp_path / "target").exists()
    assert not (tmp_path / "storage").exists()


@pytest.mark.parametrize("archive", SHARED_ZIPS + HUDI_WRITTEN_ZIPS, ids=label)
def test_every_hudi_table_migrates_to_the_rows_it_held(archive: Path, tmp_path: Path) -> None:
    source = unpack(archive, tmp_path / "source")
    before = sorted(p.stat().st_mtime_ns for p in (tmp_path / "source").rglob("*") if p.is_file())
    if archive in HUDI_WRITTEN_ZIPS:
        expected = load_table(source).read()  # checked against Hudi's Spark reader elsewhere
    else:
        expected = hudi_rs(source)
    report = migrate(source, f"file://{tmp_path}/target", storage=object_store(f"file://{tmp_path}/storage"))
    target = load_table(f"file://{tmp_path}/target")
    got = target.read()
    columns = [c for c in got.column_names if c not in META_COLUMNS]
    if expected is None:
        assert got.num_rows == 0
    else:
        assert sorted(columns) == sorted(c for c in expected.column_names if c not in META_COLUMNS)
        assert data_rows(got, columns) == data_rows(expected, columns)
    # One instant; data only under the storage path; the source untouched.
    written = target.timeline().completed(["commit"])
    assert [i.time for i in target.timeline().completed()] == [i.time for i in written]
    assert len(written) == 1
    assert not [p for p in (tmp_path / "target").rglob("*.parquet") if ".hoodie" not in p.parts]
    assert sorted(p.stat().st_mtime_ns for p in (tmp_path / "source").rglob("*") if p.is_file()) == before
    assert target.config[P.MIGRATION_SOURCE] == source
    assert verify_table(target).ok
    # Slices that were plain copy-on-write base files with meta fields are copied, names kept.
    if report.rewritten == 0 and got.num_rows:
        assert set(got.column("_hoodie_file_name").to_pylist()) <= {
            n.rsplit("/", 1)[-1] for n in map(str, (tmp_path / "source").rglob("*.parquet"))
        }


def test_a_hudi_1x_tables_merge_mode_carries_over_as_the_payload_that_merges_alike(tmp_path: Path) -> None:
    """Hudi 1.1's merge-on-read table orders records by event time (``txn_ts``, named in
    ``hoodie.table.ordering.fields``): the version-6 target merges with Hudi's ordering payload
    by the same field, so an update older than the stored record does not replace it."""
    source = unpack(HUDI_RS_TABLES / "mor" / "avro" / "v9_txns_simple_nometa.zip", tmp_path / "source")
    migrate(source, f"file://{tmp_path}/target", storage=object_store(f"file://{tmp_path}/storage"))
    target = load_table(f"file://{tmp_path}/target")
    assert target.config[P.PAYLOAD_CLASS] == P.DEFAULT_HOODIE_PAYLOAD
    assert target.config.precombine_field == "txn_ts"
    stored = target.read().sort_by("txn_id").slice(0, 1)
    older = stored.set_column(
        stored.schema.get_field_index("txn_ts"), "txn_ts", pa.array([stored["txn_ts"][0].as_py() - 1])
    )
    older = older.set_column(older.schema.get_field_index("currency"), "currency", pa.array(["older"]))
    target.upsert(older.drop_columns([c for c in older.column_names if c in META_COLUMNS]))
    (after,) = target.read([("txn_id", "=", stored["txn_id"][0].as_py())]).to_pylist()
    assert after["currency"] == stored["currency"][0].as_py() != "older"


@pytest.mark.parametrize("payload", [P.OVERWRITE_WITH_LATEST_PAYLOAD, P.DEFAULT_HOODIE_PAYLOAD])
def test_a_version_6_table_migrates_into_version_9_with_the_merge_mode_hudis_upgrade_gives(
    tmp_path: Path, payload: str
) -> None:
    """A version-6 merge-on-read table with log files, copied into a merge-on-read table of
    version 9: the rows are the source's, read alike by hudi-rs, and its payload becomes the
    merge mode Hudi's upgrade (and ``fed upgrade``) gives such a table, event time (it has an
    ordering field): a later write with an older ordering value leaves the record."""
    source = create_table(
        f"file://{tmp_path}/source",
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        table_type=P.TABLE_TYPE_MOR,
        properties={P.PAYLOAD_CLASS: payload},
    )
    first = {
        "trip_id": ["a", "b", "c"],
        "country": ["fr", "fr", "de"],
        "ts": [5, 5, 5],
        "fare": [1.0, 2.0, 3.0],
    }
    source.upsert(pa.table(first))
    source.upsert(pa.table({"trip_id": ["a"], "country": ["fr"], "ts": [6], "fare": [1.5]}))
    assert any(s.log_files for s in source.file_slices())  # a slice goes over with its log file
    migrate(
        f"file://{tmp_path}/source",
        f"file://{tmp_path}/target",
        storage={P.STORAGE_STRATEGY_CLASS: "hive"},  # hudi-rs reads Hive-layout tables
        properties={P.TABLE_TYPE: P.TABLE_TYPE_MOR, P.WRITE_TABLE_VERSION: "9"},
    )
    target = load_table(f"file://{tmp_path}/target")
    assert (target.config.version, target.config.merge_on_read) == (9, True)
    assert target.config[P.RECORD_MERGE_MODE] == "EVENT_TIME_ORDERING"
    assert P.PAYLOAD_CLASS not in target.config
    columns = ["trip_id", "country", "ts", "fare"]
    assert data_rows(target.read(), columns) == data_rows(source.read(), columns)
    target.upsert(
        pa.table({"trip_id": ["b", "d"], "country": ["fr", "fr"], "ts": [1, 1], "fare": [9.0, 4.0]})
    )
    after = {r["trip_id"]: r["fare"] for r in target.read(columns=["trip_id", "fare"]).to_pylist()}
    assert after == {"a": 1.5, "b": 2.0, "c": 3.0, "d": 4.0}
    assert data_rows(target.read(), columns) == data_rows(hudi_rs(target.path), columns)


def test_what_is_copied_and_what_is_rewritten(tmp_path: Path) -> None:
    cases = {
        "v6_simplekeygen_nonhivestyle": (3, 0),  # copy-on-write with meta fields: copies
        "v6_simplekeygen_hivestyle_no_metafields": (0, 3),  # no meta fields: rewritten
        "v8_complexkeygen_hivestyle": (3, 0),  # version 8 copy-on-write: copies
    }
    for name, (copied, rewritten) in cases.items():
        source = unpack(HUDI_RS_TABLES / f"{name}.zip", tmp_path / name)
        report = migrate(
            source, f"file://{tmp_path}/{name}-target", storage=object_store(f"file://{tmp_path}/storage")
        )
        assert (report.copied, report.rewritten) == (copied, rewritten), name
        assert "files/s" in report.format()
    merged = migrate(
        unpack(HUDI_RS_TABLES / "mor" / "avro" / "v6_trips_8i1u.zip", tmp_path / "mor"),
        f"file://{tmp_path}/mor-target",
        storage=object_store(f"file://{tmp_path}/storage"),
    )
    assert merged.rewritten == 1  # the slice with a log file: base and log merged
    assert merged.copied == 2
    target = load_table(f"file://{tmp_path}/mor-target").config
    assert target[P.TABLE_TYPE] == P.FEDERATED_TABLE_TYPE_PREFIX + P.TABLE_TYPE_COW  # object-store layout
    assert target.table_type == P.TABLE_TYPE_COW


def test_a_plain_parquet_dataset_migrates(tmp_path: Path) -> None:
    data = pa.table(
        {
            "id": list(range(30)),
            "date": [f"2026-01-0{1 + i % 3}" for i in range(30)],
            "amount": [i * 1.5 for i in range(30)],
        }
    )
    pq.write_to_dataset(data, tmp_path / "dataset", partition_cols=["date"])
    with pytest.raises(ConfigError, match="record key"):
        migrate(
            str(tmp_path / "dataset"), f"file://{tmp_path}/t", storage=object_store(f"file://{tmp_path}/s")
        )
    report = migrate(
        str(tmp_path / "dataset"),
        f"file://{tmp_path}/target",
        storage=object_store(f"file://{tmp_path}/storage"),
        record_key_fields=["id"],
    )
    assert report.rewritten == 3
    target = load_table(f"file://{tmp_path}/target")
    expected = pq.read_table(tmp_path / "dataset")  # pyarrow's own read, partitions from folders
    got = target.read(columns=["id", "date", "amount"])
    assert data_rows(got, ["id", "date", "amount"]) == data_rows(
        expected.cast(pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("date", pa.string())])),
        ["id", "date", "amount"],
    )
    assert {s.partition_path for s in target.file_slices()} == {
        "date=2026-01-01",
        "date=2026-01-02",
        "date=2026-01-03",
    }
    assert target.read(filters=[("date", "=", "2026-01-02")]).num_rows == 10


def test_a_fedcore_table_moves_to_an_object_store_layout_with_server_side_copies(
    s3_server: LoopbackS3,
) -> None:
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    options = s3_server.storage_options()
    source = Backend("s3", f"{tables}/hive_trips", storage, options)
    table = make_table(source, layout="hive")
    for n in range(3):
        WriteClient(table).upsert(trips([n, 10 + n, 20 + n], ["us", "de", "fr"], fare=float(n)))
    expected = rows(table)
    s3_server.requests.reset()
    report = migrate(
        source.table_path,
        f"{tables}/trips",
        storage=object_store(storage),
        source_options=options,
        target_options=options,
    )
    source_gets = [
        key
        for key in s3_server.requests.gets
        if key.startswith(tables.removeprefix("s3://") + "/hive_trips/country")
    ]
    assert len(source_gets) <= 1, (
        source_gets
    )  # at most one footer, for the schema: the copies are server-side
    assert report.copied == 3
    target = load_table(f"{tables}/trips", storage_options=options)
    assert rows(target) == expected
    assert target.strategy.display_name() == "object_store"
    assert {s.base_instant for s in target.file_slices()} == {s.base_instant for s in table.file_slices()}
    # The target takes writes like any table.
    WriteClient(target).upsert(trips([0], "us", fare=99.0))
    assert rows(load_table(f"{tables}/trips", storage_options=options))[0] == ("us", 99.0)


def three_country_table(tmp_path: Path) -> tuple[Backend, Table]:
    """A local Hive-layout table of three partitions, one file each, trip ids 1-3, 11-13, 21-23."""
    source = Backend("local", f"file://{tmp_path}/hive_trips", f"file://{tmp_path}/unused", None)
    table = make_table(source, layout="hive")
    WriteClient(table).bulk_insert(
        trips([1, 2, 3, 11, 12, 13, 21, 22, 23], ["us"] * 3 + ["de"] * 3 + ["fr"] * 3)
    )
    return source, table


def assert_scans_skip_by_statistics(target: Table) -> None:
    """A filter on a data column plans only the file whose column statistics admit it."""
    (kept,) = target.scan([("trip_id", "=", 12)]).plan_files()
    assert kept.partition_path == "country=de"
    assert len(target.scan([("trip_id", ">", 100)]).plan_files()) == 0


def test_a_streamed_copy_takes_its_statistics_from_the_bytes_it_passed_on(
    s3_server: LoopbackS3, tmp_path: Path
) -> None:
    # A local source and an S3 target: every file streams through the process, which keeps
    # its footer on the way, so the copies are never read back.
    source, table = three_country_table(tmp_path)
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    options = s3_server.storage_options()
    s3_server.requests.reset()
    report = migrate(
        source.table_path,
        f"{tables}/trips",
        storage=object_store(storage),
        target_options=options,
    )
    assert report.copied == 3
    target_data = storage.removeprefix("s3://") + "/"
    assert [key for key in s3_server.requests.gets if key.startswith(target_data)] == []
    target = load_table(f"{tables}/trips", storage_options=options)
    assert rows(target) == rows(table)
    assert_scans_skip_by_statistics(target)


def test_copied_files_carry_their_column_statistics_so_scans_skip_them(tmp_path: Path) -> None:
    source, _ = three_country_table(tmp_path)
    report = migrate(
        source.table_path, f"file://{tmp_path}/trips", storage=object_store(f"file://{tmp_path}/s")
    )
    assert report.copied == 3
    target = load_table(f"file://{tmp_path}/trips")
    assert len(target.file_slices()) == 3
    assert_scans_skip_by_statistics(target)
    assert [r["trip_id"] for r in target.scan([("trip_id", "=", 12)]).to_arrow().to_pylist()] == [12]


def test_an_existing_target_is_refused_unless_it_is_this_migration(tmp_path: Path) -> None:
    source = unpack(HUDI_RS_TABLES / "v6_nonpartitioned.zip", tmp_path / "source")
    storage = object_store(f"file://{tmp_path}/storage")
    other = Backend("local", f"file://{tmp_path}/other", f"file://{tmp_path}/storage", None)
    make_table(other)
    with pytest.raises(TableAlreadyExistsError, match="not a migration of"):
        migrate(source, other.table_path, storage=storage)
    first = migrate(source, f"file://{tmp_path}/target", storage=storage)
    again = migrate(source, f"file://{tmp_path}/target", storage=storage)
    assert again.already_done
    assert again.instant == first.instant
    assert "already holds the migration" in again.format()
    with pytest.raises(ConfigError, match="come from the source table"):
        migrate(source, f"file://{tmp_path}/t2", storage=storage, record_key_fields=["id"])
    with pytest.raises(ConfigError, match="overlap"):
        migrate(source, f"{source}/migrated", storage=storage)
    with pytest.raises(TableNotFoundError):
        migrate(f"file://{tmp_path}/nothing", f"file://{tmp_path}/t3", storage=storage)


def test_a_migration_that_fails_leaves_nothing_behind(tmp_path: Path) -> None:
    source = make_table(
        Backend("local", f"file://{tmp_path}/hive", f"file://{tmp_path}/unused", None), "hive"
    )
    WriteClient(source).upsert(trips(range(6), ["us", "de", "fr"] * 2))
    source.fs.rm_file(source.file_slices([("country", "=", "fr")])[0].path)  # deleted outside fedcore
    storage = f"file://{tmp_path}/storage"
    with pytest.raises(FedError, match="country=fr"):
        migrate(source.path, f"file://{tmp_path}/target", storage=object_store(storage))
    target = load_table(f"file://{tmp_path}/target")
    assert target.timeline().pending() == []  # rolled back at once
    assert not list((tmp_path / "storage").rglob("*.parquet"))


_KILL = """
import json, os, sys
from fed_dev.crash import exit_at
from fedcore.services.migrate import migrate
from fedcore.steps import observe_steps
args = json.loads(sys.argv[1])
with observe_steps(exit_at(args["step"], 9)):
    migrate(args["source"], args["target"], storage=args["storage"], options=args["options"],
            source_options=args["so"], target_options=args["so"])
"""


@pytest.mark.parametrize("step", ["data", "copied", "metadata"])
def test_an_interrupted_migration_rolls_back_and_finishes_when_run_again(backend: Backend, step: str) -> None:
    source = make_table(
        Backend(backend.name, backend.table_path + "_hive", backend.storage_path, backend.storage_options),
        layout="hive",
    )
    for n in range(3):
        WriteClient(source).upsert(trips([n, 10 + n], ["us", "de"], fare=float(n)))
    expected = rows(source)
    target, storage = backend.table_path, object_store(backend.storage_path)
    payload = {
        "source": source.path,
        "target": target,
        "storage": storage,
        "options": FAST_HEARTBEAT,
        "so": backend.storage_options,
        "step": step,
    }
    killed = subprocess.run(
        [sys.executable, "-c", _KILL, json.dumps(payload)], capture_output=True, text=True
    )
    assert killed.returncode == 9, killed.stderr
    # Nothing of the interrupted migration is visible: its instant never completed.
    assert load_table(target, storage_options=backend.storage_options).read().num_rows == 0
    time.sleep(0.5)  # the dead process's heartbeat expires
    report = migrate(
        source.path,
        target,
        storage=storage,
        options=FAST_HEARTBEAT,
        source_options=backend.storage_options,
        target_options=backend.storage_options,
    )
    assert len(report.rolled_back) == 1
    migrated = load_table(target, storage_options=backend.storage_options)
    assert rows(migrated) == expected
    check = verify_table(migrated)
    assert check.ok
    assert not check.orphans  # the killed run's files went with its rollback


def _fed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedcore", *args], capture_output=True, text=True)


def test_the_command(tmp_path: Path) -> None:
    source = unpack(HUDI_RS_TABLES / "v6_complexkeygen_hivestyle.zip", tmp_path / "source")
    done = _fed(
        "migrate", source, f"file://{tmp_path}/target", "--storage-strategy", "object_store",
        "--storage-path", f"file://{tmp_path}/storage",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "files copied" in done.stdout
    assert "files/s" in done.stdout
    refused = _fed("migrate", source, f"file://{tmp_path}/t2", "--storage-strategy", "object_store",
                   "--storage-path", f"file://{tmp_path}/storage", "--record-key", "id")  # fmt: skip
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "come from the source table" in refused.stderr
