"""The metadata table's lookups: partition -> files as of an instant, and the deltas each
instant writes (the format: ``metadata.format``; compaction, the repair tool's rebuild and
the cleanup after archival: ``metadata.folding``, ``metadata.rebuild``, ``metadata.cleanup``).

A lookup as of instant T starts from the newest manifest at or before T and
applies the deltas of the completed instants it does not cover, oldest first.
A manifest names the pending instants it skipped, so an instant that completes
after a compaction is still applied: compaction never waits for writers.

A long-lived reader (a Spark driver, a service planning many queries) shares one
``IndexCache`` between lookups: manifests, shard footers, the shard rows of the partitions
it looked up and deltas are immutable once written, so a lookup fetches only what the cache
lacks. Each of them is
bounded in bytes and entries (``io.cache``: the least recently used go first, and a
delta goes once the manifest in use holds it), so the cache's memory does not grow with the
table or its history. The manifest in use is kept while every instant after it is still
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

import contextlib
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from fedcore.exceptions import MetadataTableError, TimelineMovedError
from fedcore.io.atomic import create_exclusive
from fedcore.io.cache import BoundedCache
from fedcore.io.filesystems import read_existing, read_found, read_object, read_objects, remove_files
from fedcore.io.parquet import MAGIC, open_parquet, read_row_groups
from fedcore.io.ranged import RangedFile, ReadStats
from fedcore.metadata.catch_up import instant_ops
from fedcore.metadata.file_index import FileIndex, PartitionFiles
from fedcore.metadata.format import (
    ADD,
    FOLDER,
    LEGACY_FOLDER,
    NO_MANIFEST,
    REPAIR_HINT,
    SCHEMA,
    SCHEMA_KEY,
    Manifest,
    Op,
    apply_op,
    conformed,
    detached,
    ops_of,
    ops_table,
    parquet_table,
    row_group_holds,
    row_group_span,
    rows_of,
    shard_of,
    split_by_partition,
)
from fedcore.timeline import MANIFEST_POINTER_PREFIX, Timeline
from fedcore.timeline.archived import ArchivedInstant, hudi_archive_files, read_hudi_archive
from fedcore.timeline.layout import TableLayout
from fedcore.timeline.retention import archived_through, check_not_cleaned


class Delta(NamedTuple):
    """An instant's records, and the Avro schema a write records with them (None: none)."""

    rows: pa.Table
    schema: str | None

    @property
    def weight(self) -> int:
        return int(self.rows.nbytes) + len(self.schema or "")


#: The bounds of a handle's ``IndexCache``: bytes of partitions' shard rows and of deltas
#: (Arrow's buffers), of serialized shard footers, and the manifests and partition lists kept.
#: A long-lived handle's plan needs the manifest, each pruned partition's rows and the
#: deltas since the manifest (at most ``_MAX_CACHED_DELTAS``); the footer of a shard only
#: to read rows not cached.
PARTITION_ROW_BYTES: Final = 8 * 2**20
DELTA_BYTES: Final = 16 * 2**20
FOOTER_BYTES: Final = 4 * 2**20
MANIFEST_BYTES: Final = 8 * 2**20
CACHED_MANIFESTS: Final = 8
CACHED_PARTITION_LISTS: Final = 2


@dataclass
class IndexCache:
    """What lookups of one table have read, shared by the lookups of a long-lived handle.

    Everything here is immutable in storage (a manifest, a shard, a delta of a completed
    instant never change once written), so entries never go stale; only the choice of
    manifest to start from is revisited (see the module docstring). Each kind of entry is
    bounded (``BoundedCache``): one dropped is read again when a lookup needs it."""

    #: The timeline the handle listed last: latest reads list on from it (``Timeline.load``).
    timeline: Timeline | None = None
    #: The manifest latest reads start from (None: list manifests/ next time).
    manifest: Manifest | None = None
    #: manifest instant -> manifest (weighed by its size in storage).
    manifests: BoundedCache[str, Manifest] = field(
        default_factory=lambda: BoundedCache(MANIFEST_BYTES, CACHED_MANIFESTS)
    )
    #: shard file name -> its footer (weighed by its serialized size).
    footers: BoundedCache[str, pq.FileMetaData] = field(default_factory=lambda: BoundedCache(FOOTER_BYTES))
    #: instant -> its delta (or the changes caught up from its commit: ``_catch_up``).
    deltas: BoundedCache[str, Delta] = field(default_factory=lambda: BoundedCache(DELTA_BYTES))
    #: (shard file name, partition) -> the partition's rows in that shard (none: an empty
    #: table): shards keep their names across compactions that do not rewrite them, so these
    #: outlive the manifest they were read through.
    partition_rows: BoundedCache[tuple[str, str], pa.Table] = field(
        default_factory=lambda: BoundedCache(PARTITION_ROW_BYTES)
    )
    #: manifest instant -> its partition list.
    partition_lists: BoundedCache[str, list[str]] = field(
        default_factory=lambda: BoundedCache(max_entries=CACHED_PARTITION_LISTS)
    )
    #: Apache Hudi's archived timeline (``archived_timeline``): its completed instants, the
    #: (path, size) of the files they were read from, and the (first active instant, view
    #: manifest) it was last checked for.
    hudi_archive: dict[str, ArchivedInstant] = field(default_factory=dict)
    hudi_archive_files: frozenset[tuple[str, int]] = frozenset()
    hudi_archive_checked: tuple[str, str] | None = None
    #: Whether an instant without a delta of fed's was taken in (another writer, such as
    #: Apache Hudi's, writes the table): its timeline is then always listed whole, since
    #: such a writer may complete instants out of order, or archive them between two reads.
    co_written: bool = False

    def forget_manifest(self) -> None:
        """Start the next lookup from a listing, with manifests fetched again (the repair
        tool may have replaced the one this cache holds)."""
        self.manifest = None
        self.manifests.clear()

    def start_from(self, manifest: Manifest | None) -> None:
        """Make ``manifest`` the one latest reads start from, dropping the deltas it holds (a
        view from it or a newer one never applies them)."""
        if manifest is not None and (self.manifest is None or manifest.instant != self.manifest.instant):
            self.deltas.drop_where(lambda instant: not manifest.lacks(instant))
        self.manifest = manifest


#: Deltas a cached manifest may need before the next lookup lists manifests/ again.
_MAX_CACHED_DELTAS: Final = 32
#: The rows of a partition a shard does not hold (made of empty arrays: ``Schema.empty_table``
#: imports pandas, a fifth of a second of every process's import of fedcore).
_NO_ROWS: Final = pa.Table.from_arrays([pa.nulls(0, field.type) for field in SCHEMA], schema=SCHEMA)
#: What a cached partition's rows take besides their buffers (the table, its key).
_ENTRY_BYTES: Final = 1_024


@dataclass
class _Room:
    """Bytes a lookup may still add to the cache's row groups (None: no limit)."""

    left: int | None

    def take(self, nbytes: int) -> bool:
        if self.left is None:
            return True
        if nbytes > self.left:
            return False
        self.left -= nbytes
        return True


class _StaleView(Exception):
    """A cached view's delta is gone: list the manifests again."""


class MetadataTable(FileIndex):
    """The files of a table, as recorded by its completed instants."""

    def __init__(
        self,
        fs: AbstractFileSystem,
        table_path: str,
        load_timeline: Callable[[], Timeline],
        *,
        layout: TableLayout,
        folder: str = FOLDER,
        shard_rows: int = 50_000,
        row_group_rows: int = 2_048,
        cache: IndexCache | None = None,
    ) -> None:
        self.fs = fs
        self.table_path = table_path
        #: The metadata table's folder (``folder``: its path under the table path).
        self.folder = f"{table_path}/{folder}"
        self.load_timeline = load_timeline
        #: The table version's names and encodings (its instant files' names).
        self.layout = layout
        self.shard_rows = shard_rows
        self.row_group_rows = row_group_rows
        #: Shared with other lookups of the same table handle (see ``IndexCache``).
        self.cache = IndexCache() if cache is None else cache
        #: Whether the last view started from a cached or pointed-to manifest rather than a
        #: listing of manifests/ (a failure then retries from a listing).
        self._derived_view = False
        self._checked_as_of: tuple[Timeline, str] | None = None  # (timeline, as_of) found retained
        #: The timeline the last view was taken from (the actions of the instants it applies),
        #: and the manifest it started from.
        self._view_timeline: Timeline | None = None
        self._view_manifest: Manifest | None = None
        #: Reads made by lookups: tests and benchmarks check a lookup stays proportional.
        self.stats = ReadStats()

    # --- writing ---------------------------------------------------------------------

    def delta_path(self, instant: str) -> str:
        return f"{self.folder}/deltas/{instant}.parquet"

    def write_delta(self, instant: str, ops: Iterable[Op], schema: str | None = None) -> None:
        """Record an instant's file changes (and a write's Avro schema, so readers that fetch
        the delta need not fetch the commit metadata for it); done before the instant completes."""
        rows = sorted(ops, key=lambda op: op[:4])  # (stats never decide the order)
        table = pa.Table.from_pylist([op._asdict() for op in rows], schema=SCHEMA)
        if schema is not None:
            table = table.replace_schema_metadata({SCHEMA_KEY: schema})
        create_exclusive(self.fs, self.delta_path(instant), self.parquet_bytes(table), owned=True)

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
        manifest, deltas = self.view(as_of, fresh=fresh)
        found: set[str] = set()
        if manifest is not None and manifest.partitions is not None:
            listed = self.cache.partition_lists.get(manifest.instant)
            if listed is None:
                name, size = manifest.partitions
                table = self.read_whole(f"{self.folder}/base/{name}", size)
                listed = table.column("partition").to_pylist()
                self.cache.partition_lists.put(manifest.instant, listed)
            found.update(listed)
        for delta in self.deltas_of(deltas).values():
            added = delta.rows.filter(pc.equal(delta.rows.column("op"), ADD)).column("partition")
            found.update(pc.unique(added).to_pylist())
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
        manifest, deltas = self.view(as_of, fresh=fresh)
        state: dict[str, PartitionFiles] = {}
        if manifest is not None:
            for op in self._read_base(manifest, wanted):
                apply_op(state, op)
        for ops in self.read_deltas(deltas, wanted):
            for op in ops:
                apply_op(state, op)
        return {p: files for p, files in sorted(state.items()) if files.files}

    def write_schema(self, instant: str, as_of: str | None = None) -> str | None:
        """The Avro schema the write ``instant`` recorded, if the lookup state as of ``as_of``
        holds it (its delta, or the manifest it was folded into); None: read its commit.

        Fetches the view's manifest and deltas into the cache, where the lookup that
        follows finds them."""
        try:
            manifest, deltas = self.view(as_of)
            found = self.deltas_of(deltas)
        except (_StaleView, MetadataTableError):
            return None  # the lookup itself will say what is wrong, or retry from a listing
        delta = found.get(instant) or self.cache.deltas.get(instant)
        if delta is not None and delta.schema is not None:
            return delta.schema
        if manifest is not None and manifest.schema_instant == instant:
            return manifest.schema
        return None

    def deltas_since_compaction(self) -> int:
        return len(self.view(None, fresh=True)[1])

    def view(
        self, as_of: str | None, timeline: Timeline | None = None, fresh: bool = False
    ) -> tuple[Manifest | None, list[str]]:
        """The manifest to start from and the instants whose deltas to apply, oldest first:
        the completed instants of the active timeline it does not cover, and those Apache
        Hudi's archival moved out before they were folded into a manifest (``_hudi_archived``)."""
        timeline = self.load_timeline() if timeline is None else timeline
        manifest, deltas = self._view(as_of, timeline, fresh)
        self._view_manifest = manifest
        archived = self._hudi_archived(timeline, manifest, as_of)
        return manifest, sorted(deltas + archived) if archived else deltas

    def _hudi_archived(self, timeline: Timeline, manifest: Manifest | None, as_of: str | None) -> list[str]:
        """Completed instants a view from ``manifest`` lacks that are in Hudi's archived
        timeline only: a Hudi writer of the table archived them (``archived_timeline``).

        Only if the timeline's listing shows an archive folder; and archival moves the
        oldest instants out, so only when an instant the manifest holds is off the active
        timeline although fed's archival did not move it (``Timeline.archived_through``), or
        a pending instant it skipped is gone; for a manifest that does not record what it
        holds, when the timeline starts after it. The answer is kept for as long as the
        timeline's first instant and the manifest stay the same."""
        if not timeline.has_archive or not timeline.instants:
            return []
        first = timeline.instants[0].time
        on_timeline = {i.time for i in timeline.instants}
        start = "" if manifest is None else manifest.listed_from or manifest.instant
        if manifest is not None and manifest.folded is not None:
            moved = timeline.archived_through or ""
            gone = any(t > moved and t not in on_timeline for t in manifest.folded)
            if not gone and all(t in on_timeline or t >= first for t in manifest.excluded):
                return []
        elif (
            manifest is not None and first <= manifest.instant and all(t >= first for t in manifest.excluded)
        ):
            return []
        cache = self.cache
        if cache.hudi_archive_checked != (first, start):
            files = hudi_archive_files(self.fs, self.table_path, self.layout.instants)
            key = frozenset(files.items())
            if key != cache.hudi_archive_files:
                archived = read_hudi_archive(self.fs, list(files))
                self.stats.add(len(files), sum(files.values()))
                # Savepoints and the like change no file: only what has changes to take in.
                cache.hudi_archive = {a.time: a for a in archived if a.body is not None}
                cache.hudi_archive_files = key
            cache.hudi_archive_checked = (first, start)
        return [
            t
            for t in cache.hudi_archive
            if t not in on_timeline
            and (manifest is None or manifest.lacks(t, on_timeline=False))
            and (as_of is None or t <= as_of)
        ]

    def _view(self, as_of: str | None, timeline: Timeline, fresh: bool) -> tuple[Manifest | None, list[str]]:
        """The manifest to start from and the completed instants of the active timeline whose
        deltas to apply, oldest first.

        The manifest is the cache's (a long-lived handle), else the newest the timeline's
        listing points to, else the newest in a listing of manifests/. ``fresh``: always
        the last (compaction builds on the newest manifest; a lookup whose derived start
        was dropped retries from there)."""
        checked = self._checked_as_of
        if as_of is not None and (checked is None or checked[0] is not timeline or checked[1] != as_of):
            # Once per listed timeline: a reader's schema lookup and plan share one view.
            check_not_cleaned(self.fs, self.table_path, self.layout.instants, timeline, as_of)
            self._checked_as_of = (timeline, as_of)
        completed = [i.time for i in timeline.completed(as_of=as_of)]
        self._view_timeline = timeline
        cached = self.cache.manifest
        self._derived_view = not fresh
        # A cached manifest older than what archival moved out may lack instants that are on
        # the timeline no more, and no delta the view applies would add their files.
        archived = timeline.archived_through
        archived_past = cached is not None and archived is not None and cached.instant < archived
        if as_of is None and cached is not None and not fresh and not archived_past:
            deltas = [t for t in completed if cached.lacks(t)]
            if len(deltas) <= _MAX_CACHED_DELTAS:
                return cached, deltas
        pointed = [t for t in timeline.manifests if as_of is None or t <= as_of]
        if pointed and not fresh and (archived is None or pointed[-1] >= archived):
            manifest = None if pointed[-1] == NO_MANIFEST else self._fetch_manifest(pointed[-1], completed)
        else:
            eligible = [t for t in self.manifest_times() if as_of is None or t <= as_of]
            manifest = self._fetch_manifest(eligible[-1], completed) if eligible else None
            if manifest is not None and archived is not None and manifest.instant < archived:
                # Archival moves instants out only up to a manifest it made: one older than
                # that is all that is left here (lost manifests, or a folder the table has moved
                # out of), and the instants between are in no delta this view would apply.
                raise MetadataTableError(
                    f"the newest metadata-table manifest in {self.folder} ({manifest.instant}) is older "
                    f"than the instants archived through {archived}{REPAIR_HINT}"
                )
            if manifest is None and NO_MANIFEST not in timeline.manifests:
                # Without a manifest every delta applies, but only the active timeline's: if
                # archival moved instants out (it drops their deltas and the start pointer),
                # their files would silently go missing from the view.
                # fed's archival (its archive files, or the marker it leaves before it moves
                # instants into Hudi 1.x's history); what a Hudi writer archived is taken in
                # from its archive below (``_hudi_archived``).
                moved = archived_through(self.fs, self.table_path) or timeline.archived_through
                if moved is not None:
                    raise MetadataTableError(
                        f"no metadata-table manifest covers the instants archived through {moved}"
                        f"{REPAIR_HINT}"
                    )
        if as_of is None:
            self.cache.start_from(manifest)
        if manifest is None:
            return None, completed
        return manifest, [t for t in completed if manifest.lacks(t)]

    def manifest_times(self) -> list[str]:
        """The instants compactions folded the table up to, oldest first."""
        return sorted(name[: -len(".json")] for name in self.names("manifests") if name.endswith(".json"))

    def names(self, subfolder: str) -> list[str]:
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
            )  # (one the cache holds may be dropped before it is used: it is read again then)
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
        self.cache.manifests.put(instant, manifest, len(data))
        return manifest

    def read_deltas(self, instants: Sequence[str], wanted: set[str] | None) -> list[list[Op]]:
        """The records of the deltas of completed instants, oldest first (of ``wanted``
        partitions: None for all)."""
        found = self.deltas_of(instants)
        return [ops_of(found[instant].rows, wanted) for instant in instants]

    def deltas_of(self, instants: Sequence[str]) -> dict[str, Delta]:
        """The deltas of completed instants; those not cached fetched together."""
        out: dict[str, Delta] = {}
        missing: dict[str, str] = {}
        for instant in instants:
            cached = self.cache.deltas.get(instant)
            if cached is None:
                missing[self.delta_path(instant)] = instant
            else:
                out[instant] = cached
        found = read_existing(self.fs, list(missing))
        self.stats.add(len(found), sum(map(len, found.values())))
        for path, data in found.items():
            out[missing[path]] = self._parse_delta(missing[path], path, data)
        absent = [instant for path, instant in missing.items() if path not in found]
        if absent:
            if self._derived_view and self.cache.manifest is not None:
                raise _StaleView  # folded into a newer manifest, then dropped: list again
            out.update(self._catch_up(absent))
        return out

    def _catch_up(self, instants: Sequence[str]) -> dict[str, Delta]:
        """Take in completed instants that have no delta here (``metadata.catch_up``): a
        delta a writer of the table's old layout put in the old folder, else the changes
        the instant's own metadata records. Kept in the cache only; the next compaction of
        the metadata table folds them in for good."""
        out: dict[str, Delta] = {}
        if self.folder != f"{self.table_path}/{LEGACY_FOLDER}":
            paths = {
                f"{self.table_path}/{LEGACY_FOLDER}/deltas/{instant}.parquet": instant for instant in instants
            }
            for path, data in read_existing(self.fs, list(paths)).items():
                out[paths[path]] = self._parse_delta(paths[path], path, data)
        left = [instant for instant in instants if instant not in out]
        if not left:
            return out
        timeline = (
            {i.time: i for i in self._view_timeline.instants if i.is_completed} if self._view_timeline else {}
        )
        known = [timeline[t] for t in left if t in timeline]
        archived = [
            self.cache.hudi_archive[t] for t in left if t not in timeline and t in self.cache.hudi_archive
        ]
        if len(known) + len(archived) < len(left):
            unknown = sorted(set(left) - {i.time for i in known} - {a.time for a in archived})
            raise MetadataTableError(
                f"completed instant {unknown[0]} has no metadata-table delta; the metadata table is "
                f"damaged{REPAIR_HINT}"
            )
        try:
            bodies = read_objects(self.fs, [self.layout.instants.path(self.table_path, i) for i in known])
        except FileNotFoundError:
            # Listed on the view's timeline, gone now: archived since (its delta dropped once a
            # newer manifest held it), or else lost (the storage error says which file).
            if not self._archived_since(min(i.time for i in known)):
                raise
            raise TimelineMovedError(
                f"table {self.table_path}: instants {', '.join(i.time for i in known)} of the timeline "
                "this view was listed with have no metadata-table delta, and archival has moved "
                "instants out since the listing; list the timeline again"
            ) from None
        self.stats.add(len(bodies), sum(map(len, bodies)))
        # Another writer: this handle lists its timeline whole from now on (``co_written``).
        self.cache.co_written = True
        taken = [(i.time, i.action, body) for i, body in zip(known, bodies, strict=True)]
        taken += [(a.time, a.action, a.body or b"") for a in archived]
        manifest = self._view_manifest

        def held(instant: str) -> bool:
            """Whether the view holds an instant's changes before its deltas apply: those
            its manifest folded (a rolled-back instant is off the timeline: no delta of its)."""
            return manifest is not None and not manifest.lacks(instant)

        for time, action, body in taken:
            delta = out[time] = Delta(
                ops_table(instant_ops(time, action, body, self.table_path, self.layout.commits, held)), None
            )
            self.cache.deltas.put(time, delta, delta.weight)
        return out

    def _archived_since(self, time: str) -> bool:
        """Whether an archival may have moved instant ``time`` off the active timeline: fed's
        archived through it, or else Apache Hudi's archive log is there. (A listing of the
        archive folder each, the second only when the first says no: this runs only when a
        listed instant's files are gone.)"""
        moved = archived_through(self.fs, self.table_path, self.layout.instants)
        return (moved is not None and time <= moved) or bool(
            hudi_archive_files(self.fs, self.table_path, self.layout.instants)
        )

    def _parse_delta(self, instant: str, path: str, data: bytes) -> Delta:
        table = parquet_table(data, path)
        schema = (table.schema.metadata or {}).get(SCHEMA_KEY.encode())
        delta = Delta(conformed(table), None if schema is None else schema.decode())
        self.cache.deltas.put(instant, delta, delta.weight)
        return delta

    def _read_base(self, manifest: Manifest, wanted: set[str] | None) -> list[Op]:
        ops: list[Op] = []
        if wanted is None:
            for entry in manifest.shards:
                if entry is not None:
                    ops.extend(self.read_shard(entry, None))
            return ops
        shards: dict[int, set[str]] = {}
        for partition in wanted:
            shards.setdefault(shard_of(partition, manifest.shard_count), set()).add(partition)
        # A lookup of many partitions (a clean after a commit that wrote to thousands) keeps
        # at most half the cache's bound of the rows it reads: the rest stays cached.
        bound = self.cache.partition_rows.max_weight
        room = _Room(None if bound is None else bound // 2)
        for shard, partitions in sorted(shards.items()):
            entry = manifest.shards[shard]
            if entry is not None:
                ops.extend(self.read_shard(entry, partitions, manifest, shard, room))
        return ops

    def read_shard(
        self,
        entry: tuple[str, int, int],
        wanted: set[str] | None,
        manifest: Manifest | None = None,
        shard: int = 0,
        room: _Room | None = None,
    ) -> list[Op]:
        """The records of a shard (of ``wanted`` partitions: None for all, read whole).

        For some partitions: their rows from the cache, else from the row groups that may
        hold them, fetched in one ranged request; which those are, the shard's footer says
        (from the cache, else packed in ``manifest``, else read from the shard's tail: one
        request more). ``room``: how much of what it reads the cache may keep."""
        name, size, _rows = entry
        path = f"{self.folder}/base/{name}"
        if wanted is None:
            return ops_of(self.read_whole(path, size), None)
        try:
            tables = self._partition_rows(path, name, size, wanted, manifest, shard, room or _Room(None))
            return ops_of(pa.concat_tables(tables), None) if tables else []  # (wanted partitions' only)
        except FileNotFoundError:
            raise MetadataTableError(f"metadata-table shard {path} is missing{REPAIR_HINT}") from None
        except (OSError, pa.ArrowException) as exc:
            raise MetadataTableError(
                f"metadata-table shard {path} is unreadable: {exc}{REPAIR_HINT}"
            ) from exc

    def _partition_rows(
        self,
        path: str,
        name: str,
        size: int,
        wanted: set[str],
        manifest: Manifest | None,
        shard: int,
        room: _Room,
    ) -> list[pa.Table]:
        """The rows of the ``wanted`` partitions in a shard: a table per partition cached, and
        one of those read now."""
        cache = self.cache
        found: list[pa.Table] = []
        missed: set[str] = set()
        for partition in wanted:
            rows = cache.partition_rows.get((name, partition))
            if rows is None:
                missed.add(partition)
            else:
                found.append(rows)
        if not missed:
            return found
        source = RangedFile(self.fs, path, size, self.stats)
        footer = cache.footers.get(name)
        if footer is None and manifest is not None:
            try:
                footer = manifest.footer(shard)
            except ValueError as exc:
                raise MetadataTableError(
                    f"manifest {manifest.instant} is unreadable: {exc}{REPAIR_HINT}"
                ) from exc
        if footer is None:
            footer = open_parquet(source).metadata  # its tail read from the shard
        groups = [i for i in range(footer.num_row_groups) if row_group_holds(footer.row_group(i), missed)]
        rows = _NO_ROWS
        if groups:
            source.prefetch(row_group_span(footer.row_group(i)) for i in groups)
            rows = conformed(rows_of(read_row_groups(open_parquet(source, footer), groups), missed))
            found.append(rows)
        cache.footers.put(name, footer, footer.serialized_size)
        by_partition = split_by_partition(rows)
        for partition in missed:
            held = by_partition.get(partition)
            if held is None:  # not in this shard (an empty slice of rows would keep them all)
                held = _NO_ROWS
            weight = int(held.nbytes) + _ENTRY_BYTES
            if room.take(weight):
                # A slice of the rows of several partitions would keep them all in memory.
                kept = held if len(by_partition) == 1 else detached(held)
                cache.partition_rows.put((name, partition), kept, weight)
        return found

    def read_footer(self, entry: tuple[str, int, int]) -> bytes:
        """A shard's footer's bytes (``io.parquet.footer_bytes``), read from its tail: for a shard
        a manifest does not carry the footer of (one a fedcore of before wrote). Mostly in one
        request."""
        name, size, _rows = entry
        path = f"{self.folder}/base/{name}"
        try:
            source = RangedFile(self.fs, path, size, self.stats)
            tail = source.read_span(max(0, size - 2**16), size)
            length = int.from_bytes(tail[-8:-4], "little")
            if tail[-4:] != MAGIC or not 0 < length <= size - 12:
                raise MetadataTableError(f"metadata-table shard {path} is not Parquet{REPAIR_HINT}")
            footer = tail[-8 - length : -8] if length + 8 <= len(tail) else None
            if footer is None:
                footer = source.read_span(size - 8 - length, size - 8)
            return footer
        except FileNotFoundError:
            raise MetadataTableError(f"metadata-table shard {path} is missing{REPAIR_HINT}") from None
        except OSError as exc:
            raise MetadataTableError(
                f"metadata-table shard {path} is unreadable: {exc}{REPAIR_HINT}"
            ) from exc

    def read_whole(self, path: str, size: int) -> pa.Table:
        del size
        try:
            return parquet_table(self._cat(path), path)
        except FileNotFoundError:
            raise MetadataTableError(f"metadata-table file {path} is missing{REPAIR_HINT}") from None

    def _cat(self, path: str) -> bytes:
        data = read_object(self.fs, path)
        self.stats.add(1, len(data))
        return data

    def point_to_no_manifest(self) -> None:
        """Mark a new table's start: no manifest yet, every delta applies (a lookup then
        needs no listing of manifests/ to learn there is none)."""
        self.point_to(NO_MANIFEST)

    def pointer_path(self, instant: str) -> str:
        return f"{self.layout.instants.pointer_folder(self.table_path)}/{MANIFEST_POINTER_PREFIX}{instant}"

    def point_to(self, instant: str) -> None:
        """Name a manifest in the timeline's listing (after the manifest exists: a pointer
        never names a missing one; a crash before it only leaves lookups on an older one)."""
        with contextlib.suppress(FileExistsError):
            create_exclusive(self.fs, self.pointer_path(instant), b"")

    def parquet_bytes(
        self, table: pa.Table, statistics: list[str] | None = None, arrow_schema: bool = True
    ) -> bytes:
        """``table`` as Parquet in row groups of ``row_group_rows``, with statistics of the
        columns ``statistics`` (None: every column), and its Arrow schema unless not
        ``arrow_schema`` (the Parquet types are the same)."""
        sink = io.BytesIO()
        pq.write_table(
            table,
            sink,
            row_group_size=self.row_group_rows,
            compression="zstd",
            write_statistics=True if statistics is None else statistics,
            store_schema=arrow_schema,
        )
        return sink.getvalue()
