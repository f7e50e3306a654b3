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

from collections.abc import Sequence
from typing import IO, TypeAlias

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


def read_row_groups(parquet: pq.ParquetFile, row_groups: Sequence[int]) -> pa.Table:
    return parquet.read_row_groups(list(row_groups), use_threads=False)


def read_parquet_metadata(source: Source) -> pq.FileMetaData:
    """The footer alone: row counts and statistics without reading any data page."""
    return open_parquet(source).metadata


def read_parquet_schema(source: Source) -> pa.Schema:
    """The Arrow schema from the footer alone."""
    return open_parquet(source).schema_arrow
