"""Hudi 1.x's Avro commit metadata (table versions 8 and 9): every commit, delta commit and
replace commit file (completed and inflight) in hudi-rs's version 8 and 9 tables decodes to
what fastavro reads raw from it, encodes back to a file that decodes the same, and a file
fedcore encodes is one Hudi's readers take: its header is Hudi's, byte for byte."""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import pytest

from fedcore.exceptions import MetadataTableError
from fedcore.timeline.avro_commit_codec import AvroCommitCodec
from fedcore.timeline.commit_codec import JsonCommitCodec
from fedcore.timeline.commit_metadata import CommitMetadata, PlannedWrite, WriteStat

from ..hudi.test_hudi_conformance import HUDI_RS_TABLES, V8_V9_ZIPS, name_of

CODEC = AvroCommitCodec()
MODEL = "org.apache.hudi.avro.model"
#: The data table's timeline and its metadata table's: ``<requested>_<completion>.<action>``
#: and a write's inflight file (``<requested>.inflight`` is a commit's); the requested files of
#: commits and delta commits are empty (a replace commit's is a plan, another schema).
_COMMIT_FILE = re.compile(
    r"[^/]+/\.hoodie/(?:metadata/\.hoodie/)?timeline/"
    r"(\d+_\d+\.(?:commit|deltacommit|replacecommit)|\d+\.(?:deltacommit\.|replacecommit\.)?inflight"
    r"|\d+\.(?:commit|deltacommit)\.requested)"
)


def commit_files(archive: Path) -> dict[str, bytes]:
    """name -> bytes of each commit-metadata file in a zipped table (macOS's copies left out)."""
    with zipfile.ZipFile(archive) as zipped:
        return {
            name: zipped.read(name)
            for name in zipped.namelist()
            if _COMMIT_FILE.fullmatch(name) and not name.startswith("__MACOSX")
        }


def raw(data: bytes) -> tuple[str, dict[str, Any]]:
    """The record name and the one record, as fastavro reads the file on its own."""
    reader = fastavro.reader(io.BytesIO(data))
    (record,) = list(reader)
    assert isinstance(record, dict)
    return str(reader.writer_schema["name"]), record  # type: ignore[index]


def stat_fields(stat: WriteStat) -> tuple[Any, ...]:
    return (
        stat.file_id,
        stat.path,
        stat.partition_path,
        stat.prev_commit,
        stat.num_writes,
        stat.num_inserts,
        stat.num_update_writes,
        stat.num_deletes,
        stat.total_write_bytes,
        stat.file_size,
        stat.log_version,
        stat.base_file,
    )


def raw_stat_fields(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The same fields, picked from the raw record: stats naming a file (an inflight
    skeleton's carry no path, and say nothing yet)."""
    return [
        (
            s["fileId"],
            s["path"],
            s["partitionPath"] or "",
            s["prevCommit"] or "null",
            s["numWrites"] or 0,
            s["numInserts"] or 0,
            s["numUpdateWrites"] or 0,
            s["numDeletes"] or 0,
            s["totalWriteBytes"] or 0,
            s["fileSizeInBytes"] or 0,
            s["logVersion"] or 0,
            s["baseFile"] or "",
        )
        for stats in (record["partitionToWriteStats"] or {}).values()
        for s in stats
        if s["fileId"] and s["path"]
    ]


def test_the_tables_hold_every_kind_of_commit_file() -> None:
    kinds = {
        re.sub(r"^\d+(_\d+)?", "", name.rpartition("/")[2])
        for archive in V8_V9_ZIPS
        for name, data in commit_files(archive).items()
        if data
    }
    assert kinds == {
        ".commit",
        ".deltacommit",
        ".replacecommit",
        ".inflight",
        ".deltacommit.inflight",
        ".replacecommit.inflight",
    }


@pytest.mark.parametrize("archive", V8_V9_ZIPS, ids=name_of)
def test_hudis_commit_files_decode_to_what_they_hold(archive: Path) -> None:
    files = commit_files(archive)
    for name, data in files.items():
        decoded = CODEC.decode(data, name)
        if not data:  # a write's requested file: nothing yet
            assert decoded == JsonCommitCodec().decode(b"")
            continue
        record_name, record = raw(data)
        assert record_name in (f"{MODEL}.HoodieCommitMetadata", f"{MODEL}.HoodieReplaceCommitMetadata"), name
        assert decoded.operation == record["operationType"], name
        assert decoded.compacted is bool(record["compacted"])
        assert [stat_fields(s) for s in decoded.stats] == raw_stat_fields(record), name
        extra = dict(record["extraMetadata"] or {})
        assert decoded.schema == extra.pop("schema", None)
        assert decoded.extra == extra
        assert decoded.replaced == (record.get("partitionToReplaceFileIds") or {})
        if name.endswith(("commit", "deltacommit")) and decoded.stats:  # completed writes say their schema
            assert decoded.schema
            assert '"type":"record"' in decoded.schema


@pytest.mark.parametrize("archive", V8_V9_ZIPS, ids=name_of)
def test_hudis_commit_files_encode_back_to_files_that_decode_the_same(archive: Path) -> None:
    for name, data in commit_files(archive).items():
        if not data:
            continue
        decoded = CODEC.decode(data, name)
        encoded = CODEC.encode(decoded)
        assert CODEC.decode(encoded, "again") == decoded, name
        record_name, _ = raw(encoded)
        hudis_name, _ = raw(data)
        if name.endswith(".inflight"):  # Hudi's inflight skeleton is never a replace record
            continue
        assert record_name == hudis_name, name
        # The header (magic, schema text) is Hudi's, byte for byte: everything before the sync marker.
        header = data.index(data[-16:])
        assert encoded[:header] == data[:header], name


def test_hudi_1_0s_delta_commit_from_hudi_rs() -> None:
    data = (HUDI_RS_TABLES / "commit_metadata" / "v8_deltacommit.avro").read_bytes()
    decoded = CODEC.decode(data, "v8_deltacommit.avro")
    _, record = raw(data)
    assert [stat_fields(s) for s in decoded.stats] == raw_stat_fields(record)
    assert decoded.stats, "an upsert into a new file group"
    assert decoded.operation == record["operationType"]
    assert CODEC.decode(CODEC.encode(decoded)) == decoded


def fed_metadata(operation: str = "UPSERT", **more: Any) -> CommitMetadata:
    stats = [
        WriteStat("f1-0", "p=a/f1-0_0-1-1_20260101000000000.parquet", "p=a", num_writes=3, num_inserts=3),
        WriteStat(
            "f2-0",
            "p=b/.f2-0_20260101000000000.log.1_0-1-1",
            "p=b",
            prev_commit="20251231000000000",
            num_writes=2,
            num_update_writes=1,
            num_deletes=1,
            total_write_bytes=900,
            file_size=900,
            log_version=2,  # fed's account: its place in the slice at 20251231000000000
            base_file="f2-0_0-1-1_20251231000000000.parquet",
        ),
    ]
    return CommitMetadata(
        operation, stats, schema='{"type":"record","name":"r","fields":[]}', extra={"checkpoint": "7"}, **more
    )


def as_hudi_records_it(metadata: CommitMetadata) -> CommitMetadata:
    """``metadata`` as it reads back: a log file's stat as Hudi 1.x's append handle records it
    (its own delta commit as ``prevCommit``, the name's version, no base file), not fed's
    account of where it went (which fed's claims take at the commit, from the stats in hand)."""
    stats = [
        replace(s, prev_commit="20260101000000000", log_version=1, base_file="") if s.is_log else s
        for s in metadata.stats
    ]
    return replace(metadata, stats=stats)


def test_fed_metadata_round_trips_as_a_commit_or_a_replace_commit() -> None:
    plain = fed_metadata()
    encoded = CODEC.encode(plain)
    assert raw(encoded)[0] == "org.apache.hudi.avro.model.HoodieCommitMetadata"
    assert CODEC.decode(encoded) == as_hudi_records_it(plain)
    _, record = raw(encoded)
    assert record["version"] is None
    assert record["extraMetadata"]["checkpoint"] == "7"
    log_stat = record["partitionToWriteStats"]["p=b"][0]
    assert (log_stat["logFiles"], log_stat["prevCommit"], log_stat["logVersion"], log_stat["baseFile"]) == (
        [".f2-0_20260101000000000.log.1_0-1-1"],
        "20260101000000000",
        1,
        "",
    )

    overwrite = fed_metadata("INSERT_OVERWRITE", replaced={"p=a": ["f0-0"]})
    encoded = CODEC.encode(overwrite)
    assert raw(encoded)[0] == "org.apache.hudi.avro.model.HoodieReplaceCommitMetadata"
    assert CODEC.decode(encoded) == as_hudi_records_it(overwrite)
    compaction = fed_metadata("COMPACT", compacted=True)
    assert CODEC.decode(CODEC.encode(compaction)) == as_hudi_records_it(compaction)


def test_an_inflight_plan_is_a_commit_metadata_skeleton_that_gives_back_its_extra_metadata() -> None:
    """As Hudi 1.x writes a write's inflight file (for a replace commit too): the planned file
    groups without paths, the operation, and the commit's ``extraMetadata`` (a streaming
    sink's checkpoint), which reads back."""
    planned = [
        PlannedWrite("p=a", "f0-0", None, 3, 0, 0),
        PlannedWrite("p=b", "f1-0", "20260101000000000", 1, 2, 1),
    ]
    encoded = CODEC.encode_inflight("insert_overwrite", planned, {"checkpoint": "7"})
    name, record = raw(encoded)
    assert name == "org.apache.hudi.avro.model.HoodieCommitMetadata"
    assert record["operationType"] == "INSERT_OVERWRITE"
    skeleton = record["partitionToWriteStats"]["p=b"][0]
    assert (skeleton["fileId"], skeleton["prevCommit"], skeleton["path"]) == (
        "f1-0",
        "20260101000000000",
        None,
    )
    assert (skeleton["numInserts"], skeleton["numUpdateWrites"], skeleton["numDeletes"]) == (1, 2, 1)
    assert record["partitionToWriteStats"]["p=a"][0]["prevCommit"] == "null"
    decoded = CODEC.decode(encoded)
    assert (decoded.operation, decoded.extra, decoded.stats) == ("INSERT_OVERWRITE", {"checkpoint": "7"}, [])


def test_fields_hudis_schema_has_no_place_for_are_not_kept() -> None:
    """fed's own write-stat fields (column statistics, a compaction's last log version) ride in
    the version-6 JSON as extra fields; Hudi's Avro schema has none, so they are not kept."""
    metadata = fed_metadata()
    metadata.stats[0].column_stats = '{"id":[1,3]}'
    metadata.stats[0].last_log_version = 4
    (stat, _) = CODEC.decode(CODEC.encode(metadata)).stats
    assert (stat.column_stats, stat.last_log_version) == (None, 0)


def test_json_and_empty_files_read_as_the_json_codec_reads_them() -> None:
    metadata = fed_metadata()
    assert CODEC.decode(JsonCommitCodec().encode(metadata)) == metadata  # a legacy (6 -> 8) file
    assert CODEC.decode(b"") == JsonCommitCodec().decode(b"") == CommitMetadata("UNKNOWN")


@pytest.mark.parametrize(
    "data",
    [b"Obj\x01not avro", CODEC.encode(fed_metadata())[:-40], b"not json", b"\x00\x01"],
    ids=["bad-header", "truncated", "text", "binary"],
)
def test_unreadable_bytes_are_a_typed_error_naming_the_file(data: bytes) -> None:
    with pytest.raises(MetadataTableError, match=r"t/\.hoodie/timeline/1_2\.commit"):
        CODEC.decode(data, "t/.hoodie/timeline/1_2.commit")
