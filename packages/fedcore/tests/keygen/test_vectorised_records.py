"""The write path computes record keys, partition paths and the precombine dedup over whole
Arrow columns. These properties hold them equal to the per-row definitions they replaced
(kept here as the oracle): for every partition column type, nulls, empty values, and every
escaping case (hive-style or not, URL-encoded or not, values a path must refuse).
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedcore import properties as P
from fedcore.exceptions import FedError, InvalidPartitionValueError, InvalidRecordsError
from fedcore.keygen import grouping
from fedcore.keygen.grouping import PartitionedRows, latest_per_key, partition_rows
from fedcore.keygen.keys import record_keys
from fedcore.keygen.partitioning import PartitionScheme, value_text

# --- the per-row definitions (the oracle) ------------------------------------------------


def oracle_keys(data: pa.Table, key_fields: Sequence[str], key_generator: str) -> list[str]:
    columns = [data.column(f).to_pylist() for f in key_fields]
    complex_keys = len(key_fields) > 1 or key_generator == P.COMPLEX_KEY_GENERATOR
    keys = []
    for row, values in enumerate(zip(*columns, strict=True)):
        if any(v is None or v == "" for v in values):
            raise InvalidRecordsError(f"record {row} has a null or empty record key")
        if complex_keys:
            keys.append(",".join(f"{f}:{value_text(v)}" for f, v in zip(key_fields, values, strict=True)))
        else:
            keys.append(value_text(values[0]))
    return keys


def oracle_paths(data: pa.Table, scheme: PartitionScheme) -> list[str]:
    if not scheme.fields:
        return [""] * data.num_rows
    columns = [data.column(f).to_pylist() for f in scheme.fields]
    return [scheme.path_of(values) for values in zip(*columns, strict=True)]


def oracle_latest(keys: list[str], precombine: list[Any] | None) -> list[int]:
    best: dict[str, int] = {}
    for row, key in enumerate(keys):
        kept = best.get(key)
        if kept is None or precombine is None:
            best[key] = row
            continue
        new, old = precombine[row], precombine[kept]
        if old is None or (new is not None and new >= old):
            best[key] = row
    return sorted(best.values())


# --- columns of every type a partition or key column may have -----------------------------

#: Characters Hudi escapes, path separators, dots, '=', '%', unicode and control characters.
TEXT = st.text(alphabet=st.sampled_from(list("ab/\\.:=%#?*[]{}^'\"\x01\x7f é日 -_0")), max_size=6)
MOMENTS = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2100, 1, 1))


def _timestamps(unit: str, tz: str | None = None) -> st.SearchStrategy[tuple[pa.DataType, list[Any]]]:
    def values(moment: datetime) -> datetime:
        if unit == "s":
            moment = moment.replace(microsecond=0)
        elif unit == "ms":
            moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
        return moment.replace(tzinfo=timezone.utc) if tz else moment

    return st.tuples(st.just(pa.timestamp(unit, tz)), st.lists(st.none() | MOMENTS.map(values), max_size=12))


def _column(kinds: list[pa.DataType], values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.tuples(st.sampled_from(kinds), st.lists(st.none() | values, max_size=12))


FLOATS = st.sampled_from([0.0, 1.0, 1.5, -2.25, 1e16, 1e-5, 0.1])
DECIMALS = st.sampled_from(["0.00000001", "1.5", "-3.25000000", "0"]).map(decimal.Decimal)
COLUMNS: st.SearchStrategy[tuple[pa.DataType, list[Any]]] = st.one_of(
    _column([pa.int8(), pa.int32(), pa.int64()], st.integers(-100, 100)),
    _column([pa.uint16()], st.integers(0, 60000)),
    _column([pa.bool_()], st.booleans()),
    _column([pa.string(), pa.large_string()], TEXT),
    _column([pa.float64()], FLOATS),
    _column([pa.date32()], st.dates(date(1900, 1, 1), date(2200, 1, 1))),
    _column([pa.decimal128(12, 8)], DECIMALS),
    _timestamps("s"),
    _timestamps("ms"),
    _timestamps("us"),
    _timestamps("us", "UTC"),
    _column([pa.binary()], st.binary(max_size=3)),
)


def _table(columns: list[tuple[pa.DataType, list[Any]]], rows: int, dictionary: bool = False) -> pa.Table:
    arrays = {}
    for index, (kind, values) in enumerate(columns):
        values = (values * (rows // max(1, len(values)) + 1))[:rows] if values else [None] * rows
        array = pa.array(values, kind)
        arrays[f"c{index}"] = array.dictionary_encode() if dictionary and index == 0 else array
    return pa.table(arrays)


def _outcome(compute: Any) -> Any:
    try:
        return compute()
    except FedError as exc:
        return type(exc)


@settings(max_examples=300, deadline=None)
@given(
    columns=st.lists(COLUMNS, min_size=1, max_size=3),
    rows=st.integers(0, 20),
    hive_style=st.booleans(),
    url_encode=st.booleans(),
    dictionary=st.booleans(),
)
def test_partition_paths_equal_the_per_row_definition(
    columns: list[tuple[pa.DataType, list[Any]]],
    rows: int,
    hive_style: bool,
    url_encode: bool,
    dictionary: bool,
) -> None:
    data = _table(columns, rows, dictionary)
    scheme = PartitionScheme(tuple(data.column_names), hive_style=hive_style, url_encode=url_encode)

    def vectorised() -> list[str]:
        found = partition_rows(data, scheme)
        assert len(found.codes) == rows
        return [found.paths[code] for code in found.codes]

    expected = _outcome(lambda: oracle_paths(data, scheme))
    assert _outcome(vectorised) == expected
    if expected is not InvalidPartitionValueError and rows:
        groups = partition_rows(data, scheme).groups()
        assert sorted(np.concatenate(list(groups.values())).tolist()) == list(range(rows))
        assert all(expected[row] == path for path, members in groups.items() for row in members)


@settings(max_examples=100, deadline=None)
@given(codes=st.lists(st.integers(0, 4), min_size=1, max_size=60))
def test_rows_grouped_over_count_slices_are_each_partitions_rows_ascending(codes: list[int]) -> None:
    """Rows are counted a slice at a time (``grouping._COUNT_SLICE``, shrunk here to 7 rows):
    each partition's rows are still exactly those of its code, ascending."""
    paths = [f"p{code}" for code in range(5)]
    original = grouping._COUNT_SLICE
    grouping._COUNT_SLICE = 7  # type: ignore[misc]
    try:
        groups = PartitionedRows(np.array(codes, np.int32), paths).groups()
    finally:
        grouping._COUNT_SLICE = original  # type: ignore[misc]
    expected = {f"p{code}": [row for row, c in enumerate(codes) if c == code] for code in set(codes)}
    assert {path: rows.tolist() for path, rows in groups.items()} == expected


@settings(max_examples=300, deadline=None)
@given(
    columns=st.lists(COLUMNS, min_size=1, max_size=3),
    rows=st.integers(0, 20),
    generator=st.sampled_from([P.SIMPLE_KEY_GENERATOR, P.COMPLEX_KEY_GENERATOR]),
)
def test_record_keys_equal_the_per_row_definition(
    columns: list[tuple[pa.DataType, list[Any]]], rows: int, generator: str
) -> None:
    data = _table(columns, rows)
    fields = data.column_names
    expected = _outcome(lambda: oracle_keys(data, fields, generator))
    assert _outcome(lambda: record_keys(data, fields, generator).to_pylist()) == expected


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.sampled_from(["a", "b", "c", "a,b"]), max_size=20),
    partitions=st.lists(st.integers(0, 2), min_size=20, max_size=20),
    precombine=st.none() | st.lists(st.none() | st.integers(0, 3), min_size=20, max_size=20),
)
def test_the_precombine_dedup_equals_the_per_row_definition(
    keys: list[str], partitions: list[int], precombine: list[int | None] | None
) -> None:
    n = len(keys)
    codes = np.array(partitions[:n], np.int64)
    values = None if precombine is None else precombine[:n]
    column = None if values is None else pa.chunked_array([pa.array(values, pa.int64())])
    found = latest_per_key(codes, pa.array(keys, pa.string()), column)
    assert found.tolist() == oracle_latest([f"{p}\0{k}" for p, k in zip(codes, keys, strict=True)], values)


def test_a_timestamp_partition_is_spelled_as_python_does() -> None:
    moments = [datetime(2026, 1, 1, 12), datetime(2026, 1, 1, 12, 0, 0, 123000) + timedelta(microseconds=4)]
    data = pa.table({"t": pa.array(moments, pa.timestamp("us"))})
    found = partition_rows(data, PartitionScheme(("t",), hive_style=True, url_encode=True))
    assert [found.paths[c] for c in found.codes] == [
        "t=2026-01-01 12%3A00%3A00",
        "t=2026-01-01 12%3A00%3A00.123004",
    ]


@pytest.mark.parametrize("bad", [None, ""])
def test_a_null_or_empty_key_names_its_row(bad: str | None) -> None:
    data = pa.table({"id": pa.array(["1", "2", bad, "4"], pa.string())})
    with pytest.raises(InvalidRecordsError, match="record 2 has a null or empty record key"):
        record_keys(data, ["id"], P.SIMPLE_KEY_GENERATOR)
