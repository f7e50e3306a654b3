"""Every Hudi table in tests/data/hudi-rs (Apache Hudi's test tables from hudi-rs): read exactly
as hudi-rs reads it, or refused with a typed error, never rows that are wrong.

For a table fedcore reads, the rows are compared with hudi-rs: the whole table (snapshot,
and read-optimized for merge-on-read tables); a filter (=, !=, <, IS NULL) on every
partition column and on a data column, against the rows hudi-rs returns unfiltered,
filtered by Arrow itself (the rows' own values decide); and time travel to every
completed instant. Tables of versions 8 and 9 (Hudi 1.x) are read the same way, and their
incremental queries by completion time; hudi-rs's row counts of each are
recorded, so the oracle itself is held to something. Which tables are refused is not a list of
known cases: it follows from each table's config.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import hudi
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from fedcore.exceptions import (
    InvalidColumnsError,
    UnsupportedTableError,
)
from fedcore.files.filenames import LOG_FILE_RE
from fedcore.log.blocks import BlockType, read_blocks
from fedcore.table import Table, create_table, load_table
from fedcore.write.client import WriteClient

HUDI_RS_TABLES = Path(__file__).resolve().parents[4] / "tests" / "data" / "hudi-rs"
ZIPS = sorted(HUDI_RS_TABLES.rglob("*.zip"))


def zip_properties(archive: Path) -> dict[str, str]:
    """The table's own ``hoodie.properties`` inside a zip (not its metadata table's), unpacked
    in memory: which version a table is decides which tests it belongs to."""
    with zipfile.ZipFile(archive) as zipped:
        (name,) = (n for n in zipped.namelist() if re.fullmatch(r"[^/]+/\.hoodie/hoodie\.properties", n))
        text = zipped.read(name).decode()
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    return {key: value for key, value in pairs}


#: Tables of version 6, the version fedcore reads and writes, and of versions 8 (Hudi 1.0) and
#: 9 (Hudi 1.1), which it reads only. Split by what each table's config says,
#: not by its file name, so a version-8 table can never run as a version-6 one by accident.
V6_ZIPS = [z for z in ZIPS if zip_properties(z)["hoodie.table.version"] == "6"]
V8_V9_ZIPS = [z for z in ZIPS if zip_properties(z)["hoodie.table.version"] in ("8", "9")]
#: Tables written by Apache Hudi 0.15's Spark writer (``scripts/make_hudi_tables.py``): delete
#: blocks, an update with an older ordering value, both payload classes; each with the rows
#: Hudi's Spark reader returned (``<name>.spark.json``).
HUDI_WRITTEN = Path(__file__).resolve().parents[1] / "data" / "hudi-tables"
HUDI_WRITTEN_ZIPS = sorted(HUDI_WRITTEN.glob("*.zip"))
#: Plain values both readers give the same way (complex types are compared as a whole row count).
SIMPLE = (
    pa.types.is_integer,
    pa.types.is_string,
    pa.types.is_boolean,
    pa.types.is_floating,
    pa.types.is_date,
)

VIRTUAL = ["_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]


META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path"]
META.append("_hoodie_file_name")


def spark_rows(archive: Path) -> list[dict[str, Any]] | None:
    """The rows Hudi's own Spark reader returned for a table it wrote (None: not recorded)."""
    recorded = archive.with_suffix(".spark.json")
    return json.loads(recorded.read_text()) if recorded.exists() else None


def theirs_schema(path: str) -> list[str]:
    return [f.name for f in hudi.HudiTableBuilder.from_base_uri(path).build().get_schema()]


def name_of(archive: Path) -> str:
    if archive.is_relative_to(HUDI_WRITTEN):
        return f"hudi-0.15/{archive.stem}"
    return str(archive.relative_to(HUDI_RS_TABLES)).removesuffix(".zip")


def unpack(archive: Path, into: Path) -> str:
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(into)
        top = {name.split("/", 1)[0] for name in zipped.namelist() if not name.startswith("__MACOSX")}
    (folder,) = top
    return f"file://{into / folder}"


def hudi_rs(path: str, options: Any = None) -> pa.Table | None:
    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    batches = table.read(options) if options is not None else table.read()
    return pa.Table.from_batches(batches) if batches else None


def rows(data: pa.Table | None, columns: list[str]) -> list[tuple[Any, ...]]:
    if data is None or data.num_rows == 0:
        return []
    return sorted(zip(*(data.column(c).to_pylist() for c in columns), strict=True), key=repr)


def simple_columns(data: pa.Table) -> list[str]:
    return [f.name for f in data.schema if any(test(f.type) for test in SIMPLE)]


def table_version(path: str) -> int:
    properties = (Path(path.removeprefix("file://")) / ".hoodie" / "hoodie.properties").read_text()
    return int(re.search(r"^hoodie\.table\.version=(\d+)", properties, re.M)[1])  # type: ignore[index]


def test_the_shared_tables_are_all_here() -> None:
    assert len(ZIPS) == 28, ZIPS
    assert len(V6_ZIPS) == 10, "version 6: copy-on-write and merge-on-read"
    assert {name_of(z) for z in V8_V9_ZIPS} == set(V8_V9_ROWS)
    assert sorted(V6_ZIPS + V8_V9_ZIPS) == ZIPS, "every table is of a version some test covers"
    for archive in V8_V9_ZIPS:  # how Hudi made each one (Spark SQL), kept beside it
        assert archive.with_suffix(".sql").is_file(), archive


@pytest.mark.parametrize("archive", V6_ZIPS + HUDI_WRITTEN_ZIPS, ids=name_of)
def test_every_shared_table_is_read_like_hudi_rs_or_refused(archive: Path, tmp_path: Path) -> None:
    path = unpack(archive, tmp_path)
    assert table_version(path) == 6  # what fedcore reads: Hudi 0.14/0.15 tables
    table = load_table(path)
    ours = table.read()
    theirs = hudi_rs(path)
    if theirs is None:
        assert ours.num_rows == 0
        assert ours.schema.names == [*META, *theirs_schema(path)], "empty, with the table's schema"
        return
    columns = [c for c in simple_columns(theirs) if c in ours.column_names]
    assert any(c in columns for c in ("id", "uuid"))
    # The truth the rows and filters are held against: hudi-rs, or where it and Apache Hudi's
    # own Spark reader disagree, the rows Hudi's reader returned (recorded when the table was
    # written; see test_hudi_written_tables_are_read_as_hudis_spark_reader_reads_them).
    truth = theirs
    hudi_read = spark_rows(archive)
    if hudi_read is not None:
        recorded = pa.Table.from_pylist(hudi_read)
        if rows(theirs, recorded.column_names) != rows(recorded, recorded.column_names):
            truth = recorded
            columns = [c for c in columns if c in recorded.column_names]
    assert rows(ours, columns) == rows(truth, columns)
    if "_hoodie_record_key" in theirs.column_names:
        assert set(ours.column_names) == set(theirs.column_names), "the same columns, meta columns too"
    else:  # no meta fields: hudi-rs leaves them out, fedcore computes them (virtual keys)
        assert ours.column_names == [*VIRTUAL, *theirs.column_names]

    if table.config.table_type == "MERGE_ON_READ":
        optimized = table.scan(query_type="read_optimized").to_arrow()
        base_only = hudi.HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
        assert rows(optimized, columns) == rows(hudi_rs(path, base_only), columns)
        assert table.scan().count() == truth.num_rows

    # Filters on every partition column and on a data column; the truth is Arrow's own
    # filter over the truth's rows.
    fields = [f for f in table.handle.partition_scheme.fields if f in columns]
    for column in [*fields, "id" if "id" in columns else "fare"]:
        values = sorted({v for v in truth.column(column).to_pylist() if v is not None})
        middle = values[len(values) // 2]
        for op, value in (("=", middle), ("!=", middle), ("<", middle), ("IS NULL", None)):
            spec = (column, op) if value is None else (column, op, value)
            got = table.read([spec])
            expression = (
                pc.field(column).is_null()
                if op == "IS NULL"
                else {"=": pc.field(column) == middle, "!=": pc.field(column) != middle}.get(
                    op, pc.field(column) < middle
                )
            )
            assert rows(got, columns) == rows(truth.filter(expression), columns), spec

    # Time travel to every completed instant (before any pending compaction: hudi-rs 0.5
    # leaves out the log files written after one, which Hudi's own reader merges).
    timeline = hudi.HudiTableBuilder.from_base_uri(path).build().get_timeline()
    ours_timeline = table.timeline()
    done = {i.time for i in ours_timeline.completed()}  # a run compaction completes as a commit
    pending = [i.time for i in ours_timeline.pending() if i.action == "compaction" and i.time not in done]
    for instant in timeline.get_completed_commits():
        at = instant.timestamp
        if pending and at > min(pending):
            continue
        expected = hudi_rs(path, hudi.HudiReadOptions().with_as_of_timestamp(at))
        assert rows(table.read(as_of=at), columns) == rows(expected, columns), at


def test_hudi_written_tables_are_read_as_hudis_spark_reader_reads_them(tmp_path: Path) -> None:
    stems = {a.stem for a in HUDI_WRITTEN_ZIPS}
    assert stems == {
        "v6_mor_deletes",
        "v6_mor_default_payload",
        "v6_mor_compacted",
        "v6_mor_soft_deletes",
        "v6_mor_pending_compaction",
    }
    for archive in HUDI_WRITTEN_ZIPS:
        expected = json.loads(archive.with_suffix(".spark.json").read_text())
        table = load_table(unpack(archive, tmp_path / archive.stem))
        got = table.read(columns=list(expected[0])).sort_by("id").to_pylist()
        assert got == expected, archive.stem
        blocks = {
            b.type
            for s in table.file_slices()
            for p in s.log_paths
            for b in read_blocks(table.fs.cat_file(p), p)
        }
        if archive.stem != "v6_mor_compacted":  # its last compaction folded every log file
            assert BlockType.AVRO_DATA in blocks
        if archive.stem in ("v6_mor_deletes", "v6_mor_default_payload"):
            assert BlockType.DELETE in blocks
    # A compaction scheduled, never run: the logs written since start at its instant, and Hudi
    # merges them onto the slices before it. hudi-rs 0.5 leaves them out (it returns keys
    # deleted since, and misses a key written again); fedcore reads what Hudi reads.
    pending_path = unpack(HUDI_WRITTEN / "v6_mor_pending_compaction.zip", tmp_path / "pending")
    expected = spark_rows(HUDI_WRITTEN / "v6_mor_pending_compaction.zip")
    assert expected is not None
    columns = list(expected[0])
    pending_table = load_table(pending_path)
    assert [i.action for i in pending_table.timeline().pending()] == ["compaction"]
    assert rows(pending_table.read(columns=columns), columns) == rows(pa.Table.from_pylist(expected), columns)
    assert rows(hudi_rs(pending_path), columns) != rows(pa.Table.from_pylist(expected), columns)

    compacted = load_table(unpack(HUDI_WRITTEN / "v6_mor_compacted.zip", tmp_path / "again"))
    timeline = compacted.timeline()
    compactions = timeline.completed(["commit"])
    assert len(compactions) == 2, "Hudi compacted it twice: completed compactions are commits"
    # Between the compactions the slices are base files written by the first one plus logs.
    between = compacted.file_slices(as_of=timeline.completed(["deltacommit"])[-1].time)
    assert any(s.log_files and s.base_instant == compactions[0].time for s in between)
    # The update with an older ordering value: applied by OverwriteWithLatestAvroPayload,
    # ignored by DefaultHoodieRecordPayload, as Hudi's reader decides.
    names = {a.stem: json.loads(a.with_suffix(".spark.json").read_text()) for a in HUDI_WRITTEN_ZIPS}
    assert {"id": 2, "name": "name2-older", "city": "sf", "ts": 5, "fare": 200.0} in names["v6_mor_deletes"]
    assert {"id": 2, "name": "name2", "city": "sf", "ts": 10, "fare": 2.0} in names["v6_mor_default_payload"]


def test_an_unknown_completed_action_is_refused(tmp_path: Path) -> None:
    path = unpack(HUDI_RS_TABLES / "v6_nonpartitioned.zip", tmp_path)
    table = load_table(path)
    (Path(path.removeprefix("file://")) / ".hoodie" / "20991231000000000.deltacommit").write_text("{}")
    with pytest.raises(UnsupportedTableError, match="deltacommit"):
        table.read()  # a delta commit on a copy-on-write table: nothing fedcore can apply


def test_a_timestamp_key_generator_table_filters_by_the_rows_values(tmp_path: Path) -> None:
    table = load_table(unpack(HUDI_RS_TABLES / "v6_timebasedkeygen_nonhivestyle.zip", tmp_path))
    assert not table.handle.partition_scheme.encodes_values
    exact = table.read([("ts_str", "=", "2023-04-01T12:01:00.123Z")], ["id", "ts_str"])
    assert exact.to_pylist() == [{"id": 1, "ts_str": "2023-04-01T12:01:00.123Z"}]
    before = table.read([("ts_str", "<", "2023-04-03T12:01:00.123Z")], ["id"])
    assert sorted(before.column("id").to_pylist()) == [1, 2]
    assert all(s.partition_values == {} for s in table.file_slices()), "a path that is no value"
    # fedcore spells partition values; this generator formats dates: an upsert would write the
    # key into a second partition, so it is refused before anything is written.
    before = sorted(p.name for p in Path(table.path.removeprefix("file://"), ".hoodie").iterdir())
    data = table.read()
    with pytest.raises(UnsupportedTableError, match="TimestampBasedKeyGenerator; fedcore writes the paths"):
        table.upsert(data.select([c for c in data.column_names if not c.startswith("_hoodie_")]).slice(0, 1))
    assert sorted(p.name for p in Path(table.path.removeprefix("file://"), ".hoodie").iterdir()) == before
    assert load_table(table.path).read().num_rows == data.num_rows


def test_a_table_without_meta_fields_reads_computed_meta_columns(tmp_path: Path) -> None:
    table = load_table(unpack(HUDI_RS_TABLES / "v6_simplekeygen_hivestyle_no_metafields.zip", tmp_path))
    data = table.read()
    assert data.column_names[:4] == VIRTUAL
    for row in data.to_pylist():
        assert row["_hoodie_record_key"] == str(row["id"])
        assert row["_hoodie_partition_path"] == f"byteField={row['byteField']}"
        assert row["_hoodie_file_name"].endswith(f"_{row['_hoodie_commit_time']}.parquet")
    one = table.read([("_hoodie_record_key", "=", "1")], ["id", "name"])
    assert one.to_pylist() == [{"id": 1, "name": "Alice"}]
    partition = table.read([("_hoodie_partition_path", "=", "byteField=10")], ["id"])
    assert sorted(partition.column("id").to_pylist()) == [1, 3]
    with pytest.raises(InvalidColumnsError, match=r"populate\.meta\.fields=false"):
        table.read([("_hoodie_commit_seqno", "=", "1")])  # nothing to compute it from


def test_merge_on_read_time_travel_skips_a_rolled_back_write(tmp_path: Path) -> None:
    """The rollback table: a delta commit whose log block a rollback command block undid,
    and a later delta commit; the rolled-back write never shows, at any instant."""
    table = load_table(
        unpack(HUDI_RS_TABLES / "mor" / "parquet" / "v6_nonpartitioned_rollback.zip", tmp_path)
    )
    (only,) = table.file_slices()
    assert only.base_file_name is not None
    assert len(only.log_files) == 3
    rolled_back = "20250126040826878"  # in log file 1, undone by the command block in log file 2
    blocks = [b for path in only.log_paths for b in read_blocks(table.fs.cat_file(path), path)]
    assert next(b.instant for b in blocks if b.type == BlockType.PARQUET_DATA) == rolled_back
    assert [b.target_instant for b in blocks if b.is_rollback] == [rolled_back]
    for as_of in (None, "20250126040823628", "20250126040936578", "20250126060846931"):
        data = table.read(columns=["_hoodie_commit_time", "id"], as_of=as_of)
        assert data.num_rows == 3
        assert rolled_back not in data.column("_hoodie_commit_time").to_pylist(), as_of
    latest = table.read(columns=["id", "_hoodie_commit_time"]).to_pylist()
    assert {"id": 2, "_hoodie_commit_time": "20250126060846931"} in latest


def test_an_empty_table_and_a_read_before_the_first_commit_have_the_schema(tmp_path: Path) -> None:
    empty = load_table(unpack(HUDI_RS_TABLES / "v6_empty.zip", tmp_path / "empty"))
    assert empty.read().schema.names == [*META, "id", "name", "isActive"]
    table = load_table(unpack(HUDI_RS_TABLES / "v6_nonpartitioned.zip", tmp_path / "table"))
    before = table.read(as_of="20000101000000000")
    assert before.num_rows == 0
    assert before.schema.names == table.read().schema.names


V6_TABLES = ["v6_complexkeygen_hivestyle", "v6_nonpartitioned", "v6_simplekeygen_nonhivestyle"]


def unpack_named(hudi_rs_tables: Path, name: str, into: Path) -> str:
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
    path = unpack_named(hudi_rs_tables, name, tmp_path)
    ours = load_table(path).read()
    theirs = hudi_rs_read(path)
    columns = ["_hoodie_record_key", "_hoodie_commit_time", "_hoodie_file_name", "id", "name"]
    assert ours.num_rows == theirs.num_rows > 0
    assert sorted_rows(ours, columns) == sorted_rows(theirs, columns)


def test_partition_filters_agree_with_hudi_rs(hudi_rs_tables: Path, tmp_path: Path) -> None:
    path = unpack_named(hudi_rs_tables, "v6_complexkeygen_hivestyle", tmp_path)
    ours = load_table(path).read([("byteField", "=", "10")])
    theirs = hudi_rs_read(path, [("byteField", "=", "10")])
    assert 0 < ours.num_rows < load_table(path).read().num_rows
    assert sorted_rows(ours, ["_hoodie_record_key"]) == sorted_rows(theirs, ["_hoodie_record_key"])


#: The rows hudi-rs reads from each table of version 8 or 9 (its snapshot), and how many distinct
#: record keys they hold (None: no meta fields, or no rows): the oracle fedcore's reads of these
#: versions will be held against. A key twice is Hudi's own doing: Spark SQL's ``INSERT INTO``
#: is an insert, not an upsert, in Hudi 1.x (``rollback``), and a timestamp key generator puts a
#: key whose time changed in a second partition. What each table holds is in the ``.sql`` beside
#: it: ``txns`` tables have inserts, updates, deletes, an insert overwrite of one partition, a
#: compaction (merge-on-read) and a clustering; ``_meta`` keeps Hudi's metadata table and its
#: record index, ``_nometa`` has none; ``overwrite`` an insert overwrite of the whole table;
#: ``rollback`` a delta commit rolled back; ``lance`` Lance base files (which fedcore cannot read).
V8_V9_ROWS = {
    "v8_complexkeygen_hivestyle": (4, 4),
    "v8_empty": (0, None),
    "v8_nonpartitioned": (4, 4),
    "v8_simplekeygen_hivestyle_no_metafields": (4, None),
    "v8_simplekeygen_nonhivestyle": (4, 4),
    "v9_lance_nonpartitioned": (9, 9),
    "v9_timebasedkeygen_nonhivestyle": (5, 4),
    "v9_txns_complex_nometa": (12, 12),
    "v9_txns_nonpart_nometa": (14, 14),
    "v9_txns_simple_nometa": (12, 12),
    "v9_txns_simple_overwrite": (3, 3),
    "mor/avro/v8_trips_8i3u1d": (6, 6),
    "mor/avro/v9_nonpartitioned_rollback": (4, 3),
    "mor/avro/v9_timebasedkeygen_nonhivestyle": (6, 5),
    "mor/avro/v9_txns_complex_nometa": (12, 12),
    "mor/avro/v9_txns_nonpart_nometa": (14, 14),
    "mor/avro/v9_txns_simple_meta": (12, 12),
    "mor/avro/v9_txns_simple_nometa": (12, 12),
}


def _reads_it(archive: Path) -> bool:
    """Whether fedcore reads a table of version 8 or 9: Parquet base files, as its own config
    says (not a list of names)."""
    return zip_properties(archive).get("hoodie.table.base.file.format", "PARQUET").upper() == "PARQUET"


@pytest.mark.parametrize("archive", [z for z in V8_V9_ZIPS if _reads_it(z)], ids=name_of)
def test_a_table_of_version_8_or_9_is_read_like_hudi_rs(archive: Path, tmp_path: Path) -> None:
    """Whole rows (every plain column both give, meta columns too) and filters on every
    partition column and a data column, against hudi-rs's rows: merge-on-read tables both as a
    snapshot (log files merged onto their slices, which their delta commits' completion times
    decide) and read-optimized (base files only); time travel to every completed write;
    incremental queries from each write's completion time (Hudi 1.x selects by completion
    time). fedcore writes a copy-on-write one back as hudi-rs then reads it (a merge-on-read one,
    or a key generator whose paths fedcore does not make: refused by name before anything)."""
    path = unpack(archive, tmp_path)
    table = load_table(path)
    ours = table.read()
    theirs = hudi_rs(path)
    columns: list[str] = []
    if theirs is None:
        assert ours.num_rows == 0
        assert ours.schema.names == [*META, *theirs_schema(path)], "empty, with the table's schema"
    else:
        columns = [c for c in simple_columns(theirs) if c in ours.column_names]
        assert {"_hoodie_record_key", "_hoodie_commit_time"} <= set(columns) or "_hoodie_record_key" not in (
            theirs.column_names
        )
        assert rows(ours, columns) == rows(theirs, columns)
        if table.config.merge_on_read:
            optimized = table.scan(query_type="read_optimized").to_arrow()
            base_only = hudi.HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
            assert rows(optimized, columns) == rows(hudi_rs(path, base_only), columns)
        fields = [f for f in table.handle.partition_scheme.fields if f in columns]
        data_column = next(c for c in columns if not c.startswith("_hoodie_") and c not in fields)
        for column in [*fields, data_column]:
            values = sorted({v for v in theirs.column(column).to_pylist() if v is not None})
            middle = values[len(values) // 2]
            for op, expression in (
                ("=", pc.field(column) == middle),
                ("!=", pc.field(column) != middle),
                ("<", pc.field(column) < middle),
            ):
                got = table.read([(column, op, middle)])
                assert rows(got, columns) == rows(theirs.filter(expression), columns), (column, op)
    # Time travel to every completed write: Hudi 1.x reads the instants requested by then
    # (their log files placed by completion time, as for the snapshot).
    written = table.timeline().completed(table.handle.write_actions)
    for instant in written:
        expected = hudi_rs(path, hudi.HudiReadOptions().with_as_of_timestamp(instant.time))
        got = table.read(as_of=instant.time)
        if expected is None:
            assert got.num_rows == 0, instant
        else:
            assert rows(got, columns) == rows(expected, columns), instant
    # Incremental queries select by completion time: after each write's completion, the
    # latest version of what the writes completed since wrote.
    event_time_merges = table.config.merge_on_read and table.config.get("hoodie.record.merge.mode") == (
        "EVENT_TIME_ORDERING"
    )
    if written and event_time_merges:
        with pytest.raises(UnsupportedTableError, match="incremental query of its merge-on-read slices"):
            table.changes(written[0].completion_time or "000").to_arrow()
    elif written and "_hoodie_commit_time" in columns:
        latest = table.read()
        for instant in written:
            assert instant.completion_time is not None
            later = {i.time for i in written if i.completion_time > instant.completion_time}
            keep = pc.field("_hoodie_commit_time").isin(pa.array(sorted(later), pa.string()))
            expected_changes = latest.filter(keep)
            got_changes = table.changes(instant.completion_time).to_arrow()
            assert rows(got_changes, columns) == rows(expected_changes, columns), instant
    _write_back_one_row(table, path, columns)


def _write_back_one_row(table: Table, path: str, columns: list[str]) -> None:
    """fedcore writes a table of version 8 or 9 Hudi wrote, of either type (a row upserted
    unchanged: the same rows after it, read alike by fedcore and hudi-rs; merge-on-read: a
    delta commit appending a log file named as Hudi 1.x names them)."""
    timeline = Path(path.removeprefix("file://"), ".hoodie", "timeline")
    before = sorted(p.name for p in timeline.iterdir())
    data = table.read()
    plain = [c for c in data.column_names if not c.startswith("_hoodie_")]
    refusal: tuple[type[Exception], str] | None = None
    if table.config.partition_fields and not table.handle.partition_scheme.encodes_values:
        refusal = (UnsupportedTableError, "fedcore writes the paths of Hudi's simple")
    if refusal is not None:
        with pytest.raises(refusal[0], match=refusal[1]):
            table.upsert(data.select(plain).slice(0, 1))
        assert sorted(p.name for p in timeline.iterdir()) == before, "nothing of the write was begun"
        return
    # A row whose key no other row holds: Hudi wrote some keys into two file groups (an insert
    # after a rollback), and an upsert of such a key updates each of them, as Hudi's does.
    keys = list(zip(*(data.column(c).to_pylist() for c in table.config.record_key_fields), strict=True))
    counts = Counter(keys)
    unique = [i for i, key in enumerate(keys) if counts[key] == 1]
    if not unique:
        return
    written = table.upsert(data.select(plain).slice(unique[0], 1))
    if table.config.merge_on_read:  # an update: a log file of the delta commit's own, version 1
        logs = [n for s in load_table(path).file_slices() for n, _ in s.log_files if written.instant in n]
        assert [LOG_FILE_RE.fullmatch(n).group(2, 3) for n in logs] == [(written.instant, "1")]  # type: ignore[union-attr]
    after = load_table(path).read()
    kept = [
        c for c in columns if c not in ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")
    ]
    assert rows(after, kept) == rows(data, kept), "the row written back changed nothing"
    assert rows(after, columns) == rows(hudi_rs(path), columns), "hudi-rs reads fedcore's write alike"


@pytest.mark.parametrize("archive", [z for z in V8_V9_ZIPS if not _reads_it(z)], ids=name_of)
def test_what_fedcore_does_not_read_of_version_8_or_9_is_refused_by_name(
    archive: Path, tmp_path: Path
) -> None:
    path = unpack(archive, tmp_path)
    base_format = zip_properties(archive)["hoodie.table.base.file.format"]
    with pytest.raises(UnsupportedTableError, match=f"{base_format} base files"):
        load_table(path)  # on opening: nothing is read


@pytest.mark.parametrize("archive", V8_V9_ZIPS, ids=name_of)
def test_hudi_rs_reads_every_table_of_version_8_or_9(archive: Path, tmp_path: Path) -> None:
    """The oracle works on each table: its rows, each key once, the table's columns."""
    path = unpack(archive, tmp_path)
    theirs = hudi_rs(path)
    expected_rows, expected_keys = V8_V9_ROWS[name_of(archive)]
    if theirs is None:
        assert expected_rows == 0
        assert theirs_schema(path), "an empty table still has its schema"
        return
    assert theirs.num_rows == expected_rows
    assert set(theirs_schema(path)) <= set(theirs.column_names)
    if expected_keys is not None:
        assert pc.count_distinct(theirs.column("_hoodie_record_key")).as_py() == expected_keys


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


def completed_writes(archive: Path) -> int:
    """How many completed writes a zipped table's timeline names (either timeline layout)."""
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
    pattern = r"[^/]+/\.hoodie/(?:timeline/)?\d{17}(?:_\d{17})?\.(?:commit|deltacommit|replacecommit)"
    return sum(1 for name in names if re.fullmatch(pattern, name))


@pytest.mark.parametrize(
    "archive", [z for z in V6_ZIPS + V8_V9_ZIPS if _reads_it(z) and completed_writes(z) >= 2], ids=name_of
)
def test_a_table_whose_oldest_write_was_archived_reads_the_same_rows(archive: Path, tmp_path: Path) -> None:
    """Archival moves old instants off the active timeline while the files they wrote stay
    live: what an instant older than the timeline's first wrote is still part of the table, as
    Hudi's file-system view counts it."""
    path = unpack(archive, tmp_path)
    table = load_table(path)
    writes = table.timeline().completed(table.handle.write_actions)
    expected = table.read()
    folder = Path(table.handle.layout.instants.folder(path).removeprefix("file://"))
    oldest = [p for p in folder.iterdir() if p.is_file() and p.name.startswith(writes[0].time)]
    assert oldest
    for instant_file in oldest:
        instant_file.unlink()  # moved out by archival
    archived = load_table(path)
    assert archived.timeline().completed(archived.handle.write_actions)[0] == writes[1]
    columns = [c for c in expected.column_names if c in simple_columns(expected)]
    assert rows(archived.read(), columns) == rows(expected, columns)
