"""Apache Hudi's own Spark writers and fedcore writing one Hive-layout table, turn about.

A user moving pipelines to fed keeps old Hudi jobs writing the same table for a while. Hudi's
writers know nothing of fed's metadata table: fed takes their commits, deltas commits and
cleans in from the metadata Hudi's timeline keeps (``fedcore.metadata.catch_up``), and fed's
writes drop the metadata table Hudi's writers keep (which would otherwise be stale for Hudi's
readers). For Hudi 0.15 and 1.0.2, on both table types, Hudi upserts and deletes (with its
own metadata table on, and its cleaner keeping one commit) alternate with fedcore's upserts,
deletes and, on merge-on-read, compactions; after every step fedcore's reader (a new handle
and one kept across the steps) and Hudi's reader return exactly the model's rows. Hudi 1.0.2
and 1.2.0 do the same at their defaults, upgrading the table to their own table version as
their first write begins, and fed follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hudi as hudi_rs
import pyarrow as pa
import pytest
from foreign.hudi_spark.bundles import (
    HUDI_VERSIONS,
    HudiSession,
    check_time_travel,
    run_hudi,
    session_fixture,
)

from fedcore import properties as P
from fedcore.exceptions import CommitConflictError
from fedcore.services.repair import repair_metadata
from fedcore.services.verify import verify_table
from fedcore.table import Table, create_table, load_table

SCHEMA = "id long, p string, ts long, v string"
ARROW = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
COLUMNS = ["_hoodie_record_key", "_hoodie_partition_path", *ARROW.names]

Row = list[Any]


def row(key: int, ts: int, v: str) -> Row:
    return [key, "ab"[key % 2], ts, v]


#: (writer, operation, rows); timestamps rise, so every payload takes each step's rows.
STEPS: list[tuple[str, str, list[Row]]] = [
    ("hudi", "upsert", [row(0, 2, "hudi 1"), row(1, 2, "hudi 1"), row(20, 2, "hudi new")]),
    ("fed", "upsert", [row(1, 3, "fed 1"), row(2, 3, "fed 1"), row(21, 3, "fed new")]),
    ("hudi", "delete", [row(3, 4, ""), row(21, 4, "")]),
    ("fed", "delete", [row(4, 5, ""), row(20, 5, "")]),
    ("fed", "compact", []),
    ("hudi", "upsert", [row(2, 6, "hudi 2"), row(5, 6, "hudi 2"), row(4, 6, "hudi back")]),
    ("fed", "upsert", [row(0, 7, "fed 2"), row(6, 7, "fed 2"), row(22, 7, "fed new")]),
    ("hudi", "upsert", [row(6, 8, "hudi 3"), row(7, 8, "hudi 3")]),
    ("fed", "compact", []),
    ("fed", "upsert", [row(7, 9, "fed 3"), row(8, 9, "fed 3")]),
]


def hudi_options(name: str, table_type: str, version: str) -> dict[str, str]:
    options = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.payload.class": P.OVERWRITE_WITH_LATEST_PAYLOAD,
        "hoodie.index.type": "SIMPLE",
        "hoodie.metadata.enable": "true",
        "hoodie.clean.automatic": "true",
        "hoodie.cleaner.commits.retained": "1",
        "hoodie.compact.inline": "false",
    }
    if not version.startswith("0."):
        # Hudi 1.x writes table version 8 unless told to keep the table's version: fed's
        # tables are version 6, and a user of Hudi 1.x beside fed keeps them so.
        options |= {"hoodie.write.table.version": "6", "hoodie.write.auto.upgrade": "false"}
    return options


def arrow(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in rows], ARROW)


def seeded(path: str, name: str, table_type: str, keys: int) -> tuple[Table, dict[int, Row]]:
    """A table fed creates (Hive layout) with ``keys`` rows bulk-inserted, and its model."""
    table = create_table(
        path,
        name=name,
        record_key_fields=["id"],
        partition_fields=["p"],
        precombine_field="ts",
        table_type=table_type,  # type: ignore[arg-type]
    )
    first = [row(i, 1, "first") for i in range(keys)]
    table.bulk_insert(arrow(first))
    return table, {r[0]: r for r in first}


def fed_rows(table: Table) -> list[Row]:
    data = table.read(columns=COLUMNS)
    return sorted(list(r) for r in zip(*(data.column(c).to_pylist() for c in COLUMNS), strict=True))


def model_rows(model: dict[int, Row]) -> list[Row]:
    return sorted([str(key), f"p={values[1]}", *values] for key, values in model.items())


def readers_agree(hudi: HudiSession, path: str, kept: Table, expected: list[Row], step: str) -> None:
    """fedcore (a new handle, and ``kept``, one held across the steps) and Hudi's reader each
    return exactly ``expected``."""
    assert fed_rows(load_table(path)) == expected, f"{step}: fedcore, a new handle"
    assert fed_rows(kept) == expected, f"{step}: fedcore, a handle kept across the steps"
    read = hudi.run({"reads": {"r": {"path": path, "query_type": "snapshot", "columns": COLUMNS}}})
    assert read["reads"]["r"].get("rows") == expected, f"{step}: Hudi's reader: {read['reads']['r']}"


hudi = session_fixture(HUDI_VERSIONS)


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_hudi_and_fed_write_one_table_turn_about(
    hudi: HudiSession, table_type: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    name = f"co_{table_type.lower()}_{hudi.version.replace('.', '_')}"
    path = f"file://{tmp_path_factory.mktemp(name)}/{name}"
    kept, model = seeded(path, name, table_type, 10)
    options = hudi_options(name, table_type, hudi.version)
    seen: list[str] = []
    hudi_built_its_metadata = False
    for number, (writer, operation, rows) in enumerate(STEPS):
        step = f"step {number}: {writer} {operation}"
        if operation == "compact" and table_type == P.TABLE_TYPE_COW:
            continue
        if writer == "hudi":
            spec = {"path": path, "options": options, "schema": SCHEMA, "steps": [[operation, rows]]}
            answer = hudi.run({"writes": {"w": spec}})
            assert answer["writes"]["w"] == "ok", f"{step}: {answer['writes']['w']}"
            hudi_built_its_metadata |= bool(load_table(path).config.get(P.HUDI_METADATA_PARTITIONS))
        elif operation == "compact":
            assert load_table(path).compact() is not None, f"{step}: nothing to compact"
        else:
            data = arrow(rows)
            load_table(path).write(data, operation)  # type: ignore[arg-type]
        if writer == "fed":  # Hudi's metadata table, stale once fed wrote, was dropped
            assert not load_table(path).config.get(P.HUDI_METADATA_PARTITIONS), step
            assert not Path(path.removeprefix("file://"), P.HUDI_METADATA_FOLDER).exists(), step
        for r in rows:
            if operation == "delete":
                model.pop(r[0], None)
            else:
                model[r[0]] = r
        expected = model_rows(model)
        readers_agree(hudi, path, kept, expected, step)
        seen.append(step)
    timeline = load_table(path).timeline()
    actions = {i.action for i in timeline.completed()}
    assert "clean" in actions, "Hudi's cleaner ran (its Avro clean metadata was taken in)"
    if table_type == P.TABLE_TYPE_MOR:
        assert "deltacommit" in actions
    assert hudi_built_its_metadata, "Hudi's writer kept a metadata table of its own"
    check = verify_table(load_table(path), deep=True)  # sizes, footers, statistics
    assert check.ok, check.format()
    assert len(seen) >= 8


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_instants_hudi_archived_before_fed_took_them_in(
    hudi: HudiSession, table_type: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Hudi's writer archives (keeping 3 to 4 commits) instants fed never saw: one that made a
    partition no later write touches, and on merge-on-read the delta commits whose log files
    still hold the newest values. fed's readers (a new handle and one kept from before), its
    repair tool and Hudi's reader all return the model's rows, and fed writes on."""
    name = f"arch_{table_type.lower()}_{hudi.version.replace('.', '_')}"
    path = f"file://{tmp_path_factory.mktemp(name)}/{name}"
    kept, model = seeded(path, name, table_type, 6)
    assert fed_rows(kept) == model_rows(model)
    options = hudi_options(name, table_type, hudi.version) | {
        "hoodie.keep.min.commits": "3",
        "hoodie.keep.max.commits": "4",
        "hoodie.cleaner.commits.retained": "2",
    }
    steps: list[tuple[str, list[Row]]] = [("upsert", [[100, "c", 2, "hudi c"]])]
    steps += [("upsert", [row(k % 6, 3 + k, f"hudi {k}")]) for k in range(9)]
    made_c = ""
    for number, (operation, rows) in enumerate(steps):
        spec = {"path": path, "options": options, "schema": SCHEMA, "steps": [[operation, rows]]}
        assert hudi.run({"writes": {"w": spec}})["writes"]["w"] == "ok"
        model.update((r[0], r) for r in rows)
        if number == 0:
            made_c = load_table(path).timeline().completed()[-1].time
    archive = Path(path.removeprefix("file://"), P.HOODIE_FOLDER, "archived")
    assert any(f.name.startswith(".commits_.archive.") for f in archive.iterdir()), "Hudi archived"
    assert load_table(path).timeline().find(made_c) is None, "the commit that made p=c was archived"
    expected = model_rows(model)
    assert fed_rows(load_table(path)) == expected, "fedcore, a new handle"
    assert fed_rows(kept) == expected, "fedcore, a handle kept from before Hudi wrote"
    check = verify_table(load_table(path), deep=True)
    assert check.ok, check.format()
    repaired = load_table(path)
    repair_metadata(repaired)
    assert fed_rows(load_table(path)) == expected, "fedcore, after the repair tool rebuilt its metadata"
    more = [row(1, 50, "fed after"), [101, "c", 50, "fed c"]]
    load_table(path).upsert(
        pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in more], ARROW)
    )
    model.update((r[0], r) for r in more)
    expected = model_rows(model)
    assert fed_rows(load_table(path)) == expected, "fedcore, after its own upsert"
    assert fed_rows(kept) == expected, "fedcore, the kept handle, after its own upsert"
    read = hudi.run({"reads": {"r": {"path": path, "query_type": "snapshot", "columns": COLUMNS}}})
    assert read["reads"]["r"].get("rows") == expected, f"Hudi's reader: {read['reads']['r']}"


@pytest.mark.parametrize("version", HUDI_VERSIONS)
def test_hudi_writing_local_times_behind_fed(version: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A Hudi job in a time zone behind UTC, on a table whose config does not say UTC (fed's
    tables before it did, Hudi's own), makes instant times older than fed's newest, after fed
    compacted its metadata table past them. fed takes those instants in all the same, and reads
    each table type exactly as Hudi's reader does; on a table fed created now (UTC in its
    config) the same job's instants come after fed's."""
    hudi = HudiSession(version, time_zone="Etc/GMT+5")  # UTC-5
    try:
        for table_type in P.TABLE_TYPES:
            name = f"late_{table_type.lower()}_{version.replace('.', '_')}"
            path = f"file://{tmp_path_factory.mktemp(name)}/{name}"
            table = create_table(
                path,
                name=name,
                record_key_fields=["id"],
                partition_fields=["p"],
                precombine_field="ts",
                table_type=table_type,  # type: ignore[arg-type]
            )
            assert table.config[P.TIMELINE_TIMEZONE] == "UTC"
            table.config.without([P.TIMELINE_TIMEZONE]).save_replacing(table.fs.table_fs, table.path)
            first = [row(i, 1, "first") for i in range(6)]
            compacting = {str(P.METADATA_COMPACT_DELTAS): "1"}
            kept = load_table(path, options=compacting)
            kept.bulk_insert(
                pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in first], ARROW)
            )
            fed_rows(kept)
            newest_manifest = load_table(path).timeline().manifests[-1]
            before = {i.time for i in load_table(path).timeline().completed()}
            spec = {
                "path": path,
                "options": hudi_options(name, table_type, version),
                "schema": SCHEMA,
                "steps": [["upsert", [[100, "c", 2, "hudi c"], row(1, 2, "hudi 1")]]],
            }
            assert hudi.run({"writes": {"w": spec}})["writes"]["w"] == "ok"
            hudi_made = {i.time for i in load_table(path).timeline().completed()} - before
            assert hudi_made, "Hudi committed"
            assert max(hudi_made) < newest_manifest, "Hudi's instants are older than fed's manifest"
            read = hudi.run({"reads": {"r": {"path": path, "query_type": "snapshot", "columns": COLUMNS}}})
            expected = read["reads"]["r"]["rows"]
            assert ["100", "p=c", 100, "c", 2, "hudi c"] in expected, expected
            assert fed_rows(load_table(path)) == expected, f"{table_type}: fedcore, a new handle"
            assert fed_rows(kept) == expected, f"{table_type}: fedcore, a handle kept from before"
            more = [row(2, 3, "fed 2"), [101, "c", 3, "fed c"]]
            kept.upsert(pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in more], ARROW))
            read = hudi.run({"reads": {"r": {"path": path, "query_type": "snapshot", "columns": COLUMNS}}})
            expected = read["reads"]["r"]["rows"]
            assert ["101", "p=c", 101, "c", 3, "fed c"] in expected, expected
            assert fed_rows(load_table(path)) == expected, f"{table_type}: fedcore after its upsert"
            assert fed_rows(kept) == expected, f"{table_type}: the kept handle after its upsert"
            check = verify_table(load_table(path), deep=True)
            assert check.ok, check.format()

        name = f"utc_{version.replace('.', '_')}"
        path = f"file://{tmp_path_factory.mktemp(name)}/{name}"
        table = create_table(
            path, name=name, record_key_fields=["id"], partition_fields=["p"], precombine_field="ts"
        )
        table.bulk_insert(pa.Table.from_pylist([dict(zip(ARROW.names, row(0, 1, "x"), strict=True))], ARROW))
        fed_time = table.timeline().completed()[-1].time
        spec = {
            "path": path,
            "options": hudi_options(name, P.TABLE_TYPE_COW, version),
            "schema": SCHEMA,
            "steps": [["upsert", [row(0, 2, "hudi")]]],
        }
        assert hudi.run({"writes": {"w": spec}})["writes"]["w"] == "ok"
        assert load_table(path).timeline().completed()[-1].time > fed_time, "Hudi's instant came after fed's"
    finally:
        hudi.close()


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_a_key_two_file_groups_hold_is_upserted_and_deleted_in_both(
    hudi: HudiSession, table_type: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two bulk inserts of one key leave it in two file groups. Hudi's upsert (its simple
    index tags a record with every location it finds) updates both copies, and its delete
    deletes both; fedcore's do the same, on two tables Hudi wrote alike."""
    tables = {}
    for writer in ("hudi", "fed"):
        name = f"dup_{writer}_{table_type.lower()}_{hudi.version.replace('.', '_')}"
        path = f"file://{tmp_path_factory.mktemp(name)}/{name}"
        options = hudi_options(name, table_type, hudi.version)
        for v in ("first", "second"):
            steps = [["bulk_insert", [row(2, 1, v), row(4, 1, v)]]]
            spec = {"path": path, "options": options, "schema": SCHEMA, "steps": steps}
            assert hudi.run({"writes": {"w": spec}})["writes"]["w"] == "ok"
        tables[writer] = (path, options)
    for operation, rows in (("upsert", [row(2, 5, "updated")]), ("delete", [row(4, 6, "")])):
        path, options = tables["hudi"]
        spec = {"path": path, "options": options, "schema": SCHEMA, "steps": [[operation, rows]]}
        assert hudi.run({"writes": {"w": spec}})["writes"]["w"] == "ok"
        data = pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in rows], ARROW)
        load_table(tables["fed"][0]).write(data, operation)  # type: ignore[arg-type]
        read = {"path": tables["hudi"][0], "query_type": "snapshot", "columns": COLUMNS}
        expected = hudi.run({"reads": {"r": read}})["reads"]["r"]["rows"]
        assert [r[-1] for r in expected if r[2] == 2] == ["updated", "updated"], expected
        assert fed_rows(load_table(tables["fed"][0])) == expected, f"{operation}: fedcore's table"
        assert fed_rows(load_table(tables["hudi"][0])) == expected, f"{operation}: Hudi's, read by fedcore"


def test_a_compaction_hudi_scheduled_is_left_to_hudi_and_fed_writes_once_it_ran(
    hudi: HudiSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Hudi's writer schedules a compaction and leaves it to its compaction job (Hudi's async
    compaction). fed's writes, cleans and compactions are refused at once, as conflicts that
    name the instant and say it is Hudi's to run; following that (Hudi's job runs it), fed
    writes on, and fed's and Hudi's readers return the model's rows."""
    name = f"sched_{hudi.version.replace('.', '_')}"
    path = f"file://{tmp_path_factory.mktemp(name)}/{name}"
    kept, model = seeded(path, name, P.TABLE_TYPE_MOR, 6)
    options = hudi_options(name, P.TABLE_TYPE_MOR, hudi.version)
    scheduling = options | {
        "hoodie.compact.schedule.inline": "true",  # plan one after the write, run none
        "hoodie.compact.inline.max.delta.commits": "1",
    }
    updates = [row(1, 2, "hudi 1"), row(2, 2, "hudi 1")]
    spec = {"path": path, "options": scheduling, "schema": SCHEMA, "steps": [["upsert", updates]]}
    assert hudi.run({"writes": {"w": spec}})["writes"]["w"] == "ok"
    model.update((r[0], r) for r in updates)
    pending = [i for i in load_table(path).timeline().pending() if i.action == "compaction"]
    assert len(pending) == 1, load_table(path).timeline().pending()
    hudis = f"compaction {pending[0].time} is pending( after .*)? and was scheduled by another writer"
    mine = [row(3, 3, "fed 1")]
    data = arrow(mine)
    with pytest.raises(CommitConflictError, match=hudis) as refused:  # waited for, 1 s at most
        load_table(path).upsert(data, {str(P.COMPACTION_WAIT_MS): "1000"})
    assert "run it with Apache Hudi's compaction job, then retry the write" in str(refused.value)
    with pytest.raises(CommitConflictError, match=hudis):
        load_table(path).compact()
    assert fed_rows(load_table(path)) == model_rows(model), "nothing of the refused write"

    # The hint, followed: Hudi's inline compaction runs the pending plan (with a write of its own).
    running = options | {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1"}
    more = [row(4, 4, "hudi 2")]
    spec = {"path": path, "options": running, "schema": SCHEMA, "steps": [["upsert", more]]}
    assert hudi.run({"writes": {"w": spec}})["writes"]["w"] == "ok"
    model.update((r[0], r) for r in more)
    timeline = load_table(path).timeline()
    assert not [i for i in timeline.pending() if i.action == "compaction"], timeline.pending()
    assert timeline.find(pending[0].time) is not None, "Hudi ran the plan it scheduled"
    load_table(path).upsert(data)  # the retry
    model.update((r[0], r) for r in mine)
    expected = model_rows(model)
    assert fed_rows(load_table(path)) == expected
    assert fed_rows(kept) == expected
    read = hudi.run({"reads": {"r": {"path": path, "query_type": "snapshot", "columns": COLUMNS}}})
    assert read["reads"]["r"].get("rows") == expected, f"Hudi's reader: {read['reads']['r']}"


#: Hudi 1.x's Spark writers, at their defaults: beside fed's version-6 tables they upgrade them.
HUDI_1X = ("1.0.2", "1.2.0")

#: The turn-about at Hudi's defaults: fed writes log files and archives at version 6 before
#: Hudi's first write upgrades the table; then writes with older ordering values, which the
#: table's merge mode after the upgrade decides.
STEPS_AT_DEFAULTS: list[tuple[str, str, list[Row]]] = [
    ("fed", "upsert", [row(1, 2, "fed 0"), row(3, 2, "fed 0")]),
    ("hudi", "upsert", [row(0, 3, "hudi 1"), row(1, 3, "hudi 1"), row(20, 3, "hudi new")]),
    ("fed", "upsert", [row(1, 4, "fed 1"), row(2, 4, "fed 1"), row(21, 4, "fed new")]),
    ("hudi", "delete", [row(3, 5, ""), row(21, 5, "")]),
    ("fed", "delete", [row(4, 6, ""), row(20, 6, "")]),
    ("fed", "compact", []),
    ("hudi", "upsert", [row(2, 7, "hudi 2"), row(5, 7, "hudi 2"), row(4, 7, "hudi back")]),
    ("fed", "upsert", [row(0, 8, "fed 2"), row(6, 8, "fed 2"), row(22, 8, "fed new")]),
    ("fed", "upsert", [row(6, 1, "fed older"), row(23, 1, "fed new")]),
    ("hudi", "upsert", [row(2, 1, "hudi older"), row(7, 9, "hudi 3")]),
    ("fed", "compact", []),
    ("fed", "upsert", [row(7, 10, "fed 3"), row(8, 10, "fed 3")]),
]


def merged(model: dict[int, Row], operation: str, rows: list[Row], event_time: bool) -> None:
    """``model`` after a write of ``rows``: by commit time the write wins; by event time a
    record whose ordering value (``ts``) is below the stored one's leaves it."""
    for r in rows:
        if operation == "delete":
            model.pop(r[0], None)
        elif not (event_time and r[0] in model and model[r[0]][2] > r[2]):
            model[r[0]] = r


hudi_1x = session_fixture(HUDI_1X)


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_hudi_1x_at_its_defaults_upgrades_a_fed_table_and_fed_follows(
    hudi_1x: HudiSession, table_type: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Hudi 1.x's writer with no version option upgrades fed's version-6 table as its first
    write begins (Hudi 1.0.2 to version 8, 1.2.0 to 9; a merge-on-read table compacted first,
    its merge mode then event time). fed takes the upgraded table up: after every step
    fedcore's reader (a new handle, and one opened before the upgrade), Hudi's reader and
    hudi-rs return the model's rows, records merging by the table's merge mode; fed's writes,
    compactions and its archive from before carry on."""
    hudi = hudi_1x
    name = f"up_{table_type.lower()}_{hudi.version.replace('.', '_')}"
    path = f"file://{tmp_path_factory.mktemp(name)}/{name}"
    kept, model = seeded(path, name, table_type, 10)
    archiving = {
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
        str(P.CLEANER_COMMITS_RETAINED): "1",
        str(P.METADATA_COMPACT_DELTAS): "1",
    }
    for k in range(4):  # fed writes, compacts, cleans and archives at version 6
        rows = [row(k, 1, f"fed {k}"), row(k + 3, 1, f"fed {k}")]
        load_table(path, options=archiving).upsert(arrow(rows))
        merged(model, "upsert", rows, event_time=False)
        if k == 1 and table_type == P.TABLE_TYPE_MOR:  # archival keeps delta commits of live logs
            assert load_table(path, options=archiving).compact() is not None
    assert load_table(path).timeline().has_archive, "fed archived before Hudi came"
    options = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
    }
    upgraded_to = 8 if hudi.version == "1.0.2" else 9
    mode_after = "EVENT_TIME_ORDERING" if table_type == P.TABLE_TYPE_MOR else "COMMIT_TIME_ORDERING"
    before_hudi = ""  # the last instant before Hudi's first write
    for number, (writer, operation, rows) in enumerate(STEPS_AT_DEFAULTS):
        step = f"step {number}: {writer} {operation}"
        if operation == "compact" and table_type == P.TABLE_TYPE_COW:
            continue
        if writer == "hudi" and not before_hudi:
            before_hudi = load_table(path).timeline().completed()[-1].time
        if writer == "hudi":
            spec = {"path": path, "options": options, "schema": SCHEMA, "steps": [[operation, rows]]}
            answer = hudi.run({"writes": {"w": spec}})
            assert answer["writes"]["w"] == "ok", f"{step}: {answer['writes']['w']}"
        elif operation == "compact":
            load_table(path).compact()  # nothing to do where Hudi's inline compaction just ran
        else:
            load_table(path).write(arrow(rows), operation)  # type: ignore[arg-type]
        config = load_table(path).config
        if config.version != 6:
            assert (config.version, config.get(P.RECORD_MERGE_MODE)) == (upgraded_to, mode_after), step
        merged(model, operation, rows, event_time=config.get(P.RECORD_MERGE_MODE) == "EVENT_TIME_ORDERING")
        expected = model_rows(model)
        readers_agree(hudi, path, kept, expected, f"{step} (the kept handle opened at version 6)")
        if config.version != 6:
            assert hudi_rs_rows(path) == expected, f"{step}: hudi-rs"
    table = load_table(path)
    assert table.config.version == upgraded_to
    assert kept.config.version == upgraded_to
    completed = table.timeline().completed()
    assert {"commit", "clean"} <= {i.action for i in completed}
    if table_type == P.TABLE_TYPE_MOR:
        # Hudi's upgrade compacted the version-6 log files fed wrote: a compaction it planned
        # while its first write ran (1.2.0 before that write's instant, 1.0.2 after it).
        first_hudi = next(i for i in completed if i.action == "deltacommit" and i.time > before_hudi)
        assert any(i.action == "commit" and before_hudi < i.time < first_hudi.completed_at for i in completed)
    check = verify_table(table, deep=True)
    assert check.ok, check.format()
    # Time travel to every write, across the upgrade: fedcore answers as Hudi's reader does, or
    # refuses where it refuses (cleaned). Hudi 1.0.2's first write was requested before its
    # upgrade's compaction and completed after: its log files are on the compaction's slice,
    # which as of that write had not begun, and both leave them out.
    writes = [w.time for w in table.timeline().completed(table.handle.write_actions)]
    answered = check_time_travel(hudi.run, table, path, writes, COLUMNS)
    assert answered >= len(STEPS_AT_DEFAULTS) // 2
    # What the docs say of Hudi 0.15 on such a table: it refuses the table version.
    read = {"path": path, "query_type": "snapshot", "columns": COLUMNS}
    refused = run_hudi("0.15.0", {"reads": {"r": read}})["reads"]["r"]
    assert "IllegalArgumentException" in refused.get("error", ""), refused


def hudi_rs_rows(path: str) -> list[Row]:
    """hudi-rs's snapshot of the table, as ``fed_rows`` lists it."""
    built = hudi_rs.HudiTableBuilder.from_base_uri(path.removeprefix("file://")).build()
    data = pa.Table.from_batches(built.read())
    return sorted(list(r) for r in zip(*(data.column(c).to_pylist() for c in COLUMNS), strict=True))
