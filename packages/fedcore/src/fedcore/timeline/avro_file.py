"""Hudi's Avro metadata files: one record in an object container file, no codec.

Hudi writes the metadata of its instants (commits from table version 8 on, cleans and rollbacks
in every version) this way, with its generated classes' schema in the header. The codecs
(``avro_commit_codec``, ``avro_service_codec``) build their schemas from the pieces here and
write through ``container``; ``commit_metadata.action_body`` reads any of them back.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, Final

import fastavro

MAGIC: Final = b"Obj\x01"
NAMESPACE: Final = "org.apache.hudi.avro.model"
#: Hudi's generated Java classes ask for ``java.lang.String``; the property is part of the
#: schema text Hudi embeds, so it is part of ours.
STRING: Final[dict[str, Any]] = {"type": "string", "avro.java.string": "String"}


def optional(name: str, type_: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", type_], "default": None}


def longs(*names: str) -> list[dict[str, Any]]:
    return [optional(name, "long") for name in names]


def strings(item: Any = STRING) -> dict[str, Any]:
    """An array of strings (of ``item``s)."""
    return {"type": "array", "items": item}


#: An object container file's header, as the Avro specification defines it.
_HEADER: Final = fastavro.parse_schema(
    {
        "type": "record",
        "name": "org.apache.avro.file.Header",
        "fields": [
            {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
            {"name": "meta", "type": {"type": "map", "values": "bytes"}},
            {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": 16}},
        ],
    }
)


class AvroSchema:
    """A schema's text as Hudi embeds it (Java's compact ``Schema.toString``) and its parsed form."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.text = json.dumps(schema, separators=(",", ":")).encode()
        self.parsed = fastavro.parse_schema(schema)


def container(schema: AvroSchema, record: dict[str, Any]) -> bytes:
    """One record in an object container file with no codec, the header as Hudi writes it
    (``avro.schema`` only: a missing ``avro.codec`` means none)."""
    block = io.BytesIO()
    fastavro.schemaless_writer(block, schema.parsed, record)
    sync = os.urandom(16)
    out = io.BytesIO()
    fastavro.schemaless_writer(
        out, _HEADER, {"magic": MAGIC, "meta": {"avro.schema": schema.text}, "sync": sync}
    )
    fastavro.schemaless_writer(out, "long", 1)  # records in the block
    fastavro.schemaless_writer(out, "long", len(block.getvalue()))
    out.write(block.getvalue())
    out.write(sync)
    return out.getvalue()
