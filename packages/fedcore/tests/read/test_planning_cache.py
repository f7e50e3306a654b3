"""A long-lived table handle (a Spark driver, a service) plans each query from what it already
read plus what changed, and stays exact while other writers commit, compact and archive.

Requests are counted at the loopback S3 server, so every request any layer sends is in.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore import timeline as timeline_module
from fedcore.commit.transaction import Transaction
from fedcore.exceptions import MetadataTableError
from fedcore.io.cache import BoundedCache
from fedcore.io.parquet import footer_bytes
from fedcore.metadata.folding import compact_metadata
from fedcore.metadata.format import ADD, REMOVE, Manifest, Op, unpack_footer
from fedcore.metadata.table import IndexCache, MetadataTable
from fedcore.services.rollback import rollback
from fedcore.table import Table, create_table, load_table
from fedcore.timeline import COMMIT
from fedcore.write.client import WriteClient

from ..write.test_writes import make_table, trips

US = [("country", "=", "us")]
#: Compact the metadata table every 2 writes; archive down to 3 instants past 5, so the
#: manifests and deltas a cache started from are dropped within a few writes.
BUSY = {
    P.METADATA_COMPACT_DELTAS: "2",
    P.ARCHIVE_MIN_INSTANTS: "3",
    P.ARCHIVE_MAX_INSTANTS: "5",
    P.CLEANER_COMMITS_RETAINED: "2",
}


def test_a_long_lived_handle_plans_from_its_cache_and_stays_exact(s3_server: LoopbackS3) -> None:
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    writer = make_table(backend, **BUSY)
    for start in range(0, 30, 10):
        WriteClient(writer).upsert(trips(range(start, start + 10), ["us", "de", "fr", "es", "it"] * 2))
    reader = load_table(backend.table_path, storage_options=backend.storage_options)

    def plan() -> tuple[int, list[tuple[str, int]]]:
        s3_server.requests.reset()
        slices = reader.file_slices(US)
        return s3_server.requests.total, sorted(f for s in slices for f in s.files())

    def truth() -> list[tuple[str, int]]:
        fresh = load_table(backend.table_path, storage_options=backend.storage_options)
        return sorted(f for s in fresh.file_slices(US) for f in s.files())

    index = load_table(
        backend.table_path, storage_options=backend.storage_options
    ).handle.metadata_table_or_none()
    assert index is not None
    deltas = index.deltas_since_compaction()
    cold, first = plan()
    # A fresh handle: the timeline's LIST (which names the manifest), the manifest (with its
    # shards' footers and the newest write's schema), one ranged GET of the shard's row
    # group, and one GET per delta since the compaction, the newest write's holding its schema.
    assert cold == 3 + deltas, s3_server.requests.by_method
    started_from = reader.handle.index_cache.manifest
    assert started_from is not None
    warm, again = plan()
    assert again == first == truth()
    assert warm == 1 < cold, "nothing new on the timeline: one LIST of .hoodie/"

    before = {i.time for i in reader.timeline().completed()}
    WriteClient(writer).upsert(trips(range(30, 40), "us"))
    new = len({i.time for i in reader.timeline().completed()} - before)  # the commit and its clean
    after_commit, slices = plan()
    assert slices == truth()
    # The new timeline and one delta per new instant (the commit's holds its schema); the
    # manifest and shard the handle had are still a valid start.
    assert after_commit == 1 + new, (s3_server.requests.listed, s3_server.requests.gets)

    # Other writers' services compact the metadata table and archive, dropping the
    # manifests and deltas the cache started from; every plan stays exact.
    for start in range(40, 140, 10):
        WriteClient(writer).upsert(trips(range(start, start + 10), ["us", "de"] * 5))
        _, slices = plan()
        assert slices == truth()
    assert reader.read(US).num_rows == writer.read(US).num_rows
    # The compactions made a manifest every 2 writes: the deltas each new one holds are dropped.
    for each in (reader, writer):
        cache = each.handle.index_cache
        assert cache.manifest is not None
        assert all(cache.manifest.lacks(t) for t in cache.deltas), cache.deltas.keys()
    # A partition the handle never looked up is in the shards of its first manifest, which
    # archival has dropped by now: the handle notices, starts from the newest manifest.
    de = [("country", "=", "de")]
    assert sorted(reader.read(de).column("trip_id").to_pylist()) == sorted(
        writer.read(de).column("trip_id").to_pylist()
    )
    refreshed = reader.handle.index_cache.manifest
    assert refreshed is not None
    assert refreshed.instant > started_from.instant, "the dropped start was noticed and replaced"


def test_a_long_lived_handle_lists_the_timelines_tail_and_misses_nothing(
    s3_server: LoopbackS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Latest reads of a long-lived handle list ``.hoodie/`` from its earliest pending
    instant (else its last) on: a few keys however long the active timeline is. Commits,
    cleans, compactions, archivals and a rollback of a completed commit by another writer
    must all show up exactly as a whole listing shows them."""
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    writer = make_table(backend)
    tails: list[int] = []
    real = timeline_module.list_names_after

    def counted(*args: object) -> list[str] | None:
        names = real(*args)  # type: ignore[arg-type]
        tails.append(len(names or ()))
        return names

    monkeypatch.setattr(timeline_module, "list_names_after", counted)
    reader = load_table(backend.table_path, storage_options=backend.storage_options)

    def same_as_a_whole_listing() -> None:
        fresh = load_table(backend.table_path, storage_options=backend.storage_options)
        assert sorted(reader.read().column("trip_id").to_pylist()) == sorted(
            fresh.read().column("trip_id").to_pylist()
        )
        assert reader.handle.index_cache.timeline is not None
        assert reader.handle.index_cache.timeline.instants == fresh.timeline().instants
        assert reader.handle.index_cache.timeline.manifests == fresh.timeline().manifests

    for start in range(0, 120, 10):  # the default settings: no compaction or archival yet
        WriteClient(writer).upsert(trips(range(start, start + 10), ["us", "de"] * 5))
        same_as_a_whole_listing()
    listing = s3_server.client().list_objects_v2(Bucket=tables[5:], Prefix="trips/.hoodie/", Delimiter="/")
    assert 3 * max(tails) < len(listing["Contents"]), tails

    # Other writers' services compact and archive (dropping instants before the tail),
    # then one rolls back its completed commit (removing an instant before the tail).
    for start in range(200, 300, 10):
        WriteClient(writer, BUSY).upsert(trips(range(start, start + 10), ["us", "de"] * 5))
        same_as_a_whole_listing()
    latest = WriteClient(writer).upsert(trips(range(300, 310), "fr")).instant
    same_as_a_whole_listing()
    assert 300 in reader.read().column("trip_id").to_pylist()
    rollback(writer.handle, latest)
    same_as_a_whole_listing()
    assert 300 not in reader.read().column("trip_id").to_pylist()


def test_an_upsert_fetches_each_base_file_it_rewrites_once(s3_server: LoopbackS3) -> None:
    """On an object store the key lookup fetches small base files whole and the rewrite
    reuses them: one GET per file group, not a ranged read of its keys and then the file."""
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    table = make_table(backend)
    countries = ["us", "de", "fr", "es"]
    for start in range(0, 40, 10):  # 4 writes of 4 partitions, 16 file groups
        ids = range(start, start + 10)
        WriteClient(table).bulk_insert(trips(ids, [countries[i % 4] for i in ids]))
    groups = len(table.file_slices())
    s3_server.requests.reset()
    result = WriteClient(table).upsert(
        trips(range(40), [countries[i % 4] for i in range(40)], ts=2, fare=99.0)
    )
    assert result.updated == 40
    assert result.files_written == groups
    data_gets = sum(
        count
        for path, count in s3_server.requests.gets.items()
        if path.endswith(".parquet") and storage[5:] in path
    )
    # One GET per file group, plus the footer of the newest base file: the table's schema.
    assert data_gets == groups + 1, s3_server.requests.gets
    assert {r["fare"] for r in table.read().to_pylist()} == {99.0 + i for i in range(40)}


@pytest.mark.parametrize("backend", ["local", "s3"], indirect=True)
def test_a_long_lived_handle_away_while_archival_moves_its_start_out_misses_nothing(backend: Backend) -> None:
    """A handle that planned once, then sat idle while other writers compacted and archived
    past the manifest it started from: the instants archived after that manifest are in
    none of the deltas its next plan applies, so it must start from a newer manifest
    (which holds them) rather than read a view without their files."""
    writer = make_table(backend, **BUSY)
    for start in range(0, 20, 5):
        WriteClient(writer).write(trips(range(start, start + 5), "us"), "bulk_insert")
    reader = load_table(backend.table_path, storage_options=backend.storage_options)
    assert reader.read(US).num_rows == 20
    started_from = reader.handle.index_cache.manifest
    assert started_from is not None, "the reader starts from a compaction's manifest"
    for start in range(20, 80, 5):  # compactions every 2 writes, archival past 5 instants
        WriteClient(writer).write(trips(range(start, start + 5), "us"), "bulk_insert")
    after_start = [i.time for i in writer.timeline().completed() if i.time <= started_from.instant]
    assert not after_start, "archival moved out every instant up to the reader's start and past it"
    assert sorted(reader.read(US).column("trip_id").to_pylist()) == list(range(80))


def test_a_long_lived_reader_sees_every_commit_while_writers_compact_and_archive(
    s3_server: LoopbackS3,
) -> None:
    """Writer threads bulk-insert (each commit a new file group) with compaction every two
    instants and archival past five, while one handle scans again and again: every scan
    holds every row committed before it began."""
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    # Heartbeats that tolerate a busy interpreter: this test is about reads, not expiry.
    make_table(backend, **BUSY, **{P.HEARTBEAT_INTERVAL_MS: "2000"})
    committed: list[int] = []
    lock = threading.Lock()
    done = threading.Event()

    def write(writer: int) -> None:
        handle = load_table(backend.table_path, storage_options=backend.storage_options)
        for batch in range(8):
            ids = [writer * 1000 + batch * 2, writer * 1000 + batch * 2 + 1]
            WriteClient(handle).write(trips(ids, "us"), "bulk_insert")
            with lock:
                committed.extend(ids)

    reader = load_table(backend.table_path, storage_options=backend.storage_options)
    misses: list[int] = []
    starts: set[str] = set()  # the manifests the reader's scans started from
    with ThreadPoolExecutor(4) as pool:
        writes = [pool.submit(write, w) for w in range(3)]
        pool.submit(wait, writes).add_done_callback(lambda _: done.set())
        while not done.is_set():
            with lock:
                before = set(committed)
            if not before:  # a table no write has completed on has no columns yet
                time.sleep(0.01)
                continue
            seen = set(reader.read(US, columns=["trip_id"]).column("trip_id").to_pylist())
            misses.append(len(before - seen))
            if reader.handle.index_cache.manifest is not None:
                starts.add(reader.handle.index_cache.manifest.instant)
        for f in writes:
            f.result()  # a writer's error fails the test
    assert len(misses) >= 5
    assert not any(misses), misses
    oldest = reader.timeline().completed()[0].time
    assert starts
    assert min(starts) < oldest, "archival moved out instants after a manifest a scan started from"
    assert sorted(reader.read(US).column("trip_id").to_pylist()) == sorted(committed)


def test_a_bounded_cache_drops_the_least_recently_used_and_keeps_nothing_too_heavy() -> None:
    cache: BoundedCache[str, int] = BoundedCache(max_weight=10, max_entries=3)
    assert cache.put("a", 1, 4)
    assert cache.put("b", 2, 4)
    assert cache.get("a") == 1  # now "b" is the least recently used
    assert cache.put("c", 3, 4)  # 12 > 10: "b" goes
    assert cache.keys() == ["a", "c"]
    assert cache.weight == 8
    assert not cache.put("heavy", 4, 11)  # over the whole bound: not kept, nothing dropped
    assert cache.keys() == ["a", "c"]
    for key in "def":
        cache.put(key, 0, 0)
    assert cache.keys() == ["d", "e", "f"]
    assert cache.weight == 0
    cache.put("d", 5, 6)  # replacing an entry counts its new weight only
    assert cache.get("d") == 5
    assert cache.weight == 6
    assert cache.drop_where(lambda key: key in "de") == 2
    assert cache.keys() == ["f"]
    assert cache.weight == 0


def _commit(table: Table, ops: list[Op]) -> str:
    transaction = Transaction(table.handle, COMMIT)
    transaction.begin()
    transaction.commit(b"{}", ops)
    return transaction.time


def test_a_tightly_bounded_index_cache_stays_exact_after_evictions(tmp_path: Path) -> None:
    """A long-lived lookup whose caches hold a few partitions' rows, deltas and footers: entries go
    while the table is written, compacted (shards rewritten, shard count doubling) and files
    are removed, and every answer stays the table's, never a dropped or older state."""
    table = create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["id"], partition_fields=["p"])
    bounds = {"partition_rows": 12_000, "deltas": 16_000, "footers": 3_000}
    cache = IndexCache(
        manifests=BoundedCache(max_entries=1),
        footers=BoundedCache(bounds["footers"]),
        deltas=BoundedCache(bounds["deltas"]),
        partition_rows=BoundedCache(bounds["partition_rows"]),
    )

    def lookup(cache: IndexCache | None = None) -> MetadataTable:
        return MetadataTable(
            table.fs.table_fs,
            table.path,
            table.timeline,
            layout=table.handle.layout,
            shard_rows=30,
            row_group_rows=8,
            cache=cache,
        )

    reader, writer = lookup(cache), lookup()  # the writer compacts with a cache of its own
    partitions = [f"p={i:03d}" for i in range(40)]
    expected: dict[str, set[str]] = {p: set() for p in partitions}
    for round_ in range(15):
        ops = []
        for k, partition in enumerate(partitions[(round_ * 13) % 40 :][:16]):
            name = f"{round_:04d}{k:04d}-0000-0000-0000-000000000000-0_0-1-0_2026010100{round_:07d}.parquet"
            ops.append(Op(partition, name, 1_000 + round_, ADD, f'{{"rows": {round_}}}'))
            expected[partition].add(name)
            if len(expected[partition]) > 3:  # a clean: the oldest file goes
                oldest = min(expected[partition])
                ops.append(Op(partition, oldest, 0, REMOVE))
                expected[partition].discard(oldest)
        _commit(table, ops)
        if round_ % 3 == 2:
            assert compact_metadata(writer) is not None
        for partition in partitions[round_ % 5 :: 5]:  # a few one-partition plans each round
            found = reader.files([partition]).get(partition)
            assert set(found.files if found else ()) == expected[partition], (round_, partition)
            assert all(found.stats[name] for name in expected[partition]) if found else True
        assert cache.partition_rows.weight <= bounds["partition_rows"]
        assert cache.deltas.weight <= bounds["deltas"]
        assert cache.footers.weight <= bounds["footers"]
    manifest = writer.manifest(writer.manifest_times()[-1])
    assert manifest.shard_count >= 4, "the shard count doubled as the table grew"
    for partition in partitions:  # every partition, one at a time: all row groups are read
        assert set(reader.files([partition])[partition].files) == expected[partition]
    assert 0 < len(cache.partition_rows) < len(partitions), "partitions' rows were dropped, read again"
    assert 0 < len(cache.footers) < manifest.shard_count
    both = reader.files(partitions[:20])
    assert {p: set(f.files) for p, f in both.items()} == {p: expected[p] for p in partitions[:20]}
    assert {p: set(f.files) for p, f in reader.files().items()} == expected
    assert reader.partitions() == partitions


def test_a_handles_commit_metadata_is_bounded_by_its_bytes(tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    table = make_table(backend)
    for start in range(0, 40, 10):  # bodies of different sizes: 1 to 4 partitions
        countries = ["us", "de", "fr", "es"][: start // 10 + 1]
        WriteClient(table).upsert(
            trips(range(start, start + 10), [countries[i % len(countries)] for i in range(10)])
        )
    handle = table.handle
    instants = handle.timeline().completed(handle.write_actions)
    bodies = {
        i.time: handle.fs.table_fs.cat_file(handle.layout.instants.path(handle.path, i)) for i in instants
    }
    largest = max(map(len, bodies.values()))
    for bound in (largest, min(map(len, bodies.values())) - 1):  # one at a time; none at all
        handle.__dict__["_commits"] = commits = BoundedCache(bound, 256)
        for _ in range(2):
            for instant in instants:
                assert handle.commit_metadata(instant) == handle.layout.commits.decode(
                    bodies[instant.time], "x"
                )
                assert commits.weight <= bound
        assert len(commits) == (1 if bound == largest else 0)


def test_a_manifest_packs_its_shards_footers_and_older_ones_are_still_read(s3_server: LoopbackS3) -> None:
    """The manifest carries each shard's footer packed (deflated, of a shard with statistics of
    its partition column only), so a new lookup of one partition fetches the manifest and then
    the partition's row group: two requests. A manifest written before, with every footer
    whole, is read the same way; one with no footers (older still, or written by a fedcore of
    before after one of now) has its shards' footers read from the shards. Compaction packs
    the footers of the shards it keeps, from the manifest or else from the shard."""
    tables = s3_server.create_bucket("tables")
    table = create_table(
        f"{tables}/t",
        name="t",
        record_key_fields=["id"],
        partition_fields=["p"],
        storage_options=s3_server.storage_options(),
    )

    def lookup() -> MetadataTable:
        return MetadataTable(
            table.fs.table_fs,
            table.path,
            table.timeline,
            layout=table.handle.layout,
            shard_rows=150,
            row_group_rows=16,
        )

    partitions = [f"p={i:03d}" for i in range(60)]
    expected: dict[str, set[str]] = {p: set() for p in partitions}

    def commit(round_: int, partitions: list[str]) -> None:
        ops = []
        for k, partition in enumerate(partitions):
            name = f"{round_:04d}{k:04d}-0000-0000-0000-000000000000-0_0-1-0_2026010100{round_:07d}.parquet"
            ops.append(Op(partition, name, 1_000, ADD, f'{{"rows": {round_}}}'))
            expected[partition].add(name)
        _commit(table, ops)

    def compacted() -> Manifest:
        upto = compact_metadata(lookup())
        assert upto is not None
        manifest = lookup().manifest(upto)
        assert not manifest.footers
        assert len(manifest.packed_footers) == manifest.shard_count >= 2
        for entry, packed in zip(manifest.shards, manifest.packed_footers, strict=True):
            assert entry is not None
            assert packed is not None
            data = table.fs.table_fs.cat_file(f"{lookup().folder}/base/{entry[0]}")
            assert unpack_footer(packed) == footer_bytes(data)
        assert {p: set(f.files) for p, f in lookup().files().items()} == expected
        return manifest

    def one_partition(partition: str) -> int:
        fresh = lookup()
        assert set(fresh.files([partition])[partition].files) == expected[partition]
        return fresh.stats.requests

    def rewrite(manifest: Manifest, footers: list[str] | None) -> None:
        """The manifest as a writer of before wrote it: footers whole, or none."""
        path = lookup().manifest_path(manifest.instant)
        body = json.loads(table.fs.table_fs.cat_file(path))
        del body["packed_footers"]
        body["footers"] = footers or []
        table.fs.table_fs.pipe_file(path, json.dumps(body).encode())

    for round_ in range(6):
        commit(round_, partitions)
    manifest = compacted()
    whole = [base64.b64encode(unpack_footer(packed or "")).decode() for packed in manifest.packed_footers]
    assert sum(map(len, manifest.packed_footers or ())) < sum(map(len, whole)) / 3
    # The manifest (GET), then the partition's row group (one ranged GET).
    assert {one_partition(p) for p in partitions[::7]} == {2}

    rewrite(manifest, whole)  # every footer whole: read as before
    assert lookup().manifest(manifest.instant).footers
    assert {one_partition(p) for p in partitions[::7]} == {2}
    commit(10, partitions[:1])  # a compaction rewrites one shard, packs the others' footers
    newer = compacted()
    assert sum(a != b for a, b in zip(newer.shards, manifest.shards, strict=True)) == 1
    assert {one_partition(p) for p in partitions[::7]} == {2}

    rewrite(newer, None)  # no footers: each lookup reads its shard's footer from the shard
    assert all(one_partition(p) >= 3 for p in partitions[::7])
    commit(11, partitions[:1])
    compacted()  # the footers of the shards it keeps read from the shards
    assert {one_partition(p) for p in partitions[::7]} == {2}


def test_shards_written_before_the_stats_column_mix_with_cached_absences(tmp_path: Path) -> None:
    """A shard an older fedcore wrote (no ``stats`` column): a partition it lacks, cached as
    absent, then looked up with one it holds, answers both; a manifest whose packed footer
    does not decode is a typed error naming the repair tool."""
    table = create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["id"], partition_fields=["p"])

    def lookup(cache: IndexCache | None = None) -> MetadataTable:
        return MetadataTable(
            table.fs.table_fs,
            table.path,
            table.timeline,
            layout=table.handle.layout,
            shard_rows=1_000,
            cache=cache,
        )

    name = "00000000-0000-0000-0000-000000000000-0_0-1-0_20260101000000000.parquet"
    _commit(table, [Op("p=a", name, 10, ADD, '{"rows": 1}')])
    upto = compact_metadata(lookup())
    assert upto is not None
    index = lookup()
    manifest = index.manifest(upto)
    (entry,) = [e for e in manifest.shards if e is not None]
    shard = f"{index.folder}/base/{entry[0]}"
    fs = table.fs.table_fs
    old = pq.read_table(io.BytesIO(fs.cat_file(shard))).drop_columns(["stats"])
    sink = io.BytesIO()
    pq.write_table(old, sink)
    fs.pipe_file(shard, sink.getvalue())
    body = json.loads(fs.cat_file(index.manifest_path(upto)))
    body["packed_footers"] = []
    body["shards"] = [[entry[0], len(sink.getvalue()), entry[2]]]
    fs.pipe_file(index.manifest_path(upto), json.dumps(body).encode())

    reader = lookup(IndexCache())
    assert reader.files(["p=zz"]) == {}
    found = reader.files(["p=a", "p=zz"])
    assert set(found) == {"p=a"}
    assert set(found["p=a"].files) == {name}

    body["packed_footers"] = ["not base64 at all!"]
    fs.pipe_file(index.manifest_path(upto), json.dumps(body).encode())
    with pytest.raises(MetadataTableError, match="fed repair"):
        lookup(IndexCache()).files(["p=a"])


def test_a_bounded_cache_pickles_with_its_entries_and_bounds() -> None:
    """A handle, its caches with it, is pickled to Spark's workers."""
    cache: BoundedCache[str, int] = BoundedCache(max_weight=10, max_entries=3)
    cache.put("a", 1, 4)
    cache.put("b", 2, 5)
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.keys() == ["a", "b"]
    assert copy.weight == 9
    assert (copy.max_weight, copy.max_entries) == (10, 3)
    copy.put("c", 3, 4)  # its own lock, its own bounds: "a" goes
    assert copy.keys() == ["b", "c"]
    assert cache.keys() == ["a", "b"]
    handle = pickle.loads(pickle.dumps(IndexCache()))
    assert handle.partition_rows.max_weight is not None
