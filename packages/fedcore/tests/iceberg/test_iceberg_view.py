"""The Iceberg view: PyIceberg, a real Iceberg reader, reads exactly fedcore's rows through it
after every kind of write and table service, pruned by partition; a publish costs the same
requests however big the table, or a partition; a large partition's manifests are split, and a
publish rewrites only those its instant touched; no credential is published; racing publishers
both land."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pyarrow as pa
import pytest
import xxhash
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual
from pyiceberg.manifest import ManifestFile
from pyiceberg.table import StaticTable

from fed_dev.servers import SECRET_KEY, LoopbackS3
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.exceptions import UnsupportedTableError
from fedcore.iceberg import current_view, expiry, publish
from fedcore.iceberg import view as view_module
from fedcore.iceberg.locations import FOLDER
from fedcore.iceberg.view import INSTANT_KEY, _bucket, _gap
from fedcore.io.filesystems import filesystem_for
from fedcore.schema.iceberg import iceberg_schema
from fedcore.services.archival import archive
from fedcore.services.cleaning import clean
from fedcore.services.rollback import rollback
from fedcore.table import Table, create_table, load_table
from fedcore.timeline import WRITE_ACTIONS

from ..write.test_writes import FAST_HEARTBEAT, trips

LAYOUTS = {
    "object_store": lambda b: {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: b.storage_path},
    "bounded_prefix": lambda b: {
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: b.storage_path,
        P.STORAGE_PREFIX_COUNT: "4",
    },
    "hive": lambda b: {},
}
KEEP = {
    P.ARCHIVE_MIN_INSTANTS: "3",
    P.ARCHIVE_MAX_INSTANTS: "5",
    P.CLEANER_COMMITS_RETAINED: "1",
}


def make(backend: Backend, layout: str = "object_store", **extra: str) -> Table:
    return create_table(
        backend.table_path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={**FAST_HEARTBEAT, **LAYOUTS[layout](backend), **extra},
        storage_options=backend.storage_options,
    )


def iceberg(table: Table, location: str | None = None) -> StaticTable:
    """The published view as an Iceberg reader opens it: its metadata file alone (``location``:
    another version's than the current one)."""
    location = location or current_view(table).location
    assert location is not None
    props = {}
    if table.storage_options:  # the reader's own credentials, from its own configuration
        s3 = table.storage_options.get("s3") or {}
        props = {
            "s3.endpoint": s3["client_kwargs"]["endpoint_url"],
            "s3.access-key-id": s3["key"],
            "s3.secret-access-key": s3["secret"],
            "s3.region": "us-east-1",
        }
    return StaticTable.from_metadata(location, properties=props)


def ordered(data: pa.Table) -> pa.Table:
    names = sorted(data.column_names)
    return data.select(names).sort_by([("trip_id", "ascending"), ("_hoodie_commit_time", "ascending")])


def assert_same(table: Table) -> None:
    """Whole table, one partition, a data-column filter: the view reads what fedcore reads,
    and a one-partition scan plans that partition's files only."""
    view = iceberg(table)
    assert ordered(view.scan().to_arrow()) == ordered(table.read())
    us = view.scan(row_filter=EqualTo("country", "us"))
    assert {t.file.partition[0] for t in us.plan_files()} <= {"us"}
    assert ordered(us.to_arrow()) == ordered(table.read(filters=[("country", "=", "us")]))
    fares = view.scan(row_filter=GreaterThanOrEqual("fare", 15.0)).to_arrow()
    assert ordered(fares) == ordered(table.read(filters=[("fare", ">=", 15.0)]))


def assert_same_files(table: Table) -> None:
    """The view plans the files fedcore reads, of the whole table and of one partition: a
    cheaper ``assert_same`` between steps of a test of many files (the rows are compared
    where the test begins and ends)."""
    view = iceberg(table)
    for row_filter, filters in ((None, None), (EqualTo("country", "us"), [("country", "=", "us")])):
        scan = view.scan() if row_filter is None else view.scan(row_filter=row_filter)
        planned = sorted(t.file.file_path for t in scan.plan_files())
        assert planned == sorted(table.scan(filters=filters).parquet_files())


@pytest.mark.parametrize(
    ("layout", "version"), [*((layout, "6") for layout in sorted(LAYOUTS)), ("object_store", "9")]
)
def test_view_reads_fedcores_rows_after_every_write_and_service(
    backend: Backend, layout: str, version: str
) -> None:
    """On every layout, and on a table of Hudi 1.x's version 9 (its timeline and commit
    metadata are version 9's; what the view shows is the same)."""
    table = make(backend, layout, **KEEP, **{P.WRITE_TABLE_VERSION: version})
    table.write(trips(range(8), ["us", "de"] * 4), "bulk_insert")
    publish(table)
    assert_same(table)
    table.write(trips(range(4, 12), ["us", "de"] * 4, ts=2, fare=100.0), "upsert")
    table.write(trips([0, 2], ["us", "us"]), "delete")
    result = publish(table)  # two instants behind: two snapshots
    assert result.snapshots == 2
    assert_same(table)
    table.write(trips(range(50, 53), "fr"), "insert_overwrite")
    table.write(trips(range(60, 62), "de"), "insert_overwrite")
    publish(table)
    assert_same(table)
    clean(table.handle, retained=1)  # (the writes may have cleaned already: automatic cleaning)
    upserted = table.write(trips([60], "de", ts=9, fare=7.0), "upsert").instant
    assert publish(table).instant == upserted
    assert_same(table)
    rollback(table.handle, upserted)  # the instant the view shows is undone: the view follows
    result = publish(table)
    assert result.instant != upserted
    assert_same(table)
    for n in range(6):
        table.write(trips([n + 100], "us", fare=float(n)), "upsert")
    archive(table.handle)
    publish(table)
    assert_same(table)
    view = iceberg(table)
    instants = [s.summary[INSTANT_KEY] for s in view.metadata.snapshots if s.summary]
    assert instants == sorted(instants)
    assert instants[-1] == table.timeline().completed(WRITE_ACTIONS)[-1].time
    assert len(view.metadata.snapshots) <= len(table.timeline().completed(WRITE_ACTIONS))


def test_each_snapshot_shows_its_instant(backend: Backend) -> None:
    """The first publish shows the table as it stands; each later instant is a snapshot of
    its own, which time travel reads as fedcore reads that instant."""
    table = make(backend)
    first = table.write(trips(range(3), ["us", "de", "fr"]), "bulk_insert").instant
    assert publish(table).snapshots == 1
    instants = [first] + [
        table.write(trips(range(n * 3, n * 3 + 3), ["us", "de", "fr"], fare=float(n)), "upsert").instant
        for n in range(1, 4)
    ]
    assert publish(table).snapshots == 3
    assert publish(table).snapshots == 0  # up to date: nothing written
    view = iceberg(table)
    assert [s.summary[INSTANT_KEY] for s in view.metadata.snapshots] == instants
    for snapshot in view.metadata.snapshots:
        got = view.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
        assert ordered(got) == ordered(table.read(as_of=snapshot.summary[INSTANT_KEY]))


def test_iceberg_field_ids_stay_put_as_the_schema_evolves() -> None:
    before = iceberg_schema(pa.schema([("a", pa.int64()), ("s", pa.struct([("x", pa.int32())]))]), None, 0)
    after = iceberg_schema(
        pa.schema(
            [("n", pa.string()), ("s", pa.struct([("y", pa.bool_()), ("x", pa.int32())])), ("a", pa.int64())]
        ),
        before,
        before.highest_field_id,
    )
    ids = {f.name: f.field_id for f in after.fields}
    assert ids["a"] == before.find_field("a").field_id
    assert after.find_field("s.x").field_id == before.find_field("s.x").field_id
    assert {ids["n"], after.find_field("s.y").field_id} == {4, 5}  # new ids after the highest


def test_a_type_iceberg_readers_would_misread_is_refused(tmp_path: Path) -> None:
    table = create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["k"])
    table.write(pa.table({"k": [1], "at": pa.array([1], pa.timestamp("ns"))}), "bulk_insert")
    with pytest.raises(UnsupportedTableError, match="'at' is timestamp\\[ns\\]"):
        publish(table)
    assert current_view(table).location is None  # nothing half-published


def test_default_partition_values_are_told_apart(tmp_path: Path) -> None:
    """Hudi's default partition holds null and empty values alike; the view states which."""
    table = create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["k"], partition_fields=["c"])
    table.write(pa.table({"k": [1, 2], "c": pa.array([None, "x"], pa.string())}), "bulk_insert")
    publish(table)
    view = StaticTable.from_metadata(current_view(table).location)
    assert ordered_k(view.scan().to_arrow()) == ordered_k(table.read())
    assert view.scan(row_filter="c IS NULL").to_arrow()["k"].to_pylist() == [1]
    table.write(pa.table({"k": [3], "c": pa.array([""], pa.string())}), "upsert")
    with pytest.raises(UnsupportedTableError, match="cannot tell apart"):
        publish(table)  # one file now holds both: no identity partition value describes it


def ordered_k(data: pa.Table) -> pa.Table:
    return data.select(sorted(data.column_names)).sort_by("k")


def test_publish_requests_do_not_grow_with_the_table(s3_server: LoopbackS3) -> None:
    costs = []
    for partitions in (4, 40):
        tables, storage = s3_server.create_bucket(f"t{partitions}"), s3_server.create_bucket(f"s{partitions}")
        backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
        table = make(backend)
        countries = [f"c{n:03d}" for n in range(partitions)]
        table.write(trips(range(partitions * 5), countries * 5), "bulk_insert")
        publish(table)
        table.write(trips([1, 2, 3], ["c001"] * 3, fare=1.0), "upsert")
        table = load_table(backend.table_path, storage_options=backend.storage_options)
        s3_server.requests.reset()
        publish(table)
        costs.append(s3_server.requests.total)
        assert not [p for p in s3_server.requests.listed if p.startswith(storage.removeprefix("s3://"))]
        assert ordered(iceberg(table).scan().to_arrow()) == ordered(table.read())
    assert costs[0] == costs[1], costs


def test_no_credential_is_published(s3_server: LoopbackS3) -> None:
    tables, storage = s3_server.create_bucket("secrets"), s3_server.create_bucket("secret-data")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    table = make(backend)
    table.write(trips(range(6), ["us", "de"] * 3), "bulk_insert")
    publish(table)
    fs = filesystem_for(tables, backend.storage_options)
    published = fs.find(f"{backend.table_path}/{FOLDER}")
    assert any(p.endswith(".metadata.json") for p in published)
    for path in published:
        data = fs.cat_file(path)
        assert SECRET_KEY.encode() not in data, path
        assert b"fed-testing" not in data, path


def test_racing_publishers_both_land_on_one_history(backend: Backend) -> None:
    table = make(backend)
    table.write(trips(range(6), ["us", "de"] * 3), "bulk_insert")
    publish(table)
    table.write(trips(range(3, 9), ["us", "de"] * 3, fare=50.0), "upsert")
    results, errors = [], []

    def run() -> None:
        try:
            handle = load_table(backend.table_path, storage_options=backend.storage_options)
            results.append(publish(handle))
        except Exception as exc:  # the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert {r.instant for r in results} == {table.timeline().completed(WRITE_ACTIONS)[-1].time}
    view = iceberg(table)
    assert len(view.metadata.snapshots) == 2  # the catch-up landed once, not once per racer
    assert_same(table)


def test_the_view_is_cleaned_with_the_table(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """A publish after each of 48 writes: the files under the view's folder stay bounded
    (what no retained version reaches is deleted every few versions: 4 kept, a clean every 4
    here, where the defaults are 10 and 10), a reader reads the current version exactly, and
    the oldest version kept still plans (its metadata whole)."""
    monkeypatch.setattr(expiry, "RETAINED_VERSIONS", 4)
    monkeypatch.setattr(view_module, "CLEAN_EVERY", 4)
    table = make(backend, **KEEP)
    fs = filesystem_for(table.path, backend.storage_options)
    folder = f"{table.path}/{FOLDER}/metadata"
    counts = []
    for n in range(48):
        table.upsert(trips([n % 7, 100 + n], ["us", "de"], ts=n, fare=float(n)))
        publish(table)
        fs.invalidate_cache()
        counts.append(len(fs.ls(folder, detail=False)))
    # Bounded: the second 20 versions (the cleans' and the archival's cycle here) leave no more
    # files than the first 20 after the first clean did.
    assert max(counts[28:]) <= max(counts[8:28]), counts
    assert_same(table)
    fs.invalidate_cache()
    retained = sorted(p for p in fs.ls(folder, detail=False) if p.endswith(".metadata.json"))
    assert 4 <= len(retained) < 8, retained
    oldest = iceberg(table, fs.unstrip_protocol(retained[0]))
    # Its manifest list and manifests are all there (its data files are the table cleaner's).
    assert len(list(oldest.scan().plan_files())) > 0, "the oldest version kept is whole"


#: One row a file (the writer's estimate of a record's size is its file-size limit).
ONE_ROW_FILES = {P.RECORD_SIZE_ESTIMATE: "64", P.MAX_FILE_SIZE: "64", P.SMALL_FILE_LIMIT: "0"}
#: A manifest target of some 50 entries (a manifest's header, its schemas, is about 5 KB).
SMALL_TARGET = 16_000
_BITS = re.compile(r"-m[0-9a-f]{16}(?:-b([01]+))?\.avro$")


def manifests(table: Table) -> dict[str, ManifestFile]:
    """The current snapshot's manifests by path."""
    view = iceberg(table)
    snapshot = view.current_snapshot()
    assert snapshot is not None
    return {m.manifest_path: m for m in snapshot.manifests(view.io)}


def partition_of(manifest: ManifestFile) -> str:
    """The one partition value a manifest's summary says it holds."""
    assert manifest.partitions is not None
    (summary,) = manifest.partitions
    assert summary.lower_bound == summary.upper_bound, "a manifest holds one partition's files"
    assert summary.lower_bound is not None
    return summary.lower_bound.decode()


def bits_of(manifest: ManifestFile) -> str:
    match = _BITS.search(manifest.manifest_path)
    assert match is not None, manifest.manifest_path
    return match[1] or ""


def live(manifest: ManifestFile) -> int:
    return (manifest.added_files_count or 0) + (manifest.existing_files_count or 0)


def test_a_large_partitions_manifests_are_split_and_a_publish_rewrites_only_what_it_touched(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition whose one manifest would pass the target has several, split by the hash of
    the file id: each under the target, each of that partition only (its summary, by which
    readers prune, names it), each holding the file groups whose hash starts with its bits,
    together every file once. A one-file upsert rewrites the manifest holding its file group
    and carries every other over; a partition rewritten whole is split afresh, and merged back
    into one once it is small; a rebuild (a rollback of the instant shown) splits it afresh."""
    monkeypatch.setattr(view_module, "MANIFEST_TARGET_BYTES", SMALL_TARGET)
    table = make(backend, **ONE_ROW_FILES)
    table.write(trips(range(150), ["us"] * 140 + ["de"] * 10), "bulk_insert")
    assert len(table.read(filters=[("country", "=", "us")]).column("_hoodie_file_name").unique()) == 140
    publish(table)
    before = manifests(table)
    us = [m for m in before.values() if partition_of(m) == "us"]
    assert len(us) >= 4, [m.manifest_length for m in us]
    assert [bits_of(m) for m in before.values() if partition_of(m) == "de"] == [""]  # small: one, unsplit
    assert max(m.manifest_length for m in before.values()) <= SMALL_TARGET
    bits = [bits_of(m) for m in us]
    assert all(b and not c.startswith(b) for b in bits for c in bits if c != b), bits  # none holds another's
    view = iceberg(table)
    seen = []
    for manifest in us:
        for entry in manifest.fetch_manifest_entry(view.io):
            file_id = entry.data_file.file_path.rpartition("/")[2].split("_")[0]
            position = format(xxhash.xxh64_intdigest(file_id.encode()), "064b")
            assert position.startswith(bits_of(manifest))
            seen.append(file_id)
    assert len(seen) == len(set(seen)) == 140
    assert len(list(view.scan(row_filter=EqualTo("country", "us")).plan_files())) == 140
    assert_same(table)

    upserted = table.write(trips([3], "us", ts=2, fare=1.0), "upsert").instant  # one file group
    publish(table)
    after = manifests(table)
    assert len(set(before) - set(after)) == 1, "one manifest rewritten, every other carried over"
    (replaced,) = (before[p] for p in set(before) - set(after))
    # Rewritten as one manifest, or as two halves of it where the upsert's entries (the file
    # added, the file deleted) took it past the target.
    rewritten = [after[p] for p in set(after) - set(before)]
    assert len(rewritten) in (1, 2), [bits_of(m) for m in rewritten]
    assert all(bits_of(m).startswith(bits_of(replaced)) for m in rewritten)
    assert len(rewritten) == 1 or {bits_of(m)[-1] for m in rewritten} == {"0", "1"}
    assert sum(m.existing_files_count or 0 for m in rewritten) == live(replaced) - 1
    assert sum(m.added_files_count or 0 for m in rewritten) == 1
    assert sum(m.deleted_files_count or 0 for m in rewritten) == 1
    assert_same_files(table)

    rollback(table.handle, upserted)  # the instant the view shows undone: the view is rebuilt, split afresh
    publish(table)
    rebuilt = [m for m in manifests(table).values() if partition_of(m) == "us"]
    assert len(rebuilt) >= 4, [m.manifest_length for m in rebuilt]
    assert max(m.manifest_length for m in rebuilt) <= SMALL_TARGET
    assert sum(live(m) for m in rebuilt) == 140
    assert_same_files(table)

    table.write(trips(range(500, 503), "us"), "insert_overwrite")  # every "us" file group replaced
    publish(table)
    assert sum(live(m) for m in manifests(table).values() if partition_of(m) == "us") == 3
    assert_same_files(table)
    table.write(trips([500], "us", ts=3, fare=2.0), "upsert")
    publish(table)
    assert [bits_of(m) for m in manifests(table).values() if partition_of(m) == "us"] == [""], "merged"
    assert_same(table)


def test_a_publish_costs_the_same_requests_however_big_the_partition(
    s3_server: LoopbackS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-file upsert's publish into a partition of 60 files (a few manifests) and into
    one of 240 (several times as many): the same reads, one manifest among them, and the same
    writes: the manifest list, the metadata, the hint, and the manifest that replaces the one
    read (two halves of it, where the upsert took it past the target)."""
    monkeypatch.setattr(view_module, "MANIFEST_TARGET_BYTES", SMALL_TARGET)
    reads, writes, counts = [], [], []
    for files in (60, 240):
        tables, storage = s3_server.create_bucket(f"big{files}"), s3_server.create_bucket(f"bigs{files}")
        backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
        table = make(backend, **ONE_ROW_FILES)
        table.write(trips(range(files + 2), ["us"] * files + ["de"] * 2), "bulk_insert")
        publish(table)
        before = manifests(table)
        counts.append(len(before))
        table.write(trips([7], "us", ts=2, fare=1.0), "upsert")
        table = load_table(backend.table_path, storage_options=backend.storage_options)
        s3_server.requests.reset()
        publish(table)
        requests = dict(s3_server.requests.by_method)
        after = manifests(table)
        (replaced,) = set(before) - set(after)
        written = set(after) - set(before)
        assert all(bits_of(after[p]).startswith(bits_of(before[replaced])) for p in written)
        assert requests.pop("PUT") == 3 + len(written)
        reads.append(requests)
        writes.append(len(written))
        assert ordered(iceberg(table).scan().to_arrow()) == ordered(table.read())
    assert 3 <= counts[0] < counts[1], counts
    assert reads[0] == reads[1], reads
    assert set(writes) <= {1, 2}, writes
    assert sum(reads[0].values()) + 3 + max(writes) <= 12


def test_a_file_group_finds_its_manifest_or_a_gap_of_its_own() -> None:
    known = {"00", "011", "1"}  # "010" emptied out: a gap
    assert _bucket(known, "0001" + "0" * 60) == "00"
    assert _bucket(known, "1" * 64) == "1"
    assert _bucket(known, "0111" + "0" * 60) == "011"
    gap = "0101" + "0" * 60
    assert _bucket(known, gap) is None
    assert _gap(known, gap) == "010"  # the shortest prefix no manifest's bits start with
    assert _gap(set(), gap) == ""
