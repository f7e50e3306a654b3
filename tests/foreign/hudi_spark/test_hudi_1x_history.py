"""fedcore's archival of a version-9 table against Apache Hudi 1.2.0: the instants fed moves
into Hudi 1.x's archived timeline (``.hoodie/timeline/history/``) are the ones Hudi's meta
client loads from it, with their completion times and the metadata Hudi reads from their
bytes; Hudi's writer then archives onto fed's history (and compacts it, Hudi's LSM compaction
merging fed's files with its own), fed archives onto Hudi's, and every reader agrees with a
model after each turn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import fsspec
import pyarrow as pa
import pytest
from foreign.hudi_spark.bundles import HudiSession

from fedcore import properties as P
from fedcore.table import Table, create_table, load_table
from fedcore.timeline import CLEAN, lsm
from fedcore.timeline.commit_metadata import deleted_files

SCHEMA = "id long, p string, ts long, v string"
ARROW = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
COLUMNS = ["_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path", *ARROW.names]
Row = list[Any]


def row(key: int, ts: int, v: str) -> Row:
    return [key, "ab"[key % 2], ts, v]


@pytest.fixture(scope="module")
def hudi() -> Iterator[HudiSession]:
    session = HudiSession("1.2.0")
    yield session
    session.close()


def history_rows(path: str) -> list[list[object]]:
    """fed's reading of the history: requested time, action, completion time, and the count
    Hudi's ``detail`` gives (write statistics of a commit, files a clean deleted)."""
    table = load_table(path)
    folder = table.handle.layout.instants.history_folder(table.handle.path)
    assert folder is not None
    held = lsm.read_history(fsspec.filesystem("file"), folder.removeprefix("file://"))
    out: list[list[object]] = []
    for row in held.to_pylist():
        data = row["metadata"] or b""
        if row["action"] == CLEAN:
            detail = sum(len(names) for names in deleted_files(data).values())
        else:
            detail = len(table.handle.layout.commits.decode(data, row["instantTime"]).stats)
        out.append([row["instantTime"], row["action"], row["completionTime"], detail])
    return out


def fed_rows(table: Table) -> list[Row]:
    data = table.read(columns=COLUMNS)
    return sorted(list(r) for r in zip(*(data.column(c).to_pylist() for c in COLUMNS), strict=True))


@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_fed_and_hudi_archive_into_one_history(
    hudi: HudiSession, table_type: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    name = f"history_{table_type.lower()}"
    path = f"file://{tmp_path_factory.mktemp(name)}/{name}"
    archiving = {
        str(P.ARCHIVE_MIN_INSTANTS): "2",
        str(P.ARCHIVE_MAX_INSTANTS): "3",
        str(P.CLEANER_COMMITS_RETAINED): "1",
        str(P.METADATA_COMPACT_DELTAS): "1",
    }
    compacting = {str(P.COMPACT_INLINE): "true", str(P.COMPACT_INLINE_MAX_DELTA_COMMITS): "2"}
    create_table(
        path,
        name=name,
        record_key_fields=["id"],
        partition_fields=["p"],
        precombine_field="ts",
        table_type=table_type,
        properties={
            P.WRITE_TABLE_VERSION: "9",
            P.HIVE_STYLE_PARTITIONING: "true",
            **archiving,
            **(compacting if table_type == P.TABLE_TYPE_MOR else {}),
        },
    )
    model: dict[int, Row] = {}
    ts = 0

    def fed_upserts(count: int) -> None:
        nonlocal ts
        for _ in range(count):
            ts += 1
            rows = [row(ts % 5, ts, f"fed {ts}"), row(100 + ts, ts, "fed new")]
            load_table(path).upsert(
                pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in rows], ARROW)
            )
            model.update({r[0]: r for r in rows})

    def readers_agree(turn: str) -> None:
        table = load_table(path)
        hudi_snapshot = {"path": path, "query_type": "snapshot", "columns": COLUMNS}
        answer = hudi.run({"reads": {"r": hudi_snapshot}, "timelines": {"t": {"path": path}}})
        fed = fed_rows(table)
        assert sorted(r[3:] for r in fed) == sorted(model.values()), f"{turn}: fedcore"
        assert answer["reads"]["r"].get("rows") == fed, f"{turn}: Hudi's reader: {answer['reads']['r']}"
        timelines = answer["timelines"]["t"]
        assert "error" not in timelines, f"{turn}: {timelines}"
        assert timelines["archived"] == history_rows(path), f"{turn}: the history Hudi loads is fed's"
        active = [[i.time, i.action, i.completion_time] for i in table.timeline().completed()]
        assert timelines["active"] == active, turn
        assert table.verify(deep=True).ok, turn

    fed_upserts(26)
    snapshot = lsm.history_snapshot(
        fsspec.filesystem("file"), f"{path.removeprefix('file://')}/.hoodie/timeline/history"
    )
    assert any(f.layer == 1 for f in snapshot.files), "fed's archivals filled a layer and compacted it"
    readers_agree("fed archived")
    archived_by_fed = len(history_rows(path))

    options = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        # Hudi archives nothing its metadata table has not compacted past.
        "hoodie.metadata.compact.max.delta.commits": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
        "hoodie.cleaner.commits.retained": "1",
        # Hudi's LSM compaction takes fed's layer-0 files with its own.
        "hoodie.timeline.compaction.batch.size": "2",
    }
    for _ in range(4):
        ts += 1
        rows = [row(ts % 5, ts, f"hudi {ts}"), row(200 + ts, ts, "hudi new")]
        spec = {"path": path, "options": options, "schema": SCHEMA, "steps": [["upsert", rows]]}
        assert hudi.run({"writes": {"w": spec}})["writes"]["w"] == "ok"
        model.update({r[0]: r for r in rows})
    assert len(history_rows(path)) > archived_by_fed, "Hudi archived onto fed's history"
    readers_agree("Hudi archived")

    archived_by_hudi = len(history_rows(path))
    fed_upserts(6)
    assert len(history_rows(path)) > archived_by_hudi, "fed archived onto Hudi's history"
    readers_agree("fed archived again")
