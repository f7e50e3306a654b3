"""Table version 6's instant-file bodies besides a completed write's: a write's inflight plan
(``CommitCodec.encode_inflight``) byte for byte, and a clean's and a rollback's metadata
(``ServiceMetadataCodec``). The golden files were written by the code before these encodings
went behind the table layout. fed wrote clean and rollback metadata as JSON then; it writes
Hudi's Avro now (Hudi's time-travel check reads the last clean's as Avro), with the same
content, and still reads the JSON its older tables hold."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro

from fedcore.timeline.commit_metadata import PlannedWrite, deleted_files, rolled_back_actions
from fedcore.timeline.layout import V6

GOLDEN = Path(__file__).parents[1] / "data" / "golden"
T = "20260102030405678"
START = "20260102030405699"
#: partition -> file names a clean or rollback deleted (unsorted: the encoding sorts them).
DELETED = {"country=us": ["b.parquet", "a.parquet"], "": [f".f_{T}.log.1_0-1-2"]}


def test_inflight_plan_bytes() -> None:
    writes = [
        PlannedWrite(
            "country=us", "a1b2c3d4-0000-0000-0000-000000000001-0", T, inserts=3, updates=2, deletes=1
        ),
        PlannedWrite("country=us", "a1b2c3d4-0000-0000-0000-000000000002-0", None, 3, 0, 0),
        PlannedWrite("", "a1b2c3d4-0000-0000-0000-000000000003-0", None, 0, 0, 0),
    ]
    extra = {"fed.sink.checkpoint": '{"3": "w"}'}
    golden = (GOLDEN / "inflight_v6.json").read_bytes()
    assert V6.commits.encode_inflight("upsert", writes, extra) == golden
    # What streaming checkpoints read back from it.
    decoded = V6.commits.decode(golden)
    assert decoded.extra == extra
    assert decoded.operation == "UPSERT"


def avro_record(data: bytes, name: str) -> dict[str, Any]:
    """The one record of a Hudi metadata file, checked to be Avro of Hudi's record ``name``."""
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.writer_schema is not None
    assert reader.writer_schema["name"] == f"org.apache.hudi.avro.model.{name}"
    (record,) = list(reader)
    assert isinstance(record, dict)
    return record


def same_content(record: dict[str, Any], golden: dict[str, Any]) -> None:
    """Every field the JSON held, with its value (Hudi's schema adds fields, at their defaults)."""
    for key, value in golden.items():
        if key == "partitionMetadata":
            assert set(record[key]) == set(value)
            for partition, fields in value.items():
                assert {k: record[key][partition][k] for k in fields} == fields
        else:
            assert record[key] == value, key


def test_clean_metadata() -> None:
    golden = (GOLDEN / "clean_v6.json").read_bytes()
    encoded = V6.services.clean(start=START, earliest_retained=T, deleted=DELETED, took_ms=12)
    record = avro_record(encoded, "HoodieCleanMetadata")
    same_content(record, json.loads(golden))
    assert record["earliestCommitToRetain"] == T
    for data in (golden, encoded):  # the JSON of fed's older tables is still read
        assert deleted_files(data) == {p: sorted(names) for p, names in DELETED.items()}


def test_rollback_metadata() -> None:
    golden = (GOLDEN / "rollback_v6.json").read_bytes()
    encoded = V6.services.rollback(
        start=START, rolled_back=T, action="deltacommit", deleted=DELETED, took_ms=7
    )
    same_content(avro_record(encoded, "HoodieRollbackMetadata"), json.loads(golden))
    for data in (golden, encoded):
        assert rolled_back_actions(data) == {T: "deltacommit"}
