"""A table's schema through its writes: input conformed to it, the schema evolved by a write
(new columns, wider types), key columns cast only exactly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from fedcore import properties as P
from fedcore.exceptions import InvalidRecordsError, SchemaMismatchError
from fedcore.schema.meta import META_COLUMNS, strip_meta


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
