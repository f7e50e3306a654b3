"""Table version 6's names and encodings, byte for byte: what fed writes and Apache Hudi 0.14/0.15
read. Pinned before the table version went behind one seam per concern
(``fedcore.timeline.layout``), so that refactors of that seam, and the versions added beside
it, cannot change a version 6 table's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedcore.exceptions import UnsupportedTableVersionError
from fedcore.files.filenames import LogFileName
from fedcore.timeline import (
    CLEAN,
    COMMIT,
    COMPACTION,
    COMPLETED,
    DELTA_COMMIT,
    INFLIGHT,
    REPLACE_COMMIT,
    REQUESTED,
    ROLLBACK,
    SAVEPOINT,
    Instant,
)
from fedcore.timeline.commit_metadata import CommitMetadata, WriteStat
from fedcore.timeline.layout import V6, layout_for

GOLDEN = Path(__file__).parents[1] / "data" / "golden"
T = "20260102030405678"

#: action -> its file names requested, inflight, completed.
INSTANT_FILES = {
    COMMIT: (f"{T}.commit.requested", f"{T}.inflight", f"{T}.commit"),
    DELTA_COMMIT: (f"{T}.deltacommit.requested", f"{T}.deltacommit.inflight", f"{T}.deltacommit"),
    REPLACE_COMMIT: (f"{T}.replacecommit.requested", f"{T}.replacecommit.inflight", f"{T}.replacecommit"),
    CLEAN: (f"{T}.clean.requested", f"{T}.clean.inflight", f"{T}.clean"),
    ROLLBACK: (f"{T}.rollback.requested", f"{T}.rollback.inflight", f"{T}.rollback"),
    # A compaction completes as a commit (Hudi's timeline).
    COMPACTION: (f"{T}.compaction.requested", f"{T}.compaction.inflight", f"{T}.commit"),
    SAVEPOINT: (f"{T}.savepoint.requested", f"{T}.savepoint.inflight", f"{T}.savepoint"),
}
STATES = (REQUESTED, INFLIGHT, COMPLETED)


@pytest.mark.parametrize("action", sorted(INSTANT_FILES))
def test_instant_file_names(action: str) -> None:
    for state, name in zip(STATES, INSTANT_FILES[action], strict=True):
        assert V6.instants.file_name(Instant(T, action, state)) == name
        parsed = V6.instants.parse(name)
        # A compaction's completed file is a commit: it lists as one.
        assert parsed == Instant(T, COMMIT if (action, state) == (COMPACTION, COMPLETED) else action, state)


def test_instant_paths_and_other_files() -> None:
    assert (
        V6.instants.path("s3://b/t", Instant(T, COMMIT, REQUESTED), INFLIGHT)
        == f"s3://b/t/.hoodie/{T}.inflight"
    )
    assert V6.instants.parse("20260102030405.commit") == Instant("20260102030405", COMMIT, COMPLETED)
    assert V6.instants.parse(f"{T}.logcompaction.requested") == Instant(T, "logcompaction", REQUESTED)
    for other in ("hoodie.properties", f"fed-manifest-{T}", "archived", ".heartbeat", f"{T}.commit.crc"):
        assert V6.instants.parse(other) is None


def representative_write() -> CommitMetadata:
    """An upsert onto a merge-on-read slice: a base file with column statistics and a log file."""
    return CommitMetadata(
        "UPSERT",
        [
            WriteStat(
                "fid-0",
                f"p=1/fid-0_0-1-2_{T}.parquet",
                "p=1",
                "20260101000000000",
                num_writes=10,
                num_inserts=4,
                num_update_writes=6,
                num_deletes=1,
                total_write_bytes=1000,
                file_size=1234,
                column_stats='{"rows":10}',
            ),
            WriteStat(
                "fid-1",
                "p=1/.fid-1_20260101000000000.log.2_0-1-3",
                "p=1",
                "20260101000000000",
                num_writes=3,
                num_update_writes=3,
                total_write_bytes=300,
                file_size=310,
                log_version=2,
                base_file="fid-1_0-1-2_20260101000000000.parquet",
            ),
        ],
        schema='{"type":"record"}',
        extra={"k": "v"},
    )


def test_commit_metadata_bytes() -> None:
    golden = (GOLDEN / "commit_v6.json").read_bytes()
    metadata = representative_write()
    assert V6.commits.encode(metadata) == golden
    assert V6.commits.decode(golden) == metadata


def test_replace_commit_metadata_bytes() -> None:
    metadata = CommitMetadata("INSERT_OVERWRITE", replaced={"p=1": ["fid-0"]})
    golden = (GOLDEN / "replacecommit_v6.json").read_bytes()
    assert V6.commits.encode(metadata) == golden
    assert V6.commits.decode(golden) == metadata


def test_log_file_names() -> None:
    name = V6.log_files.name(
        "fid-1", base_instant="20260101000000000", instant=T, place=2, write_token="0-1-3"
    )
    assert name == ".fid-1_20260101000000000.log.2_0-1-3"
    assert V6.log_files.parse(name) == LogFileName("fid-1", "20260101000000000", 2, "0-1-3", False)
    cdc = V6.log_files.parse(".fid-1_20260101000000.log.12_1-0-1.cdc")
    assert cdc == LogFileName("fid-1", "20260101000000", 12, "1-0-1", True)
    assert V6.log_files.parse(f"fid-0_0-1-2_{T}.parquet") is None


def test_one_layout_per_version() -> None:
    """Versions 6, 8 and 9 have layouts, of tables of either type written; any other is
    refused by name, never read by another version's rules."""
    assert V6.instants.folder("s3://b/t") == "s3://b/t/.hoodie"
    assert layout_for(6) is V6
    assert (layout_for(8).version, layout_for(9).version) == (8, 9)
    assert layout_for(8).instants.folder("s3://b/t") == "s3://b/t/.hoodie/timeline"
    assert [layout_for(v).timeline_layout for v in (6, 8, 9)] == [1, 2, 2]
    for version in (5, 7, 10):
        with pytest.raises(UnsupportedTableVersionError, match=f"table version {version};"):
            layout_for(version, "trips")


@pytest.mark.parametrize(
    ("name", "instant"),
    [
        (
            "20260101000000000_20260101000001000.commit",
            ("20260101000000000", "commit", "completed", "20260101000001000"),
        ),
        ("20260101000000000.inflight", ("20260101000000000", "commit", "inflight", None)),
        ("20260101000000000.commit.requested", ("20260101000000000", "commit", "requested", None)),
        ("20260101000000000.clustering.inflight", ("20260101000000000", "clustering", "inflight", None)),
        (
            "20260101000000000_20260101000001000.replacecommit",
            ("20260101000000000", "replacecommit", "completed", "20260101000001000"),
        ),
        ("20260101000000000.deltacommit", ("20260101000000000", "deltacommit", "completed", None)),  # legacy
    ],
)
def test_version_8_instant_names_parse_and_name_back(
    name: str, instant: tuple[str, str, str, str | None]
) -> None:
    naming = layout_for(8).instants
    parsed = naming.parse(name)
    assert parsed is not None
    assert (parsed.time, parsed.action, parsed.state, parsed.completion_time) == instant
    assert naming.file_name(parsed) == name


def test_version_8_names_of_other_files_do_not_parse() -> None:
    naming = layout_for(8).instants
    for name in (
        "history",
        "20260101000000000_20260101000001000.commit.requested",
        "hoodie.properties",
        "x.crc",
    ):
        assert naming.parse(name) is None, name
