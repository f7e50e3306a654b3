"""The table schema as Hudi records it: an Avro schema in each commit's ``extraMetadata``.

Hudi tools read the schema from there, and fedcore's reader needs the types of
the partition columns to compare filter literals with partition values before
opening any data file.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

_PRIMITIVES: list[tuple[Any, str]] = [
    (pa.types.is_boolean, "boolean"),
    (lambda t: pa.types.is_integer(t) and t.bit_width <= 32, "int"),
    (pa.types.is_integer, "long"),
    (lambda t: pa.types.is_floating(t) and t.bit_width <= 32, "float"),
    (pa.types.is_floating, "double"),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "bytes"),
]


def _avro_type(arrow: pa.DataType, name: str) -> Any:
    if pa.types.is_date32(arrow) or pa.types.is_date64(arrow):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(arrow):
        unit = "millis" if arrow.unit in ("s", "ms") else "micros"
        return {"type": "long", "logicalType": f"timestamp-{unit}"}
    if pa.types.is_decimal(arrow):
        return {"type": "bytes", "logicalType": "decimal", "precision": arrow.precision, "scale": arrow.scale}
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return {"type": "array", "items": _nullable(_avro_type(arrow.value_type, f"{name}_item"))}
    if pa.types.is_struct(arrow):
        return _record(name, arrow)
    if pa.types.is_map(arrow):
        return {"type": "map", "values": _nullable(_avro_type(arrow.item_type, f"{name}_value"))}
    for test, avro in _PRIMITIVES:
        if test(arrow):
            return avro
    return "string"


def _nullable(avro: Any) -> list[Any]:
    return ["null", avro]


def _record(name: str, fields: pa.StructType | pa.Schema) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "fields": [
            {"name": f.name, "type": _nullable(_avro_type(f.type, f.name)), "default": None} for f in fields
        ],
    }


def to_avro_json(schema: pa.Schema, table_name: str) -> str:
    record = _record(f"{table_name}_record", schema)
    record["namespace"] = f"hoodie.{table_name}"
    return json.dumps(record, separators=(",", ":"))


_FROM_AVRO: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
    "null": pa.null(),
}
#: Logical types as Spark's Parquet files hold them (and pyarrow reads them back).
_LOGICAL: dict[str, pa.DataType] = {
    "date": pa.date32(),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
    "uuid": pa.string(),
}


def arrow_type(avro: Any, named: dict[str, pa.DataType] | None = None) -> pa.DataType:
    """The Arrow type of an Avro type (JSON form), nullable unions unwrapped.

    Raises ``ValueError`` for what has no single Arrow type (a union of two non-null
    types) or an unknown type name."""
    named = {} if named is None else named
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"a union of {len(branches)} non-null types has no single Arrow type")
        return arrow_type(branches[0], named)
    if isinstance(avro, str):
        if avro in _FROM_AVRO:
            return _FROM_AVRO[avro]
        if avro in named or avro.rsplit(".", 1)[-1] in named:
            return named.get(avro) or named[avro.rsplit(".", 1)[-1]]
        raise ValueError(f"unknown Avro type {avro!r}")
    kind = avro.get("type")
    logical = avro.get("logicalType")
    if logical == "decimal":
        return pa.decimal128(int(avro["precision"]), int(avro.get("scale", 0)))
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    if kind == "record":
        fields = [
            pa.field(f["name"], arrow_type(f["type"], named), nullable=True) for f in avro.get("fields", [])
        ]
        result: pa.DataType = pa.struct(fields)
    elif kind == "array":
        result = pa.list_(arrow_type(avro["items"], named))
    elif kind == "map":
        result = pa.map_(pa.string(), arrow_type(avro["values"], named))
    elif kind == "enum":
        result = pa.string()
    elif kind == "fixed":
        result = pa.binary(int(avro["size"]))
    else:
        return arrow_type(kind, named)
    if "name" in avro:
        named[avro["name"]] = result
        if avro.get("namespace"):
            named[f"{avro['namespace']}.{avro['name']}"] = result
    return result


def arrow_schema(avro_json: str) -> pa.Schema:
    """The Arrow schema of a table's Avro record schema (``ValueError`` if it is none)."""
    record = json.loads(avro_json)
    if not isinstance(record, dict) or record.get("type") != "record":
        raise ValueError("the schema is not an Avro record")
    struct = arrow_type(record)
    return pa.schema(list(struct))


def field_types(avro_json: str | None) -> dict[str, pa.DataType]:
    """Arrow types of the top-level fields; empty when there is no (readable) schema."""
    if not avro_json:
        return {}
    try:
        schema = arrow_schema(avro_json)
    except (ValueError, KeyError, TypeError):
        return {}
    return {field.name: field.type for field in schema}
