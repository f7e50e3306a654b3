"""fedcore writing tables of versions 8 and 9 (Hudi 1.0 and 1.1+): created at the version
asked, with Hudi 1.x's timeline (completion times in the completed files' names), its Avro
commit metadata and its configuration keys, and read back exactly by hudi-rs after every write.
Apache Hudi 1.2's own Spark reader holds them too (``tox -e hudi``)."""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from collections import Counter
from pathlib import Path

import hudi
import pyarrow as pa
import pytest

from fed_dev.crash import Crash, crash_at
from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.commit import version_upgrade
from fedcore.commit.transaction import Transaction
from fedcore.exceptions import (
    CommitConflictError,
    ConfigError,
    InstantConflictError,
    InvalidTableConfigError,
    UnsupportedTableVersionError,
)
from fedcore.handle.config import TableConfig
from fedcore.steps import observe_steps
from fedcore.table import Table, create_table, load_table
from fedcore.timeline.avro_commit_codec import AvroCommitCodec

FAST_HEARTBEAT = {P.HEARTBEAT_INTERVAL_MS: "100", P.HEARTBEAT_TOLERABLE_MISSES: "2"}
COLUMNS = [
    "_hoodie_commit_time",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "id",
    "country",
    "ts",
    "fare",
]
#: ``<requested>_<completion>.<action>``: a completed instant's file in Hudi 1.x's timeline.
COMPLETED = re.compile(r"(\d{17})_(\d{17})\.(commit|replacecommit|clean|rollback|deltacommit)")


def new_table(path: str, version: str, storage_options: dict[str, str] | None = None, **extra: str) -> Table:
    return create_table(
        path,
        name="trips",
        record_key_fields=["id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={P.WRITE_TABLE_VERSION: version, **FAST_HEARTBEAT, **extra},
        storage_options=storage_options,
    )


def trips(ids: list[int], country: str, ts: int, fare: float = 0.0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "country": [country] * len(ids),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": [fare + i for i in ids],
        }
    )


def whole_rows(table: pa.Table, columns: list[str] = COLUMNS) -> Counter[tuple[object, ...]]:
    return Counter(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


def hudi_rs_rows(path: str, columns: list[str] = COLUMNS) -> Counter[tuple[object, ...]]:
    built = hudi.HudiTableBuilder.from_base_uri(path).build()
    batches = built.read()
    return whole_rows(
        pa.Table.from_batches(batches) if batches else built.get_schema().empty_table(), columns
    )


def data_rows(table: Table) -> dict[int, tuple[str, int, float]]:
    read = table.scan().to_arrow()
    return {r["id"]: (r["country"], r["ts"], r["fare"]) for r in read.to_pylist()}


def timeline_names(path: str) -> list[str]:
    return sorted(os.listdir(f"{path.removeprefix('file://')}/.hoodie/timeline"))


@pytest.mark.parametrize(("version", "key"), [("8", P.WRITE_TABLE_VERSION), ("9", P.TABLE_VERSION)])
def test_a_table_is_created_at_the_version_asked_with_hudi_1x_keys(
    tmp_path: Path, version: str, key: str
) -> None:
    table = create_table(
        str(tmp_path / "t"),
        name="trips",
        record_key_fields=["id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={key: version},
    )
    stored = TableConfig.load(table.handle.fs.table_fs, table.path)
    assert {k: stored.get(k) for k in (P.TABLE_VERSION, P.TABLE_INITIAL_VERSION)} == {
        P.TABLE_VERSION: version,
        P.TABLE_INITIAL_VERSION: version,
    }
    assert (stored[P.TIMELINE_LAYOUT_VERSION], stored[P.TIMELINE_PATH], stored[P.TIMELINE_HISTORY_PATH]) == (
        "2",
        "timeline",
        "history",
    )
    # An ordering field: Hudi 1.x's default merge mode, the greatest ordering value wins.
    assert stored[P.RECORD_MERGE_MODE] == "EVENT_TIME_ORDERING"
    assert stored[P.KEY_GENERATOR_TYPE] == "SIMPLE"
    assert P.RECORD_MERGER_STRATEGY not in stored, "version 6's name of the merger strategy"
    if version == "8":
        assert (stored[P.PRECOMBINE_FIELD], stored[P.PAYLOAD_CLASS], stored[P.RECORD_MERGE_STRATEGY_ID]) == (
            "ts",
            P.DEFAULT_HOODIE_PAYLOAD,
            P.DEFAULT_RECORD_MERGER_STRATEGY,
        )
    else:  # version 9 names the ordering field anew and has no payload class
        assert (stored[P.ORDERING_FIELDS], stored.get(P.PRECOMBINE_FIELD), stored.get(P.PAYLOAD_CLASS)) == (
            "ts",
            None,
            None,
        )
    assert stored.precombine_field == "ts"
    assert os.path.isdir(tmp_path / "t" / ".hoodie" / "timeline" / "history")
    assert load_table(table.path).scan().to_arrow().num_rows == 0


def test_without_an_ordering_field_the_latest_write_wins(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = create_table(
        path, name="trips", record_key_fields=["id"], properties={P.WRITE_TABLE_VERSION: "8"}
    )
    config = table.handle.config
    assert (config[P.RECORD_MERGE_MODE], config[P.PAYLOAD_CLASS], config[P.RECORD_MERGE_STRATEGY_ID]) == (
        "COMMIT_TIME_ORDERING",
        P.OVERWRITE_WITH_LATEST_PAYLOAD,
        P.COMMIT_TIME_MERGE_STRATEGY,
    )
    table.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    table.upsert(pa.table({"id": [1], "v": ["c"]}))
    assert sorted(load_table(path).scan().to_arrow().select(["id", "v"]).to_pylist(), key=str) == [
        {"id": 1, "v": "c"},
        {"id": 2, "v": "b"},
    ]
    columns = [*COLUMNS[:3], "id", "v"]
    assert hudi_rs_rows(path, columns) == whole_rows(load_table(path).scan().to_arrow(), columns)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({P.WRITE_TABLE_VERSION: "7"}, "fed creates tables of version 6, 8, 9"),
        ({P.WRITE_TABLE_VERSION: "8", P.TABLE_VERSION: "9"}, "given twice"),
        ({P.RECORD_MERGE_MODE: "EVENT_TIME_ORDERING"}, "version 6 orders records by its payload class"),
        ({P.WRITE_TABLE_VERSION: "9", P.RECORD_MERGE_MODE: "CUSTOM"}, "fed writes EVENT_TIME_ORDERING"),
        ({P.WRITE_TABLE_VERSION: "8", P.PAYLOAD_CLASS: P.DEFAULT_HOODIE_PAYLOAD}, "merges by hoodie.record"),
    ],
)
def test_a_version_fed_does_not_create_or_a_key_of_another_version_is_refused(
    tmp_path: Path, properties: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidTableConfigError, match=message):
        create_table(str(tmp_path / "t"), name="trips", record_key_fields=["id"], properties=properties)
    assert not (tmp_path / "t" / ".hoodie" / "hoodie.properties").exists()


@pytest.mark.parametrize("version", ["8", "9"])
def test_every_write_is_read_by_hudi_rs_as_fedcore_reads_it(tmp_path: Path, version: str) -> None:
    """Each write operation, then fedcore's and hudi-rs's whole rows (meta columns included)
    equal each other and a model of event-time ordering; every completed instant is named by
    its completion time, later than its requested time and than every instant before it."""
    path = str(tmp_path / "t")
    table = new_table(path, version, **{str(P.CLEANER_COMMITS_RETAINED): "2"})
    model: dict[int, tuple[str, int, float]] = {}

    def check() -> None:
        fed = load_table(path)
        assert data_rows(fed) == model
        assert hudi_rs_rows(path) == whole_rows(fed.scan().to_arrow())

    table.bulk_insert(trips([1, 2, 3, 4], "us", 10))
    model |= {i: ("us", 10, 0.0 + i) for i in (1, 2, 3, 4)}
    check()
    table.upsert(trips([1, 5], "us", 20, 100.0))  # an update and an insert
    model |= {1: ("us", 20, 101.0), 5: ("us", 20, 105.0)}
    check()
    table.upsert(trips([2], "us", 5, 200.0))  # an older ordering value: the stored record stays
    check()
    table.insert(trips([6, 7], "de", 1))
    model |= {6: ("de", 1, 6.0), 7: ("de", 1, 7.0)}
    check()
    table.delete(trips([3, 6], "us", 30).set_column(1, "country", pa.array(["us", "de"])))
    del model[3], model[6]
    check()
    table.insert_overwrite(trips([8], "de", 1))  # replaces the partition de
    del model[7]
    model[8] = ("de", 1, 8.0)
    check()
    table.upsert(trips([4], "us", 40, 400.0))
    model[4] = ("us", 40, 404.0)
    check()

    names = timeline_names(path)
    completed = [COMPLETED.fullmatch(n) for n in names]
    done = [(m[1], m[2], m[3]) for m in completed if m is not None]
    assert {action for _, _, action in done} >= {"commit", "replacecommit", "clean"}
    assert all(requested < completion for requested, completion, _ in done)
    by_request = sorted(done)
    # Hudi's time generator: an instant is requested after every completion it has seen.
    for (_, earlier_completion, _), (later_request, _, _) in itertools.pairwise(by_request):
        assert earlier_completion < later_request
    # The commit metadata is Hudi 1.x's Avro, and says what the write did.
    last_commit = [n for n in names if n.endswith(".commit") and COMPLETED.fullmatch(n)][-1]
    body = (tmp_path / "t" / ".hoodie" / "timeline" / last_commit).read_bytes()
    assert body.startswith(b"Obj\x01")
    metadata = AvroCommitCodec().decode(body)
    assert (metadata.operation, sum(s.num_update_writes for s in metadata.stats)) == ("UPSERT", 1)


@pytest.mark.parametrize("table_type", [P.TABLE_TYPE_COW, P.TABLE_TYPE_MOR])
def test_what_a_one_row_upsert_lists_on_version_9_beside_version_6(
    s3_server: LoopbackS3, table_type: str
) -> None:
    """A commit's fixed cost on S3, counted at the server: a one-row upsert lists the instants'
    folder once to plan, once to request its instant and once for the table services on either
    version; version 9 lists it once more to choose its completion time after the claims
    (``timeline.completion_time``), and lists ``.hoodie/`` for fed's pointer files where that
    is a folder of its own (planning, the table services), never to request an instant or
    choose a completion time. Every other listing is the same on both."""
    bucket = s3_server.create_bucket("versions")
    listed: dict[str, Counter[str]] = {}
    for version in ("6", "9"):
        table = new_table(
            f"{bucket}/trips{version}", version, s3_server.storage_options(), **{P.TABLE_TYPE: table_type}
        )
        table.insert(trips([1, 2, 3], "us", 1))
        table.upsert(trips([1], "us", 2, 10.0))  # a slice with a log file (merge-on-read) or a rewrite
        s3_server.requests.reset()
        table.upsert(trips([2], "us", 3, 20.0))
        listed[version] = Counter()
        for prefix, count in s3_server.requests.listed.items():
            within = prefix.split(f"/trips{version}/", 1)[1]
            listed[version][re.sub(r"\d{17}", "<instant>", within)] += count
        expected = Counter({(1, "us", 2, 11.0): 1, (2, "us", 3, 22.0): 1, (3, "us", 1, 3.0): 1})
        assert whole_rows(table.scan().to_arrow(), ["id", "country", "ts", "fare"]) == expected
    v6, v9 = listed["6"], listed["9"]
    assert v6[".hoodie/"] == 3, v6
    assert (v9[".hoodie/timeline/"], v9[".hoodie/"]) == (4, 2), v9
    others = {prefix for prefix in v6 | v9 if prefix not in (".hoodie/", ".hoodie/timeline/")}
    assert {p: v9[p] for p in others} == {p: v6[p] for p in others}, (v6, v9)


@pytest.mark.parametrize("version", ["8", "9"])
def test_a_write_rolled_forward_after_its_commit_decision_keeps_its_completion_time(
    backend: Backend, version: str
) -> None:
    table = new_table(backend.table_path, version, backend.storage_options)
    table.upsert(trips([1, 2], "us", 1))
    with pytest.raises(Crash), observe_steps(crash_at("outcome")):
        table.upsert(trips([2, 3], "us", 2, 10.0))
    fs = table.handle.fs.table_fs
    pending = table.handle.timeline().pending()
    assert [i.action for i in pending] == ["commit"]
    outcome = fs.cat_file(table.handle.outcome_path(pending[0].time))
    decided = outcome.split(b"\n", 1)[0].split()
    assert decided[0] == b"commit"
    assert len(decided) == 2, "the completion time is decided with the commit"
    time.sleep(0.5)  # the heartbeat expires: the next writer recovers the instant
    load_table(backend.table_path, options=FAST_HEARTBEAT, storage_options=backend.storage_options).upsert(
        trips([9], "de", 1)
    )
    completed = [i for i in table.handle.timeline().completed() if i.time == pending[0].time]
    assert [i.completion_time for i in completed] == [decided[1].decode()]
    assert data_rows(load_table(backend.table_path, storage_options=backend.storage_options)) == {
        1: ("us", 1, 1.0),
        2: ("us", 2, 12.0),
        3: ("us", 2, 13.0),
        9: ("de", 1, 9.0),
    }


def test_archival_and_cleaning_keep_the_table_hudi_rs_reads(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = new_table(
        path,
        "9",
        **{
            str(P.CLEANER_COMMITS_RETAINED): "1",
            str(P.ARCHIVE_MIN_INSTANTS): "2",
            str(P.ARCHIVE_MAX_INSTANTS): "3",
        },
    )
    model: dict[int, tuple[str, int, float]] = {}
    for step in range(8):
        table.upsert(trips([step % 3, 10 + step], "us", step, 10.0 * step))
        model |= {
            step % 3: ("us", step, 10.0 * step + step % 3),
            10 + step: ("us", step, 10.0 * step + 10 + step),
        }
    fed = load_table(path)
    assert data_rows(fed) == model
    assert hudi_rs_rows(path) == whole_rows(fed.scan().to_arrow())
    active = [n for n in timeline_names(path) if COMPLETED.fullmatch(n)]
    assert 0 < len([n for n in active if n.endswith(".commit")]) < 8, "older commits were archived"


@pytest.mark.parametrize("target", [8, 9])
def test_fed_upgrade_moves_a_version_6_table_to_hudi_1x_as_hudi_does(tmp_path: Path, target: int) -> None:
    """The timeline moves into ``.hoodie/timeline/`` (completed instants named by their files'
    modification times, commit metadata re-encoded as Avro), the keys of the version are
    written, and the table reads the same, by fedcore and hudi-rs; its writes then merge as
    before (version 6's default payload: the latest write wins)."""
    path = str(tmp_path / "t")
    table = new_table(path, "6", **{str(P.CLEANER_COMMITS_RETAINED): "2"})
    for step in range(4):
        table.upsert(trips([1, 2 + step], "us", 10 - step, 10.0 * step))
    table.insert_overwrite(trips([9], "de", 1))
    before = whole_rows(load_table(path).scan().to_arrow())
    changed = table.upgrade(table_version=target)
    assert changed[P.TABLE_VERSION] == ("6", str(target))
    assert changed[P.RECORD_MERGE_MODE] == ("", "COMMIT_TIME_ORDERING")
    upgraded = load_table(path)
    assert upgraded.config.version == target
    assert upgraded.config[P.TABLE_INITIAL_VERSION] == "6"
    assert whole_rows(upgraded.scan().to_arrow()) == before
    assert hudi_rs_rows(path) == before
    hoodie = tmp_path / "t" / ".hoodie"
    assert not [n for n in os.listdir(hoodie) if re.fullmatch(r"\d{17}\..*", n)], "no instant left behind"
    names = timeline_names(path)
    done = [m for m in map(COMPLETED.fullmatch, names) if m is not None]
    assert {m[3] for m in done} == {"commit", "replacecommit", "clean"}
    assert all(m[1] < m[2] for m in done), "completed after requested"
    commit = next(n for n in names if COMPLETED.fullmatch(n) and n.endswith(".commit"))
    assert (hoodie / "timeline" / commit).read_bytes().startswith(b"Obj\x01")
    clean = next(n for n in names if COMPLETED.fullmatch(n) and n.endswith(".clean"))
    assert (hoodie / "timeline" / clean).read_bytes().startswith(b"Obj\x01")
    # Time travel reads the same as before the move.
    writes = upgraded.timeline().completed(upgraded.handle.write_actions)
    assert whole_rows(upgraded.read(as_of=writes[-1].time)) == before
    upgraded.upsert(trips([1], "us", 0, 500.0))  # an older ordering value: the latest write wins
    assert data_rows(load_table(path))[1] == ("us", 0, 501.0)
    assert hudi_rs_rows(path) == whole_rows(load_table(path).scan().to_arrow())
    assert table.upgrade(table_version=target) == {}, "upgraded already"


def test_a_write_may_repeat_the_table_version_as_hudi_1x_jobs_pass_it(tmp_path: Path) -> None:
    """Hudi 1.x's jobs pass ``hoodie.write.table.version`` on every write: the table's own
    version is accepted, another refused with a typed error that names ``fed upgrade``."""
    path = str(tmp_path / "t")
    new_table(path, "9").upsert(trips([1], "us", 1))
    load_table(path).upsert(trips([2], "us", 1), {P.WRITE_TABLE_VERSION: "9"})
    with pytest.raises(ConfigError, match=r"does not change the table's version.*fed upgrade"):
        load_table(path).upsert(trips([3], "us", 1), {P.WRITE_TABLE_VERSION: "8"})
    assert sorted(data_rows(load_table(path))) == [1, 2]


def test_a_table_kept_open_across_an_upgrade_follows_it(backend: Backend) -> None:
    """A reader and a writer that opened the table at version 6 (a long-lived pipeline) go on
    after another process upgraded it (Hudi 1.x's writer at its defaults does, or `fed
    upgrade`): they read its rows (not an empty table from the old timeline folder, which
    the upgrade emptied), and write at the new version."""
    path, options = backend.table_path, backend.storage_options
    table = new_table(path, "6", options)
    table.upsert(trips([1, 2], "us", 5))
    kept = load_table(path, storage_options=options, options={str(P.CLEANER_COMMITS_RETAINED): "3"})
    before = whole_rows(kept.scan().to_arrow())
    assert whole_rows(kept.scan().to_arrow()) == before  # a second read lists on from the first
    load_table(path, storage_options=options).upgrade(table_version=9)
    assert kept.config.version == 6, "not yet listed"
    assert whole_rows(kept.scan().to_arrow()) == before
    assert kept.config.version == 9
    assert kept.handle.options[str(P.CLEANER_COMMITS_RETAINED)] == "3", "the caller's options kept"
    assert P.PAYLOAD_CLASS not in kept.handle.options, "version 6's keys gone with its config"
    first = load_table(path, storage_options=options).timeline().completed()[0].time
    assert kept.partitions(as_of=first) == ["country=us"], "its file index follows too"
    kept.upsert(trips([2, 3], "us", 1, 100.0))  # commit-time ordering: the latest write wins
    assert data_rows(load_table(path, storage_options=options)) == {
        1: ("us", 5, 1.0),
        2: ("us", 1, 102.0),
        3: ("us", 1, 103.0),
    }
    written = load_table(path, storage_options=options).timeline().completed()[-1]
    assert written.completion_time, "the write completed as version 9 names it"


def test_a_version_6_handle_beside_a_crashed_upgrade_reads_its_config_only_when_it_changed(
    s3_server: LoopbackS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade that crashed before it switched the config leaves ``.hoodie/timeline/``
    behind, and the table at version 6: a long-lived handle's latest reads still list the
    timeline's tail and ask only whether ``hoodie.properties`` changed (a HEAD), not read it
    and list the whole timeline each time; once an upgrade completes, the handle follows it."""
    tables = s3_server.create_bucket("tables")
    path, options = f"{tables}/trips", s3_server.storage_options()
    new_table(path, "6", options).upsert(trips([1, 2], "us", 5))
    kept = load_table(path, storage_options=options)
    before = whole_rows(kept.scan().to_arrow())

    def crash(*_: object) -> dict[str, str]:
        raise Crash("before the config switch")

    with monkeypatch.context() as patched:
        patched.setattr(version_upgrade, "_version_keys", crash)
        with pytest.raises(Crash):
            load_table(path, storage_options=options).upgrade(table_version=9)
    assert s3_server.client().list_objects_v2(Bucket=tables[5:], Prefix="trips/.hoodie/timeline/")["KeyCount"]
    assert whole_rows(kept.scan().to_arrow()) == before  # reads the config: it says 6
    assert kept.config.version == 6
    planned = kept.file_slices()
    s3_server.requests.reset()
    assert kept.file_slices() == planned
    # The timeline's tail (one LIST of .hoodie/) and the config's HEAD; before, a GET of the
    # config and a LIST of the whole timeline too, on every read.
    assert s3_server.requests.by_method == {"LIST": 1, "HEAD": 1}, s3_server.requests.by_method
    assert whole_rows(kept.scan().to_arrow()) == before

    load_table(path, storage_options=options).upsert(trips([3], "us", 5))  # at version 6 still
    assert data_rows(kept) == data_rows(load_table(path, storage_options=options))
    assert sorted(data_rows(kept)) == [1, 2, 3]
    assert kept.config.version == 6

    load_table(path, storage_options=options).upgrade(table_version=9)  # finishes what was left
    assert whole_rows(kept.scan().to_arrow()) == whole_rows(
        load_table(path, storage_options=options).scan().to_arrow()
    )
    assert sorted(data_rows(kept)) == [1, 2, 3]
    assert kept.config.version == 9


def test_fed_upgrade_takes_a_version_8_table_to_9(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = new_table(path, "8")
    table.upsert(trips([1, 2], "us", 5))
    before = whole_rows(load_table(path).scan().to_arrow())
    timeline = timeline_names(path)
    changed = table.upgrade(table_version=9)
    config = load_table(path).config
    assert changed[P.TABLE_VERSION] == ("8", "9")
    assert (config[P.ORDERING_FIELDS], config[P.LEGACY_PAYLOAD_CLASS]) == ("ts", P.DEFAULT_HOODIE_PAYLOAD)
    assert {P.PRECOMBINE_FIELD, P.PAYLOAD_CLASS, P.RECORD_MERGE_STRATEGY_ID}.isdisjoint(config)
    assert config[P.RECORD_MERGE_MODE] == "EVENT_TIME_ORDERING"
    assert timeline_names(path) == timeline, "8 -> 9 changes keys only"
    assert whole_rows(load_table(path).scan().to_arrow()) == before == hudi_rs_rows(path)
    with pytest.raises(UnsupportedTableVersionError, match="never down"):
        load_table(path).upgrade(table_version=8)


@pytest.mark.parametrize("target", [8, 9])
def test_fed_upgrade_compacts_a_merge_on_read_table_and_moves_it_as_hudi_does(
    tmp_path: Path, target: int
) -> None:
    """A merge-on-read table of version 6 with log files: compacted first, then moved; its
    rows, and time travel to every write before, read the same by fedcore and hudi-rs; its
    merge mode is event time as Hudi's upgrade makes it (a precombine field), so a write with
    an older ordering value no longer replaces a record; later writes are Hudi 1.x's log files."""
    path = str(tmp_path / "t")
    table = new_table(path, "6", **{P.TABLE_TYPE: P.TABLE_TYPE_MOR})
    table.upsert(trips([1, 2, 3], "us", 5))
    table.upsert(trips([1, 4], "us", 6, 100.0))
    table.upsert(trips([2], "us", 7, 200.0))
    assert any(s.log_files for s in table.file_slices())
    writes = table.timeline().completed(table.handle.write_actions)
    before = {w.time: whole_rows(table.read(columns=COLUMNS, as_of=w.time)) for w in writes}
    latest = whole_rows(table.scan().to_arrow())
    changed = table.upgrade(table_version=target)
    assert changed[P.RECORD_MERGE_MODE] == ("", "EVENT_TIME_ORDERING")
    upgraded = load_table(path)
    assert (upgraded.config.version, upgraded.config.merge_on_read) == (target, True)
    completed = upgraded.timeline().completed()
    assert completed[-1].action == "commit", "compacted before the move"
    assert not [s for s in upgraded.file_slices() if s.log_files], "every slice a base file alone"
    assert whole_rows(upgraded.scan().to_arrow()) == latest
    assert hudi_rs_rows(path) == latest
    for instant, rows in before.items():
        assert whole_rows(upgraded.read(columns=COLUMNS, as_of=instant)) == rows, instant
    upgraded.upsert(trips([1], "us", 1, 900.0))  # older than the stored ordering value: ignored
    upgraded.upsert(trips([3], "us", 9, 300.0))
    assert {k: v for k, v in data_rows(load_table(path)).items() if k in (1, 3)} == {
        1: ("us", 6, 101.0),
        3: ("us", 9, 303.0),
    }
    assert any(COMPLETED.fullmatch(n) for n in timeline_names(path))
    logs = [name for s in load_table(path).file_slices() for name, _ in s.log_files]
    assert logs
    assert all(name.split("_")[1].split(".")[0] != completed[-1].time for name in logs), (
        "named by delta commit"
    )
    assert hudi_rs_rows(path) == whole_rows(load_table(path).scan().to_arrow())


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_fed_upgrade_refuses_pending_instants(tmp_path: Path, table_type: str) -> None:
    """Refused before anything is done: a merge-on-read table is not compacted either."""
    path = str(tmp_path / "t")
    table = new_table(path, "6", **{P.TABLE_TYPE: table_type})
    table.upsert(trips([1], "us", 1))
    table.upsert(trips([1], "us", 2))
    before = [str(i) for i in load_table(path).timeline().completed()]
    action = "deltacommit" if table_type == P.TABLE_TYPE_MOR else "commit"
    in_flight = Transaction(table.handle, action)  # its heartbeat beating
    with in_flight, pytest.raises(InstantConflictError, match="pending instants"):
        load_table(path).upgrade(table_version=9)
    assert load_table(path).config.version == 6
    assert [str(i) for i in load_table(path).timeline().completed()] == before, "nothing done, no compaction"


def test_an_upgrade_keeps_the_version_6_log_files_of_a_slice_whose_base_was_archived(tmp_path: Path) -> None:
    """After upgrading a merge-on-read table, its version-6 log files stay in their slice even
    where archival took the slice's base instant (whose completion time then is unknown):
    time travel answers as before the upgrade, and the latest slice holds none of them."""
    path = str(tmp_path / "t")
    archiving = {
        P.TABLE_TYPE: P.TABLE_TYPE_MOR,
        str(P.ARCHIVE_MIN_INSTANTS): "3",
        str(P.ARCHIVE_MAX_INSTANTS): "4",
        str(P.CLEANER_COMMITS_RETAINED): "2",
        str(P.METADATA_COMPACT_DELTAS): "1",
    }
    table = new_table(path, "6", **archiving)
    table.upsert(trips([1, 2], "fr", 5))  # the slice's base
    table.upsert(trips([1], "fr", 9, 100.0))  # its log files
    table.upsert(trips([1], "fr", 3, 200.0))
    for i in range(8):
        table.upsert(trips([100 + i], "us", 5))
    base = min(s.base_instant for s in load_table(path).file_slices() if s.partition_path == "country=fr")
    assert load_table(path).timeline().find(base) is None, "the base instant was archived"
    writes = load_table(path).timeline().completed(table.handle.write_actions)
    before = {w.time: whole_rows(load_table(path).read(columns=COLUMNS, as_of=w.time)) for w in writes}
    load_table(path).upgrade(table_version=9)
    upgraded = load_table(path)
    for instant, rows in before.items():
        assert whole_rows(upgraded.read(columns=COLUMNS, as_of=instant)) == rows, instant
    assert not [s for s in upgraded.file_slices() if s.log_files], "no old log file on a new slice"
    assert hudi_rs_rows(path) == whole_rows(upgraded.scan().to_arrow())


def test_a_write_that_began_on_version_6_during_the_upgrade_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that requested its instant after the upgrade checked for pending ones and
    before the switch: its instant is rolled back, so its commit fails (nothing of it visible)
    rather than land in a folder the new timeline never reads."""
    path = str(tmp_path / "t")
    table = new_table(path, "6")
    table.upsert(trips([1, 2], "us", 1))
    before = data_rows(load_table(path))
    stale = load_table(path, options=FAST_HEARTBEAT)
    began, upgraded = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def hold(step: str) -> None:
        if step == "data":
            began.set()
            upgraded.wait(30)

    def late_write() -> None:
        try:
            with observe_steps(hold):
                stale.upsert(trips([3], "us", 1))
        except BaseException as error:
            failure.append(error)

    real_move = version_upgrade._moved_instants

    def move_after_the_late_write_began(*args: object) -> list[str]:
        writer.start()
        assert began.wait(30)
        return real_move(*args)  # type: ignore[arg-type]

    writer = threading.Thread(target=late_write)
    monkeypatch.setattr(version_upgrade, "_moved_instants", move_after_the_late_write_began)
    table.upgrade(table_version=9)
    upgraded.set()
    writer.join(60)
    assert len(failure) == 1
    assert isinstance(failure[0], CommitConflictError)
    after = load_table(path)
    assert after.config.version == 9
    assert data_rows(after) == before
    assert after.timeline().pending() == []
    hoodie = tmp_path / "t" / ".hoodie"
    assert not [n for n in os.listdir(hoodie) if re.fullmatch(r"\d{17}\..*", n)]
    assert hudi_rs_rows(path) == whole_rows(after.scan().to_arrow())
