"""Taking in an instant another writer (Apache Hudi's) made without fed's metadata table, from
its own metadata (``fedcore.metadata.catch_up``): exactly, or refused naming the instant and
what to run, never a guess. Whole tables written by Hudi itself: ``tests/foreign/hudi_spark``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fedcore.exceptions import MetadataTableError
from fedcore.metadata.catch_up import instant_ops
from fedcore.metadata.format import ADD, REMOVE, REPLACE, Op
from fedcore.timeline.layout import V6

TABLE = "s3://bucket/trips"
BASE = "f1-0_0-1-0_20260101000000001.parquet"


def body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def rollback(undone: str, action: str | None, deleted: list[str], **extra: Any) -> bytes:
    instants = [{"commitTime": undone, "action": action}] if action else []
    partitions = {"country=us": {"partitionPath": "country=us", "successDeleteFiles": deleted, **extra}}
    return body(commitsRollback=[undone], instantsRollback=instants, partitionMetadata=partitions)


def test_a_replace_commit_is_taken_in_from_its_write_stats_and_retired_groups() -> None:
    stat = {
        "fileId": "f2-0",
        "path": "country=us/f2-0_0-1-0_20260101000000002.parquet",
        "partitionPath": "country=us",
        "fileSizeInBytes": 99,
    }
    commit = body(
        partitionToWriteStats={"country=us": [stat]}, partitionToReplaceFileIds={"country=us": ["f1-0"]}
    )
    assert instant_ops("20260101000000002", "replacecommit", commit, TABLE, V6.commits) == [
        Op("country=us", "f2-0_0-1-0_20260101000000002.parquet", 99, ADD, None),
        Op("country=us", "f1-0", 20260101000000002, REPLACE, None),
    ]


def test_a_stat_without_a_size_is_refused_naming_the_instant() -> None:
    stat = {
        "fileId": "f2-0",
        "path": "country=us/f2-0_0-1-0_20260101000000002.parquet",
        "partitionPath": "country=us",
    }
    commit = body(partitionToWriteStats={"country=us": [stat]})
    with pytest.raises(
        MetadataTableError,
        match=r"instant 20260101000000002 \(commit\) of table .* was written "
        r"without fed's metadata table.*records no file size.*fed repair s3://bucket/trips",
    ):
        instant_ops("20260101000000002", "commit", commit, TABLE, V6.commits)


def test_a_rollback_of_a_write_the_view_never_held_only_deletes_its_files() -> None:
    """A failed replace commit (or one undone before fed saw it): its files go, nothing to
    restore; the same when older rollback metadata does not name the action."""
    for action in ("replacecommit", None):
        data = rollback("20260101000000005", action, [f"country=us/{BASE}"])
        ops = instant_ops("20260101000000006", "rollback", data, TABLE, V6.commits, held=lambda _: False)
        assert ops == [Op("country=us", BASE, 0, REMOVE, None)]


def test_a_rollback_fed_cannot_undo_exactly_is_refused() -> None:
    held = {"20260101000000005"}.__contains__
    cases = {
        "rolled back the replace commit 20260101000000005": rollback(
            "20260101000000005", "replacecommit", []
        ),
        "does not say what action 20260101000000005 was": rollback("20260101000000005", None, []),
        r"appended rollback blocks to 1 log files \(.f1-0_20260101000000001.log.1_0-1-0": rollback(
            "20260101000000005",
            "deltacommit",
            [],
            rollbackLogFiles={".f1-0_20260101000000001.log.1_0-1-0": 120},
        ),
    }
    for why, data in cases.items():
        with pytest.raises(MetadataTableError, match=rf"instant 20260101000000006 \(rollback\).*{why}"):
            instant_ops("20260101000000006", "rollback", data, TABLE, V6.commits, held=held)
    # A completed commit (not a replace) that the view held: its files go, which undoes it.
    ops = instant_ops(
        "20260101000000006",
        "rollback",
        rollback("20260101000000005", "commit", [f"country=us/{BASE}"]),
        TABLE,
        V6.commits,
        held,
    )
    assert ops == [Op("country=us", BASE, 0, REMOVE, None)]
