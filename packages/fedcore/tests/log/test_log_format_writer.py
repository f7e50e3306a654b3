"""Log blocks fedcore writes (the first step of merge-on-read writes, issue 29) are Hudi's
format byte for byte: framed as ``test_log_merge.frame`` frames blocks after Hudi's
``HoodieLogFormatWriter``, delete records equal to what fastavro encodes with Hudi's own
``HoodieDeleteRecordList`` schema, and every block read back by fedcore's reader as written."""

from __future__ import annotations

import io
import json
import struct
from datetime import timezone
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedcore.exceptions import UnsupportedLogBlockError
from fedcore.log.blocks import (
    BlockType,
    HeaderKey,
    avro_data_block,
    data_records,
    delete_block,
    delete_records,
    parquet_data_block,
    read_blocks,
    rollback_block,
    wrapper_of,
)
from fedcore.schema.avro import to_avro_json

from .test_log_merge import HUDI_DELETE_SCHEMA, frame

SCHEMA_JSON = '{"type": "record", "name": "trips", "fields": []}'
texts = st.text(max_size=40) | st.none()


def hudi_delete_content(keys: list[Any], partitions: list[Any], ordering: pa.Array | None) -> bytes:
    """A delete block's content as Hudi encodes it (fastavro, Hudi's schema)."""
    records = []
    for i, (key, partition) in enumerate(zip(keys, partitions, strict=True)):
        value = None if ordering is None else ordering[i].as_py()
        wrapped = None
        if value is not None:
            assert ordering is not None
            wrapped = (f"org.apache.hudi.avro.model.{wrapper_of(ordering.type)}", {"value": value})
        records.append({"recordKey": key, "partitionPath": partition, "orderingVal": wrapped})
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(HUDI_DELETE_SCHEMA), {"deleteRecordList": records})
    datum = out.getvalue()
    return struct.pack(">ii", 3, len(datum)) + datum


@given(
    rows=st.lists(st.tuples(texts, texts, st.integers(-(2**63), 2**63 - 1) | st.none(), texts), max_size=30)
)
def test_delete_blocks_are_hudis_encoding_byte_for_byte(rows: list[tuple[Any, Any, Any, Any]]) -> None:
    keys = [r[0] for r in rows]
    partitions = [r[1] for r in rows]
    for ordering in (
        None,
        pa.array([r[2] for r in rows], pa.int64()),
        pa.array([r[3] for r in rows], pa.string()),
    ):
        written = delete_block(
            pa.array(keys, pa.string()), pa.array(partitions, pa.string()), ordering, "7", "{}"
        )
        header = {HeaderKey.INSTANT_TIME: "7", HeaderKey.SCHEMA: "{}"}
        assert written == frame(BlockType.DELETE, header, hudi_delete_content(keys, partitions, ordering))
        (block,) = read_blocks(written, "t.log")
        read = delete_records(block)
        assert read.column("record_key").to_pylist() == keys
        assert read.column("partition_path").to_pylist() == partitions
        if ordering is not None:
            assert read.column(wrapper_of(ordering.type) or "").to_pylist() == ordering.to_pylist()


def test_int_ordering_values_take_hudis_int_wrapper() -> None:
    ordering = pa.array([1, None, -5], pa.int32())
    keys, partitions = ["a", "b", "c"], ["p", "p", "p"]
    written = delete_block(pa.array(keys), pa.array(partitions), ordering, "7", "{}")
    header = {HeaderKey.INSTANT_TIME: "7", HeaderKey.SCHEMA: "{}"}
    assert written == frame(BlockType.DELETE, header, hudi_delete_content(keys, partitions, ordering))
    assert delete_records(read_blocks(written, "t.log")[0]).column("IntWrapper").to_pylist() == [1, None, -5]


def test_ordering_values_fedcore_does_not_encode_are_refused_by_type() -> None:
    with pytest.raises(UnsupportedLogBlockError, match="double"):
        delete_block(pa.array(["a"]), pa.array(["p"]), pa.array([1.5]), "7", "{}")


def test_a_parquet_data_block_reads_back_with_its_instant_and_schema() -> None:
    records = pa.table({"_hoodie_record_key": ["a", "b"], "ts": [1, 2], "fare": [1.5, None]})
    written = parquet_data_block(records, "20261124000000000", SCHEMA_JSON)
    (block,) = read_blocks(written + written, "t.log")[:1]
    assert block.type == BlockType.PARQUET_DATA
    assert block.instant == "20261124000000000"
    assert block.header[HeaderKey.SCHEMA] == SCHEMA_JSON
    assert data_records(block).equals(records)
    assert len(read_blocks(written + written, "t.log")) == 2  # blocks append one after another


def test_a_rollback_block_names_its_target() -> None:
    written = rollback_block("20261124000000002", "20261124000000001")
    header = {
        HeaderKey.INSTANT_TIME: "20261124000000002",
        HeaderKey.TARGET_INSTANT_TIME: "20261124000000001",
        HeaderKey.COMMAND_BLOCK_TYPE: "0",
    }
    assert written == frame(BlockType.COMMAND, header, b"")
    (block,) = read_blocks(written, "t.log")
    assert block.is_rollback
    assert block.target_instant == "20261124000000001"


def hudi_avro_content(records: pa.Table, schema: dict[str, Any]) -> bytes:
    """An Avro data block's content as Hudi's ``HoodieAvroDataBlock`` serialises it: version,
    count, then each record's length and its encoding (fastavro's, with the block's schema)."""
    parsed = fastavro.parse_schema(schema)
    parts = [struct.pack(">ii", 3, records.num_rows)]
    for row in records.to_pylist():
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, row)
        parts.append(struct.pack(">i", len(out.getvalue())) + out.getvalue())
    return b"".join(parts)


ROW = st.fixed_dictionaries(
    {
        "key": texts,
        "n": st.integers(-(2**63), 2**63 - 1) | st.none(),
        "small": st.integers(-(2**31), 2**31 - 1) | st.none(),
        "x": st.floats(allow_nan=False) | st.none(),
        "f": st.floats(width=32, allow_nan=False) | st.none(),
        "flag": st.booleans() | st.none(),
        "raw": st.binary(max_size=20) | st.none(),
        "day": st.dates() | st.none(),
        "at": st.datetimes(timezones=st.just(timezone.utc)) | st.none(),
    }
)
AVRO_TYPES = pa.schema(
    [
        ("key", pa.string()),
        ("n", pa.int64()),
        ("small", pa.int32()),
        ("x", pa.float64()),
        ("f", pa.float32()),
        ("flag", pa.bool_()),
        ("raw", pa.binary()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", "UTC")),
    ]
)


@given(rows=st.lists(ROW, max_size=25))
def test_avro_data_blocks_are_hudis_encoding_byte_for_byte(rows: list[dict[str, Any]]) -> None:
    records = pa.Table.from_pylist(rows, schema=AVRO_TYPES)
    schema_json = to_avro_json(records.schema, "trips")
    block = avro_data_block(records, "20260101000000000", schema_json)
    expected = hudi_avro_content(records, json.loads(schema_json))
    assert block == frame(
        BlockType.AVRO_DATA,
        {HeaderKey.INSTANT_TIME: "20260101000000000", HeaderKey.SCHEMA: schema_json},
        expected,
    )
    (read,) = read_blocks(block, "test.log")
    assert data_records(read).cast(AVRO_TYPES).equals(records)


def test_avro_data_blocks_refuse_nested_columns_by_name() -> None:
    records = pa.table({"tags": pa.array([["a"]], pa.list_(pa.string()))})
    with pytest.raises(UnsupportedLogBlockError, match="'tags' is list<item: string>"):
        avro_data_block(records, "20260101000000000", to_avro_json(records.schema, "trips"))
