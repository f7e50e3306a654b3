"""Merge-on-read semantics beyond what the shared Hudi tables exercise: delete blocks, ordering
values, payload classes, rollbacks, failed and corrupt blocks.

Blocks are framed here as Hudi's ``HoodieLogFormatWriter`` frames them (table version 6,
log format version 1), and delete records are encoded with Hudi's own
``HoodieDeleteRecordList`` schema (its wrappers' field is ``value``), so the decoder is
checked against the published format, not against itself. The rows the shared tables hold
are checked against hudi-rs in ``test_hudi_conformance``.
"""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from fedcore.exceptions import CorruptLogFileError, UnsupportedLogBlockError, UnsupportedTableError
from fedcore.log.blocks import (
    BlockType,
    HeaderKey,
    LogBlock,
    check_applicable,
    data_records,
    delete_records,
    read_blocks,
)
from fedcore.log.merge import LogRecords, MergeRules, applicable_blocks, merge, merge_rules


def frame(kind: int, header: dict[int, str], content: bytes) -> bytes:
    def metadata(entries: dict[int, str]) -> bytes:
        out = struct.pack(">i", len(entries))
        for key, value in entries.items():
            encoded = value.encode()
            out += struct.pack(">ii", key, len(encoded)) + encoded
        return out

    body = struct.pack(">ii", 1, kind) + metadata(header) + struct.pack(">q", len(content)) + content
    body += metadata({})
    total = len(body) + 8
    return b"#HUDI#" + struct.pack(">q", total) + body + struct.pack(">q", total + 6)


def _wrapper(name: str, avro: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": "value", "type": avro}]}


#: Hudi's HoodieDeleteRecordList (hudi-common/src/main/avro), as Hudi 0.14 writes it.
HUDI_DELETE_SCHEMA = {
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {
            "name": "deleteRecordList",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "HoodieDeleteRecord",
                    "fields": [
                        {"name": "recordKey", "type": ["null", "string"], "default": None},
                        {"name": "partitionPath", "type": ["null", "string"], "default": None},
                        {
                            "name": "orderingVal",
                            "type": [
                                "null",
                                _wrapper("BooleanWrapper", "boolean"),
                                _wrapper("IntWrapper", "int"),
                                _wrapper("LongWrapper", "long"),
                                _wrapper("FloatWrapper", "float"),
                                _wrapper("DoubleWrapper", "double"),
                                _wrapper("BytesWrapper", "bytes"),
                                _wrapper("StringWrapper", "string"),
                                _wrapper("DateWrapper", "int"),
                                _wrapper(
                                    "DecimalWrapper",
                                    {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
                                ),
                                _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
                                _wrapper("TimestampMicrosWrapper", "long"),
                            ],
                            "default": None,
                        },
                    ],
                },
            },
        }
    ],
}


def delete_block(instant: str, deletes: list[tuple[str, Any]]) -> LogBlock:
    """Deletes as (key, orderingVal): None, or (wrapper name, value)."""
    records = [
        {
            "recordKey": key,
            "partitionPath": "p=1",
            "orderingVal": None
            if ordering is None
            else (f"org.apache.hudi.avro.model.{ordering[0]}", {"value": ordering[1]}),
        }
        for key, ordering in deletes
    ]
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(HUDI_DELETE_SCHEMA), {"deleteRecordList": records})
    datum = out.getvalue()
    content = struct.pack(">ii", 3, len(datum)) + datum
    (block,) = read_blocks(frame(BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant}, content), "test.log")
    return block


def data_block(instant: str, rows: list[dict[str, Any]]) -> LogRecords:
    block = LogBlock(BlockType.PARQUET_DATA, {HeaderKey.INSTANT_TIME: instant}, b"", "test.log")
    return LogRecords(block, pa.Table.from_pylist(rows, SCHEMA), None)


SCHEMA = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
BASE = pa.Table.from_pylist(
    [{"_hoodie_record_key": k, "ts": 10, "v": f"base-{k}"} for k in ("a", "b", "c", "d")], SCHEMA
)


def merged(
    logs: list[LogRecords], payload: str = "latest", base: pa.Table = BASE, rules: MergeRules | None = None
) -> dict[str, Any]:
    keys = [
        r.data.column("_hoodie_record_key").combine_chunks() if r.data is not None else None for r in logs
    ]
    rules = rules or MergeRules("ts", payload)  # type: ignore[arg-type]
    ordering_type = base.schema.field(rules.ordering_field).type if rules.ordering_field else None
    kept, updates = merge(
        base, base.column("_hoodie_record_key").combine_chunks(), logs, keys, rules, ordering_type
    )
    rows = [*(kept.to_pylist() if kept is not None else []), *(r for _, u in updates for r in u.to_pylist())]
    assert len({r["_hoodie_record_key"] for r in rows}) == len(rows), "one row per key"
    return {r["_hoodie_record_key"]: (r["ts"], r["v"]) for r in rows}


def test_a_delete_block_decodes_hudis_own_encoding() -> None:
    block = delete_block("t1", [("a", None), ("b", ("LongWrapper", 7)), ("c", ("StringWrapper", "x"))])
    deletes = delete_records(block)
    assert deletes.column("record_key").to_pylist() == ["a", "b", "c"]
    assert deletes.column("LongWrapper").to_pylist() == [None, 7, None]
    assert deletes.column("StringWrapper").to_pylist() == [None, None, "x"]


def test_log_records_update_base_records_and_insert_new_keys() -> None:
    result = merged(
        [
            data_block(
                "t1",
                [
                    {"_hoodie_record_key": "a", "ts": 11, "v": "a1"},
                    {"_hoodie_record_key": "e", "ts": 1, "v": "e1"},
                ],
            )
        ]
    )
    assert result == {
        "a": (11, "a1"),
        "b": (10, "base-b"),
        "c": (10, "base-c"),
        "d": (10, "base-d"),
        "e": (1, "e1"),
    }


def test_among_log_records_the_greatest_ordering_wins_and_ties_go_to_the_newer() -> None:
    logs = [
        data_block(
            "t1",
            [
                {"_hoodie_record_key": "a", "ts": 50, "v": "a-50"},
                {"_hoodie_record_key": "b", "ts": 50, "v": "b-50"},
            ],
        ),
        data_block(
            "t2",
            [
                {"_hoodie_record_key": "a", "ts": 30, "v": "a-30"},
                {"_hoodie_record_key": "b", "ts": 50, "v": "b-50-later"},
            ],
        ),
    ]
    result = merged(logs)
    assert result["a"] == (50, "a-50")
    assert result["b"] == (50, "b-50-later")


def test_the_payload_decides_whether_an_older_ordering_value_updates_the_base_record() -> None:
    logs = [data_block("t1", [{"_hoodie_record_key": "a", "ts": 1, "v": "a-late-but-older"}])]
    assert merged(logs, "latest")["a"] == (1, "a-late-but-older")  # OverwriteWithLatestAvroPayload
    assert merged(logs, "ordering")["a"] == (10, "base-a")  # DefaultHoodieRecordPayload


def test_deletes_follow_ordering_values_and_arrival_order() -> None:
    logs = [
        data_block("t1", [{"_hoodie_record_key": "c", "ts": 90, "v": "c-90"}]),
        LogRecords.of(
            delete_block(
                "t2",
                [
                    ("a", None),
                    ("b", ("IntWrapper", 0)),
                    ("c", ("LongWrapper", 40)),
                    ("d", ("LongWrapper", 40)),
                ],
            )
        ),
        data_block("t3", [{"_hoodie_record_key": "b", "ts": 1, "v": "b-again"}]),
    ]
    result = merged(logs)
    assert "a" not in result  # no ordering value: deleted
    assert result["b"] == (1, "b-again")  # a record after a delete always wins
    assert result["c"] == (90, "c-90")  # the delete's ordering (40) is below the record's (90)
    assert "d" not in result  # deletes the base record whatever its ordering value


#: Hudi 1.x's table config for each merge mode (table version 9 names the ordering field
#: ``hoodie.table.ordering.fields``; version 8 ``hoodie.table.precombine.field``).
COMMIT_TIME = {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING", "hoodie.table.ordering.fields": "ts"}
EVENT_TIME = {"hoodie.record.merge.mode": "EVENT_TIME_ORDERING", "hoodie.table.ordering.fields": "ts"}


def test_hudi_1x_merge_modes_are_read_from_the_table_config_or_refused_by_name() -> None:
    assert merge_rules("t", COMMIT_TIME, ["ts"]) == MergeRules(None, "latest")
    assert merge_rules("t", EVENT_TIME, ["ts"]) == MergeRules("ts", "ordering", ordered_deletes=True)
    version_8 = {"hoodie.record.merge.mode": "EVENT_TIME_ORDERING", "hoodie.table.precombine.field": "ts"}
    assert merge_rules("t", version_8, ["ts"]).ordering_field == "ts"
    for config, what in (
        ({"hoodie.record.merge.mode": "CUSTOM"}, "CUSTOM"),
        ({**EVENT_TIME, "hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}, "partial updates"),
        ({**EVENT_TIME, "hoodie.record.merge.property.hoodie.payload.delete.field": "op"}, "delete.field"),
        ({**EVENT_TIME, "hoodie.table.ordering.fields": "ts,seq"}, "2 fields"),
    ):
        with pytest.raises(UnsupportedTableError, match=what):
            merge_rules("t", config, ["ts", "seq"])
    assert merge_rules(
        "t", {**EVENT_TIME, "hoodie.table.partial.update.mode": "NONE"}, ["ts"]
    ).ordered_deletes


def test_commit_time_ordering_lets_the_latest_write_win_whatever_its_ordering_value() -> None:
    logs = [
        data_block("t1", [{"_hoodie_record_key": "a", "ts": 50, "v": "a-50"}]),
        data_block("t2", [{"_hoodie_record_key": "a", "ts": 30, "v": "a-30"}]),
        data_block("t2", [{"_hoodie_record_key": "b", "ts": 1, "v": "b-1"}]),
        LogRecords.of(delete_block("t3", [("c", ("LongWrapper", 1))])),
    ]
    result = merged(logs, rules=merge_rules("t", COMMIT_TIME, ["ts"]))
    assert result == {"a": (30, "a-30"), "b": (1, "b-1"), "d": (10, "base-d")}


def test_event_time_ordering_orders_a_delete_that_carries_an_ordering_value_like_a_record() -> None:
    """Hudi 1.x: a delete with an ordering value (not the default int 0) loses to a base record
    with a greater one, and a later record brings its key back only with one at least the
    delete's; a commit-time delete (the int 0, as Spark SQL's DELETE writes) always wins, and
    any later record brings its key back. Hudi 0.x's payload deletes the base record."""
    logs = [
        LogRecords.of(
            delete_block(
                "t1",
                [
                    ("a", ("LongWrapper", 5)),  # below the base record's 10
                    ("b", ("LongWrapper", 50)),
                    ("c", ("LongWrapper", 50)),
                    ("d", ("IntWrapper", 0)),
                ],
            )
        ),
        data_block(
            "t2",
            [
                {"_hoodie_record_key": "b", "ts": 40, "v": "b-40"},  # below the delete's 50
                {"_hoodie_record_key": "c", "ts": 50, "v": "c-50"},  # a tie goes to the later
                {"_hoodie_record_key": "d", "ts": 1, "v": "d-1"},
            ],
        ),
    ]
    result = merged(logs, rules=merge_rules("t", EVENT_TIME, ["ts"]))
    # d: the record after the delete outranks it and is what the log holds for d; its
    # ordering value is below the base record's, which stays (Hudi merges log onto base so).
    assert result == {"a": (10, "base-a"), "c": (50, "c-50"), "d": (10, "base-d")}
    assert merged(logs, "ordering") == {"b": (40, "b-40"), "c": (50, "c-50"), "d": (10, "base-d")}


def test_event_time_ordering_a_flagged_delete_at_the_default_int_0_is_a_commit_time_delete() -> None:
    schema = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int32()), ("v", pa.string())])
    flagged = schema.append(pa.field("_hoodie_is_deleted", pa.bool_()))
    base = pa.Table.from_pylist([{"_hoodie_record_key": k, "ts": 10, "v": k} for k in "ab"], schema)
    block = LogBlock(BlockType.PARQUET_DATA, {HeaderKey.INSTANT_TIME: "t1"}, b"", "test.log")
    rows = [
        {"_hoodie_record_key": "a", "ts": 0, "v": "x", "_hoodie_is_deleted": True},  # the default: wins
        {"_hoodie_record_key": "b", "ts": 5, "v": "x", "_hoodie_is_deleted": True},  # below 10: loses
    ]
    logs = [LogRecords(block, pa.Table.from_pylist(rows, flagged), None)]
    assert merged(logs, base=base, rules=merge_rules("t", EVENT_TIME, ["ts"])) == {"b": (10, "b")}


def test_a_record_flagged_deleted_removes_its_key() -> None:
    schema = SCHEMA.append(pa.field("_hoodie_is_deleted", pa.bool_()))
    block = LogBlock(BlockType.PARQUET_DATA, {HeaderKey.INSTANT_TIME: "t1"}, b"", "test.log")
    rows = [{"_hoodie_record_key": "a", "ts": 20, "v": "x", "_hoodie_is_deleted": True}]
    logs = [LogRecords(block, pa.Table.from_pylist(rows, schema), None)]
    base = BASE.append_column("_hoodie_is_deleted", pa.array([False] * 4))
    assert "a" not in merged(logs, base=base)


def test_failed_rolled_back_and_corrupt_blocks_do_not_apply() -> None:
    def block(instant: str, kind: int = BlockType.PARQUET_DATA, **header: str) -> bytes:
        values = {HeaderKey.INSTANT_TIME: instant, **{HeaderKey[k.upper()]: v for k, v in header.items()}}
        return frame(kind, values, b"")

    log = b"".join(
        [
            block("001"),
            block("002"),  # a write that failed, then was rolled back by a command block
            block("003", BlockType.COMMAND, target_instant_time="002", command_block_type="0"),
            block("004"),  # a write still pending
            block("005"),
        ]
    )
    truncated = block("006")[:-20]  # a writer died while appending: a corrupt block
    blocks = read_blocks(log + truncated, "test.log")
    assert [b.type for b in blocks][-1] == BlockType.CORRUPT
    committed = {"001", "002", "005", "006"}.__contains__
    applied = applicable_blocks(blocks, "009", committed)
    assert [b.instant for b in applied] == ["001", "005"]
    assert [b.instant for b in applicable_blocks(blocks, "001", committed)] == ["001"]  # time travel


def test_blocks_fedcore_cannot_apply_are_refused_by_name() -> None:
    hfile = read_blocks(frame(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: "1"}, b""), "x.log")[0]
    with pytest.raises(UnsupportedLogBlockError, match="HFILE_DATA"):
        check_applicable(hfile)
    compacted = LogBlock(BlockType.AVRO_DATA, {0: "1", HeaderKey.COMPACTED_BLOCK_TIMES: "0,1"}, b"", "x.log")
    with pytest.raises(UnsupportedLogBlockError, match="log-compacted"):
        check_applicable(compacted)
    old_delete = LogBlock(BlockType.DELETE, {0: "1"}, struct.pack(">ii", 2, 0), "x.log")
    with pytest.raises(UnsupportedLogBlockError, match="version 2"):
        delete_records(old_delete)


def test_an_undecodable_avro_block_is_a_typed_error_not_a_traceback() -> None:
    schema = '{"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}]}'
    garbage = struct.pack(">ii", 3, 2) + struct.pack(">i", 3) + b"\xff\xff\xff"
    block = LogBlock(
        BlockType.AVRO_DATA, {HeaderKey.INSTANT_TIME: "1", HeaderKey.SCHEMA: schema}, garbage, "x.log"
    )
    with pytest.raises(CorruptLogFileError, match="cannot be decoded"):
        data_records(block)
    unknown = LogBlock(BlockType.AVRO_DATA, {0: "1", HeaderKey.SCHEMA: '{"type": "nope"'}, garbage, "x.log")
    with pytest.raises(UnsupportedLogBlockError, match="no Arrow form"):
        data_records(unknown)
