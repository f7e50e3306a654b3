"""Hudi's meta columns and record keys, computed on Arrow tables.

Every base file starts with Hudi's five meta columns, so Hudi readers (and
hudi-rs) recognise a fedcore file, and so that an update can find the records
it replaces by ``_hoodie_record_key`` alone, without knowing the key fields.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fedcore import properties as P
from fedcore.exceptions import InvalidRecordsError, SchemaMismatchError, UnsupportedTableError
from fedcore.keygen.partitioning import PartitionScheme, value_texts

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


def with_meta_fields(schema: pa.Schema) -> pa.Schema:
    """A data schema with Hudi's five meta columns (strings) first, as base files hold them."""
    return pa.schema([pa.field(name, pa.string()) for name in META_COLUMNS] + list(schema))


def check_columns(data: pa.Table, fields: Sequence[str], what: str) -> None:
    missing = [f for f in fields if f not in data.column_names]
    if missing:
        raise InvalidRecordsError(
            f"the input has no {what} column {', '.join(map(repr, missing))}: add it to the input"
        )


def check_required_columns(
    names: Collection[str], record_key: Sequence[str], partition: Sequence[str], ordering: str | None = None
) -> None:
    """``InvalidRecordsError`` naming the first column missing from ``names`` (a write's input)
    of those that say which record a row is: a record key field, a partition field, or
    ``ordering`` (an upsert's ordering, precombine, field); the message says to add it.

    Refused whatever ``hoodie.datasource.write.reconcile.schema`` and
    ``hoodie.write.set.null.for.missing.columns`` say (they fill other missing columns with
    nulls): a null key is no key; a null partition value is Hudi's
    ``__HIVE_DEFAULT_PARTITION__``, another partition, where an upsert would insert a second
    copy of every stored key it updates; an upsert ranks the records of a key by their
    ordering values. Apache Hudi refuses a missing key field, and an upsert's missing
    ordering field; a missing partition field its key generators write to the default
    partition, which is the duplicate this refuses."""
    given = set(names)
    wanted = [(f, "a record key field of the table", _ADD_KEY) for f in record_key]
    wanted += [(f, "a partition field of the table", _ADD_PARTITION) for f in partition]
    if ordering:
        wanted.append((ordering, "the table's ordering (precombine) field", _ADD_ORDERING))
    for field, role, action in wanted:
        if field not in given:
            raise InvalidRecordsError(f"the input has no column {field!r}, {role}: {action}")


#: What a write whose input lacks a column of ``check_required_columns`` is told to do.
_ADD_KEY: Final = "add it (each record's key is spelled from it; it is never written as null)"
_ADD_PARTITION: Final = (
    "add it (each record's partition path is spelled from it; it is never written as null)"
)
_ADD_ORDERING: Final = (
    "add it, with a value in every record (an upsert keeps each key's record with the greatest)"
)


def check_keys(data: pa.Table, key_fields: Sequence[str]) -> None:
    """``InvalidRecordsError`` naming the first row whose record key has a null or empty
    value, or a complex key's value that would make two keys one (``check_complex_key_values``)."""
    _check_present(data, key_fields)
    if len(key_fields) > 1:
        check_complex_key_values(key_fields, [value_texts(data.column(f)) for f in key_fields])


def _check_present(data: pa.Table, key_fields: Sequence[str]) -> None:
    """``InvalidRecordsError`` naming the first row whose record key has a null or empty value."""
    check_columns(data, key_fields, "record key")
    missing = None
    for field in key_fields:
        column = data.column(field)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        bad = pc.is_null(column)
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
            bad = pc.or_kleene(bad, pc.equal(column, ""))
        missing = bad if missing is None else pc.or_kleene(missing, bad)
    if missing is not None and pc.any(missing).as_py():
        row = pc.index(missing, True).as_py()
        raise InvalidRecordsError(f"record {row} has a null or empty record key ({', '.join(key_fields)})")


def record_keys(data: pa.Table, key_fields: Sequence[str], key_generator: str) -> pa.Array:
    """Hudi's record keys, one string per row: the value for one simple key field,
    ``f1:v1,f2:v2`` otherwise (values spelled by ``value_text``), computed over whole columns."""
    _check_present(data, key_fields)
    texts = [value_texts(data.column(f)) for f in key_fields]
    if len(key_fields) == 1 and key_generator != P.COMPLEX_KEY_GENERATOR:
        return texts[0]
    if len(key_fields) > 1:
        check_complex_key_values(key_fields, texts)
    return _complex_keys(key_fields, texts)


#: What a value of a complex key may not hold or be: the separator of its parts (Hudi's key
#: ``f1:v1,f2:v2`` is read back by splitting at commas), and the placeholders Hudi writes for
#: a null or empty part.
KEY_PART_SEPARATOR: Final = ","
KEY_PART_PLACEHOLDERS: Final = ("__null__", "__empty__")


def check_complex_key_values(key_fields: Sequence[str], texts: Sequence[pa.Array]) -> None:
    """``InvalidRecordsError`` naming the field and value of a complex key part that would
    make two records' keys one string: Hudi joins the parts as ``f1:v1,f2:v2`` without
    escaping, so ``('x,b:y', 'z')`` and ``('x', 'y,b:z')`` both become ``a:x,b:y,b:z``, and
    an upsert of one would replace the other. With no comma in any value, the parts split
    back one way only."""
    for field, text in zip(key_fields, texts, strict=True):
        bad = pc.or_(
            pc.match_substring(text, KEY_PART_SEPARATOR), pc.is_in(text, pa.array(KEY_PART_PLACEHOLDERS))
        )
        if pc.any(bad).as_py():
            value = text.filter(pc.fill_null(bad, False))[0].as_py()
            raise InvalidRecordsError(
                f"record key field {field!r} has the value {value!r}: a part of a complex record key "
                f"({', '.join(key_fields)}) may not contain {KEY_PART_SEPARATOR!r} or be one of "
                f"{', '.join(KEY_PART_PLACEHOLDERS)}, or two records' keys could be the same string"
            )


def _complex_keys(key_fields: Sequence[str], texts: Sequence[Any]) -> pa.Array:
    """Hudi's complex keys, ``f1:v1,f2:v2``, from each field's values as text."""
    parts: list[Any] = []
    for index, (field, text) in enumerate(zip(key_fields, texts, strict=True)):
        parts.extend([("," if index else "") + f"{field}:", text])
    joined = pc.binary_join_element_wise(*parts, "")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


@dataclass(frozen=True)
class PartitionedRows:
    """Which partition each row goes to: ``paths[codes[row]]``."""

    codes: np.ndarray  # integers, one per row
    paths: list[str]

    def groups(self) -> dict[str, np.ndarray]:
        """The rows of each partition that has any, ascending (int64)."""
        if not self.paths:  # no rows at all
            return {}
        # Arrow's stable sort of small integers counts them (a pass, no comparisons).
        order = pc.sort_indices(pa.array(self.codes)).to_numpy().view(np.int64)
        counts = _counts(self.codes, len(self.paths))
        parts = np.split(order, np.cumsum(counts)[:-1])
        return {path: rows for path, rows in zip(self.paths, parts, strict=True) if len(rows)}

    def take(self, rows: np.ndarray) -> PartitionedRows:
        return PartitionedRows(self.codes[rows], self.paths)


#: Codes counted a slice at a time (``_counts``).
_COUNT_SLICE: Final = 1 << 20


def _counts(codes: np.ndarray, distinct: int) -> np.ndarray:
    """How many of ``codes`` are each of ``0..distinct-1``. ``np.bincount`` widens its input
    to int64 first: for millions of rows that copy is fresh memory (glibc maps blocks past
    32 MB anew on every call), which the kernel zeroes page by page: 180 ms for 10,000,000
    codes against 12 ms a slice at a time, each slice's copy reused."""
    counts = np.zeros(distinct, np.int64)
    for start in range(0, len(codes), _COUNT_SLICE):
        counts += np.bincount(codes[start : start + _COUNT_SLICE], minlength=distinct)
    return counts


def partition_rows(data: pa.Table, scheme: PartitionScheme) -> PartitionedRows:
    """Each row's partition path, computed once per distinct partition (with Hudi's escaping
    and the checks of ``PartitionScheme.path_of``), never once per row."""
    if not scheme.fields:
        return PartitionedRows(np.zeros(data.num_rows, np.int64), [""])
    check_columns(data, scheme.fields, "partition")
    encoded = [pc.dictionary_encode(pc.fill_null(value_texts(data.column(f)), "")) for f in scheme.fields]
    texts = [e.dictionary.to_pylist() for e in encoded]
    indices = [e.indices.to_numpy(zero_copy_only=False) for e in encoded]  # no nulls: no copy
    if len(encoded) == 1:
        codes, combos = indices[0], [[text] for text in texts[0]]
    else:
        combined = indices[0].astype(np.int64)
        for values, more in zip(texts[1:], indices[1:], strict=True):
            if int(combined.max(initial=0)) >= 2**62 // max(1, len(values)):
                combined = np.unique(combined, return_inverse=True)[1].reshape(-1)  # dense again
            combined = combined * len(values) + more
        _, first, codes = np.unique(combined, return_index=True, return_inverse=True)
        combos = [[texts[f][indices[f][row]] for f in range(len(encoded))] for row in first]
    found = [scheme.path_of_texts(combo) for combo in combos]
    if not found:
        return PartitionedRows(np.zeros(0, np.int64), [])
    paths = sorted(set(found))
    position = {path: index for index, path in enumerate(paths)}
    remap = np.array([position[path] for path in found], np.int64)
    codes = codes.reshape(-1)
    if len(paths) == len(found) and (remap == np.arange(len(remap))).all():
        return PartitionedRows(codes, paths)  # met in order already: no pass over the rows
    return PartitionedRows(remap[codes], paths)


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
        if not _spelled_by_cast(kind):
            raise UnsupportedTableError(
                f"record key field {field!r} is {kind}: fedcore cannot spell its values as Hudi's "
                "key generator does, so it cannot compute this table's record keys"
            )
        texts.append(pc.cast(column, pa.string()))
    if complex_keys:
        spelled = [pc.if_else(pc.equal(t, ""), "__empty__", pc.fill_null(t, "__null__")) for t in texts]
        return _complex_keys(key_fields, spelled)
    joined = texts[0]
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def stored_keys(data: pa.Table, key_fields: Sequence[str], key_generator: str, meta_fields: bool) -> pa.Array:
    """The record keys of stored rows (as text): their ``_hoodie_record_key``, or for a table
    written without meta fields (virtual keys, ``meta_fields`` False), computed from the key
    fields as Hudi's key generators spell them (``record_key_array``)."""
    if meta_fields:
        keys = data.column(RECORD_KEY)
        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        return keys if pa.types.is_string(keys.type) else keys.cast(pa.string())
    complex_keys = len(key_fields) > 1 or key_generator.strip() == P.COMPLEX_KEY_GENERATOR
    return record_key_array(data, key_fields, complex_keys)


def _spelled_by_cast(kind: pa.DataType) -> bool:
    """Whether Arrow's cast to text spells values of ``kind`` as Java's ``toString`` does (not
    floating point, timestamps or nested values)."""
    return not (pa.types.is_floating(kind) or pa.types.is_timestamp(kind) or pa.types.is_nested(kind))


def stored_key_columns(key_fields: Sequence[str], meta_fields: bool) -> list[str]:
    """The columns ``stored_keys`` reads: the meta column, or (virtual keys) the key fields."""
    return [RECORD_KEY] if meta_fields else list(key_fields)


def virtual_key_types_error(schema: pa.Schema, key_fields: Sequence[str]) -> UnsupportedTableError | None:
    """Why a table written without meta fields (virtual keys) could not spell the keys of rows
    in ``schema`` as Hudi's key generators do (None: it can): every read and upsert computes
    them, so a key fedcore cannot spell exactly is refused before it is written."""
    for field in key_fields:
        if field not in schema.names:
            continue
        kind = schema.field(field).type
        if not _spelled_by_cast(kind):
            return UnsupportedTableError(
                f"record key field {field!r} is {kind}: a table without meta fields "
                f"({P.POPULATE_META_FIELDS}=false) computes its keys from their values, and fedcore "
                "cannot spell such values as Hudi's key generators do; give the key as text or integers, "
                f"or keep meta fields for this table ({P.POPULATE_META_FIELDS}=true, fixed when a table is "
                "created)"
            )
    return None


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


def conform(data: pa.Table, schema: pa.Schema | None, keys: Sequence[str] = ()) -> pa.Table:
    """Input in the write's schema (``evolve``'s; the first write's is the input's own): a
    column the input lacks (``evolve`` allowed it) is null, narrower types cast up. ``keys``
    (record key and partition columns) are cast only exactly (``conform_keys``)."""
    data = strip_meta(data)
    if schema is None:
        return data
    extra = [name for name in data.column_names if name not in schema.names]
    if extra:
        raise SchemaMismatchError(f"input columns {extra} are not columns of the table")
    data = conform_keys(data, schema, keys)
    try:
        return conform_to(data, schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise SchemaMismatchError(f"input does not fit the table schema: {exc}") from exc


def conform_keys(data: pa.Table, schema: pa.Schema | None, keys: Sequence[str]) -> pa.Table:
    """``data`` with its record key and partition columns (``keys``) in the table's types.

    A key column never changes type through a write: a record's key and partition path are
    spelled from its values, so ``1.0`` for a table's ``1`` would be another record (Hudi's
    key ``'1.0'``, folder ``bucket=1.0``), and every later upsert would insert a second copy.
    A column of another type is cast only where ``exact_key_cast`` allows the pair of types
    and every value converts exactly (floats that are all whole numbers into an integer key:
    what pandas makes of an integer column with a null in it); anything else is refused
    with ``SchemaMismatchError`` naming the column, both types and a value that does not
    fit, before anything is written."""
    if schema is None:
        return data
    for name in keys:
        if name not in data.column_names or name not in schema.names:
            continue  # a missing key column is refused where keys are checked
        want = schema.field(name).type
        column = data.column(name)
        if column.type == want:
            continue
        if not exact_key_cast(want, column.type):
            raise key_type_error(name, want, column.type)
        data = data.set_column(data.schema.get_field_index(name), name, _exact_cast(name, column, want))
    return data


def key_type_error(name: str, table: pa.DataType, given: pa.DataType) -> SchemaMismatchError:
    return SchemaMismatchError(
        f"key column {name!r} is {table} in the table; the input's {given} is not cast to it, as "
        "its records' keys or partition paths would change"
    )


#: Largest magnitude up to which every whole number is a float64 (beyond, a float that came
#: from an integer column may already have lost digits).
_EXACT_FLOAT_INTEGERS: Final = 2**53


def exact_key_cast(table: pa.DataType, given: pa.DataType) -> bool:
    """Whether a key column of type ``given`` may be written into a table whose column is
    ``table`` (values checked as they are cast): the same kind of value whose text Hudi's key
    generators spell alike in both types (integers of any width, whole floats into integers,
    strings, binaries, dates, timestamps of one zone in any unit)."""
    if pa.types.is_dictionary(given):
        return exact_key_cast(table, given.value_type)
    if pa.types.is_null(given):
        return True  # no values: nulls, refused as keys where keys are checked
    kinds = (_kind(table), _kind(given))
    if kinds in (("integer", "integer"), ("integer", "floating")):
        return True
    if kinds[0] != kinds[1] or kinds[0] not in ("string", "binary", "date", "timestamp"):
        return False
    return kinds[0] != "timestamp" or table.tz == given.tz


def _exact_cast(name: str, column: pa.ChunkedArray, want: pa.DataType) -> pa.ChunkedArray:
    """``column`` as ``want``, every value unchanged (``SchemaMismatchError`` names one that
    would change: truncated, out of range, or a float too large to be a whole number exactly)."""
    values = column
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if pa.types.is_floating(values.type):
        too_big = pc.greater_equal(pc.abs(values), _EXACT_FLOAT_INTEGERS)
        if pc.any(too_big).as_py():
            bad = values.filter(pc.fill_null(too_big, False))[0].as_py()
            raise SchemaMismatchError(
                f"key column {name!r} is {want} in the table; the input's {column.type} value {bad!r} "
                "is beyond the whole numbers a float holds exactly"
            )
    try:
        return values.cast(want, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(
            f"key column {name!r} is {want} in the table; the input's {column.type} values do not all "
            f"convert to it exactly: {exc}"
        ) from exc


def evolve(
    table: pa.Schema, incoming: pa.Schema, *, fill_missing: bool, keys: Sequence[str] = ()
) -> pa.Schema:
    """The table's schema after a write of rows in ``incoming``, as Hudi's Spark writer
    evolves it: a new column is added (nullable: older records have none); a wider type
    replaces the table's (int -> long, float -> double, an integer -> a floating point);
    a narrower input type is cast up to the table's; a column the input lacks is written as
    null when ``fill_missing`` (``hoodie.datasource.write.reconcile.schema``) and the column
    is nullable. Anything else is refused, naming the column (``SchemaMismatchError``).
    ``keys`` (record key and partition columns) keep the table's type whatever the input's:
    their values are cast exactly or refused (``conform_keys``); one the input lacks is
    refused (``InvalidRecordsError``), never filled with nulls."""
    incoming = pa.schema([f for f in incoming if f.name not in META_COLUMNS])
    fields = []
    for field in table:
        index = incoming.get_field_index(field.name)
        if index < 0:
            missing = f"the input has no column {field.name!r}"
            if field.name in keys:  # never filled: see ``check_required_columns``
                raise InvalidRecordsError(
                    f"{missing}, a record key or partition field of the table: add it (records' keys "
                    "and partition paths are spelled from it, so it is never written as null)"
                )
            if not field.nullable:
                raise SchemaMismatchError(f"{missing} of the table, which is not nullable: add it")
            if not fill_missing:
                raise SchemaMismatchError(
                    f"{missing} of the table: set {P.RECONCILE_SCHEMA}=true to write it as null"
                )
            fields.append(field)
            continue
        given = incoming.field(index).type
        if field.name in keys:
            if given != field.type and not exact_key_cast(field.type, given):
                raise key_type_error(field.name, field.type, given)
            fields.append(field)
            continue
        fields.append(field.with_type(_written_type(field.name, field.type, given)))
    fields.extend(f.with_nullable(True) for f in incoming if f.name not in table.names)
    return pa.schema(fields)


def _written_type(name: str, table: pa.DataType, given: pa.DataType) -> pa.DataType:
    """A column's type after a write of ``given`` values into it (see ``evolve``)."""
    if given == table or pa.types.is_null(given):  # nulls only (an empty input's): any type
        return table
    if widens(table, given):
        return given
    kinds = (_kind(table), _kind(given))
    if kinds == ("floating", "integer") or (kinds[0] == kinds[1] and kinds[0] != "other"):
        return table  # cast to the table's (checked as the rows are)
    if pa.types.is_nested(table) and given.id == table.id:
        return table  # the same nesting (its nullability may differ): cast as the rows are
    raise SchemaMismatchError(
        f"column {name!r} is {table} in the table; the input's {given} neither is nor widens to it"
    )


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether ``new`` holds ``old``'s values as a wider type, as Hudi evolves a column (and
    Avro promotes): a wider integer or floating point, or a floating point for an integer."""
    kinds = (_kind(old), _kind(new))
    if kinds in (("integer", "integer"), ("floating", "floating")):
        return bool(new.bit_width > old.bit_width)
    return kinds == ("integer", "floating")


def _kind(data_type: pa.DataType) -> str:
    """Types a column may take either of (representations of one kind of value)."""
    if pa.types.is_integer(data_type):
        return "integer"
    if pa.types.is_floating(data_type):
        return "floating"
    for kind, test in (
        (
            "string",
            lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t),
        ),
        (
            "binary",
            lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t),
        ),
        ("timestamp", pa.types.is_timestamp),
        ("date", pa.types.is_date),
        ("decimal", pa.types.is_decimal),
    ):
        if test(data_type):
            return kind
    if pa.types.is_dictionary(data_type):
        return _kind(data_type.value_type)
    return "other"


def latest_per_key(partitions: np.ndarray, keys: pa.Array, precombine: pa.ChunkedArray | None) -> np.ndarray:
    """Row indices (ascending) to keep when a batch holds one (partition, key) several times:
    the greatest precombine value wins, a null the least, the later row on a tie (Hudi's
    default combine before upsert). One sort of the batch, no loop over rows."""
    rows = np.arange(len(keys), dtype=np.int64)
    columns = {"partition": partitions, "key": keys}
    if precombine is not None:
        columns["has_precombine"] = pc.is_valid(precombine)  # a null ranks below any value
        columns["precombine"] = precombine
    columns["row"] = rows
    ranked = pa.table(columns).sort_by([(name, "ascending") for name in columns])
    if ranked.num_rows < 2:
        return rows
    part, key = ranked.column("partition"), ranked.column("key")
    same_as_next = pc.and_(
        pc.equal(part.slice(0, len(part) - 1), part.slice(1)),
        pc.equal(key.slice(0, len(key) - 1), key.slice(1)),
    )
    last = np.append(~same_as_next.to_numpy(), True)
    return np.sort(ranked.column("row").to_numpy()[last])
