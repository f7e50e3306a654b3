"""``spark.read.format("fed")``: the rows fedcore reads, partitions pruned through the metadata table."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark import cloudpickle
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

import fed_spark
from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend
from fed_spark.__main__ import one_line
from fed_spark.source import FedReader
from fedcore import properties as P
from fedcore.exceptions import FedError
from fedcore.schema.meta import META_COLUMNS
from fedcore.table import Table, create_table, load_table

# Spark pickles the recording source below to its Python workers, which cannot import tests.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

REGIONS = ["eu", "us", "ap", None, "sa"]


def trips(n: int, start: int = 0, ts: int = 1) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([REGIONS[i % len(REGIONS)] for i in ids], pa.string()),
            "ts": pa.array([ts] * n, pa.int64()),
            "v": pa.array([i / 7 % 1 for i in ids], pa.float64()),
        }
    )


def new_table(backend: Backend, name: str = "trips") -> Table:
    return create_table(
        f"{backend.table_path}-{name}",
        name=name,
        record_key_fields=["id"],
        partition_fields=["region"],
        precombine_field="ts",
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: backend.storage_path},
        storage_options=backend.storage_options,
    )


def rows(data: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(data.column(c).to_pylist() for c in data.column_names), strict=True), key=repr)


def spark_rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in frame.collect()), key=repr)


@pytest.fixture
def history(backend: Backend) -> tuple[Table, list[str]]:
    """A table with three instants: a bulk insert, an upsert, a delete."""
    table = new_table(backend)
    first = table.bulk_insert(trips(200)).instant
    second = table.upsert(trips(50, start=180, ts=2)).instant  # 20 updates, 30 inserts
    third = table.delete(trips(10, start=0)).instant
    return table, [first, second, third]


def test_spark_reads_the_rows_fedcore_reads(fed: SparkSession, history: tuple[Table, list[str]]) -> None:
    table, _ = history
    frame = fed.read.format("fed").load(table.path)
    expected = table.read()
    assert frame.columns == expected.column_names  # the _hoodie_* meta columns first, as in Hudi
    assert frame.columns[:5] == list(META_COLUMNS)
    assert spark_rows(frame) == rows(expected)
    assert frame.count() == 220


def test_time_travel_with_hudis_option(local_fed: SparkSession, tmp_path: Path) -> None:
    table, (first, second, _) = _history_at(tmp_path)
    for given in (
        first,
        f"{first[:4]}-{first[4:6]}-{first[6:8]} {first[8:10]}:{first[10:12]}:{first[12:14]}.{first[14:]}",
    ):
        frame = local_fed.read.format("fed").option("as.of.instant", given).load(table.path)
        assert spark_rows(frame) == rows(table.read(as_of=first))
    at_second = local_fed.read.format("fed").option("as.of.instant", second).load(table.path)
    assert at_second.count() == 230


def _history_at(tmp_path: Path) -> tuple[Table, list[str]]:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table = new_table(backend)
    instants = [table.bulk_insert(trips(200)).instant, table.upsert(trips(50, start=180, ts=2)).instant]
    instants.append(table.delete(trips(10, start=0)).instant)
    return table, instants


DEFAULT = "__HIVE_DEFAULT_PARTITION__"
#: A WHERE clause, the regions whose rows match, and the partitions a plan may keep: Hudi's
#: default partition holds nulls and empty strings, so its path rules it out only for = and
#: IN (and IS NULL's opposite); here its files hold nulls only, which their column
#: statistics say, so every comparison skips them too.
WHERE = [
    ("region = 'eu'", {"eu"}, {"eu"}),
    ("region <=> 'eu'", {"eu"}, {"eu"}),
    ("region <=> NULL", {None}, {DEFAULT}),
    ("region IN ('eu', 'us')", {"eu", "us"}, {"eu", "us"}),
    ("region IN ('eu', NULL)", {"eu"}, {"eu"}),
    ("region < 'eu'", {"ap"}, {"ap"}),
    ("region <= 'eu'", {"ap", "eu"}, {"ap", "eu"}),
    ("region > 'sa'", {"us"}, {"us"}),
    ("region >= 'sa'", {"sa", "us"}, {"sa", "us"}),
    ("region IS NULL", {None}, {DEFAULT}),
    ("region IS NOT NULL", {"eu", "us", "ap", "sa"}, {"eu", "us", "ap", "sa"}),
    ("region >= 'eu' AND region < 'us'", {"eu", "sa"}, {"eu", "sa"}),
    ("region = 'eu' AND v > 0.5", {"eu"}, {"eu"}),
    # ORs are never pushed to a Python source: every partition is read, every row still right.
    ("region = 'eu' OR region = 'us'", {"eu", "us"}, {"eu", "us", "ap", "sa", DEFAULT}),
]


@pytest.mark.parametrize(("where", "regions", "planned"), WHERE)
def test_partition_filters_prune_and_every_row_is_right(
    local_fed: SparkSession, tmp_path: Path, where: str, regions: set[str | None], planned: set[str]
) -> None:
    table, _ = _history_at(tmp_path)
    frame = local_fed.read.format("fed").load(table.path).where(where)
    everything = table.read()
    matching = spark_rows(local_fed.createDataFrame(everything).where(where))
    assert spark_rows(frame) == matching
    assert {r[everything.column_names.index("region")] for r in matching} == regions
    found = _planned_partitions(local_fed, table.path, where, tmp_path / "planned.json")
    assert {p.removeprefix("region=") for p in found} == planned


def _planned_partitions(spark: SparkSession, path: str, where: str, record: Path) -> set[str]:
    """The partitions the source plans for ``where``, as Spark drives it (its own pushed
    filters), recorded by a subclass that writes down what it plans."""

    class Recording(fed_spark.FedDataSource):
        @classmethod
        def name(cls) -> str:
            return "fed_recording"

        def reader(self, schema: Any) -> Any:
            inner = super().reader(schema)
            inner.__class__ = RecordingReader
            return inner

    class RecordingReader(FedReader):
        def pushFilters(self, filters: list[Any]) -> Any:
            kept = super().pushFilters(filters)
            assert list(kept) == list(filters)  # Spark re-checks every row
            return kept

        def partitions(self) -> Any:
            parts = super().partitions()
            planned = sorted({s.partition_path for part in parts for s in part.slices})
            record.write_text(json.dumps(planned))
            return parts

    spark.dataSource.register(Recording)
    spark.read.format("fed_recording").load(path).where(where).collect()
    return set(json.loads(record.read_text()))


def test_a_pruned_query_on_s3_lists_no_storage_and_reads_only_its_partition(
    spark: SparkSession, s3_server: LoopbackS3, tmp_path: Path
) -> None:
    tables, storage = s3_server.create_bucket("sp-tables"), s3_server.create_bucket("sp-storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    table = new_table(backend)
    table.bulk_insert(trips(200))
    table.upsert(trips(50, start=180, ts=2))
    fed_spark.register(spark, storage_options=backend.storage_options)
    s3_server.requests.reset()
    found = spark.read.format("fed").load(table.path).where("region = 'eu'").collect()
    assert sorted(r["id"] for r in found) == [i for i in range(230) if i % 5 == 0]
    bucket = storage.removeprefix("s3://")
    assert not [p for p in s3_server.requests.listed if p.startswith(bucket)]  # storage never listed
    data_gets = [key for key in s3_server.requests.gets if key.startswith(bucket)]
    assert data_gets  # the rows came from the data files ...
    # ... of the one partition that matches, and the footer of one file of the latest commit,
    # whose schema (the types reads return) the driver reads before planning.
    eu_files = {s.base_file_name for s in table.file_slices([("region", "=", "eu")])}
    assert eu_files <= {key.rpartition("/")[2] for key in data_gets}
    others = [key for key in data_gets if "/region=eu/" not in key]
    latest = table.timeline().completed()[-1].time
    assert len(others) <= 1
    assert all(key.endswith(f"_{latest}.parquet") for key in others)


def test_sql_tables_and_temporary_views(local_fed: SparkSession, tmp_path: Path) -> None:
    table, (first, _, _) = _history_at(tmp_path)
    local_fed.sql(f"CREATE TABLE fed_trips USING fed OPTIONS (path '{table.path}')")
    local_fed.sql(
        f"CREATE TEMPORARY VIEW fed_trips_then USING fed OPTIONS (path '{table.path}', "
        f"`as.of.instant` '{first}')"
    )
    try:
        counts = local_fed.sql("SELECT region, count(*) AS n FROM fed_trips GROUP BY region").collect()
        expected = pc.value_counts(table.read().column("region")).to_pylist()
        assert {r["region"]: r["n"] for r in counts} == {e["values"]: e["counts"] for e in expected}
        then = local_fed.sql("SELECT id FROM fed_trips_then WHERE region = 'us'").collect()
        assert sorted(r["id"] for r in then) == [i for i in range(200) if i % 5 == 1]
    finally:
        local_fed.sql("DROP TABLE IF EXISTS fed_trips")
        local_fed.sql("DROP VIEW IF EXISTS fed_trips_then")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"path": "{path}/*"}, "is a glob; pass the table path"),
        ({"path": "{path}/region=eu/[a-f]*.parquet"}, "is a glob; pass the table path"),
        ({"path": "{path}", "as.of.instnt": "20260101000000000"}, "as.of.instnt: is not an option"),
        ({"path": "{path}", "as.of.instant": "yesterday"}, "'yesterday' is not an instant"),
        ({"path": "{path}", "hoodie.datasource.query.type": "fast"}, "'fast' is not one of"),
        ({"path": "{path}-missing"}, "no table at"),
    ],
)
def test_bad_reads_say_why(
    local_fed: SparkSession, tmp_path: Path, options: dict[str, str], message: str
) -> None:
    table, _ = _history_at(tmp_path)
    given = {k: v.format(path=table.path) for k, v in options.items()}
    with pytest.raises(AnalysisException, match=re.escape(message)) as raised:
        local_fed.read.format("fed").options(**given).load().collect()
    said = one_line(raised.value)  # what `python -m fed_spark` prints: fedcore's message alone
    assert message in said
    assert "\n" not in said
    assert "Traceback" not in said


def test_a_schema_other_than_the_tables_is_refused(local_fed: SparkSession, tmp_path: Path) -> None:
    table, _ = _history_at(tmp_path)
    with pytest.raises(AnalysisException, match="do not pass one"):
        local_fed.read.format("fed").schema("id long").load(table.path).collect()


def test_every_type_reads_back_equal(local_fed: SparkSession, tmp_path: Path) -> None:
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "part": pa.array(["a", "a", "b"]),
            "i8": pa.array([1, None, -3], pa.int8()),
            "i16": pa.array([300, None, -3], pa.int16()),
            "i32": pa.array([70000, None, -3], pa.int32()),
            "f32": pa.array([1.5, None, -0.25], pa.float32()),
            "f64": pa.array([1.5, None, float("inf")], pa.float64()),
            "dec": pa.array([decimal.Decimal("12.34"), None, decimal.Decimal("-0.01")], pa.decimal128(10, 2)),
            "text": pa.array(["é", None, ""]),
            "raw": pa.array([b"\x00\x01", None, b""], pa.binary()),
            "flag": pa.array([True, None, False]),
            "day": pa.array([dt.date(2026, 1, 1), None, dt.date(1970, 1, 1)], pa.date32()),
            "at": pa.array(
                [
                    dt.datetime(2026, 1, 1, 12, 30, 1, 5, tzinfo=dt.timezone.utc),
                    None,
                    dt.datetime(1999, 12, 31, tzinfo=dt.timezone.utc),
                ],
                pa.timestamp("us", "UTC"),
            ),
            "local_at": pa.array(
                [dt.datetime(2026, 1, 1, 12, 30), None, dt.datetime(1, 1, 1)], pa.timestamp("us")
            ),
            "nums": pa.array([[1, 2], None, []], pa.list_(pa.int64())),
            "tags": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
            "point": pa.array(
                [{"x": 1, "label": "p"}, None, {"x": None, "label": None}],
                pa.struct([("x", pa.int32()), ("label", pa.string())]),
            ),
        }
    )
    backend = Backend("local", f"file://{tmp_path}/tables/types", f"file://{tmp_path}/storage", None)
    table = create_table(
        backend.table_path,
        name="types",
        record_key_fields=["id"],
        partition_fields=["part"],
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: backend.storage_path},
    )
    table.bulk_insert(data)
    frame = local_fed.read.format("fed").load(table.path).drop(*META_COLUMNS).orderBy("id")
    assert frame.columns == data.column_names
    got = frame.toArrow()
    for name in data.column_names:
        expected = data.column(name).to_pylist()
        actual = got.column(name).to_pylist()
        if name == "tags":
            expected = [None if m is None else dict(m) for m in expected]
            actual = [None if m is None else dict(m) for m in actual]
        assert actual == expected, name


HUDI_TABLES = ["v6_complexkeygen_hivestyle", "v6_nonpartitioned", "v6_simplekeygen_nonhivestyle"]


@pytest.mark.parametrize(
    "name",
    [
        *HUDI_TABLES,
        "v6_simplekeygen_hivestyle_no_metafields",
        "v6_timebasedkeygen_nonhivestyle",
        "mor/parquet/v6_complexkeygen_hivestyle",
        "mor/parquet/v6_nonpartitioned_rollback",
        "mor/avro/v6_trips_8i1u",
        # Hudi 1.x's (versions 8 and 9): log files placed by completion time, merge modes.
        "v9_txns_simple_nometa",
        "mor/avro/v8_trips_8i3u1d",
        "mor/avro/v9_txns_simple_nometa",
    ],
)
def test_tables_written_by_hudi_read_as_fedcore_reads_them(
    local_fed: SparkSession, hudi_rs_tables: Path, tmp_path: Path, name: str
) -> None:
    archive = hudi_rs_tables / f"{name}.zip"
    if not archive.exists():
        pytest.fail(f"{archive} is missing")
    with zipfile.ZipFile(archive) as unpacked:
        unpacked.extractall(tmp_path)
    path = f"file://{tmp_path / Path(name).name}"
    expected = load_table(path).read()
    frame = local_fed.read.format("fed").load(path)
    assert frame.count() == expected.num_rows > 0
    keys = ["_hoodie_record_key", "_hoodie_commit_time", "_hoodie_file_name"]
    assert spark_rows(frame.select(*keys)) == rows(expected.select(keys))


def test_incremental_queries_with_hudis_options(local_fed: SparkSession, tmp_path: Path) -> None:
    table, (first, second, third) = _history_at(tmp_path)  # bulk insert, upsert, delete
    incremental = {"hoodie.datasource.query.type": "incremental"}

    def pulled(**options: str) -> list[tuple[Any, ...]]:
        found = local_fed.read.format("fed").options(**incremental, **options).load(table.path)
        return sorted((r["id"], r["_hoodie_commit_time"]) for r in found.collect())

    upserted = [(i, second) for i in range(180, 230)]  # 20 updated, 30 inserted at the second
    assert pulled(**{"hoodie.datasource.read.begin.instanttime": first}) == upserted
    assert pulled(**{"hoodie.datasource.read.begin.instanttime": second}) == []  # a delete writes no record
    everything = pulled(**{"hoodie.datasource.read.begin.instanttime": "000"})
    assert len(everything) == 220
    bounded = pulled(
        **{"hoodie.datasource.read.begin.instanttime": "000", "hoodie.datasource.read.end.instanttime": first}
    )
    assert bounded == [(i, first) for i in range(200)]
    assert rows(table.changes(first).to_arrow().select(["id"])) == [(i,) for i in range(180, 230)]
    del third


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"hoodie.datasource.query.type": "incremental"}, "begin.instanttime: is needed"),
        ({"hoodie.datasource.read.begin.instanttime": "000"}, "is for incremental queries"),
        (
            {
                "hoodie.datasource.query.type": "incremental",
                "hoodie.datasource.read.begin.instanttime": "soon",
            },
            "'soon' is not an instant",
        ),
    ],
)
def test_bad_incremental_queries_say_why(
    local_fed: SparkSession, tmp_path: Path, options: dict[str, str], message: str
) -> None:
    table, _ = _history_at(tmp_path)
    with pytest.raises(AnalysisException, match=re.escape(message)):
        local_fed.read.format("fed").options(**options).load(table.path).collect()


@pytest.mark.parametrize(
    "where", [None, "region = 'eu'", "region IN ('eu', 'us') AND v > 0.5", "region = 'eu' OR v < 0.1"]
)
def test_native_and_python_scans_return_the_same_rows(
    local_fed: SparkSession, tmp_path: Path, where: str | None
) -> None:
    table, (first, _, _) = _history_at(tmp_path)
    native = fed_spark.read(local_fed, table.path, where, scan="native")
    python = fed_spark.read(local_fed, table.path, where, scan="python")
    assert "parquet" in native._jdf.queryExecution().executedPlan().toString().lower()
    assert spark_rows(native) == spark_rows(python)
    expected = local_fed.createDataFrame(table.read())
    assert spark_rows(native) == spark_rows(expected.where(where) if where else expected)
    then = fed_spark.read(local_fed, table.path, where, as_of=first, scan="native")
    assert spark_rows(then) == spark_rows(
        fed_spark.read(local_fed, table.path, where, as_of=first, scan="python")
    )


def test_a_native_scan_reads_only_the_planned_files(local_fed: SparkSession, tmp_path: Path) -> None:
    table, _ = _history_at(tmp_path)
    frame = fed_spark.read(local_fed, table.path, "region = 'eu'", scan="native")
    files = {r[0].rpartition("/")[2] for r in frame.select("_metadata.file_path").distinct().collect()}
    assert files == {s.base_file_name for s in table.file_slices([("region", "=", "eu")])}


def test_merge_on_read_tables_fall_back_to_the_python_scan(
    local_fed: SparkSession, hudi_rs_tables: Path, tmp_path: Path
) -> None:
    with zipfile.ZipFile(hudi_rs_tables / "mor" / "avro" / "v6_trips_8i1u.zip") as archive:
        archive.extractall(tmp_path)
    path = f"file://{tmp_path / 'v6_trips_8i1u'}"
    auto = fed_spark.read(local_fed, path)
    assert spark_rows(auto.select("_hoodie_record_key")) == rows(
        load_table(path).read().select(["_hoodie_record_key"])
    )
    with pytest.raises(FedError, match="log files to merge"):
        fed_spark.read(local_fed, path, scan="native")


def test_a_filter_on_a_data_column_skips_files_by_their_statistics(
    spark: SparkSession, s3_server: LoopbackS3, tmp_path: Path
) -> None:
    """Three bulk inserts of 1,000 ids each: each partition's files cover id ranges of their
    own, so ``id < 500`` needs the first commit's files only, through the fed source (data
    GETs at the server) and through the native scan (the files Spark reads)."""
    tables, storage = s3_server.create_bucket("skip-tables"), s3_server.create_bucket("skip-storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    table = new_table(backend)
    first = table.bulk_insert(trips(1000)).instant
    for start in (1000, 2000):
        table.bulk_insert(trips(1000, start=start))
    fed_spark.register(spark, storage_options=backend.storage_options)
    wanted = {  # the default partition's files hold null regions only: IS NOT NULL skips them
        s.base_file_name
        for s in table.file_slices()
        if s.base_instant == first and s.partition_path != f"region={DEFAULT}"
    }
    latest = table.timeline().completed()[-1].time

    s3_server.requests.reset()
    found = spark.read.format("fed").load(table.path).where("id < 500 AND region IS NOT NULL").collect()
    assert sorted(r["id"] for r in found) == [i for i in range(500) if REGIONS[i % 5] is not None]
    bucket = storage.removeprefix("s3://")
    fetched = {key.rpartition("/")[2] for key in s3_server.requests.gets if key.startswith(bucket)}
    # the first commit's files, and one file of the latest commit, whose footer gives the schema
    assert wanted <= fetched
    assert len(fetched - wanted) <= 1
    assert all(name.endswith(f"_{latest}.parquet") for name in fetched - wanted)

    local = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    native_table = new_table(local)
    for start in (0, 1000, 2000):
        native_table.bulk_insert(trips(1000, start=start))
    fed_spark.register(spark)
    frame = fed_spark.read(spark, native_table.path, "id < 500", scan="native")
    assert len(frame.inputFiles()) == len(REGIONS)  # one file per partition: the first commit's
    assert sorted(r["id"] for r in frame.collect()) == list(range(500))
