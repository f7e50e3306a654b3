"""What a write accepts, read as Arrow: tables, record batches, streams, pandas frames."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeAlias

import pyarrow as pa

from fedcore.exceptions import InvalidRecordsError

#: What a write accepts: a ``pyarrow.Table`` or ``RecordBatch``, a ``RecordBatchReader``, or any
#: object that exports an Arrow stream (``__arrow_c_stream__``: polars, DuckDB relations,
#: pandas 2.2+, ...); a pandas ``DataFrame`` of older pandas goes through ``Table.from_pandas``.
WriteInput: TypeAlias = Any


def to_arrow_table(data: WriteInput) -> pa.Table:
    """Write input as one Arrow table, read from its stream once (``InvalidRecordsError`` if it
    is nothing Arrow can read)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    try:
        if isinstance(data, pa.RecordBatchReader):
            return data.read_all()
        if _is_pandas(data):  # before its Arrow stream, which holds a filtered frame's index
            return pa.Table.from_pandas(data, preserve_index=False)
        if hasattr(data, "__arrow_c_stream__"):
            return pa.RecordBatchReader.from_stream(data).read_all()
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise InvalidRecordsError(f"cannot read the records as Arrow: {exc}") from exc
    raise InvalidRecordsError(
        f"records must be a pyarrow Table, RecordBatch or RecordBatchReader, or export an Arrow stream "
        f"(pandas, polars, ...), not {type(data).__name__}"
    )


def record_chunks(data: WriteInput, max_bytes: int) -> Iterator[pa.Table]:
    """A streamed write input as tables of about ``max_bytes`` each (Arrow bytes, whole
    record batches), each read only when it is needed, so the stream is never held whole.
    Anything else (a table, already in memory) is one table. At least one table, empty for
    empty input."""
    if not _is_pandas(data) and (
        isinstance(data, pa.RecordBatchReader) or hasattr(data, "__arrow_c_stream__")
    ):
        try:
            reader = (
                data if isinstance(data, pa.RecordBatchReader) else pa.RecordBatchReader.from_stream(data)
            )
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InvalidRecordsError(f"cannot read the records as Arrow: {exc}") from exc
        batches: list[pa.RecordBatch] = []
        size, yielded = 0, False
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            except (pa.ArrowException, TypeError, ValueError) as exc:
                raise InvalidRecordsError(f"cannot read the records as Arrow: {exc}") from exc
            batches.append(batch)
            size += batch.nbytes
            if size >= max_bytes:
                yield pa.Table.from_batches(batches, reader.schema)
                batches, size, yielded = [], 0, True
        if batches or not yielded:
            yield pa.Table.from_batches(batches, reader.schema)
        return
    yield to_arrow_table(data)


def _is_pandas(data: WriteInput) -> bool:
    """A pandas frame: its columns only (its Arrow stream would add a non-default index as a
    column, ``__index_level_0__``, once rows were filtered out)."""
    return type(data).__module__.startswith("pandas")
