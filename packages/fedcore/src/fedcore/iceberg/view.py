"""Publishing the Iceberg view: one Iceberg snapshot per fed instant, written from fed's own
metadata, never from a listing.

Layout, under the table path (metadata only, as everything under ``.hoodie/``)::

    .hoodie/iceberg/metadata/<N>-<T>.metadata.json  table metadata, version N (T: the table's tag)
    .hoodie/iceberg/metadata/version-hint.text      N (a hint: readers probe past it)
    .hoodie/iceberg/metadata/snap-<id>-<uuid>.avro  a snapshot's manifest list
    .hoodie/iceberg/metadata/<uuid>-m<shard>.avro   the manifest of one fed partition
    .hoodie/iceberg/metadata/<uuid>-m<shard>-b<bits>.avro  one of a large partition's manifests

The view's commit point is the exclusive create of version N+1's metadata file: two publishers
racing for the same version never both win, and the loser starts again from the winner's.

Each manifest holds base files of one fed partition (its shard: a hash of the partition
path), so a snapshot rewrites the manifests of the partitions its instant wrote and carries
every other manifest over: a publish costs requests in proportion to what the instants
changed, not to the size of the table, and a reader that prunes to one partition opens that
partition's manifests only. A partition whose manifest would pass ``MANIFEST_TARGET_BYTES``
(Iceberg's writers' 8 MB target) has several, each holding the file groups whose file-id
hash starts with its bits (``-b<bits>``; none: all of them): a publish rewrites the ones
holding the file groups its instants touched and carries the others over, so neither a
reader's decoding nor a publish's rewrite meets one manifest as large as a partition with
a hundred thousand files; a manifest that outgrows the target is split as it is rewritten,
and a partition's manifests are merged again when a publish rewrites all of them or their
live entries would fill under half the target. The files an instant added, replaced and retired come
from its commit metadata;
where that chain is broken (the first publish, or a rollback of an instant the view showed),
the view is rebuilt from the metadata table's latest file slices, diffed against what it
showed so that every file keeps its Iceberg history."""

from __future__ import annotations

import contextlib
import math
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import xxhash
from pyiceberg.manifest import (
    DataFile,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil, TableMetadataV2
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import (
    Operation,
    Snapshot,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSnapshotUpdate,
    RemoveSnapshotsUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSpecUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    TableUpdate,
    update_table_metadata,
)

from fedcore import properties as P
from fedcore.exceptions import (
    StorageError,
    StorageFileExistsError,
    StorageFileNotFoundError,
    UnsupportedTableError,
)
from fedcore.files.filenames import BASE_FILE_RE
from fedcore.handle import HasHandle, TableHandle, handle_of
from fedcore.iceberg.data_files import DataFiles, parse_stats, partition_spec
from fedcore.iceberg.expiry import CLEAN_EVERY, clean_view
from fedcore.iceberg.fileio import FedFileIO, HeldOutput
from fedcore.iceberg.locations import HINT, metadata_file, metadata_folder, version_of
from fedcore.io.atomic import create_exclusive
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import open_sized, read_found, read_object
from fedcore.io.parquet import file_stats, read_parquet_metadata
from fedcore.schema.iceberg import iceberg_schema, name_mapping_json, same_fields
from fedcore.schema.meta import with_meta_fields
from fedcore.timeline import ROLLBACK, Instant
from fedcore.timeline.commit_metadata import CommitMetadata

#: Snapshot summary keys naming what a snapshot shows.
INSTANT_KEY = "fed.instant"
ACTION_KEY = "fed.action"
#: Table property: which of fed's query types the view shows.
QUERY_TYPE_KEY = "fed.query-type"
#: Table property: a hash of the commit Avro schema the current Iceberg schema was made for, so
#: that a publish whose commits record the same schema needs no file footer to learn it.
SCHEMA_HASH_KEY = "fed.avro-schema-hash"
_MANIFEST_RE = re.compile(r"-m([0-9a-f]{16})(?:-b([01]{1,64}))?\.avro$")
#: A manifest's size past which it is split (Iceberg's writers' default target,
#: ``commit.manifest.target-size-bytes``): one the size of a partition of 100,000 files (22 MB
#: of 220-byte entries) is decoded by one reader thread, and rewritten whole by each publish.
MANIFEST_TARGET_BYTES = 8 * 2**20
#: Entries encoded to estimate the size of a manifest of many more.
_SAMPLE = 1000
#: How often a publisher that lost a race for the next version starts again.
_ATTEMPTS = 5


@dataclass(frozen=True)
class ViewState:
    """The view as published: its newest metadata file and the fed instant it shows."""

    location: str | None  # URI of the newest version's metadata file; None before the first publish
    version: int  # N (0 before the first publish)
    metadata: TableMetadata | None
    instant: str | None  # the fed instant of the current snapshot


@dataclass(frozen=True)
class PublishResult:
    """What a publish did: the view now shows ``instant`` (None: an empty table), through the
    metadata at ``metadata_location``; ``snapshots`` were added to get there."""

    instant: str | None
    metadata_location: str | None
    snapshots: int
    #: The metadata published (its schema is what a catalog registers).
    metadata: TableMetadata | None = field(default=None, compare=False, repr=False)


def current_view(table: HasHandle) -> ViewState:
    """The newest published version: the version hint, then a probe past it (the hint is
    written after the version, so it may lag by one or more)."""
    table = handle_of(table)
    fs = table.fs.table_fs
    folder = metadata_folder(table)
    try:
        version = int(read_object(fs, f"{folder}/{HINT}").decode().strip())
    except (FileNotFoundError, ValueError):
        version = 0
    # The hinted version and the next in one round trip; then one more while there are more.
    found = read_found(fs, [metadata_file(table, v) for v in (version, version + 1) if v])
    while metadata_file(table, version + 1) in found:
        version += 1
        found |= read_found(fs, [metadata_file(table, version + 1)])
    if version == 0:
        return ViewState(None, 0, None, None)
    location = metadata_file(table, version)
    raw = found[location] if location in found else read_object(fs, location)
    metadata = TableMetadataUtil.parse_raw(raw.decode())
    return ViewState(location, version, metadata, shown_instant(metadata))


def shown_instant(metadata: TableMetadata) -> str | None:
    """The fed instant the view's current snapshot shows."""
    snapshot = metadata.current_snapshot()
    return _instant_of(snapshot) if snapshot is not None else None


def _instant_of(snapshot: Snapshot) -> str | None:
    return snapshot.summary.additional_properties.get(INSTANT_KEY) if snapshot.summary else None


def latest_instant(table: HasHandle) -> str | None:
    """The instant a publish now would show: the table's latest completed write."""
    table = handle_of(table)
    writes = table.timeline().completed(table.write_actions)
    return writes[-1].time if writes else None


def publish(table: HasHandle) -> PublishResult:
    """Bring the view up to the table's latest completed write: one snapshot per write
    instant since the one it shows. Returns at once when it is up to date."""
    table = handle_of(table)
    for _ in range(_ATTEMPTS):
        state = current_view(table)
        try:
            result = _Publisher(table, state).run()
        except StorageFileExistsError:
            continue  # another publisher wrote this version first: start from theirs
        if (
            result.metadata_location
            and result.snapshots
            and version_of(result.metadata_location) % CLEAN_EVERY == 0
        ):
            # What no retained version reaches goes; a clean that fails leaves it to the next.
            with contextlib.suppress(StorageError):
                clean_view(table, metadata_folder(table), result.metadata_location)
        return result
    raise UnsupportedTableError(
        f"table {table.name}: {_ATTEMPTS} publishers' versions of the Iceberg view landed first; "
        "nothing was published"
    )


@dataclass
class _Change:
    """What one snapshot does to one manifest shard: file groups retired, files added."""

    removed: set[tuple[str, str]] = field(default_factory=set)  # (partition, file id)
    added: list[tuple[str, DataFile]] = field(default_factory=list)  # (file id, its entry)


@dataclass(frozen=True)
class _Item:
    """One entry of a manifest being written: where its file group hashes to, and how."""

    position: str  # the file id's hash, 64 bits as 0s and 1s
    status: ManifestEntryStatus
    entry: ManifestEntry


class _Publisher:
    def __init__(self, table: TableHandle, state: ViewState) -> None:
        self.table = table
        self.state = state
        self.io = FedFileIO(table.fs.table_fs)
        self.folder = metadata_folder(table)
        self.merge_on_read = table.config.merge_on_read
        self.timeline = table.timeline()
        self._types: dict[str, pa.DataType] = {}
        self._schemas: dict[str, pa.Schema] = {}  # a commit's Avro schema -> its files' schema
        self._schema_hash = ""  # of the Avro schema of the instant being published
        self._headers: dict[tuple[int, int], int] = {}  # (schema id, spec id) -> a manifest's header bytes
        #: The version this publish replaces, logged in the first metadata it makes.
        self._replaces = state.location

    def run(self) -> PublishResult:
        writes = self.timeline.completed(self.table.write_actions)
        state = self.state
        latest = writes[-1].time if writes else None
        if state.metadata is not None and state.instant == latest:
            return PublishResult(latest, state.location, 0, state.metadata)
        metadata = state.metadata
        if latest is None:
            if metadata is not None:  # every write rolled back: an empty snapshot
                return self._commit(self._full(metadata, None), 1)
            schema = self.table.schema(self.timeline)
            if schema is None:
                return PublishResult(None, None, 0)
            self._schema_hash = _hash(self.table.config.get(P.CREATE_SCHEMA) or "")
            return self._commit(self._create(self._arrow(schema)), 0)
        if metadata is None:
            metadata = self._create(self._arrow_at(writes[-1]))
            return self._commit(self._full(metadata, writes[-1]), 1)
        pending = self._incremental_instants(writes)
        if pending is None:
            return self._commit(self._full(metadata, writes[-1]), 1)
        for instant in pending:
            metadata = self._incremental(metadata, instant)
        return self._commit(metadata, len(pending))

    # -- which instants --------------------------------------------------------------------

    def _incremental_instants(self, writes: list[Instant]) -> list[Instant] | None:
        """The writes after the one the view shows, when each can be applied in turn from its
        commit metadata; None when the chain is broken (the instant shown was rolled back, or
        archived with a rollback since)."""
        shown = self.state.instant
        if shown is None:
            return None
        times = {w.time for w in writes}
        if shown not in times:
            active_from = min((i.time for i in self.timeline), default="")
            rolled_back_since = any(
                i.action == ROLLBACK and i.time > shown for i in self.timeline.completed((ROLLBACK,))
            )
            if shown >= active_from or rolled_back_since:
                return None
        return [w for w in writes if w.time > shown]

    # -- snapshots -------------------------------------------------------------------------

    def _incremental(self, metadata: TableMetadata, instant: Instant) -> TableMetadata:
        commit = self.table.commit_metadata(instant)
        metadata = self._evolve(metadata, self._arrow_at(instant, metadata))
        files = self._data_files(metadata)
        changes: dict[str, _Change] = {}
        for stat in commit.stats:
            name = stat.path.rpartition("/")[2]
            if BASE_FILE_RE.fullmatch(name) is None:
                continue  # a log file: the view shows base files only
            change = changes.setdefault(_shard(stat.partition_path), _Change())
            change.removed.add((stat.partition_path, stat.file_id))
            uri = self.table.fs.to_physical(stat.path)
            rows, stats = self._stats(stat.path, stat.file_size, stat.column_stats)
            entry = files.entry(uri, stat.partition_path, stat.file_size, rows, stats)
            change.added.append((stat.file_id, entry))
        for partition, file_ids in commit.replaced.items():
            change = changes.setdefault(_shard(partition), _Change())
            change.removed.update((partition, file_id) for file_id in file_ids)
        return self._snapshot(metadata, instant, commit, changes, full=False)

    def _full(self, metadata: TableMetadata, instant: Instant | None) -> TableMetadata:
        """A snapshot of the table as its metadata table shows it now (every partition)."""
        if instant is not None:
            metadata = self._evolve(metadata, self._arrow_at(instant, metadata))
        files = self._data_files(metadata)
        current = self._manifests(metadata)
        changes: dict[str, _Change] = {shard: _Change() for shard in current}
        # Every file group the view shows is retired, then every live one added back: the
        # manifest writer keeps a file both retired and added as it was (see ``_rewrite``).
        for manifest in (m for buckets in current.values() for m in buckets.values()):
            for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=True):
                partition, file_id = self._file_group(entry.data_file.file_path)
                changes[_shard(partition)].removed.add((partition, file_id))
        if instant is not None:
            index = self.table.file_index_at(self.timeline)
            for partition, partition_files in index.files().items():
                change = changes.setdefault(_shard(partition), _Change())
                for file_id, (_base, name) in sorted(
                    partition_files.latest_base_files(self.table.layout.log_files).items()
                ):
                    path = f"{partition}/{name}" if partition else name
                    size = partition_files.files[name]
                    rows, stats = self._stats(path, size, partition_files.stats.get(name))
                    uri = self.table.fs.to_physical(path)
                    change.added.append((file_id, files.entry(uri, partition, size, rows, stats)))
        commit = self.table.commit_metadata(instant) if instant is not None else None
        return self._snapshot(metadata, instant, commit, changes, full=True)

    def _snapshot(
        self,
        metadata: TableMetadata,
        instant: Instant | None,
        commit: CommitMetadata | None,
        changes: Mapping[str, _Change],
        full: bool,
    ) -> TableMetadata:
        snapshot_id = _snapshot_id()
        sequence = int(getattr(metadata, "last_sequence_number", 0)) + 1  # (the view is format 2)
        schema = metadata.schema()
        spec = metadata.spec()
        current = self._manifests(metadata)
        collector = SnapshotSummaryCollector()
        manifests: list[ManifestFile] = [
            m
            for shard, buckets in current.items()
            if shard not in changes
            for m in buckets.values()
            if _live(m)
        ]
        added = deleted = 0
        for shard, change in sorted(changes.items()):
            written, fresh, gone = self._rewrite(
                current.get(shard, {}), shard, change, snapshot_id, schema, spec, collector
            )
            added, deleted = added + fresh, deleted + gone
            manifests.extend(written)
        operation = (
            Operation.APPEND if not deleted else Operation.DELETE if not added else Operation.OVERWRITE
        )
        summary_fields = collector.build()
        if instant is not None:
            summary_fields[INSTANT_KEY] = instant.time
            summary_fields[ACTION_KEY] = instant.action
        if commit is not None:
            summary_fields["fed.operation"] = commit.operation
        if full:
            summary_fields["fed.rebuilt"] = "true"
        previous = metadata.current_snapshot()
        summary = update_snapshot_summaries(
            Summary(operation=operation, **summary_fields),
            previous.summary if previous is not None and previous.summary is not None else None,
        )
        manifest_list = f"{self.folder}/snap-{snapshot_id}-{uuid.uuid4()}.avro"
        parent = previous.snapshot_id if previous is not None else None
        with write_manifest_list(
            format_version=2,
            output_file=self.io.new_output(manifest_list),
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent,
            sequence_number=sequence,
            avro_compression="deflate",
        ) as writer:
            writer.add_manifests(sorted(manifests, key=lambda m: m.manifest_path))
        snapshot = Snapshot(
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent,
            sequence_number=sequence,
            timestamp_ms=max(int(time.time() * 1000), metadata.last_updated_ms + 1),
            manifest_list=manifest_list,
            summary=summary,
            schema_id=schema.schema_id,
        )
        updates: list[TableUpdate] = [
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate(
                ref_name=MAIN_BRANCH,
                type=SnapshotRefType.BRANCH,
                snapshot_id=snapshot_id,
                max_ref_age_ms=None,
                max_snapshot_age_ms=None,
                min_snapshots_to_keep=None,
            ),
        ]
        expired = self._expired(metadata)
        if expired:
            updates.append(RemoveSnapshotsUpdate(snapshot_ids=expired))
        replaces, self._replaces = self._replaces, None
        return update_table_metadata(metadata, tuple(updates), metadata_location=replaces)

    def _rewrite(
        self,
        buckets: Mapping[str, ManifestFile],
        shard: str,
        change: _Change,
        snapshot_id: int,
        schema: Schema,
        spec: PartitionSpec,
        collector: SnapshotSummaryCollector,
    ) -> tuple[list[ManifestFile], int, int]:
        """One shard's manifests after ``change`` (``buckets``: its manifests now, by their
        bits): (the manifests, files added, files deleted). Only the manifests holding a file
        group the change touches are rewritten, the others carried over (those left with no
        live entry dropped); all of them are rewritten together (and split afresh) when the
        change touches every one, or when their live entries would fill under half the
        target."""
        routed: dict[str, _Change] = {}
        known = set(buckets)
        for partition, file_id in change.removed:
            bits = _bucket(known, _position(file_id))
            if bits is not None:  # (else no manifest holds it: the view does not show it)
                routed.setdefault(bits, _Change()).removed.add((partition, file_id))
        for file_id, data_file in change.added:
            position = _position(file_id)
            bits = _bucket(known, position)
            if bits is None:  # a gap a manifest emptied out left
                bits = _gap(known, position)
                known.add(bits)
            routed.setdefault(bits, _Change()).added.append((file_id, data_file))
        header = self._header(snapshot_id, schema, spec)
        live = {bits: m for bits, m in buckets.items() if _live(m)}
        merged = header + sum(_live_bytes(m, header) for m in live.values())  # as one manifest
        if set(live) <= set(routed) or (len(live) > 1 and merged <= MANIFEST_TARGET_BYTES // 2):
            units = [("", list(live.values()), change)]
            manifests: list[ManifestFile] = []
        else:
            units = [(bits, [live[bits]] if bits in live else [], c) for bits, c in sorted(routed.items())]
            manifests = [m for bits, m in live.items() if bits not in routed]
        added = deleted = 0
        for bits, old, unit in units:
            items, fresh, gone = self._items(old, unit, spec)
            for item in items:
                if item.status == ManifestEntryStatus.ADDED:
                    collector.add_file(item.entry.data_file, schema, spec)
                elif item.status == ManifestEntryStatus.DELETED:
                    collector.remove_file(item.entry.data_file, schema, spec)
            added, deleted = added + fresh, deleted + gone
            entries = sum(_entries(m) for m in old)
            per_entry = (
                (sum(m.manifest_length for m in old) - len(old) * header) / entries if entries else None
            )
            manifests += self._write(shard, bits, items, per_entry, snapshot_id, schema, spec)
        return manifests, added, deleted

    def _items(
        self, old: list[ManifestFile], change: _Change, spec: PartitionSpec
    ) -> tuple[list[_Item], int, int]:
        """The entries of the manifests ``old`` after ``change``: (the entries, files added,
        files deleted). A file both retired and added back is kept as it was (an EXISTING
        entry with its own history)."""
        items: list[_Item] = []
        new_paths = {df.file_path for _, df in change.added}
        old_paths = set()
        gone = 0
        for manifest in old:
            if manifest.partition_spec_id != spec.spec_id:
                continue  # files of another spec: re-added under the new one below
            for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=True):
                path = entry.data_file.file_path
                old_paths.add(path)
                group = self._file_group(path)
                status = ManifestEntryStatus.EXISTING
                if path not in new_paths and group in change.removed:
                    status = ManifestEntryStatus.DELETED
                    gone += 1
                items.append(_Item(_position(group[1]), status, entry))
        fresh = 0
        for file_id, data_file in change.added:
            if data_file.file_path not in old_paths:
                entry = ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, data_file=data_file)
                items.append(_Item(_position(file_id), ManifestEntryStatus.ADDED, entry))
                fresh += 1
        return items, fresh, gone

    def _write(
        self,
        shard: str,
        bits: str,
        items: list[_Item],
        per_entry: float | None,
        snapshot_id: int,
        schema: Schema,
        spec: PartitionSpec,
    ) -> list[ManifestFile]:
        """The manifests of ``items``, whose file ids' hashes all start with ``bits``: one,
        unless it would pass the target; then split by the next bits of the hashes into as
        many as its size needs (estimated at ``per_entry`` bytes an entry where the manifests
        they come from tell, else measured)."""
        if not items:
            return []
        header = self._header(snapshot_id, schema, spec)
        room = max(MANIFEST_TARGET_BYTES - header, 1)  # for entries, in a manifest of the target
        depth = len(bits)
        if per_entry is None and len(items) > 2 * _SAMPLE:
            # No manifest they came from to tell: a sample's size (each entry is a block of its
            # own), rather than encoding them all only to find they must be split.
            sample = items[:: len(items) // _SAMPLE]
            encoded, _ = self._encode("sample.avro", sample, snapshot_id, schema, spec)
            per_entry = (len(encoded) - header) / len(sample)
        splittable = len(items) > 1 and depth < 64
        more = 0
        if splittable and per_entry is not None and len(items) * per_entry > room:
            more = math.ceil(math.log2(len(items) * per_entry / room))
        if not more:
            suffix = f"-b{bits}" if bits else ""
            name = f"{uuid.uuid4()}-m{shard}{suffix}.avro"
            output, manifest = self._encode(name, items, snapshot_id, schema, spec)
            if len(output) <= MANIFEST_TARGET_BYTES or not splittable:
                output.upload()
                return [manifest]
            per_entry = (len(output) - header) / len(items)
            more = math.ceil(math.log2(len(items) * per_entry / room))
        more = max(1, min(more, 64 - depth))
        groups: dict[str, list[_Item]] = {}
        for item in items:
            groups.setdefault(item.position[: depth + more], []).append(item)
        out: list[ManifestFile] = []
        for sub, group in sorted(groups.items()):
            out += self._write(shard, sub, group, per_entry, snapshot_id, schema, spec)
        return out

    def _encode(
        self, name: str, items: list[_Item], snapshot_id: int, schema: Schema, spec: PartitionSpec
    ) -> tuple[HeldOutput, ManifestFile]:
        """A manifest of ``items`` in memory, and its entry in the manifest list."""
        output = self.io.new_held_output(f"{self.folder}/{name}")
        with write_manifest(
            format_version=2,
            spec=spec,
            schema=schema,
            output_file=output,
            snapshot_id=snapshot_id,
            avro_compression="deflate",
        ) as writer:
            for item in items:
                if item.status == ManifestEntryStatus.EXISTING:
                    writer.existing(item.entry)
                elif item.status == ManifestEntryStatus.DELETED:
                    writer.delete(item.entry)
                else:
                    writer.add(item.entry)
        return output, writer.to_manifest_file()

    def _header(self, snapshot_id: int, schema: Schema, spec: PartitionSpec) -> int:
        """The bytes of a manifest before its first entry (its schemas, mostly: some 5 KB)."""
        key = (schema.schema_id, spec.spec_id)
        if key not in self._headers:
            writer = write_manifest(
                format_version=2,
                spec=spec,
                schema=schema,
                output_file=self.io.new_held_output(f"{self.folder}/header.avro"),
                snapshot_id=snapshot_id,
                avro_compression="deflate",
            )
            writer.__enter__()  # writes the header; never stored (an empty manifest is refused)
            self._headers[key] = writer.tell()
        return self._headers[key]

    def _expired(self, metadata: TableMetadata) -> list[int]:
        """Snapshots of instants archived off the active timeline (the current one stays):
        the view keeps the history fed keeps."""
        active_from = min((i.time for i in self.timeline), default=None)
        current = metadata.current_snapshot_id
        out = []
        for snapshot in metadata.snapshots:
            shown = _instant_of(snapshot)
            if snapshot.snapshot_id != current and active_from and (shown is None or shown < active_from):
                out.append(snapshot.snapshot_id)
        return out

    # -- schema, spec, files ---------------------------------------------------------------

    def _arrow_at(self, instant: Instant, metadata: TableMetadata | None = None) -> pa.Schema:
        """The schema of the files as of ``instant``: a base file's footer (the exact types
        readers meet; the commit's Avro schema is coarser), read once per distinct schema the
        commits record, and not at all when ``metadata`` was made for the same one. Where that
        instant's files were cleaned since, the newest files say."""
        recorded = self.table.commit_metadata(instant).schema or ""
        self._schema_hash = _hash(recorded)
        schema = self._schemas.get(recorded)
        if (
            schema is None
            and metadata is not None
            and metadata.properties.get(SCHEMA_HASH_KEY) == self._schema_hash
        ):
            schema = metadata.schema().as_arrow()  # maps back to the same Iceberg fields
        if schema is None:
            try:
                found = self.table.schema(self.timeline, as_of=instant.time)
            except StorageFileNotFoundError:
                found = self.table.schema(self.timeline)
            if found is None:
                raise UnsupportedTableError(
                    f"table {self.table.name}: instant {instant.time} records no schema"
                )
            schema = self._arrow(found)
        self._schemas[recorded] = schema
        return schema

    def _arrow(self, schema: pa.Schema) -> pa.Schema:
        """The columns the base files hold: Hudi's five meta columns first. Hudi writes them
        even with ``hoodie.populate.meta.fields=false`` (null then: fed's reads compute four of
        them, the view shows what the files hold)."""
        return with_meta_fields(schema)

    def _create(self, arrow: pa.Schema) -> TableMetadata:
        schema = iceberg_schema(arrow, None, 0)
        spec = partition_spec(self.table.partition_scheme, schema)
        self._types = {f.name: f.type for f in arrow}
        return TableMetadataV2(
            location=self.table.path,
            schemas=[schema],
            current_schema_id=schema.schema_id,
            last_column_id=schema.highest_field_id,
            partition_specs=[spec],
            default_spec_id=spec.spec_id,
            last_partition_id=max((f.field_id for f in spec.fields), default=999),
            sort_orders=[UNSORTED_SORT_ORDER],
            default_sort_order_id=UNSORTED_SORT_ORDER.order_id,
            properties=self._properties(schema),
            table_uuid=uuid.uuid4(),
        )

    def _properties(self, schema: Schema) -> dict[str, str]:
        return {
            "schema.name-mapping.default": name_mapping_json(schema),
            QUERY_TYPE_KEY: "read_optimized" if self.merge_on_read else "snapshot",
            "fed.table-type": self.table.config.table_type,
            SCHEMA_HASH_KEY: self._schema_hash,
        }

    def _evolve(self, metadata: TableMetadata, arrow: pa.Schema) -> TableMetadata:
        """``metadata`` with the schema and partition-spec updates that make it describe
        ``arrow`` (the schema of the instant a snapshot shows)."""
        self._types = {f.name: f.type for f in arrow}
        current = metadata.schema()
        schema = iceberg_schema(arrow, current, metadata.last_column_id)
        updates: list[TableUpdate] = []
        if not same_fields(schema, current):
            schema = Schema(*schema.fields, schema_id=max(s.schema_id for s in metadata.schemas) + 1)
            updates += [
                AddSchemaUpdate(schema_=schema),
                SetCurrentSchemaUpdate(schema_id=-1),
                SetPropertiesUpdate(updates=self._properties(schema)),
            ]
        elif metadata.properties.get(SCHEMA_HASH_KEY) != self._schema_hash:
            updates.append(SetPropertiesUpdate(updates={SCHEMA_HASH_KEY: self._schema_hash}))
        spec = partition_spec(self.table.partition_scheme, schema)
        if not _same_spec(spec, metadata.spec()):
            spec_id = max(s.spec_id for s in metadata.partition_specs) + 1
            spec = PartitionSpec(*spec.fields, spec_id=spec_id)
            updates += [AddPartitionSpecUpdate(spec=spec), SetDefaultSpecUpdate(spec_id=-1)]
        if not updates:
            return metadata
        replaces, self._replaces = self._replaces, None
        return update_table_metadata(metadata, tuple(updates), metadata_location=replaces)

    def _data_files(self, metadata: TableMetadata) -> DataFiles:
        return DataFiles(self.table.partition_scheme, metadata.schema(), metadata.spec(), self._types)

    def _stats(self, path: str, size: int, recorded: str | None) -> tuple[int, Mapping[str, list[Any]]]:
        """A base file's rows and column statistics: as recorded, else from its footer."""
        parsed = parse_stats(recorded)
        if parsed is not None:
            return parsed
        with self.table.fs.errors(path), open_sized(self.table.fs, path, size) as handle:
            footer = read_parquet_metadata(handle)
        text = file_stats(footer, footer.schema.names)
        parsed = parse_stats(text)
        return parsed if parsed is not None else (footer.num_rows, {})

    def _manifests(self, metadata: TableMetadata) -> dict[str, dict[str, ManifestFile]]:
        """The current snapshot's manifests by shard, then by the bits of the file-id hashes
        each holds ("": all of them)."""
        snapshot = metadata.current_snapshot()
        if snapshot is None:
            return {}
        out: dict[str, dict[str, ManifestFile]] = {}
        for manifest in snapshot.manifests(self.io):
            match = _MANIFEST_RE.search(manifest.manifest_path)
            if match is None:
                raise UnsupportedTableError(
                    f"table {self.table.name}: manifest {manifest.manifest_path} of the Iceberg view was "
                    "not written by fed"
                )
            out.setdefault(match[1], {})[match[2] or ""] = manifest
        return out

    def _file_group(self, uri: str) -> tuple[str, str]:
        logical = self.table.fs.to_logical(uri)
        partition, _, name = logical.rpartition("/")
        match = BASE_FILE_RE.fullmatch(name)
        if match is None:
            raise UnsupportedTableError(f"table {self.table.name}: {uri} in the Iceberg view is no base file")
        return partition, match[1]

    # -- commit ----------------------------------------------------------------------------

    def _commit(self, metadata: TableMetadata, snapshots: int) -> PublishResult:
        """Create the next version exclusively (``StorageFileExistsError``: another publisher's
        landed first), then move the version hint."""
        version = self.state.version + 1
        location = metadata_file(self.table, version)
        create_exclusive(self.table.fs.table_fs, location, metadata.model_dump_json().encode())
        with storage_errors(location):
            self.table.fs.table_fs.pipe_file(f"{self.folder}/{HINT}", str(version).encode())
        return PublishResult(shown_instant(metadata), location, snapshots, metadata)


def _hash(text: str) -> str:
    return str(xxhash.xxh64_hexdigest(text.encode()))


def _shard(partition: str) -> str:
    return str(xxhash.xxh64_hexdigest(partition.encode()))


def _position(file_id: str) -> str:
    """Where a file group goes among its partition's manifests: its file id's hash, in bits."""
    return format(xxhash.xxh64_intdigest(file_id.encode()), "064b")


def _bucket(known: set[str], position: str) -> str | None:
    """Which of a partition's manifests (``known``: their bits, none a prefix of another)
    holds the file group at ``position``: None where none does."""
    for depth in sorted({len(bits) for bits in known}):
        if position[:depth] in known:
            return position[:depth]
    return None


def _gap(known: set[str], position: str) -> str:
    """The bits of a new manifest for ``position``, which no manifest in ``known`` holds: the
    shortest prefix of it that no known manifest's bits start with."""
    for depth in range(65):
        bits = position[:depth]
        if not any(k.startswith(bits) for k in known):
            return bits
    raise AssertionError(f"{position} is held by one of {sorted(known)}")


def _live(manifest: ManifestFile) -> int:
    """A manifest's live entries (ADDED or EXISTING)."""
    return (manifest.added_files_count or 0) + (manifest.existing_files_count or 0)


def _live_bytes(manifest: ManifestFile, header: int) -> float:
    """The bytes a manifest's live entries take (its length past the header, in proportion)."""
    entries = _entries(manifest)
    return (manifest.manifest_length - header) * _live(manifest) / entries if entries else 0.0


def _entries(manifest: ManifestFile) -> int:
    return sum(
        n or 0
        for n in (manifest.added_files_count, manifest.existing_files_count, manifest.deleted_files_count)
    )


def _same_spec(a: PartitionSpec, b: PartitionSpec) -> bool:
    return [(f.source_id, f.name, str(f.transform)) for f in a.fields] == [
        (f.source_id, f.name, str(f.transform)) for f in b.fields
    ]


def _snapshot_id() -> int:
    return uuid.uuid4().int & ((1 << 63) - 1)
