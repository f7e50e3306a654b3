"""Hudi's meta columns and record keys, computed on Arrow tables.

Every base file starts with Hudi's five meta columns, so Hudi readers (and
hudi-rs) recognise a fedcore file, and so that an update can find the records
it replaces by ``_hoodie_record_key`` alone, without knowing the key fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from fedcore import properties as P
from fedcore.exceptions import InvalidRecordsError, SchemaMismatchError, UnsupportedTableError
from fedcore.partitioning import PartitionScheme, value_text

COMMIT_TIME: Final = "_hoodie_commit_time"
COMMIT_SEQNO: Final = "_hoodie_commit_seqno"
RECORD_KEY: Final = "_hoodie_record_key"
PARTITION_PATH: Final = "_hoodie_partition_path"
FILE_NAME: Final = "_hoodie_file_name"
META_COLUMNS: Final = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)


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
        if hasattr(data, "__arrow_c_stream__"):
            return pa.RecordBatchReader.from_stream(data).read_all()
        if type(data).__module__.startswith("pandas"):
            return pa.Table.from_pandas(data, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise InvalidRecordsError(f"cannot read the records as Arrow: {exc}") from exc
    raise InvalidRecordsError(
        f"records must be a pyarrow Table, RecordBatch or RecordBatchReader, or export an Arrow stream "
        f"(pandas, polars, ...), not {type(data).__name__}"
    )


def with_meta_fields(schema: pa.Schema) -> pa.Schema:
    """A data schema with Hudi's five meta columns (strings) first, as base files hold them."""
    return pa.schema([pa.field(name, pa.string()) for name in META_COLUMNS] + list(schema))


def check_columns(data: pa.Table, fields: Sequence[str], what: str) -> None:
    missing = [f for f in fields if f not in data.column_names]
    if missing:
        raise InvalidRecordsError(f"input has no {what} column {', '.join(map(repr, missing))}")


def record_keys(data: pa.Table, key_fields: Sequence[str], key_generator: str) -> list[str]:
    """Hudi's record keys: the value for one simple key field, ``f1:v1,f2:v2`` otherwise."""
    check_columns(data, key_fields, "record key")
    columns = [data.column(f).to_pylist() for f in key_fields]
    complex_keys = len(key_fields) > 1 or key_generator == P.COMPLEX_KEY_GENERATOR
    keys = []
    for row, values in enumerate(zip(*columns, strict=True)):
        if any(v is None or v == "" for v in values):
            raise InvalidRecordsError(
                f"record {row} has a null or empty record key ({', '.join(key_fields)})"
            )
        if complex_keys:
            keys.append(",".join(f"{f}:{value_text(v)}" for f, v in zip(key_fields, values, strict=True)))
        else:
            keys.append(value_text(values[0]))
    return keys


def partition_paths(data: pa.Table, scheme: PartitionScheme) -> list[str]:
    if not scheme.fields:
        return [""] * data.num_rows
    check_columns(data, scheme.fields, "partition")
    columns = [data.column(f).to_pylist() for f in scheme.fields]
    cache: dict[tuple[object, ...], str] = {}
    out = []
    for values in zip(*columns, strict=True):
        path = cache.get(values)
        if path is None:
            path = cache[values] = scheme.path_of(values)
        out.append(path)
    return out


def record_key_array(data: pa.Table, key_fields: Sequence[str], complex_keys: bool) -> pa.Array:
    """Hudi's record keys of stored rows, computed over whole columns (virtual keys: tables
    written without meta columns): the value for a simple key, ``f1:v1,f2:v2`` for a complex
    one, where a null value is ``__null__`` and an empty one ``__empty__``.

    Raises ``UnsupportedTableError`` for a key column whose text Arrow does not spell as
    Java does (floating point, timestamps): such a key could not be matched exactly."""
    texts = []
    for field in key_fields:
        column = data.column(field)
        kind = column.type
        if pa.types.is_floating(kind) or pa.types.is_timestamp(kind) or pa.types.is_nested(kind):
            raise UnsupportedTableError(
                f"record key field {field!r} is {kind}: fedcore cannot spell its values as Hudi's "
                "key generator does, so it cannot compute this table's record keys"
            )
        texts.append(pc.cast(column, pa.string()))
    joined = texts[0]
    if complex_keys:
        parts: list[Any] = []
        for index, (field, text) in enumerate(zip(key_fields, texts, strict=True)):
            spelled = pc.if_else(pc.equal(text, ""), "__empty__", pc.fill_null(text, "__null__"))
            parts.extend([("," if index else "") + f"{field}:", spelled])
        joined = pc.binary_join_element_wise(*parts, "")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def conform_to(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Rows in another (newer) schema of the table: a column the rows lack is null, narrower
    types widen, columns the schema lacks are left out (as in Hudi, the newest schema wins)."""
    if data.schema.equals(schema):
        return data
    columns = [
        data.column(field.name) if field.name in data.column_names else pa.nulls(data.num_rows, field.type)
        for field in schema
    ]
    return pa.table(dict(zip(schema.names, columns, strict=True))).cast(schema)


def strip_meta(data: pa.Table) -> pa.Table:
    return data.drop_columns([c for c in META_COLUMNS if c in data.column_names])


def conform(data: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """Input cast to the table's (meta-column-free) schema; the first write defines it."""
    data = strip_meta(data)
    if schema is None:
        return data
    missing = [name for name in schema.names if name not in data.column_names]
    extra = [name for name in data.column_names if name not in schema.names]
    if missing or extra:
        raise SchemaMismatchError(
            f"input columns differ from the table's: missing {missing or 'none'}, "
            f"unexpected {extra or 'none'}"
        )
    data = data.select(schema.names)
    try:
        return data.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise SchemaMismatchError(f"input does not fit the table schema: {exc}") from exc


def latest_per_key(keys: list[str], precombine: pa.Array | None) -> list[int]:
    """Row indices to keep when a batch holds one key several times: the greatest precombine value
    wins, the later row on a tie (Hudi's default combine before upsert)."""
    best: dict[str, int] = {}
    values = precombine.to_pylist() if precombine is not None else None
    for row, key in enumerate(keys):
        kept = best.get(key)
        if kept is None or values is None:
            best[key] = row
            continue
        new, old = values[row], values[kept]
        if old is None or (new is not None and new >= old):
            best[key] = row
    return sorted(best.values())


def take(data: pa.Table, rows: Sequence[int]) -> pa.Table:
    return data.take(pa.array(rows, pa.int64())) if len(rows) != data.num_rows else data
