"""Creating over an earlier table's remains, hand-edited storage keys, rollback after a clean,
and options that must reach what they configure."""

from __future__ import annotations

import json
import time

import pytest

from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import (
    ConfigError,
    MetadataTableError,
    RollbackError,
    StorageStrategyMismatchError,
    TableAlreadyExistsError,
)
from fedcore.handle.config import properties_path
from fedcore.metadata.table import MetadataTable
from fedcore.services.rollback import rollback
from fedcore.steps import observe_steps
from fedcore.table import Table, load_table
from fedcore.write.client import WriteClient

from ..write.test_writes import make_table, rows, trips


def test_create_refuses_a_folder_holding_an_earlier_timeline(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1, 2]))
    table.fs.table_fs.rm_file(properties_path(table.path))
    with pytest.raises(TableAlreadyExistsError, match="start_over"):
        make_table(backend, layout="hive")
    with pytest.raises(TableAlreadyExistsError, match="start_over"):  # still refused: nothing changed
        make_table(backend, layout="hive")
    from fedcore.table import create_table

    fresh = create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        storage_options=backend.storage_options,
        start_over=True,
    )
    assert fresh.timeline().instants == ()
    assert rows(fresh) == {}
    WriteClient(fresh).upsert(trips([7]))
    assert rows(fresh) == {7: ("us", 17.0)}


def test_create_over_a_live_table_is_refused_even_when_starting_over(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1]))
    from fedcore.table import create_table

    with pytest.raises(TableAlreadyExistsError):
        create_table(
            backend.table_path,
            name="trips",
            record_key_fields=["trip_id"],
            storage_options=backend.storage_options,
            start_over=True,
        )
    assert rows(table) == {1: ("us", 11.0)}


@pytest.mark.parametrize(
    ("key", "value"),
    [(P.STORAGE_PATH, "s3://elsewhere"), (P.STORAGE_HASH_FUNCTION, "xxh64"), (P.STORAGE_CHECKSUM, None)],
)
def test_hand_edited_storage_keys_are_caught(backend: Backend, key: str, value: str | None) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([1]))
    fs = table.fs.table_fs
    lines = bytes(fs.cat_file(properties_path(table.path))).decode("latin-1").splitlines()
    edited = [line for line in lines if not line.startswith(key + "=")]
    if value is not None:
        edited.append(f"{key}={value.replace(':', chr(92) + ':')}")
    fs.pipe_file(properties_path(table.path), "\n".join(edited).encode("latin-1"))
    with pytest.raises(StorageStrategyMismatchError, match="edited by hand"):
        load_table(backend.table_path, storage_options=backend.storage_options)


def test_the_latest_write_rolls_back_through_a_clean_that_spared_it(backend: Backend) -> None:
    table = make_table(backend, **{P.CLEANER_COMMITS_RETAINED: "1"})
    writer = WriteClient(table)
    writer.upsert(trips([1, 2], fare=10.0))
    second = writer.upsert(trips([1], fare=20.0)).instant
    third = writer.upsert(trips([1], fare=30.0)).instant
    actions = [i.action for i in table.timeline()]
    assert actions[-1] == "clean", "the writer's clean ran after the third write"
    rollback(table.handle, third)
    assert rows(table) == {1: ("us", 21.0), 2: ("us", 12.0)}
    # The clean deleted the first write's version of the file group: the second write,
    # which superseded it, can no longer be rolled back; the error says so plainly.
    with pytest.raises(RollbackError, match="can no longer be rolled back: clean"):
        rollback(table.handle, second)
    assert rows(table) == {1: ("us", 21.0), 2: ("us", 12.0)}


def test_storage_keys_given_to_a_writer_must_match_the_table(backend: Backend) -> None:
    table = make_table(backend)
    with pytest.raises(StorageStrategyMismatchError):
        WriteClient(table, {P.STORAGE_STRATEGY_CLASS: "hive"})
    with pytest.raises(StorageStrategyMismatchError):
        WriteClient(table, {P.STORAGE_PATH: f"{backend.storage_path}-other"})
    with pytest.raises(ConfigError, match=P.STORAGE_CHECKSUM):
        WriteClient(table, {P.STORAGE_CHECKSUM: "1"})
    WriteClient(table, {P.STORAGE_PATH: backend.storage_path}).upsert(trips([1]))  # the same: fine
    assert rows(table) == {1: ("us", 11.0)}


def test_writer_options_reach_the_heartbeat_and_are_checked_before_writing(backend: Backend) -> None:
    table = make_table(backend)  # the table's own config beats every 100 ms
    fs = table.fs.table_fs
    folder = f"{table.path}/.hoodie/.heartbeat"
    seen: list[tuple[bytes, bytes]] = []

    def watch(step: str) -> None:
        if step == "inflight":
            (beat,) = fs.ls(folder, detail=False, refresh=True)
            first = bytes(fs.cat_file(beat))
            time.sleep(0.45)
            seen.append((first, bytes(fs.cat_file(beat))))

    # The writer's option (one beat a minute) must win over the table's 100 ms.
    with observe_steps(watch):
        WriteClient(table, {P.HEARTBEAT_INTERVAL_MS: "60000"}).upsert(trips([1]))
    ((first, later),) = seen
    assert first == later, "the heartbeat ran at the table's interval, not the writer's"
    seen.clear()
    with observe_steps(watch):
        WriteClient(table).upsert(trips([2]))
    ((first, later),) = seen
    assert first != later, "without the option, the table's 100 ms interval applies"
    for key, bad in [
        (P.HEARTBEAT_INTERVAL_MS, "soon"),
        (P.MAX_FILE_SIZE, "big"),
        (P.CLEANER_COMMITS_RETAINED, "0"),
        (P.CLEAN_AUTOMATIC, "maybe"),
        (P.ARCHIVE_MIN_INSTANTS, "40"),
    ]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            WriteClient(table, {key: bad})
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_table(backend.table_path, options={key: bad}, storage_options=backend.storage_options)
    assert rows(table) == {1: ("us", 11.0), 2: ("us", 12.0)}


def test_a_missing_delta_is_caught_up_from_its_commit_or_refused_naming_the_instant(backend: Backend) -> None:
    table = make_table(backend)
    WriteClient(table).upsert(trips([2], "de"))
    instant = WriteClient(table, {P.METADATA_COMPACT_DELTAS: "100"}).upsert(trips([1])).instant
    index = table.handle.file_index
    assert isinstance(index, MetadataTable)
    table.fs.table_fs.rm_file(index.delta_path(instant))

    def fresh() -> Table:
        return load_table(backend.table_path, storage_options=backend.storage_options)

    # The commit's own metadata says what it wrote, as it does for a writer that keeps no delta.
    assert rows(fresh()) == {1: ("us", 11.0), 2: ("de", 12.0)}
    # A commit whose stats do not say how big its files are cannot be caught up exactly.
    commit = f"{table.path}/.hoodie/{instant}.commit"
    body = json.loads(table.fs.table_fs.cat_file(commit))
    for stats in body["partitionToWriteStats"].values():
        for stat in stats:
            stat["fileSizeInBytes"] = 0
    table.fs.table_fs.pipe_file(commit, json.dumps(body).encode())
    with pytest.raises(MetadataTableError) as caught:
        fresh().read()
    message = str(caught.value)
    assert f"instant {instant} (commit)" in message
    assert "written without fed's metadata table" in message
    assert "damaged" not in message
    assert "fed repair" in message
