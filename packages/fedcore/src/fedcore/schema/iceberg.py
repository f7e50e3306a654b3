"""The Iceberg schema of a table's files, with field ids that stay put as the schema evolves.

fed's Parquet files carry no Iceberg field ids: readers map columns by name through the
table's name mapping (``schema.name-mapping.default``), and a column keeps its id for as
long as its name lives, so files written before a column was added read it as null."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import create_mapping_from_schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from fedcore.exceptions import UnsupportedTableError


def iceberg_schema(arrow: pa.Schema, previous: Schema | None, last_column_id: int) -> Schema:
    """The Iceberg form of ``arrow``: a column (or nested field) named as in ``previous``
    keeps its id there; a new one takes the next id after ``last_column_id``. Every field is
    optional: older files may lack a column added since."""
    known = dict(_ids_by_path(previous.as_struct(), "")) if previous is not None else {}
    counter = itertools.count(last_column_id + 1)

    def next_id(path: str) -> int:
        return known[path] if path in known else next(counter)

    fields = [
        NestedField(next_id(f.name), f.name, _iceberg_type(f.type, f.name, next_id), required=False)
        for f in arrow
    ]
    return Schema(*fields, schema_id=0 if previous is None else previous.schema_id)


def same_fields(a: Schema, b: Schema) -> bool:
    """Whether two schemas have the same fields (ids, names, types), whatever their schema ids."""
    return a.as_struct() == b.as_struct()


def name_mapping_json(schema: Schema) -> str:
    """``schema.name-mapping.default``: each column's name to its id, for files without ids."""
    return create_mapping_from_schema(schema).model_dump_json()


def _ids_by_path(struct: StructType, prefix: str) -> Iterator[tuple[str, int]]:
    for field in struct.fields:
        path = f"{prefix}{field.name}"
        yield path, field.field_id
        yield from _nested_ids(field.field_type, path)


def _nested_ids(kind: IcebergType, path: str) -> Iterator[tuple[str, int]]:
    if isinstance(kind, StructType):
        yield from _ids_by_path(kind, f"{path}.")
    elif isinstance(kind, ListType):
        yield f"{path}.element", kind.element_id
        yield from _nested_ids(kind.element_type, f"{path}.element")
    elif isinstance(kind, MapType):
        yield f"{path}.key", kind.key_id
        yield f"{path}.value", kind.value_id
        yield from _nested_ids(kind.key_type, f"{path}.key")
        yield from _nested_ids(kind.value_type, f"{path}.value")


def _iceberg_type(kind: pa.DataType, path: str, next_id: Callable[[str], int]) -> IcebergType:
    if pa.types.is_struct(kind):
        return StructType(
            *(
                NestedField(
                    next_id(f"{path}.{f.name}"),
                    f.name,
                    _iceberg_type(f.type, f"{path}.{f.name}", next_id),
                    required=False,
                )
                for f in kind
            )
        )
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        element = f"{path}.element"
        return ListType(
            next_id(element), _iceberg_type(kind.value_type, element, next_id), element_required=False
        )
    if pa.types.is_map(kind):
        key, value = f"{path}.key", f"{path}.value"
        return MapType(
            next_id(key),
            _iceberg_type(kind.key_type, key, next_id),
            next_id(value),
            _iceberg_type(kind.item_type, value, next_id),
            value_required=False,
        )
    return primitive_type(kind, path)


def primitive_type(kind: pa.DataType, column: str) -> PrimitiveType:
    """The Iceberg type Parquet files of this Arrow type are read as; a type Iceberg readers
    would misread (unsigned integers, millisecond or nanosecond timestamps, ...) is refused
    with ``UnsupportedTableError`` rather than published."""
    if pa.types.is_boolean(kind):
        return BooleanType()
    if pa.types.is_int8(kind) or pa.types.is_int16(kind) or pa.types.is_int32(kind):
        return IntegerType()  # stored as Parquet INT32
    if pa.types.is_int64(kind):
        return LongType()
    if pa.types.is_float32(kind):
        return FloatType()
    if pa.types.is_float64(kind):
        return DoubleType()
    if pa.types.is_decimal128(kind):
        return DecimalType(kind.precision, kind.scale)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return StringType()
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return BinaryType()
    if pa.types.is_fixed_size_binary(kind):
        return FixedType(kind.byte_width)
    if pa.types.is_date32(kind):
        return DateType()
    if pa.types.is_timestamp(kind) and kind.unit == "us":
        return TimestampType() if kind.tz is None else TimestamptzType()
    raise UnsupportedTableError(
        f"column {column!r} is {kind} in the table's files, which has no Iceberg type its readers "
        "read exactly (Iceberg timestamps are microseconds; there are no unsigned integers); "
        "the table cannot be published as an Iceberg view"
    )
