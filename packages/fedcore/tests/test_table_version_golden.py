"""Table version 6's names and encodings, byte for byte: what fed writes and Apache Hudi 0.14/0.15
read. Pinned before the table version went behind one seam per concern
(``fedcore.timeline.layout``), so that refactors of that seam, and the versions added beside
it, cannot change a version 6 table's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedcore.files.filenames import LOG_FILE_RE, log_file_name
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
    instant_path,
    parse_instant_file,
)
from fedcore.timeline.commit_metadata import CommitMetadata, WriteStat

GOLDEN = Path(__file__).parent / "data" / "golden"
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
        assert Instant(T, action, state).file_name() == name
        parsed = parse_instant_file(name)
        # A compaction's completed file is a commit: it lists as one.
        assert parsed == Instant(T, COMMIT if (action, state) == (COMPACTION, COMPLETED) else action, state)


def test_instant_paths_and_other_files() -> None:
    assert (
        instant_path("s3://b/t", Instant(T, COMMIT, REQUESTED), INFLIGHT) == f"s3://b/t/.hoodie/{T}.inflight"
    )
    assert parse_instant_file("20260102030405.commit") == Instant("20260102030405", COMMIT, COMPLETED)
    assert parse_instant_file(f"{T}.logcompaction.requested") == Instant(T, "logcompaction", REQUESTED)
    for other in ("hoodie.properties", f"fed-manifest-{T}", "archived", ".heartbeat", f"{T}.commit.crc"):
        assert parse_instant_file(other) is None


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
    assert metadata.to_bytes() == golden
    assert CommitMetadata.from_bytes(golden) == metadata


def test_replace_commit_metadata_bytes() -> None:
    metadata = CommitMetadata("INSERT_OVERWRITE", replaced={"p=1": ["fid-0"]})
    golden = (GOLDEN / "replacecommit_v6.json").read_bytes()
    assert metadata.to_bytes() == golden
    assert CommitMetadata.from_bytes(golden) == metadata


def test_log_file_names() -> None:
    name = log_file_name("fid-1", "20260101000000000", 2, "0-1-3")
    assert name == ".fid-1_20260101000000000.log.2_0-1-3"
    match = LOG_FILE_RE.fullmatch(name)
    assert match is not None
    assert match.groups() == ("fid-1", "20260101000000000", "2", "0-1-3", None)
    cdc = LOG_FILE_RE.fullmatch(".fid-1_20260101000000.log.12_1-0-1.cdc")
    assert cdc is not None
    assert cdc.groups() == ("fid-1", "20260101000000", "12", "1-0-1", ".cdc")
    assert LOG_FILE_RE.fullmatch(f"fid-0_0-1-2_{T}.parquet") is None
