"""fedcore's archival of tables of versions 8 and 9: instants move into Hudi 1.x's archived
timeline (``.hoodie/timeline/history/``: Parquet files of ``HoodieLSMTimelineInstant`` rows,
manifests, ``_version_``), where Apache Hudi 1.x's readers and writers find them as their own
archival's (``tox -e hudi``). The table reads the same after; what the history holds is what
the active timeline held."""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedcore import properties as P
from fedcore.exceptions import InstantNotRetainedError
from fedcore.services.archival import read_archive
from fedcore.table import Table, create_table, load_table
from fedcore.timeline import lsm
from fedcore.timeline.naming import InstantNamingV8

COLUMNS = ["_hoodie_commit_time", "_hoodie_record_key", "id", "country", "ts", "fare"]
NAMING = InstantNamingV8()
LOCAL = fsspec.filesystem("file")


def trips(ids: list[int], ts: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "country": ["us"] * len(ids),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": [float(ts * 100 + i) for i in ids],
        }
    )


def rows(read: pa.Table) -> Counter[tuple[object, ...]]:
    return Counter(zip(*(read.column(c).to_pylist() for c in COLUMNS), strict=True))


def timeline_files(path: Path) -> dict[str, bytes]:
    folder = path / ".hoodie" / "timeline"
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def history(path: Path) -> pa.Table:
    return lsm.read_history(LOCAL, str(path / ".hoodie" / "timeline" / "history"))


def archiving_table(path: Path, table_type: str, version: str = "9") -> Table:
    compacting = {str(P.COMPACT_INLINE): "true", str(P.COMPACT_INLINE_MAX_DELTA_COMMITS): "2"}
    return create_table(
        str(path),
        name="trips",
        record_key_fields=["id"],
        partition_fields=["country"],
        precombine_field="ts",
        table_type=table_type,
        properties={
            P.WRITE_TABLE_VERSION: version,
            str(P.CLEANER_COMMITS_RETAINED): "2",
            str(P.ARCHIVE_MIN_INSTANTS): "2",
            str(P.ARCHIVE_MAX_INSTANTS): "3",
            **(compacting if table_type == "MERGE_ON_READ" else {}),
        },
    )


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_archival_moves_instants_into_hudi_1x_history(tmp_path: Path, table_type: str) -> None:
    """Every instant gone from the active timeline is one row of the history: its requested
    and completion times as its file was named, the action it completed as, its completed
    file's bytes, and a compaction's or clean's plan; nothing goes to fed's own archive. The
    table reads the same (now and as of every instant still active), time travel to an
    archived instant is refused, and ``verify --deep`` accounts for the archived writes' files."""
    path = tmp_path / "t"
    table = archiving_table(path, table_type)
    seen: dict[str, bytes] = {}
    snapshots: dict[str, Counter[tuple[object, ...]]] = {}
    for step in range(14):
        table.upsert(trips([step % 4, 100 + step], step))
        seen |= timeline_files(path)
        read = load_table(str(path))
        snapshots[read.timeline().completed()[-1].time] = rows(read.scan().to_arrow())
    active = timeline_files(path)
    gone = {name: data for name, data in seen.items() if name not in active}
    completed_gone = {
        name: NAMING.parse(name) for name in gone if (i := NAMING.parse(name)) is not None and i.is_completed
    }
    assert completed_gone, "archival ran"
    archived = history(path)
    assert sorted(
        zip(
            *(archived.column(c).to_pylist() for c in ("instantTime", "completionTime", "action")),
            strict=True,
        )
    ) == sorted((i.time, i.completion_time, i.action) for i in completed_gone.values() if i is not None)
    by_time = dict(zip(archived.column("instantTime").to_pylist(), archived.to_pylist(), strict=True))
    for name, instant in completed_gone.items():
        assert instant is not None
        row = by_time[instant.time]
        assert row["metadata"] == (gone[name] or None)
        assert row["version"] == 1
        requested = {n: d for n, d in gone.items() if n.startswith(instant.time) and n.endswith(".requested")}
        if instant.action == "clean" or (name.endswith(".commit") and table_type == "MERGE_ON_READ"):
            (plan,) = requested.values()  # a clean's plan (fed's is empty), a compaction's plan
            assert row["plan"] == (plan or None)
            assert plan or instant.action == "clean"
        else:
            assert row["plan"] is None
    assert not (path / ".hoodie" / "archived").exists() or not any(
        n.startswith("fed-archive-") for n in os.listdir(path / ".hoodie" / "archived")
    )
    folder = path / ".hoodie" / "timeline" / "history"
    version = int((folder / "_version_").read_text())
    manifest = json.loads((folder / f"manifest_{version}").read_text())
    for entry in manifest["files"]:
        data_file = folder / entry["fileName"]
        assert data_file.stat().st_size == entry["fileLen"]
        footer = pq.ParquetFile(data_file)
        assert footer.metadata.metadata[b"parquet.avro.schema"] == lsm.AVRO_SCHEMA.encode()
        assert footer.metadata.row_group(0).column(0).compression == "GZIP"

    fed = load_table(str(path))
    assert rows(fed.scan().to_arrow()) == snapshots[max(snapshots)]
    first_active = fed.timeline().completed()[0].time
    for instant, expected in snapshots.items():
        if instant < min(by_time):
            continue
        if instant <= max(by_time):
            with pytest.raises(InstantNotRetainedError):
                fed.scan(as_of=instant).to_arrow()
        elif instant >= first_active:
            with contextlib.suppress(InstantNotRetainedError):  # cleaned: retained writes start later
                assert rows(fed.scan(as_of=instant).to_arrow()) == expected, instant
    report = fed.verify(deep=True)
    assert report.ok, report


def test_a_write_that_listed_an_instant_archival_then_moved_reads_it_from_history(tmp_path: Path) -> None:
    """A handle whose listing showed an instant completed, and whose read of it comes after
    another process archived it, finds its file's bytes in the history."""
    path = tmp_path / "t"
    table = archiving_table(path, "COPY_ON_WRITE")
    table.upsert(trips([1], 1))
    reader = load_table(str(path))
    listed = reader.timeline().completed()[0]
    for step in range(2, 16):
        table.upsert(trips([step], step))
    assert listed.time in history(path).column("instantTime").to_pylist(), "archived since the listing"
    written = reader._handle.commit_metadata(listed)
    assert [s.path.rsplit("/", 1)[-1][:36] for s in written.stats]


def _rows(times: list[str]) -> pa.Table:
    return pa.table(
        {
            "instantTime": times,
            "completionTime": [t[:-1] + "9" for t in times],
            "action": ["commit"] * len(times),
            "metadata": [t.encode() for t in times],
            "plan": [None] * len(times),
            "version": [1] * len(times),
        },
        schema=lsm.SCHEMA,
    )


def test_a_full_layer_of_history_compacts_and_an_append_run_again_adds_nothing(tmp_path: Path) -> None:
    """Once layer 0 holds ``COMPACTION_BATCH`` files they become one layer-1 file, as Hudi's
    ``LSMTimelineWriter`` compacts; files only older manifests list go once those are not
    retained; an archival that crashed after its append and runs again adds no row twice."""
    fs = LOCAL
    folder = str(tmp_path / "history")
    os.makedirs(folder)
    times = [f"2026010100000{n:02d}00" for n in range(40)]
    for n in range(0, 30, 2):
        lsm.append_history(fs, folder, _rows(times[n : n + 2]))
        lsm.append_history(fs, folder, _rows(times[n : n + 2]))  # run again: nothing added
    snapshot = lsm.history_snapshot(fs, folder)
    assert [f.layer for f in snapshot.files] == [1] + [0] * 5
    assert snapshot.files[0].name == f"{times[0]}_{times[19]}_1.parquet"
    held = lsm.read_history(fs, folder)
    assert held.column("instantTime").to_pylist() == times[:30]
    assert held.column("metadata").to_pylist() == [t.encode() for t in times[:30]]
    assert lsm.archived_completion_times(fs, folder) == {t: t[:-1] + "9" for t in times[:30]}
    names = set(os.listdir(folder))
    layer0_of_the_first_batch = {f"{times[n]}_{times[n + 1]}_0.parquet" for n in range(0, 20, 2)}
    assert not names & layer0_of_the_first_batch, "compacted files no retained manifest lists are gone"
    manifests = sorted(int(n.removeprefix("manifest_")) for n in names if n.startswith("manifest_"))
    assert len(manifests) == lsm.RETAINED_MANIFESTS
    assert manifests[-1] == snapshot.version
    assert (tmp_path / "history" / "_version_").read_text() == str(snapshot.version)
    assert snapshot.newest == times[29]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_fed_upgrade_adds_fed_archive_to_hudi_1x_history(tmp_path: Path, table_type: str) -> None:
    """What fed archived of a version-6 table is in Hudi 1.x's archived timeline after ``fed
    upgrade`` (as Hudi's upgrade converts its own archive log): each archived completed instant
    once, completed at its requested time, its metadata in version 9's encoding; the table
    reads the same."""
    path = tmp_path / "t"
    table = archiving_table(path, table_type, version="6")
    for step in range(14):
        table.upsert(trips([step % 4, 100 + step], step))
    fed_archive = read_archive(load_table(str(path)).handle).to_pylist()
    completed = {r["instant"]: r for r in fed_archive if r["file"] == f"{r['instant']}.{r['action']}"}
    assert completed, "fed archived at version 6"
    before = rows(load_table(str(path)).scan().to_arrow())
    table.upgrade(table_version=9)
    held = history(path)
    assert sorted(
        zip(held.column("instantTime").to_pylist(), held.column("action").to_pylist(), strict=True)
    ) == sorted((t, r["action"]) for t, r in completed.items())
    assert held.column("completionTime").to_pylist() == held.column("instantTime").to_pylist()
    upgraded = load_table(str(path))
    codec = upgraded.handle.layout.commits
    for row in held.to_pylist():
        if row["action"] in ("commit", "deltacommit"):
            assert row["metadata"].startswith(b"Obj\x01"), "Avro, as version 9 encodes commit metadata"
            assert codec.decode(row["metadata"], row["instantTime"]).stats
    assert rows(upgraded.scan().to_arrow()) == before


def test_an_append_that_died_before_version_or_lost_a_race_to_it_leaves_a_history_that_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between a manifest and ``_version_`` leaves ``_version_`` behind: the next
    append builds on the greatest manifest and points ``_version_`` at its own. An archival that
    publishes while another is about to point ``_version_`` at an older manifest is not undone:
    ``_version_`` ends at the greatest, every row held."""
    folder = str(tmp_path / "history")
    os.makedirs(folder)
    times = [f"2026010100000{n:02d}00" for n in range(6)]
    lsm.append_history(LOCAL, folder, _rows(times[:1]))
    replace = lsm.replace_atomic

    def crash(*args: object) -> None:
        raise OSError("the process died here")

    monkeypatch.setattr(lsm, "replace_atomic", crash)
    with pytest.raises(OSError, match="died"):
        lsm.append_history(LOCAL, folder, _rows(times[1:2]))
    monkeypatch.setattr(lsm, "replace_atomic", replace)
    assert (tmp_path / "history" / "_version_").read_text() == "1", "the crash left it behind"
    lsm.append_history(LOCAL, folder, _rows(times[1:2]))  # archival runs again
    lsm.append_history(LOCAL, folder, _rows(times[2:3]))
    assert lsm.read_history(LOCAL, folder).column("instantTime").to_pylist() == times[:3]

    raced: list[bool] = []

    def late(fs: object, path: str, data: bytes) -> None:
        if not raced:  # another archival publishes and points first
            raced.append(True)
            lsm.append_history(LOCAL, folder, _rows(times[4:5]))
        replace(fs, path, data)  # type: ignore[arg-type]

    monkeypatch.setattr(lsm, "replace_atomic", late)
    lsm.append_history(LOCAL, folder, _rows(times[3:4]))
    monkeypatch.setattr(lsm, "replace_atomic", replace)
    snapshot = lsm.history_snapshot(LOCAL, folder)
    assert snapshot.version == max(int(n[9:]) for n in os.listdir(folder) if n.startswith("manifest_"))
    assert lsm.read_history(LOCAL, folder).column("instantTime").to_pylist() == times[:5]
