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


_FROM_AVRO = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}


def field_types(avro_json: str | None) -> dict[str, pa.DataType]:
    """Arrow types of the top-level primitive fields (partition columns are primitives)."""
    if not avro_json:
        return {}
    try:
        record = json.loads(avro_json)
    except ValueError:
        return {}
    out: dict[str, pa.DataType] = {}
    for field in record.get("fields", []):
        kinds = field["type"] if isinstance(field["type"], list) else [field["type"]]
        for kind in kinds:
            if kind == "null":
                continue
            if isinstance(kind, dict) and kind.get("logicalType") == "date":
                out[field["name"]] = pa.date32()
            elif isinstance(kind, str) and kind in _FROM_AVRO:
                out[field["name"]] = _FROM_AVRO[kind]
            break
    return out
