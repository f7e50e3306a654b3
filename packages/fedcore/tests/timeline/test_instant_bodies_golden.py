"""Table version 6's instant-file bodies besides a completed write's, byte for byte: a write's
inflight plan (``CommitCodec.encode_inflight``) and a clean's and a rollback's metadata
(``ServiceMetadataCodec``). The golden files were written by the code before these encodings
went behind the table layout, so the move cannot have changed a version 6 table's files."""

from __future__ import annotations

from pathlib import Path

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


def test_clean_metadata_bytes() -> None:
    golden = (GOLDEN / "clean_v6.json").read_bytes()
    encoded = V6.services.clean(start=START, earliest_retained=T, deleted=DELETED, took_ms=12)
    assert encoded == golden
    assert deleted_files(golden) == {p: sorted(names) for p, names in DELETED.items()}


def test_rollback_metadata_bytes() -> None:
    golden = (GOLDEN / "rollback_v6.json").read_bytes()
    encoded = V6.services.rollback(
        start=START, rolled_back=T, action="deltacommit", deleted=DELETED, took_ms=7
    )
    assert encoded == golden
    assert rolled_back_actions(golden) == {T: "deltacommit"}
