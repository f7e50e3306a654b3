"""Filters skip the row groups whose statistics prove no row matches, exactly: a skipped row
group never holds a row that satisfies the filters (a property test against reading every
row), and a scan returns what filtering every row returns."""

from __future__ import annotations

import datetime as dt
import io
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedcore import properties as P
from fedcore.io.filesystems import open_sized
from fedcore.io.parquet import open_parquet
from fedcore.metadata.format import FOLDER
from fedcore.read.filters import Filter, matching_row_groups, row_expression
from fedcore.services.repair import repair_metadata
from fedcore.table import Table, create_table, load_table

SCHEMA = pa.schema([("i", pa.int64()), ("f", pa.float64()), ("s", pa.string()), ("d", pa.date32())])
ints = st.integers(-5, 5)
floats = st.sampled_from([-1.5, -0.0, 0.0, 0.5, 2.0, math.inf, -math.inf, math.nan])
strings = st.sampled_from(["", "a", "ab", "b", "é", "z"])
dates = st.dates(dt.date(2026, 1, 1), dt.date(2026, 1, 6))
VALUES = {"i": ints, "f": floats, "s": strings, "d": dates}
OPS = ("=", "!=", "<", "<=", ">", ">=", "IN", "IS NULL", "IS NOT NULL")


def column(values: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(st.none(), values, values, values)


@st.composite
def filters(draw: st.DrawFn) -> Filter:
    name = draw(st.sampled_from(sorted(VALUES)))
    op = draw(st.sampled_from(OPS))
    if op in ("IS NULL", "IS NOT NULL"):
        return Filter.of((name, op))
    if op == "IN":
        return Filter.of((name, "IN", draw(st.lists(VALUES[name], min_size=1, max_size=3))))
    return Filter.of((name, op, draw(VALUES[name])))


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(*(column(VALUES[n]) for n in SCHEMA.names)), min_size=1, max_size=60),
    group_rows=st.integers(1, 12),
    conditions=st.lists(filters(), min_size=1, max_size=3),
)
def test_a_skipped_row_group_holds_no_matching_row(
    rows: list[tuple[object, ...]], group_rows: int, conditions: list[Filter]
) -> None:
    data = pa.Table.from_pylist([dict(zip(SCHEMA.names, row, strict=True)) for row in rows], SCHEMA)
    buffer = io.BytesIO()
    pq.write_table(data, buffer, row_group_size=group_rows)
    parquet = open_parquet(buffer.getvalue())
    kept = set(matching_row_groups(parquet.metadata, conditions))
    expression = row_expression(conditions)
    for group in range(parquet.metadata.num_row_groups):
        if group not in kept:
            assert parquet.read_row_groups([group]).filter(expression).num_rows == 0, group


def test_a_scan_reads_only_the_row_groups_its_filters_may_match(tmp_path: Path) -> None:
    """A table whose base files hold many row groups, ids ascending through each file."""
    table = create_table(
        f"file://{tmp_path}/t",
        name="t",
        record_key_fields=["id"],
        partition_fields=["part"],
        properties={
            P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE,
            P.STORAGE_PATH: f"file://{tmp_path}/storage",
            # 1,000 rows a row group: the block size over the record size estimate
            str(P.PARQUET_BLOCK_SIZE): "16000",
            str(P.RECORD_SIZE_ESTIMATE): "16",
        },
    )
    ids = pa.array(range(20_000), pa.int64())
    table.bulk_insert(
        pa.table({"id": ids, "part": pa.compute.if_else(pa.compute.less(ids, 10_000), "a", "b"), "x": ids})
    )
    everything = table.read(columns=["id", "part", "x"])
    for conditions in (
        [("id", "<", 1500)],
        [("id", ">=", 19_990), ("x", "!=", 19_995)],
        [("id", "IN", [5, 12_345, 40_000])],
        [("x", "=", -1)],
        [("part", "=", "b"), ("x", "<=", 10_500)],
    ):
        parsed = [Filter.of(c) for c in conditions]
        found = table.scan(conditions, ["id", "x"]).to_arrow().sort_by("id")
        expected = everything.filter(row_expression(parsed)).select(["id", "x"]).sort_by("id")
        assert found == expected, conditions

    (slice_a,) = table.scan([("part", "=", "a")]).plan_files()
    with open_sized(table.fs, slice_a.path, slice_a.size) as handle:
        metadata = open_parquet(handle).metadata
    assert metadata.num_row_groups == 10
    assert matching_row_groups(metadata, [Filter.of(("id", "<", 1500))]) == [0, 1]
    assert matching_row_groups(metadata, [Filter.of(("id", "=", 10_000))]) == []
    assert matching_row_groups(metadata, [Filter.of(("x", "IS NULL"))]) == []
    assert matching_row_groups(metadata, [Filter.of(("part", "!=", "a"))]) == []


def object_store_table(folder: Path, **options: str) -> Table:
    """An empty table keyed by ``id``, partitioned by ``part``, data under ``folder/storage``."""
    return create_table(
        f"file://{folder}/t",
        name="t",
        record_key_fields=["id"],
        partition_fields=["part"],
        precombine_field="ts",
        properties={
            P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE,
            P.STORAGE_PATH: f"file://{folder}/storage",
            **options,
        },
    )


def sample_table(folder: Path, **options: str) -> Table:
    """Two partitions and three writes; each write's file in a partition holds ids of a
    range of its own."""
    table = object_store_table(folder, **options)
    for start in range(0, 3000, 1000):  # one file per partition per write: ids [start, start + 1000)
        ids = pa.array(range(start, start + 1000), pa.int64())
        table.bulk_insert(
            pa.table(
                {
                    "id": ids,
                    "part": pc.cast(pc.bit_wise_and(ids, 1), pa.string()),
                    "ts": pa.repeat(pa.scalar(1, pa.int64()), 1000),
                    "name": pc.binary_join_element_wise(
                        "n", pc.utf8_lpad(pc.cast(pc.divide(ids, 100), pa.string()), 2, "0"), ""
                    ),
                    "fare": pc.if_else(pc.equal(pc.bit_wise_and(ids, 7), 0), None, pc.multiply(ids, 0.5)),
                    "day": pc.cast(pc.add(pc.divide(ids, 1000), 19000), pa.int32()).cast(pa.date32()),
                }
            )
        )
    return table


def test_a_scan_skips_the_files_whose_statistics_rule_out_its_filters(tmp_path: Path) -> None:
    table = sample_table(tmp_path)
    assert len(table.file_slices()) == 6
    everything = table.read()
    cases: list[tuple[list[tuple[object, ...]], int]] = [
        ([("id", "<", 500)], 2),
        ([("id", ">=", 2000), ("id", "<=", 2001)], 2),
        ([("id", "=", 1500), ("part", "=", "0")], 1),
        ([("id", "IN", [5, 2999])], 3),  # 5: both partitions' first files (by range, not parity)
        ([("id", "IN", [-1, 99_999])], 0),
        ([("id", "!=", 3)], 6),
        ([("name", "=", "n15")], 2),
        ([("fare", "IS NULL")], 3),  # nulls at ids divisible by 8: partition 0 only
        ([("fare", ">", 1400.0)], 2),
        ([("day", "=", dt.date(2022, 1, 9))], 2),  # day 19001: ids 1000-1999
        ([("ts", "=", 2)], 0),
    ]
    for conditions, files in cases:
        planned = table.scan(conditions).plan_files()
        assert len(planned) == files, conditions
        expected = everything.filter(row_expression([Filter.of(c) for c in conditions]))
        assert table.read(conditions).sort_by("id") == expected.sort_by("id"), conditions


def test_files_without_statistics_are_read_as_before(tmp_path: Path) -> None:
    """A table written without statistics (``...column.stats.enable=false``, or before fed
    took them): nothing is skipped, every answer is the same."""
    table = sample_table(tmp_path, **{str(P.COLUMN_STATS_ENABLE): "false"})
    assert len(table.scan([("id", "<", 500)]).plan_files()) == 6
    assert table.read([("id", "<", 500)]).num_rows == 500
    index = table.handle.metadata_table_or_none()
    assert index is not None
    assert all(not files.stats for files in index.files().values())


def test_statistics_survive_compaction_and_repair(tmp_path: Path) -> None:
    table = sample_table(tmp_path, **{str(P.METADATA_COMPACT_DELTAS): "1"})
    index = table.handle.metadata_table_or_none()
    assert index is not None
    assert index.deltas_since_compaction() == 0  # compacted after each write
    assert len(table.scan([("id", "<", 500)]).plan_files()) == 2
    table.fs.table_fs.rm(f"{table.path}/{FOLDER}", recursive=True)  # rebuilt from the timeline
    repair_metadata(load_table(table.path))
    fresh = load_table(table.path)
    assert len(fresh.scan([("id", "<", 500)]).plan_files()) == 2
    assert fresh.read([("id", "<", 500)]).num_rows == 500


def test_only_the_listed_columns_get_statistics(tmp_path: Path) -> None:
    table = sample_table(tmp_path, **{str(P.COLUMN_STATS_COLUMNS): "name"})
    assert len(table.scan([("id", "<", 500)]).plan_files()) == 6
    assert len(table.scan([("name", "=", "n15")]).plan_files()) == 2


@settings(max_examples=25, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 40), column(ints), column(strings)), min_size=1, max_size=30),
        min_size=1,
        max_size=4,
    ),
    operations=st.lists(
        st.sampled_from(["upsert", "insert", "delete", "bulk_insert"]), min_size=4, max_size=4
    ),
    conditions=st.lists(
        st.one_of(
            st.tuples(st.just("id"), st.sampled_from(OPS[:6]), st.integers(-1, 41)),
            st.tuples(st.just("i"), st.sampled_from(OPS), ints),
            st.tuples(st.just("s"), st.sampled_from(OPS[:6]), strings),
        ),
        min_size=1,
        max_size=2,
    ),
)
def test_a_filtered_scan_returns_what_filtering_every_row_returns(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[list[tuple[int, object, object]]],
    operations: list[str],
    conditions: list[tuple[str, str, object]],
) -> None:
    """Random writes (upserts, inserts, deletes) and random filters: a skipped file never
    held a matching row."""
    table = object_store_table(tmp_path_factory.mktemp("t"))
    for rows, operation in zip(batches, ["upsert", *operations[1:]], strict=False):  # first: some rows
        data = pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "part": pa.array([str(r[0] % 3) for r in rows], pa.string()),
                "ts": pa.array([1] * len(rows), pa.int64()),
                "i": pa.array([r[1] for r in rows], pa.int64()),
                "s": pa.array([r[2] for r in rows], pa.string()),
            }
        )
        table.write(data, operation)  # type: ignore[arg-type]
    filters = [
        Filter.of((c, op))
        if op in ("IS NULL", "IS NOT NULL")
        else Filter.of((c, op, [v] if op == "IN" else v))
        for c, op, v in conditions
    ]
    everything = table.read()
    expected = everything.filter(row_expression(filters)).sort_by("id")
    assert table.read(filters).sort_by("id") == expected
