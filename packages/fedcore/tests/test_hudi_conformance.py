"""Every Hudi table in ../shared/hudi-tables: read exactly as hudi-rs reads it, or refused with a
typed error, never rows that are wrong.

For a table fedcore reads, the rows are compared with hudi-rs: the whole table; a filter
(=, !=, <, IS NULL) on every partition column and on a data column, against the rows
hudi-rs returns unfiltered, filtered by Arrow itself (the rows' own values decide); and
time travel to every completed instant. A table fedcore refuses must raise a FedError
on opening or on reading.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import hudi
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from fedcore.exceptions import FedError, InvalidColumnsError, UnsupportedTableError
from fedcore.table import load_table

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "hudi-tables"
ZIPS = sorted(SHARED.rglob("*.zip")) if SHARED.is_dir() else []
#: Plain values both readers give the same way (complex types are compared as a whole row count).
SIMPLE = (
    pa.types.is_integer,
    pa.types.is_string,
    pa.types.is_boolean,
    pa.types.is_floating,
    pa.types.is_date,
)

#: What fedcore cannot read exactly yet, and so refuses: table version 8 and merge-on-read.
REFUSED = {"v8_complexkeygen_hivestyle", "v8_nonpartitioned", "mor/avro/v6_trips_8i1u"} | {
    f"mor/parquet/{name}" for name in ("v6_complexkeygen_hivestyle", "v6_empty", "v6_nonpartitioned_rollback")
}


def name_of(archive: Path) -> str:
    return str(archive.relative_to(SHARED)).removesuffix(".zip")


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


def test_the_shared_tables_are_all_here() -> None:
    assert len(ZIPS) == 12, ZIPS
    assert {name_of(z) for z in ZIPS} >= REFUSED


@pytest.mark.parametrize("archive", ZIPS, ids=name_of)
def test_every_shared_table_is_read_like_hudi_rs_or_refused(archive: Path, tmp_path: Path) -> None:
    path = unpack(archive, tmp_path)
    if name_of(archive) in REFUSED:
        assert hudi_rs(path) is not None or "empty" in name_of(archive), "hudi-rs reads it: it is real"
        with pytest.raises(FedError):  # a typed error that says why, never rows
            load_table(path).read()
        return
    table = load_table(path)
    ours = table.read()
    theirs = hudi_rs(path)
    if theirs is None:
        assert ours.num_rows == 0
        return
    columns = [c for c in simple_columns(theirs) if c in ours.column_names]
    assert "id" in columns
    assert rows(ours, columns) == rows(theirs, columns)
    assert set(ours.column_names) == set(theirs.column_names), "the same columns, meta columns too"

    # Filters on every partition column and on a data column; the truth is Arrow's own
    # filter over the rows hudi-rs returns.
    fields = [f for f in table.partition_scheme.fields if f in columns]
    for column in [*fields, "id"]:
        values = sorted({v for v in theirs.column(column).to_pylist() if v is not None})
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
            assert rows(got, columns) == rows(theirs.filter(expression), columns), spec

    # Time travel to every completed instant.
    timeline = hudi.HudiTableBuilder.from_base_uri(path).build().get_timeline()
    for instant in timeline.get_completed_commits():
        at = instant.timestamp
        expected = hudi_rs(path, hudi.HudiReadOptions().with_as_of_timestamp(at))
        assert rows(table.read(as_of=at), columns) == rows(expected, columns), at


def test_merge_on_read_tables_are_refused_not_read_empty(tmp_path: Path) -> None:
    mor = sorted((SHARED / "mor").rglob("*.zip"))
    assert mor, "the merge-on-read tables are in shared/"
    for archive in mor:
        path = unpack(archive, tmp_path / archive.parent.name)
        with pytest.raises(UnsupportedTableError, match="MERGE_ON_READ"):
            load_table(path)


def test_an_unknown_completed_action_is_refused(tmp_path: Path) -> None:
    path = unpack(SHARED / "v6_nonpartitioned.zip", tmp_path)
    table = load_table(path)
    (Path(path.removeprefix("file://")) / ".hoodie" / "20991231000000000.deltacommit").write_text("{}")
    with pytest.raises(UnsupportedTableError, match="deltacommit"):
        table.read()


def test_a_timestamp_key_generator_table_filters_by_the_rows_values(tmp_path: Path) -> None:
    table = load_table(unpack(SHARED / "v6_timebasedkeygen_nonhivestyle.zip", tmp_path))
    assert not table.partition_scheme.encodes_values
    exact = table.read([("ts_str", "=", "2023-04-01T12:01:00.123Z")], ["id", "ts_str"])
    assert exact.to_pylist() == [{"id": 1, "ts_str": "2023-04-01T12:01:00.123Z"}]
    before = table.read([("ts_str", "<", "2023-04-03T12:01:00.123Z")], ["id"])
    assert sorted(before.column("id").to_pylist()) == [1, 2]
    assert all(s.partition_values == {} for s in table.file_slices()), "a path that is no value"


def test_meta_columns_of_a_table_without_meta_fields_are_left_out(tmp_path: Path) -> None:
    table = load_table(unpack(SHARED / "v6_simplekeygen_hivestyle_no_metafields.zip", tmp_path))
    data = table.read()
    assert not [c for c in data.column_names if c.startswith("_hoodie")]
    assert data.num_rows == 4
    with pytest.raises(InvalidColumnsError, match=r"populate\.meta\.fields=false"):
        table.read([("_hoodie_record_key", "=", "1")])
    with pytest.raises(InvalidColumnsError, match=r"populate\.meta\.fields=false"):
        table.read(columns=["_hoodie_commit_time"])
