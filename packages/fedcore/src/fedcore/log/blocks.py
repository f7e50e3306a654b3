"""Hudi's log files (merge-on-read): blocks framed in a log file, decoded to Arrow.

A merge-on-read file slice is a base file plus log files, each a sequence of
blocks: ``#HUDI#``, the block's length, the log format version, the block type,
a header (instant time, schema, the target of a command), the content, a footer
and the block's total length. Data blocks hold records (Avro or Parquet), delete
blocks hold keys, command blocks roll back earlier blocks of a failed instant.
This module frames, decodes and encodes blocks; ``log.merge`` decides which apply.

Formats come from libraries: Parquet blocks are whole Parquet files (pyarrow),
Avro blocks are Avro datums, each after a 4-byte length, decoded by fastavro as
one in-memory Avro container whose record type is ``(fixed(4) length, record)``,
so the framing is decoded with the records, without a Python loop over them.
Anything this module cannot decode exactly (HFile and CDC blocks, log-compacted
or partial-update blocks, older block versions) raises ``UnsupportedLogBlockError``
naming it; a block whose framing is broken is a corrupt block, which Hudi's
readers skip (a writer died while appending it), and so does this one.
"""

from __future__ import annotations

import enum
import io
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import fastavro
import fastavro.read
import fastavro.schema
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fedcore.exceptions import CorruptLogFileError, UnsupportedLogBlockError
from fedcore.io.parquet import read_parquet
from fedcore.schema.avro import arrow_type

MAGIC: Final = b"#HUDI#"
LOG_FORMAT_VERSION: Final = 1
#: The version written first in Avro data and delete block contents by Hudi 0.10 and later.
BLOCK_CONTENT_VERSION: Final = 3


class BlockType(enum.IntEnum):
    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7


#: The only command block type: roll back the blocks of ``TARGET_INSTANT_TIME``.
ROLLBACK_COMMAND: Final = "0"


@dataclass(frozen=True)
class LogBlock:
    """One block of a log file; ``content`` is still encoded (see ``data_records``)."""

    type: BlockType
    header: dict[int, str]
    content: bytes
    where: str  # log file and offset, for errors

    @property
    def instant(self) -> str:
        return self.header.get(HeaderKey.INSTANT_TIME, "")

    @property
    def target_instant(self) -> str:
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME, "")

    @property
    def is_rollback(self) -> bool:
        return (
            self.type == BlockType.COMMAND
            and self.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == ROLLBACK_COMMAND
        )


def read_blocks(data: bytes, path: str) -> list[LogBlock]:
    """Every block of a log file, in order; broken framing gives a ``CORRUPT`` block up to
    the next ``#HUDI#`` (as Hudi's reader makes one)."""
    blocks: list[LogBlock] = []
    position = 0
    while position < len(data):
        if data[position : position + len(MAGIC)] != MAGIC:
            raise CorruptLogFileError(f"{path}: no log block starts at byte {position}")
        block, end = _read_block(data, position, path)
        blocks.append(block)
        position = end
    return blocks


def _read_block(data: bytes, start: int, path: str) -> tuple[LogBlock, int]:
    where = f"{path} at byte {start}"
    body = start + len(MAGIC)
    try:
        (length,) = struct.unpack_from(">q", data, body)
        end = body + 8 + length
        if length < 0 or end > len(data) or (end < len(data) and data[end : end + len(MAGIC)] != MAGIC):
            raise ValueError("the block's length does not end at a block boundary")
        version, kind = struct.unpack_from(">ii", data, body + 8)
        if version != LOG_FORMAT_VERSION:
            raise UnsupportedLogBlockError(
                f"{where}: log format version {version}; fedcore reads version {LOG_FORMAT_VERSION}"
            )
        header, position = _read_metadata(data, body + 16)
        (content_length,) = struct.unpack_from(">q", data, position)
        position += 8
        content = data[position : position + content_length]
        if len(content) != content_length:
            raise ValueError("the content runs past the block")
        _footer, position = _read_metadata(data, position + content_length)
        if position + 8 != end:
            raise ValueError("the block's parts do not add up to its length")
    except (struct.error, ValueError, UnicodeDecodeError):
        following = data.find(MAGIC, body)
        end = len(data) if following < 0 else following
        return LogBlock(BlockType.CORRUPT, {}, b"", where), end
    try:
        block_type = BlockType(kind)
    except ValueError:
        raise UnsupportedLogBlockError(f"{where}: unknown log block type {kind}") from None
    return LogBlock(block_type, header, content, where), end


def _read_metadata(data: bytes, position: int) -> tuple[dict[int, str], int]:
    (count,) = struct.unpack_from(">i", data, position)
    position += 4
    if count < 0:
        raise ValueError("negative header size")
    entries: dict[int, str] = {}
    for _ in range(count):  # a handful of header entries per block
        key, size = struct.unpack_from(">ii", data, position)
        position += 8
        if size < 0 or position + size > len(data):
            raise ValueError("a header value runs past the block")
        entries[key] = data[position : position + size].decode()
        position += size
    return entries, position


def check_applicable(block: LogBlock) -> None:
    """Raise ``UnsupportedLogBlockError`` for a block whose effect fedcore cannot reproduce."""
    if block.type in (BlockType.HFILE_DATA, BlockType.CDC_DATA):
        raise UnsupportedLogBlockError(
            f"{block.where}: {block.type.name} blocks are not read by fedcore "
            "(it reads Avro and Parquet data blocks, delete blocks and rollback command blocks)"
        )
    if HeaderKey.COMPACTED_BLOCK_TIMES in block.header:
        raise UnsupportedLogBlockError(
            f"{block.where}: a log-compacted block (minor compaction) is not read by fedcore"
        )
    if block.header.get(HeaderKey.IS_PARTIAL, "false").strip().lower() == "true":
        raise UnsupportedLogBlockError(f"{block.where}: a partial-update block is not read by fedcore")
    if block.type == BlockType.COMMAND and not block.is_rollback:
        command = block.header.get(HeaderKey.COMMAND_BLOCK_TYPE)
        raise UnsupportedLogBlockError(f"{block.where}: command block type {command!r} is not a rollback")


# --- data blocks ---------------------------------------------------------------------------


def data_records(block: LogBlock) -> pa.Table:
    """The records of an Avro or Parquet data block, as Arrow (meta columns included)."""
    check_applicable(block)
    if block.type == BlockType.PARQUET_DATA:
        try:
            return read_parquet(block.content)
        except (pa.ArrowException, OSError) as exc:
            raise CorruptLogFileError(f"{block.where}: the Parquet data block cannot be read: {exc}") from exc
    if block.type != BlockType.AVRO_DATA:
        raise ValueError(f"{block.type.name} is not a data block")
    schema_json = block.header.get(HeaderKey.SCHEMA)
    if not schema_json:
        raise CorruptLogFileError(f"{block.where}: an Avro data block without a schema in its header")
    count, datums = _avro_content(block)
    try:
        writer = json.loads(schema_json)
        record_type = arrow_type(writer)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UnsupportedLogBlockError(
            f"{block.where}: the block's Avro schema has no Arrow form: {exc}"
        ) from exc
    try:
        decoded = _framed_records(writer, count, datums)
        rows = pa.array(decoded, pa.struct([pa.field("record", record_type)])).field("record")
    except (*_AVRO_ERRORS, pa.ArrowException) as exc:
        raise CorruptLogFileError(f"{block.where}: the Avro data block cannot be decoded: {exc}") from exc
    return pa.Table.from_struct_array(rows)


def avro_records(block: LogBlock) -> list[dict[str, Any]]:
    """The records of an Avro data block as dicts, by its header's schema: for blocks of
    metadata (Hudi's archived timeline), whose nested unions have no Arrow form; a data
    path decodes with ``data_records``."""
    if block.type != BlockType.AVRO_DATA:
        raise ValueError(f"{block.type.name} is not an Avro data block")
    count, datums = _avro_content(block)
    try:
        writer = json.loads(block.header.get(HeaderKey.SCHEMA) or "")
        return [row["record"] for row in _framed_records(writer, count, datums)]
    except _AVRO_ERRORS as exc:
        raise CorruptLogFileError(f"{block.where}: the Avro data block cannot be decoded: {exc}") from exc


def _avro_content(block: LogBlock) -> tuple[int, bytes]:
    """An Avro data block's record count and datums, its content version checked."""
    content = block.content
    version, count = struct.unpack_from(">ii", content, 0) if len(content) >= 8 else (None, 0)
    if version != BLOCK_CONTENT_VERSION:
        raise UnsupportedLogBlockError(
            f"{block.where}: Avro data block version {version}; fedcore reads version {BLOCK_CONTENT_VERSION}"
        )
    return count, content[8:]


def _framed_records(writer: Any, count: int, datums: bytes) -> list[Any]:
    """Decode ``count`` datums of ``writer``'s schema, each after its 4-byte length, as one
    in-memory Avro container of ``(fixed(4) length, record)`` records."""
    framed = {
        "type": "record",
        "name": "Framed",
        "namespace": "fedcore.log",
        "fields": [
            {"name": "length", "type": {"type": "fixed", "name": "Length", "size": 4}},
            {"name": "record", "type": writer},
        ],
    }
    return list(fastavro.reader(io.BytesIO(_container(framed, count, datums))))


#: What fastavro raises for bytes or a schema it cannot decode.
_AVRO_ERRORS: Final = (
    ValueError,
    TypeError,
    LookupError,  # fastavro's compiled reader runs off the end of short data with an IndexError
    EOFError,
    fastavro.read.SchemaResolutionError,
    fastavro.schema.SchemaParseException,
)


def _container(schema: dict[str, Any], count: int, datums: bytes) -> bytes:
    """An Avro object container holding ``datums`` (``count`` records) as one block."""
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), [], codec="null")
    header = out.getvalue()
    sync = header[-16:]
    return header + _zigzag(count) + _zigzag(len(datums)) + datums + sync


def _zigzag(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while encoded > 0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


# --- delete blocks -------------------------------------------------------------------------

#: The wrappers of ``HoodieDeleteRecord.orderingVal``, in union order after "null", with the
#: Arrow types their values have. Each wrapper's field is renamed after its branch when
#: decoding (the binary encoding does not depend on field names), so the branch a record
#: took is the one non-null field of a struct.
ORDERING_WRAPPERS: Final[tuple[tuple[str, Any, pa.DataType], ...]] = (
    ("BooleanWrapper", "boolean", pa.bool_()),
    ("IntWrapper", "int", pa.int32()),
    ("LongWrapper", "long", pa.int64()),
    ("FloatWrapper", "float", pa.float32()),
    ("DoubleWrapper", "double", pa.float64()),
    ("BytesWrapper", "bytes", pa.binary()),
    ("StringWrapper", "string", pa.string()),
    ("DateWrapper", "int", pa.int32()),
    (
        "DecimalWrapper",
        {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
        pa.decimal128(30, 15),
    ),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}, pa.time64("us")),
    ("TimestampMicrosWrapper", "long", pa.int64()),
)
_ARRAY_WRAPPER: Final = "ArrayWrapper"


def _delete_schema() -> dict[str, Any]:
    wrappers: list[Any] = [
        {"type": "record", "name": name, "fields": [{"name": name, "type": avro}]}
        for name, avro, _ in ORDERING_WRAPPERS
    ]
    # Hudi 1.x's composite ordering values: decoded so they can be recognised and refused.
    element: list[Any] = ["null", *(name for name, _, _ in ORDERING_WRAPPERS)]
    element.append(
        {
            "type": "record",
            "name": "LocalDateWrapper",
            "fields": [{"name": "LocalDateWrapper", "type": "int"}],
        }
    )
    wrappers.append(
        {
            "type": "record",
            "name": _ARRAY_WRAPPER,
            "fields": [{"name": _ARRAY_WRAPPER, "type": ["null", {"type": "array", "items": element}]}],
        }
    )
    record = {
        "type": "record",
        "name": "HoodieDeleteRecord",
        "fields": [
            {"name": "recordKey", "type": ["null", "string"]},
            {"name": "partitionPath", "type": ["null", "string"]},
            {"name": "orderingVal", "type": ["null", *wrappers]},
        ],
    }
    return {
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [{"name": "deleteRecordList", "type": {"type": "array", "items": record}}],
    }


_DELETE_SCHEMA: Final = fastavro.parse_schema(_delete_schema())
#: A decoded wrapper is ``{name: value}``, so a union of them is a struct with a field per name.
_WRAPPED: Final = [pa.field(name, arrow) for name, _, arrow in ORDERING_WRAPPERS]
_COMPOSITE_ITEM: Final = pa.struct([*_WRAPPED, pa.field("LocalDateWrapper", pa.int32())])
_ORDERING_STRUCT: Final = pa.struct([*_WRAPPED, pa.field(_ARRAY_WRAPPER, pa.list_(_COMPOSITE_ITEM))])
_DELETE_STRUCT: Final = pa.struct(
    [("recordKey", pa.string()), ("partitionPath", pa.string()), ("orderingVal", _ORDERING_STRUCT)]
)


def delete_records(block: LogBlock) -> pa.Table:
    """The keys a delete block deletes: ``record_key``, ``partition_path`` and one column per
    ordering wrapper (``orderingVal`` as the writer wrapped it; all null for a record that
    carries none)."""
    check_applicable(block)
    content = block.content
    version, size = struct.unpack_from(">ii", content, 0) if len(content) >= 8 else (None, 0)
    if version != BLOCK_CONTENT_VERSION:
        raise UnsupportedLogBlockError(
            f"{block.where}: delete block version {version} (Java-serialized before Hudi 0.14); "
            f"fedcore reads version {BLOCK_CONTENT_VERSION}"
        )
    try:
        decoded: Any = fastavro.schemaless_reader(io.BytesIO(content[8 : 8 + size]), _DELETE_SCHEMA, None)
        records = pa.array(decoded["deleteRecordList"], _DELETE_STRUCT)
    except (*_AVRO_ERRORS, pa.ArrowException) as exc:
        raise CorruptLogFileError(f"{block.where}: the delete block cannot be decoded: {exc}") from exc
    ordering = records.field("orderingVal")
    wrapped = dict(
        zip([f.name for f in _ORDERING_STRUCT], ordering.flatten(), strict=True)
    )  # parent nulls applied
    composite = wrapped[_ARRAY_WRAPPER]
    if composite.null_count != len(composite):
        raise UnsupportedLogBlockError(f"{block.where}: deletes with composite ordering values (Hudi 1.x)")
    columns = {"record_key": records.field("recordKey"), "partition_path": records.field("partitionPath")}
    for name, _, _ in ORDERING_WRAPPERS:
        columns[name] = wrapped[name]
    return pa.table(columns)


def wrapper_of(arrow: pa.DataType) -> str | None:
    """The ordering wrapper Hudi puts a value of this Arrow type in (None: no wrapper)."""
    if pa.types.is_boolean(arrow):
        return "BooleanWrapper"
    if pa.types.is_integer(arrow):
        return "LongWrapper" if arrow.bit_width == 64 else "IntWrapper"
    if pa.types.is_float32(arrow):
        return "FloatWrapper"
    if pa.types.is_float64(arrow):
        return "DoubleWrapper"
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return "StringWrapper"
    if pa.types.is_binary(arrow):
        return "BytesWrapper"
    if pa.types.is_date(arrow):
        return "DateWrapper"
    if pa.types.is_decimal(arrow):
        return "DecimalWrapper"
    if pa.types.is_time(arrow):
        return "TimeMicrosWrapper"
    if pa.types.is_timestamp(arrow):
        return "TimestampMicrosWrapper"
    return None


# --- writing -------------------------------------------------------------------------------
#
# The inverse of the above, for merge-on-read writes: blocks framed as Hudi's log writer frames
# them (log format version 1), their contents encoded over whole Arrow arrays.


def encode_block(kind: BlockType, header: Mapping[HeaderKey, str], content: bytes) -> bytes:
    """One framed block: ``#HUDI#``, its length, version and type, the header, the content, an
    empty footer, and the block's size from its magic on (Hudi's reverse reader uses it)."""
    body = b"".join(
        [
            struct.pack(">ii", LOG_FORMAT_VERSION, kind),
            _encode_metadata(header),
            struct.pack(">q", len(content)),
            content,
            _encode_metadata({}),
        ]
    )
    length = len(body) + 8  # the reverse pointer is part of the block
    return MAGIC + struct.pack(">q", length) + body + struct.pack(">q", len(MAGIC) + length)


def _encode_metadata(entries: Mapping[HeaderKey, str]) -> bytes:
    parts = [struct.pack(">i", len(entries))]
    for key, value in entries.items():  # a handful of header entries per block
        encoded = value.encode()
        parts.append(struct.pack(">ii", key, len(encoded)) + encoded)
    return b"".join(parts)


def parquet_data_block(records: pa.Table, instant: str, avro_schema: str, compression: str = "gzip") -> bytes:
    """A Parquet data block of ``records`` (meta columns included), written by ``instant``;
    ``avro_schema``: the writer schema (JSON) Hudi's readers take from the header."""
    out = pa.BufferOutputStream()
    pq.write_table(records, out, compression=compression)
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: avro_schema}
    return encode_block(BlockType.PARQUET_DATA, header, out.getvalue().to_pybytes())


def avro_data_block(records: pa.Table, instant: str, avro_schema: str) -> bytes:
    """An Avro data block of ``records`` (meta columns included; ``avro_schema``: their writer
    schema, each field a ``["null", type]`` union as ``schema.avro.to_avro_json`` makes it):
    version, count, then each record's length and its Avro binary encoding (Hudi's
    ``HoodieAvroDataBlock``). Encoded over whole columns: every field's bytes are computed
    per column and joined per row; flat schemas of primitive, date and timestamp columns
    only (``UnsupportedLogBlockError`` names any other)."""
    count = records.num_rows
    fields = [_avro_field(records.column(name).combine_chunks(), name) for name in records.column_names]
    encoded = pc.binary_join_element_wise(*fields, _EMPTY) if fields else _constant(b"", count)
    lengths = pc.binary_length(encoded).to_numpy(zero_copy_only=False).astype(">i4")
    prefixes = _fixed_width(lengths.tobytes(), 4, count)
    items = pc.binary_join_element_wise(prefixes, encoded, _EMPTY)
    content = struct.pack(">ii", BLOCK_CONTENT_VERSION, count) + _joined(items)
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: avro_schema}
    return encode_block(BlockType.AVRO_DATA, header, content)


def _avro_field(values: pa.Array, name: str) -> pa.Array:
    """Each value as the Avro ``["null", type]`` union of its Arrow type."""
    count = len(values)
    kind = values.type
    if pa.types.is_boolean(kind):
        value = _fixed_width(
            values.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8).tobytes(), 1, count
        )
    elif pa.types.is_integer(kind) or pa.types.is_date(kind):
        as_int = values.cast(pa.int32()) if pa.types.is_date(kind) else values.cast(pa.int64())
        value = _varints(as_int.fill_null(0).to_numpy(zero_copy_only=False))
    elif pa.types.is_timestamp(kind):
        unit = "ms" if kind.unit in ("s", "ms") else "us"  # as to_avro_json declares it
        ticks = values.cast(pa.timestamp(unit, kind.tz)).cast(pa.int64()).fill_null(0)
        value = _varints(ticks.to_numpy(zero_copy_only=False))
    elif pa.types.is_floating(kind):
        width = 4 if kind.bit_width <= 32 else 8
        floats = values.fill_null(0).to_numpy(zero_copy_only=False).astype("<f4" if width == 4 else "<f8")
        value = _fixed_width(floats.tobytes(), width, count)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        value = _strings(values)
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        value = _strings(values.cast(pa.binary()))
    else:
        raise UnsupportedLogBlockError(
            f"column {name!r} is {kind}: fedcore writes Avro data blocks of flat primitive, date and "
            "timestamp columns only (hoodie.logfile.data.block.format=parquet writes every type)"
        )
    tagged = pc.binary_join_element_wise(_constant(_zigzag(1), count), value, _EMPTY)
    return pc.if_else(values.is_null(), _NULL_BRANCH, tagged)


def _fixed_width(data: bytes, width: int, count: int) -> pa.Array:
    """``count`` binary values of ``width`` bytes each, cut from ``data``."""
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _joined(values: pa.Array) -> bytes:
    """The bytes of a binary array's values, back to back."""
    if not len(values):
        return b""
    offsets = np.frombuffer(values.buffers()[1], np.int32, len(values) + 1, values.offset * 4)
    data: bytes = values.buffers()[2].to_pybytes()
    return data[offsets[0] : offsets[-1]]


def rollback_block(instant: str, target: str) -> bytes:
    """A command block by which ``instant`` rolls back the blocks ``target`` appended."""
    header = {
        HeaderKey.INSTANT_TIME: instant,
        HeaderKey.TARGET_INSTANT_TIME: target,
        HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND,
    }
    return encode_block(BlockType.COMMAND, header, b"")


def delete_block(
    keys: pa.Array, partitions: pa.Array, ordering: pa.Array | None, instant: str, avro_schema: str
) -> bytes:
    """A delete block of ``keys`` in ``partitions`` (string arrays), each with its ordering value
    (``ordering``: integers or strings, wrapped as Hudi wraps them; None: no ordering values),
    encoded as ``HoodieDeleteRecordList`` version 3."""
    count = len(keys)
    if len(partitions) != count or (ordering is not None and len(ordering) != count):
        raise ValueError("a delete block needs as many partitions and ordering values as keys")
    parts = [_optional_string(keys), _optional_string(partitions), _ordering_union(ordering, count)]
    encoded = _joined(pc.binary_join_element_wise(*parts, _EMPTY))
    datum = (_zigzag(count) + encoded + b"\x00") if count else b"\x00"  # one array block, then its end
    content = struct.pack(">ii", BLOCK_CONTENT_VERSION, len(datum)) + datum
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: avro_schema}
    return encode_block(BlockType.DELETE, header, content)


def _binary_scalar(value: bytes) -> pa.Scalar:
    """A binary scalar made from its buffers: ``pa.scalar`` of a Python value imports pandas
    (pyarrow looks for its types), a fifth of a second of the import of every process that
    imports fedcore, the CLI's and its reads' among them, whether it converts anything or not."""
    offsets = pa.py_buffer(np.array([0, len(value)], dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(value)])[0]


_EMPTY: Final = _binary_scalar(b"")
_NULL_BRANCH: Final = _binary_scalar(b"\x00")


def _constant(value: bytes, count: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, pa.binary()), count)


def _strings(values: pa.Array) -> pa.Array:
    """Each value as an Avro ``string`` (or ``bytes``): its length, then its UTF-8 bytes (null:
    empty)."""
    binary = pa.types.is_binary(values.type)
    data = (values if binary else values.cast(pa.string()).cast(pa.binary())).fill_null(b"")
    lengths = pc.binary_length(data).to_numpy(zero_copy_only=False)
    return pc.binary_join_element_wise(_varints(lengths), data, _EMPTY)


def _optional_string(values: pa.Array) -> pa.Array:
    """Each value as an Avro ``["null", "string"]`` union: its branch, then the string."""
    tagged = pc.binary_join_element_wise(_constant(_zigzag(1), len(values)), _strings(values), _EMPTY)
    return pc.if_else(values.is_null(), _NULL_BRANCH, tagged)


def _ordering_union(ordering: pa.Array | None, count: int) -> pa.Array:
    """``orderingVal``: null, or the wrapper of the value's type (its union branch, then the
    wrapped value)."""
    if ordering is None:
        return _constant(b"\x00", count)
    wrapper = wrapper_of(ordering.type)
    if wrapper in ("IntWrapper", "LongWrapper"):
        value = _varints(ordering.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False))
    elif wrapper == "StringWrapper":
        value = _strings(ordering)
    else:
        raise UnsupportedLogBlockError(f"fedcore writes no delete block with {ordering.type} ordering values")
    branch = 1 + [name for name, _, _ in ORDERING_WRAPPERS].index(wrapper)
    tagged = pc.binary_join_element_wise(_constant(_zigzag(branch), count), value, _EMPTY)
    return pc.if_else(ordering.is_null(), _NULL_BRANCH, tagged)


def _varints(values: Any) -> pa.Array:
    """Avro's zigzag variable-length longs of ``values``, one binary value each, computed over
    the whole array: 7 bits a byte, low bits first, the high bit set on all but the last."""
    signed = np.asarray(values, np.int64)
    u = ((signed << 1) ^ (signed >> 63)).view(np.uint64)
    shifts = np.arange(10, dtype=np.uint64) * np.uint64(7)
    groups = (u[:, None] >> shifts[None, :]) & np.uint64(0x7F)
    more = (u[:, None] >> (shifts[None, :] + np.uint64(7))) != 0
    sizes = more.sum(axis=1) + 1
    used = np.arange(10)[None, :] < sizes[:, None]
    data = (groups | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)[used]
    offsets = np.zeros(len(u) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(u), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
