"""Reading Parquet from Python-owned sources (bytes, fsspec files) without a crash at exit.

pyarrow's threaded readers finish a read on its worker threads, and a worker can
drop the last reference to the source a moment after the call has returned. When
the source is Python-owned (a ``bytes`` buffer, an fsspec file), dropping it
needs the GIL; if the interpreter is finalizing by then, the worker thread is
unwound and the process aborts ("terminate called without an active exception",
exit 134) after all its work is done (apache/arrow#34314). On this project's
machine ``pq.read_table(pa.BufferReader(data))`` in a short script aborted 9 to 18
times in 100, and ``fed files`` / ``fed layout`` about 5 in 100.

Every Parquet read in fedcore therefore goes through here: decoding on the
calling thread (``use_threads=False``) and without pre-buffering (which fetches
on arrow's I/O pool), so no arrow thread ever holds a Python object. Nothing is
lost by it: the reader already reads file slices in parallel on its own threads,
and metadata-table files are small.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import math
import struct
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

#: A local path, bytes, or an open (fsspec) file.
Source: TypeAlias = "str | bytes | pa.Buffer | IO[bytes]"


def open_parquet(source: Source, metadata: pq.FileMetaData | None = None) -> pq.ParquetFile:
    """A Parquet file to read selectively (``metadata``, ``read_row_groups``); see ``read_parquet``.
    ``metadata``: its footer, read before (the footer is then not fetched again)."""
    if isinstance(source, (bytes, bytearray, memoryview, pa.Buffer)):
        source = pa.BufferReader(source)
    return pq.ParquetFile(source, metadata=metadata, pre_buffer=False)


def read_parquet(source: Source, columns: Sequence[str] | None = None) -> pa.Table:
    """A whole Parquet file, or only ``columns`` of it."""
    wanted = list(columns) if columns is not None else None
    return open_parquet(source).read(columns=wanted, use_threads=False)


def read_row_groups(
    parquet: pq.ParquetFile,
    row_groups: Sequence[int],
    columns: Sequence[str] | None = None,
    *,
    native: bool = False,
) -> pa.Table:
    """``row_groups`` of ``parquet`` (none: no rows, with the file's schema), or only ``columns``
    of them. ``native``: ``parquet`` reads an arrow-owned file (``pyarrow.OSFile``), so no
    Python object is held and arrow may decode its columns on its own threads (a selective
    scan reads a few files: one thread each was the bottleneck)."""
    wanted = list(columns) if columns is not None else None
    return parquet.read_row_groups(list(row_groups), columns=wanted, use_threads=native)


@dataclass(frozen=True)
class ColumnStats:
    """What statistics say of one column over some rows (a row group's, a file's).

    ``low``/``high``: the least and greatest non-null values as Python values of the
    column's Arrow type (None: not recorded); ``nulls``: null values (None: not recorded);
    ``rows``: the rows covered."""

    low: Any
    high: Any
    nulls: int | None
    rows: int


def row_group_stats(
    metadata: pq.FileMetaData, row_group: int, columns: Collection[str]
) -> dict[str, ColumnStats]:
    """The statistics of ``columns`` (top-level ones) in one row group of a file's footer;
    a column without statistics is left out."""
    group = metadata.row_group(row_group)
    found: dict[str, ColumnStats] = {}
    for index in range(group.num_columns):
        chunk = group.column(index)
        name = chunk.path_in_schema
        if name not in columns or chunk.statistics is None:
            continue
        stats = chunk.statistics
        low, high = (stats.min, stats.max) if stats.has_min_max else (None, None)
        if not (_exact(low) and _exact(high)):
            low = high = None
        nulls = stats.null_count if stats.has_null_count else None
        found[name] = ColumnStats(low, high, nulls, group.num_rows)
    return found


def _exact(value: Any) -> bool:
    """Whether a statistic's Python value is the stored value exactly, so that comparing a
    filter's value with it proves something. Timestamps are not (pyarrow gives them in
    microseconds, whatever the unit, and with or without a zone by the logical type), nor
    binary values (fed's filters compare strings)."""
    return (
        value is None
        or isinstance(value, (bool, int, float, str, decimal.Decimal))
        or (isinstance(value, dt.date) and not isinstance(value, dt.datetime))
    )


def read_parquet_metadata(source: Source) -> pq.FileMetaData:
    """The footer alone: row counts and statistics without reading any data page."""
    return open_parquet(source).metadata


#: Parquet's magic, which opens and ends every file; the footer's length is the 4 bytes before the last.
MAGIC: Final = b"PAR1"


def footer_bytes(parquet: bytes) -> bytes:
    """The footer (Thrift ``FileMetaData``) of a whole Parquet file's bytes."""
    (length,) = struct.unpack("<I", parquet[-8:-4])
    return parquet[-8 - length : -8]


def parse_footer(footer: bytes) -> pq.FileMetaData:
    """A footer's bytes (``footer_bytes``) as pyarrow's metadata of the file: parsed as a file
    of the magic and the footer alone (the footer names the data pages by offset; parsing it
    reads none of them)."""
    tail = struct.pack("<I", len(footer)) + MAGIC
    return pq.read_metadata(pa.BufferReader(MAGIC + footer + tail))


def footer_from_tail(tail: bytes) -> pq.FileMetaData | None:
    """A file's footer from its last bytes (a copy that streamed them already has them), or
    None when they do not hold all of it (then read it from the file)."""
    if len(tail) < 8 or tail[-4:] != MAGIC:
        return None
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 8 > len(tail):
        return None
    return parse_footer(tail[-8 - length : -8])


def read_parquet_schema(source: Source) -> pa.Schema:
    """The Arrow schema from the footer alone."""
    return open_parquet(source).schema_arrow


#: Longest string a file's statistics keep: a longer least or greatest value leaves the
#: column out (a truncated value would not bound it), so stats stay small per file.
MAX_STATS_TEXT: Final = 64


def file_stats(metadata: pq.FileMetaData, columns: Collection[str]) -> str | None:
    """The statistics of ``columns`` over a whole file, from its footer, as compact JSON:
    ``{"rows": N, "columns": {name: [least, greatest, nulls], ...}}``.

    A column is left out where a row group has no statistics for it, or where its values
    do not survive JSON exactly (timestamps, binary, NaN, long strings); readers then do not
    skip the file by that column. None when no column has statistics."""
    if not metadata.num_row_groups:
        return None
    first = metadata.row_group(0)
    found: dict[str, list[Any]] = {}
    for index in range(first.num_columns):
        name = first.column(index).path_in_schema
        merged = _merged_stats(metadata, index) if name in columns else None
        if merged is not None:
            found[name] = merged
    if not found:
        return None
    return json.dumps({"rows": metadata.num_rows, "columns": found}, separators=(",", ":"))


def _merged_stats(metadata: pq.FileMetaData, index: int) -> list[Any] | None:
    """``[least, greatest, nulls]`` of column ``index`` over every row group, or None."""
    low: Any = None
    high: Any = None
    nulls = 0
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(index)
        stats = chunk.statistics
        if stats is None or not stats.has_null_count:
            return None
        nulls += stats.null_count
        if not stats.has_min_max:
            if stats.null_count == chunk.num_values:  # every value null: nothing to bound
                continue
            return None
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    encoded = [_json_value(low), _json_value(high)]
    if (low is not None and encoded[0] is None) or (high is not None and encoded[1] is None):
        return None
    return [*encoded, nulls]


def _json_value(value: Any) -> Any:
    """A statistic as JSON keeps it exactly, or None where it would not."""
    if not _exact(value):
        return None
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if not math.isnan(value) else None
    if isinstance(value, str):
        return value if len(value) <= MAX_STATS_TEXT else None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value) if value.is_finite() else None
    return None  # (no other value is exact)


@functools.lru_cache(maxsize=2**16)
def read_file_stats(text: str) -> tuple[int, Mapping[str, list[Any]]]:
    """The rows and the per-column ``[least, greatest, nulls]`` of ``file_stats`` output, as
    JSON values (the reader types them by the table's schema). Decoded once per process: a
    long-lived planner meets the same files' statistics query after query (callers never
    change what it returns)."""
    data = json.loads(text)
    return int(data["rows"]), data["columns"]
