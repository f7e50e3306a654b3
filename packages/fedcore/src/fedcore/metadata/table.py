"""The metadata table: partition -> files, fed only from instant metadata.

Under ``.hoodie/metadata/fed-files/``:

- ``deltas/<instant>.parquet``: the file changes of one instant (added, deleted,
  file groups replaced), sorted by partition. Written before the instant
  completes and counted only once it has, so a crash anywhere before the commit
  point leaves a delta that no reader ever applies. A commit writes bytes in
  proportion to the files it changed, whatever the size of the table.
- ``base/<instant>-<shard>-<attempt>.parquet`` and ``manifests/<instant>.json``: the
  compacted state. Partitions are hashed into shards; a shard is sorted by
  partition and cut into small row groups, so looking up one partition reads a
  footer and the row groups holding it. Compaction rewrites only the shards its
  deltas touched, doubles the shard count when shards outgrow their target, and
  switches over by creating the manifest exclusively.
- ``base/<instant>-partitions-<attempt>.parquet``: the partition list, for filters that do
  not pin every partition column.

A lookup as of instant T starts from the newest manifest at or before T and
applies the deltas of the completed instants it does not cover, oldest first.
A manifest names the pending instants it skipped, so an instant that completes
after a compaction is still applied: compaction never waits for writers.

A long-lived reader (a Spark driver, a service planning many queries) shares one
``IndexCache`` between lookups: manifests, shard footers, deltas and the files of
the partitions it looked up are immutable once written, so a lookup fetches only
what the cache lacks. The manifest in use is kept while every instant after it is still
on the active timeline: an older manifest plus more deltas is then the same state as a
newer manifest, so the cache needs no listing to stay correct. Archival breaks that (the
instants it moves out are in no delta a view applies), so before it moves any out it
marks how far it goes in the timeline's listing (``Timeline.archived_through``), and a
cached manifest older than that is replaced by the newest one pointed to. A delta gone
(archival dropped it once a newer manifest covered it) or a long run of deltas makes the
next lookup list manifests again. A plan with nothing new on the timeline then costs one
LIST of the tail of ``.hoodie/`` (``Timeline.load``'s ``since``). A new handle fetches
the manifest and the deltas after it together, so it pays three round trips (timeline,
manifest and deltas, shard row group) however many deltas there are.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash
from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.exceptions import MetadataTableError
from fedcore.io.atomic import create_exclusive, replace_atomic
from fedcore.io.filesystems import read_found, read_object, read_objects, remove_files
from fedcore.io.parquet import open_parquet, read_parquet, read_row_groups
from fedcore.metadata.file_index import FileIndex, PartitionFiles
from fedcore.metadata.ranged import RangedFile, ReadStats
from fedcore.retention import archived_through, check_not_cleaned
from fedcore.timeline import MANIFEST_POINTER_PREFIX, Timeline

FOLDER: Final = f"{P.HOODIE_FOLDER}/metadata/fed-files"
_MAGIC: Final = b"PAR1"
_SCHEMA_KEY: Final = "fed.schema"
#: The pointer of a table no compaction has run on yet (older than any instant).
NO_MANIFEST: Final = "0" * 17
#: What every error about a damaged metadata table ends with.
REPAIR_HINT: Final = "; run `fed repair TABLE` to rebuild the metadata table from storage"

ADD: Final = 0
#: A file gone from the table (cleaned, or undone by a rollback). Not an operation's name:
#: ``write_job.DELETE`` is the write that deletes records.
REMOVE: Final = 1
REPLACE: Final = 2  # name is a file id retired from the table; size holds the replacing instant
UNREPLACE: Final = 3  # undoes REPLACE (rollback of a replace commit)

_SCHEMA: Final = pa.schema(
    [
        pa.field("partition", pa.string(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("op", pa.int8(), nullable=False),
        # An added file's column statistics (``io.parquet.file_stats``); null where none were
        # taken. Files written before the column existed lack it: read as null.
        pa.field("stats", pa.string()),
    ]
)
_PARTITIONS_SCHEMA: Final = pa.schema([pa.field("partition", pa.string(), nullable=False)])


class Op(NamedTuple):
    partition: str
    name: str
    size: int
    op: int
    stats: str | None = None


@dataclass(frozen=True)
class Manifest:
    instant: str
    excluded: frozenset[str]
    shards: tuple[tuple[str, int, int] | None, ...]  # (file name, bytes, rows) per shard
    partitions: tuple[str, int] | None  # (file name, bytes)
    #: Each shard's Parquet footer (base64), so a lookup fetches only the row groups it
    #: needs, in one ranged GET, without first reading the footer. Empty in manifests
    #: written before footers were kept: their shards' footers are read from the shards.
    footers: tuple[str | None, ...] = ()
    #: The Avro schema written by ``schema_instant``, the newest write folded in (so a reader
    #: of a freshly compacted table needs no commit metadata to type its filters).
    schema: str | None = None
    schema_instant: str | None = None

    @property
    def shard_count(self) -> int:
        return len(self.shards)

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "instant": self.instant,
                "excluded": sorted(self.excluded),
                "shards": [list(s) if s else None for s in self.shards],
                "partitions": list(self.partitions) if self.partitions else None,
                "footers": list(self.footers),
                "schema": self.schema,
                "schema_instant": self.schema_instant,
            }
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        body = json.loads(data)
        return cls(
            instant=body["instant"],
            excluded=frozenset(body["excluded"]),
            shards=tuple((s[0], int(s[1]), int(s[2])) if s else None for s in body["shards"]),
            partitions=(body["partitions"][0], int(body["partitions"][1])) if body["partitions"] else None,
            footers=tuple(body.get("footers", ())),
            schema=body.get("schema"),
            schema_instant=body.get("schema_instant"),
        )

    def footer(self, shard: int) -> pq.FileMetaData | None:
        """A shard's footer, as the manifest carries it (None: read it from the shard)."""
        encoded = self.footers[shard] if shard < len(self.footers) else None
        if not encoded:
            return None
        footer = base64.b64decode(encoded)
        tail = struct.pack("<I", len(footer)) + _MAGIC
        return pq.read_metadata(pa.BufferReader(_MAGIC + footer + tail))


@dataclass
class IndexCache:
    """What lookups of one table have read, shared by the lookups of a long-lived handle.

    Everything here is immutable in storage (a manifest, a shard, a delta of a completed
    instant never change once written), so entries never go stale; only the choice of
    manifest to start from is revisited (see the module docstring)."""

    #: The timeline the handle listed last: latest reads list on from it (``Timeline.load``).
    timeline: Timeline | None = None
    #: The manifest latest reads start from (None: list manifests/ next time).
    manifest: Manifest | None = None
    manifests: dict[str, Manifest] = field(default_factory=dict)
    footers: dict[str, pq.FileMetaData] = field(default_factory=dict)
    deltas: dict[str, list[Op]] = field(default_factory=dict)
    #: instant -> the Avro schema its delta records (writes only).
    delta_schemas: dict[str, str] = field(default_factory=dict)
    #: (manifest instant, partition) -> the partition's ops in that manifest's shards.
    base: dict[tuple[str, str], list[Op]] = field(default_factory=dict)
    #: manifest instant -> its partition list.
    partition_lists: dict[str, list[str]] = field(default_factory=dict)

    def forget_manifest(self) -> None:
        """Start the next lookup from a listing, with manifests fetched again (the repair
        tool may have replaced the one this cache holds)."""
        self.manifest = None
        self.manifests.clear()


#: Deltas a cached manifest may need before the next lookup lists manifests/ again.
_MAX_CACHED_DELTAS: Final = 32
#: Partitions whose shard rows a cache keeps (a bound on its memory).
_MAX_CACHED_PARTITIONS: Final = 100_000


class _StaleView(Exception):
    """A cached view's delta is gone: list the manifests again."""


def shard_of(partition: str, shard_count: int) -> int:
    digest: int = xxhash.xxh32_intdigest(partition.encode())
    return digest % shard_count


class MetadataTable(FileIndex):
    """The files of a table, as recorded by its completed instants."""

    def __init__(
        self,
        fs: AbstractFileSystem,
        table_path: str,
        load_timeline: Callable[[], Timeline],
        *,
        shard_rows: int = 50_000,
        row_group_rows: int = 2_048,
        cache: IndexCache | None = None,
    ) -> None:
        self.fs = fs
        self.table_path = table_path
        self.folder = f"{table_path}/{FOLDER}"
        self._load_timeline = load_timeline
        self.shard_rows = shard_rows
        self.row_group_rows = row_group_rows
        #: Shared with other lookups of the same table handle (see ``IndexCache``).
        self.cache = IndexCache() if cache is None else cache
        #: Whether the last view started from a cached or pointed-to manifest rather than a
        #: listing of manifests/ (a failure then retries from a listing).
        self._derived_view = False
        self._checked_as_of: tuple[Timeline, str] | None = None  # (timeline, as_of) found retained
        #: Reads made by lookups: tests and benchmarks check a lookup stays proportional.
        self.stats = ReadStats()

    # --- writing ---------------------------------------------------------------------

    def delta_path(self, instant: str) -> str:
        return f"{self.folder}/deltas/{instant}.parquet"

    def write_delta(self, instant: str, ops: Iterable[Op], schema: str | None = None) -> None:
        """Record an instant's file changes (and a write's Avro schema, so readers that fetch
        the delta need not fetch the commit metadata for it); done before the instant completes."""
        rows = sorted(ops, key=lambda op: op[:4])  # (stats never decide the order)
        table = pa.Table.from_pylist([op._asdict() for op in rows], schema=_SCHEMA)
        if schema is not None:
            table = table.replace_schema_metadata({_SCHEMA_KEY: schema})
        create_exclusive(self.fs, self.delta_path(instant), self._parquet_bytes(table), owned=True)

    def discard_delta(self, instant: str) -> None:
        """Drop the delta of an instant that will never complete (rollback of a failed write)."""
        remove_files(self.fs, [self.delta_path(instant)])  # one request; gone already is fine

    # --- reading ---------------------------------------------------------------------

    def partitions(self, as_of: str | None = None) -> list[str]:
        try:
            return self._partitions(as_of)
        except (_StaleView, MetadataTableError):
            if not self._derived_view:
                raise
            self.cache.forget_manifest()  # its files were dropped: start from a listed view
            return self._partitions(as_of, fresh=True)

    def _partitions(self, as_of: str | None, fresh: bool = False) -> list[str]:
        manifest, deltas = self._view(as_of, fresh=fresh)
        found: set[str] = set()
        if manifest is not None and manifest.partitions is not None:
            listed = self.cache.partition_lists.get(manifest.instant)
            if listed is None:
                name, size = manifest.partitions
                table = self._read_whole(f"{self.folder}/base/{name}", size)
                listed = self.cache.partition_lists[manifest.instant] = table.column("partition").to_pylist()
            found.update(listed)
        for ops in self._read_deltas(deltas, None):
            found.update(op.partition for op in ops if op.op == ADD)
        return sorted(found)

    def files(
        self, partitions: Iterable[str] | None = None, as_of: str | None = None
    ) -> dict[str, PartitionFiles]:
        wanted = None if partitions is None else set(partitions)
        try:
            return self._files(wanted, as_of)
        except (_StaleView, MetadataTableError):
            if not self._derived_view:
                raise
            self.cache.forget_manifest()  # its files were dropped: start from a listed view
            return self._files(wanted, as_of, fresh=True)

    def _files(
        self, wanted: set[str] | None, as_of: str | None, fresh: bool = False
    ) -> dict[str, PartitionFiles]:
        manifest, deltas = self._view(as_of, fresh=fresh)
        state: dict[str, PartitionFiles] = {}
        if manifest is not None:
            for op in self._read_base(manifest, wanted):
                _apply(state, op)
        for ops in self._read_deltas(deltas, wanted):
            for op in ops:
                _apply(state, op)
        return {p: files for p, files in sorted(state.items()) if files.files}

    def write_schema(self, instant: str, as_of: str | None = None) -> str | None:
        """The Avro schema the write ``instant`` recorded, if the lookup state as of ``as_of``
        holds it (its delta, or the manifest it was folded into); None: read its commit.

        Fetches the view's manifest and deltas into the cache, where the lookup that
        follows finds them."""
        try:
            manifest, deltas = self._view(as_of)
            self._read_deltas(deltas, set())
        except (_StaleView, MetadataTableError):
            return None  # the lookup itself will say what is wrong, or retry from a listing
        if instant in self.cache.delta_schemas:
            return self.cache.delta_schemas[instant]
        if manifest is not None and manifest.schema_instant == instant:
            return manifest.schema
        return None

    def deltas_since_compaction(self) -> int:
        return len(self._view(None, fresh=True)[1])

    def _view(
        self, as_of: str | None, timeline: Timeline | None = None, fresh: bool = False
    ) -> tuple[Manifest | None, list[str]]:
        """The manifest to start from and the instants whose deltas to apply, oldest first.

        The manifest is the cache's (a long-lived handle), else the newest the timeline's
        listing points to, else the newest in a listing of manifests/. ``fresh``: always
        the last (compaction builds on the newest manifest; a lookup whose derived start
        was dropped retries from there)."""
        timeline = self._load_timeline() if timeline is None else timeline
        checked = self._checked_as_of
        if as_of is not None and (checked is None or checked[0] is not timeline or checked[1] != as_of):
            # Once per listed timeline: a reader's schema lookup and plan share one view.
            check_not_cleaned(self.fs, self.table_path, timeline, as_of)
            self._checked_as_of = (timeline, as_of)
        completed = [i.time for i in timeline.completed(as_of=as_of)]
        cached = self.cache.manifest
        self._derived_view = not fresh
        # A cached manifest older than what archival moved out may lack instants that are on
        # the timeline no more, and no delta the view applies would add their files.
        archived = timeline.archived_through
        archived_past = cached is not None and archived is not None and cached.instant < archived
        if as_of is None and cached is not None and not fresh and not archived_past:
            deltas = [t for t in completed if t > cached.instant or t in cached.excluded]
            if len(deltas) <= _MAX_CACHED_DELTAS:
                return cached, deltas
        pointed = [t for t in timeline.manifests if as_of is None or t <= as_of]
        if pointed and not fresh and (archived is None or pointed[-1] >= archived):
            manifest = None if pointed[-1] == NO_MANIFEST else self._fetch_manifest(pointed[-1], completed)
        else:
            eligible = [t for t in self.manifest_times() if as_of is None or t <= as_of]
            manifest = self._fetch_manifest(eligible[-1], completed) if eligible else None
            if manifest is None and NO_MANIFEST not in timeline.manifests:
                # Without a manifest every delta applies, but only the active timeline's: if
                # archival moved instants out (it drops their deltas and the start pointer),
                # their files would silently go missing from the view.
                moved = archived_through(self.fs, self.table_path)
                if moved is not None:
                    raise MetadataTableError(
                        f"no metadata-table manifest covers the instants archived through {moved}"
                        f"{REPAIR_HINT}"
                    )
        if as_of is None:
            self.cache.manifest = manifest
        if manifest is None:
            return None, completed
        return manifest, [t for t in completed if t > manifest.instant or t in manifest.excluded]

    def manifest_times(self) -> list[str]:
        """The instants compactions folded the table up to, oldest first."""
        return sorted(name[: -len(".json")] for name in self._names("manifests") if name.endswith(".json"))

    def _names(self, subfolder: str) -> list[str]:
        try:
            entries = self.fs.ls(f"{self.folder}/{subfolder}", detail=False, refresh=True)
        except FileNotFoundError:
            return []
        return [entry.rsplit("/", 1)[-1] for entry in entries]

    def _fetch_manifest(self, instant: str, completed: Sequence[str]) -> Manifest:
        """The manifest ``instant``, fetched together with the deltas of the completed
        instants after it (those a view from it applies), so a new handle pays one round
        trip for both rather than one after the other."""
        if instant not in self.cache.manifests:
            paths = {self.manifest_path(instant): instant}
            paths.update(
                (self.delta_path(t), t) for t in completed if t > instant and t not in self.cache.deltas
            )
            if len(paths) > 1:
                found = read_found(self.fs, list(paths))
                self.stats.add(len(found), sum(map(len, found.values())))
                for path, data in found.items():
                    if paths[path] == instant:
                        self._parse_manifest(instant, data)
                    else:
                        self._parse_delta(paths[path], path, data)
        return self.manifest(instant)  # what the prefetch missed is read (or fails) here

    def manifest_path(self, instant: str) -> str:
        return f"{self.folder}/manifests/{instant}.json"

    def manifest(self, instant: str) -> Manifest:
        cached = self.cache.manifests.get(instant)
        if cached is not None:
            return cached
        try:
            data = self._cat(self.manifest_path(instant))
        except FileNotFoundError:
            raise MetadataTableError(f"manifest {instant} is missing{REPAIR_HINT}") from None
        return self._parse_manifest(instant, data)

    def _parse_manifest(self, instant: str, data: bytes) -> Manifest:
        try:
            manifest = Manifest.from_bytes(data)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise MetadataTableError(f"manifest {instant} is unreadable: {exc}{REPAIR_HINT}") from exc
        self.cache.manifests[instant] = manifest
        return manifest

    def drop_older_than(self, boundary: Manifest) -> int:
        """Delete what no view from ``boundary`` on needs (archival made older views
        impossible): older manifests, the deltas folded into it, shards only they used.
        Returns how many files went."""
        self._point_to(boundary.instant)  # lookups that follow pointers start here or later
        used: set[str] = set()
        for manifest in (self.manifest(t) for t in self.manifest_times() if t >= boundary.instant):
            used.update(entry[0] for entry in manifest.shards if entry)
            if manifest.partitions is not None:
                used.add(manifest.partitions[0])
        doomed = [
            f"{self.folder}/manifests/{name}"
            for name in self._names("manifests")
            if name.endswith(".json") and name[: -len(".json")] < boundary.instant
        ]
        doomed += [
            f"{self.folder}/deltas/{name}"
            for name in self._names("deltas")
            if name[:17] <= boundary.instant and name[:17] not in boundary.excluded
        ]
        # A compaction in progress writes shards named after a later instant, and a repair
        # after the newest completed one, which may be the boundary: neither is touched.
        doomed += [
            f"{self.folder}/base/{name}"
            for name in self._names("base")
            if name[:17] < boundary.instant and name not in used
        ]
        doomed += [
            self.pointer_path(time) for time in self._load_timeline().manifests if time < boundary.instant
        ]
        remove_files(self.fs, doomed)
        return len(doomed)

    def _read_deltas(self, instants: Sequence[str], wanted: set[str] | None) -> list[list[Op]]:
        """The deltas of completed instants, oldest first; those not cached fetched together."""
        cache = self.cache.deltas
        missing = [instant for instant in instants if instant not in cache]
        paths = [self.delta_path(instant) for instant in missing]
        try:
            found = read_objects(self.fs, paths)
        except FileNotFoundError as exc:
            if self.cache.manifest is not None:
                raise _StaleView from None  # folded into a newer manifest, then dropped
            raise MetadataTableError(
                f"a completed instant has no metadata-table delta ({exc}); the metadata table is "
                f"damaged{REPAIR_HINT}"
            ) from None
        self.stats.add(len(found), sum(map(len, found)))
        for instant, path, data in zip(missing, paths, found, strict=True):
            self._parse_delta(instant, path, data)
        return [[op for op in cache[i] if wanted is None or op.partition in wanted] for i in instants]

    def _parse_delta(self, instant: str, path: str, data: bytes) -> None:
        table = _parquet_table(data, path)
        schema = (table.schema.metadata or {}).get(_SCHEMA_KEY.encode())
        if schema is not None:
            self.cache.delta_schemas[instant] = schema.decode()
        self.cache.deltas[instant] = _ops(table, None)

    def _read_base(self, manifest: Manifest, wanted: set[str] | None) -> list[Op]:
        ops: list[Op] = []
        if wanted is None:
            for entry in manifest.shards:
                if entry is not None:
                    ops.extend(self._read_shard(entry, None))
            return ops
        cached = self.cache.base
        shards: dict[int, set[str]] = {}
        for partition in sorted(wanted):
            known = cached.get((manifest.instant, partition))
            if known is not None:
                ops.extend(known)
            else:
                shards.setdefault(shard_of(partition, manifest.shard_count), set()).add(partition)
        for shard, partitions in sorted(shards.items()):
            entry = manifest.shards[shard]
            found = self._read_shard(entry, partitions, manifest.footer(shard)) if entry is not None else []
            ops.extend(found)
            if len(cached) < _MAX_CACHED_PARTITIONS:
                by_partition: dict[str, list[Op]] = {partition: [] for partition in partitions}
                for op in found:
                    by_partition[op.partition].append(op)
                for partition, partition_ops in by_partition.items():
                    cached[(manifest.instant, partition)] = partition_ops
        return ops

    def _read_shard(
        self, entry: tuple[str, int, int], wanted: set[str] | None, footer: pq.FileMetaData | None = None
    ) -> list[Op]:
        name, size, _rows = entry
        path = f"{self.folder}/base/{name}"
        if wanted is None:
            return _ops(self._read_whole(path, size), None)
        try:
            source = RangedFile(self.fs, path, size, self.stats)
            reader = open_parquet(source, self.cache.footers.get(name) or footer)
            self.cache.footers[name] = reader.metadata
            groups = [
                index
                for index in range(reader.metadata.num_row_groups)
                if _row_group_holds(reader.metadata.row_group(index), wanted)
            ]
            source.prefetch(_row_group_span(reader.metadata.row_group(index)) for index in groups)
            table = read_row_groups(reader, groups) if groups else _SCHEMA.empty_table()
        except FileNotFoundError:
            raise MetadataTableError(f"metadata-table shard {path} is missing{REPAIR_HINT}") from None
        except (OSError, pa.ArrowException) as exc:
            raise MetadataTableError(
                f"metadata-table shard {path} is unreadable: {exc}{REPAIR_HINT}"
            ) from exc
        return _ops(table, wanted)

    def _read_whole(self, path: str, size: int) -> pa.Table:
        del size
        try:
            return _parquet_table(self._cat(path), path)
        except FileNotFoundError:
            raise MetadataTableError(f"metadata-table file {path} is missing{REPAIR_HINT}") from None

    def _cat(self, path: str) -> bytes:
        data = read_object(self.fs, path)
        self.stats.add(1, len(data))
        return data

    # --- compaction --------------------------------------------------------------------

    def compact(self) -> str | None:
        """Fold the deltas of completed instants into the sharded base; the new manifest's instant."""
        timeline = self._load_timeline()
        completed = timeline.completed()
        if not completed:
            return None
        upto = completed[-1].time
        old, deltas = self._view(None, timeline, fresh=True)  # the same listing: every delta is <= upto
        if not deltas:
            return None
        changes: dict[str, PartitionFiles] = {}
        delta_ops = [op for ops in self._read_deltas(deltas, None) for op in ops]
        written = [t for t in deltas if t in self.cache.delta_schemas]
        schema, schema_instant = (old.schema, old.schema_instant) if old is not None else (None, None)
        if written:
            schema, schema_instant = self.cache.delta_schemas[written[-1]], written[-1]
        touched = {op.partition for op in delta_ops}
        old_count = old.shard_count if old else 1
        old_rows = sum(s[2] for s in old.shards if s) if old else 0
        adds = sum(1 for op in delta_ops if op.op == ADD)
        count = old_count
        while (old_rows + adds) / count > self.shard_rows:
            count *= 2
        rewrite = (
            set(range(count)) if count != old_count or old is None else {shard_of(p, count) for p in touched}
        )
        # The state of every rewritten shard: its old rows (from whichever old shard held
        # them), then the deltas.
        sources = (set(range(old_count)) if count != old_count else rewrite) if old is not None else set()
        for shard in sorted(sources):
            entry = old.shards[shard] if old is not None else None
            if entry is not None:
                for op in self._read_shard(entry, None):
                    _apply(changes, op)
        for op in delta_ops:
            _apply(changes, op)
        kept = old is not None and count == old_count
        shards: list[tuple[str, int, int] | None] = (
            list(old.shards) if old is not None and kept else [None] * count
        )
        footers: list[str | None] = (
            [old.footers[i] if i < len(old.footers) else None for i in range(count)]
            if old is not None and kept
            else [None] * count
        )
        # Two writers' services may compact up to the same instant at once: each writes its
        # own files, and the exclusive manifest picks one; the loser's files are garbage that
        # ``drop_older_than`` removes once archival passes them.
        attempt = uuid.uuid4().hex[:8]
        self._write_shards(upto, attempt, changes, rewrite, shards, footers)
        partitions = self._write_partitions(upto, attempt, self._partition_list(old, changes, touched))
        pending = frozenset(i.time for i in timeline.pending() if i.time < upto)
        manifest = Manifest(upto, pending, tuple(shards), partitions, tuple(footers), schema, schema_instant)
        try:
            create_exclusive(self.fs, self.manifest_path(upto), manifest.to_bytes())
        except FileExistsError:
            return None  # another process compacted up to the same instant
        self._point_to(upto)
        return upto

    def _write_shards(
        self,
        upto: str,
        attempt: str,
        state: Mapping[str, PartitionFiles],
        rewrite: Iterable[int],
        shards: list[tuple[str, int, int] | None],
        footers: list[str | None],
    ) -> None:
        """Write the shards ``rewrite`` of ``state``, filling in their entries in place."""
        count = len(shards)
        for shard in sorted(rewrite):
            rows = [
                row
                for partition in sorted(p for p in state if shard_of(p, count) == shard)
                for row in _state_rows(partition, state[partition])
            ]
            if not rows:
                shards[shard] = footers[shard] = None
                continue
            data = self._parquet_bytes(pa.Table.from_pylist(rows, schema=_SCHEMA))
            name = f"{upto}-{shard:05d}-{attempt}.parquet"
            create_exclusive(self.fs, f"{self.folder}/base/{name}", data)
            shards[shard] = (name, len(data), len(rows))
            footers[shard] = base64.b64encode(_footer_bytes(data)).decode()

    def _write_partitions(self, upto: str, attempt: str, partitions: list[str]) -> tuple[str, int]:
        data = self._parquet_bytes(pa.table({"partition": partitions}, schema=_PARTITIONS_SCHEMA))
        name = f"{upto}-partitions-{attempt}.parquet"
        create_exclusive(self.fs, f"{self.folder}/base/{name}", data)
        return name, len(data)

    def rebuild(
        self,
        upto: str,
        state: Mapping[str, PartitionFiles],
        pending: Iterable[str],
        schema: tuple[str, str] | None,
        hook: Callable[[str], None] | None = None,
    ) -> Manifest:
        """Replace the lookup state as of ``upto`` (the newest completed instant) with
        ``state``, rebuilt from storage by the repair tool.

        Everything is written under new names first; then the manifest of ``upto`` is
        created, or replaced in one atomic write, and the timeline's pointer names it. A
        lookup sees the old manifest or the new one whole, each naming only its own shards,
        so a crash before the switch leaves the old state and unreferenced files that
        archival sweeps. Instants that were ``pending`` (before ``upto``) stay excluded, so
        their deltas apply when they complete, as after a compaction; so do the deltas of
        instants after ``upto``. ``schema``: (write instant, Avro schema) of the newest write."""
        rows = sum(len(files.files) for files in state.values())
        count = 1
        while rows / count > self.shard_rows:
            count *= 2
        attempt = uuid.uuid4().hex[:8]
        shards: list[tuple[str, int, int] | None] = [None] * count
        footers: list[str | None] = [None] * count
        self._write_shards(upto, attempt, state, range(count), shards, footers)
        partitions = self._write_partitions(upto, attempt, sorted(p for p, f in state.items() if f.files))
        manifest = Manifest(
            upto,
            frozenset(t for t in pending if t < upto),
            tuple(shards),
            partitions,
            tuple(footers),
            schema[1] if schema else None,
            schema[0] if schema else None,
        )
        if hook is not None:
            hook("rebuilt")
        try:
            create_exclusive(self.fs, self.manifest_path(upto), manifest.to_bytes())
        except FileExistsError:
            replace_atomic(self.fs, self.manifest_path(upto), manifest.to_bytes())
        if hook is not None:
            hook("switched")
        self._point_to(upto)
        self.cache.manifests[upto] = manifest
        self.cache.forget_manifest()
        return manifest

    def point_to_no_manifest(self) -> None:
        """Mark a new table's start: no manifest yet, every delta applies (a lookup then
        needs no listing of manifests/ to learn there is none)."""
        self._point_to(NO_MANIFEST)

    def pointer_path(self, instant: str) -> str:
        return f"{self.table_path}/{P.HOODIE_FOLDER}/{MANIFEST_POINTER_PREFIX}{instant}"

    def _point_to(self, instant: str) -> None:
        """Name a manifest in the timeline's listing (after the manifest exists: a pointer
        never names a missing one; a crash before it only leaves lookups on an older one)."""
        with contextlib.suppress(FileExistsError):
            create_exclusive(self.fs, self.pointer_path(instant), b"")

    def _partition_list(
        self, old: Manifest | None, changes: dict[str, PartitionFiles], touched: set[str]
    ) -> list[str]:
        known: set[str] = set()
        if old is not None and old.partitions is not None:
            name, size = old.partitions
            known.update(self._read_whole(f"{self.folder}/base/{name}", size).column("partition").to_pylist())
        for partition in touched:
            if changes.get(partition) and changes[partition].files:
                known.add(partition)
            else:
                known.discard(partition)
        return sorted(known)

    def _parquet_bytes(self, table: pa.Table) -> bytes:
        sink = io.BytesIO()
        pq.write_table(table, sink, row_group_size=self.row_group_rows, compression="zstd")
        return sink.getvalue()


def _footer_bytes(parquet: bytes) -> bytes:
    """The footer (Thrift ``FileMetaData``) of a whole Parquet file's bytes."""
    (length,) = struct.unpack("<I", parquet[-8:-4])
    return parquet[-8 - length : -8]


def _parquet_table(data: bytes, path: str) -> pa.Table:
    try:
        return read_parquet(data)
    except pa.ArrowException as exc:
        raise MetadataTableError(f"metadata-table file {path} is unreadable: {exc}{REPAIR_HINT}") from exc


def _ops(table: pa.Table, wanted: set[str] | None) -> list[Op]:
    columns = [table.column(name).to_pylist() for name in ("partition", "name", "size", "op")]
    stats = table.column("stats").to_pylist() if "stats" in table.column_names else [None] * table.num_rows
    return [Op(*row) for row in zip(*columns, stats, strict=True) if wanted is None or row[0] in wanted]


def _row_group_holds(row_group: pq.RowGroupMetaData, wanted: set[str]) -> bool:
    stats = row_group.column(0).statistics
    if stats is None or not stats.has_min_max:
        return True
    return any(stats.min <= partition <= stats.max for partition in wanted)


def _row_group_span(row_group: pq.RowGroupMetaData) -> tuple[int, int]:
    """The bytes holding a row group's column chunks (dictionary page first when there is one)."""
    starts, ends = [], []
    for index in range(row_group.num_columns):
        column = row_group.column(index)
        start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
        starts.append(start)
        ends.append(start + column.total_compressed_size)
    return min(starts), max(ends)


def _apply(state: dict[str, PartitionFiles], op: Op) -> None:
    files = state.setdefault(op.partition, PartitionFiles())
    if op.op == ADD:
        files.files[op.name] = op.size
        if op.stats is not None:
            files.stats[op.name] = op.stats
    elif op.op == REMOVE:
        files.files.pop(op.name, None)
        files.stats.pop(op.name, None)
    elif op.op == REPLACE:
        files.replaced[op.name] = str(op.size)
    elif op.op == UNREPLACE:
        files.replaced.pop(op.name, None)


def _state_rows(partition: str, files: PartitionFiles) -> Sequence[dict[str, object]]:
    live_ids = {name.split("_", 1)[0].lstrip(".") for name in files.files}
    rows: list[dict[str, object]] = [
        {"partition": partition, "name": name, "size": size, "op": ADD, "stats": files.stats.get(name)}
        for name, size in sorted(files.files.items())
    ]
    # A replaced file group is remembered while any of its files still exists (until cleaned).
    rows.extend(
        {"partition": partition, "name": file_id, "size": int(instant), "op": REPLACE}
        for file_id, instant in sorted(files.replaced.items())
        if file_id in live_ids
    )
    return rows
