"""The table handle: config, storage strategy, federated filesystem, timeline, file index.

The strategy is fixed when the table is created and persisted in its config;
every later open rebuilds it from there. A caller that passes storage keys on
open (a writer's options, a CLI flag) is checked against the persisted ones,
because the same table read through two strategies would look for its files in
two different places; a checksum over the persisted storage keys catches a hand
edit of ``hoodie.properties``.

This module sits low in fedcore's layers: the read path (``reader``, ``scan``),
the commit protocol (``transaction``), the table services and the writer take a
``TableHandle`` and sit above it; ``fedcore.table`` adds the user-facing methods.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any, Final, Protocol, TypeVar

import pyarrow as pa

from fedcore import properties as P
from fedcore.exceptions import (
    ConfigError,
    InvalidTableConfigError,
    MetadataTableRequiredError,
    StorageStrategyMismatchError,
    UnsupportedTableError,
)
from fedcore.files.file_group import LogSlicing
from fedcore.files.filenames import BASE_FILE_RE
from fedcore.handle.config import TableConfig, properties_path
from fedcore.io.cache import BoundedCache
from fedcore.io.filesystems import StorageOptions, filesystem_for, open_sized, read_object, version_stamp
from fedcore.io.parquet import read_parquet_schema
from fedcore.io.uris import normalize_uri
from fedcore.keygen.keys import stored_key_columns, stored_keys
from fedcore.keygen.partitioning import PartitionScheme
from fedcore.metadata import FileIndex, ListingFileIndex, MetadataTable
from fedcore.metadata.format import folder_of
from fedcore.metadata.table import IndexCache
from fedcore.schema.avro import arrow_schema
from fedcore.schema.evolution import evolve
from fedcore.schema.meta import META_COLUMNS, strip_meta, with_meta_fields
from fedcore.storage.base import StorageStrategy
from fedcore.storage.federated import FederatedFileSystem
from fedcore.storage.loader import load_storage_strategy, named_strategy_class, strategy_spec
from fedcore.timeline import COMMIT, COMPACTION, MERGE_ON_READ_WRITE_ACTIONS, WRITE_ACTIONS, Instant, Timeline
from fedcore.timeline.commit_metadata import CommitMetadata
from fedcore.timeline.layout import TableLayout, layout_for
from fedcore.timeline.lsm import ArchivedCompletionTimes
from fedcore.timeline.retention import archived_file

#: Completed instants' metadata a handle keeps (the least recently used dropped first): at
#: most this many, and this many bytes of it as stored (parsed, it takes about 0.6 times as
#: much memory; a bulk insert of 10,000 files with column statistics stores about 9.5 MB).
#: Heavier metadata is read again each time it is needed.
_MAX_CACHED_COMMITS = 256
_CACHED_COMMIT_BYTES = 8 * 2**20
#: A handle or a subclass of it: ``with_options`` keeps the caller's class.
H = TypeVar("H", bound="TableHandle")


class HasHandle(Protocol):
    """What holds a table handle: a ``fedcore.Table``, or a handle itself."""

    @property
    def handle(self) -> TableHandle: ...


def handle_of(table: HasHandle) -> TableHandle:
    """The handle behind a ``fedcore.Table`` (or a handle): what the engine API's entry
    points take a table as, so a user passes the ``Table`` they hold."""
    return table.handle


class TableHandle:
    """What every part of fedcore works on: a table's config, its storage strategy, its
    federated filesystem, its timeline, file index and schema, and the runtime options
    (the caller's over the table's). It knows no reader and no commit protocol: those sit
    above it and take a handle. Users hold a ``fedcore.Table``, which holds a handle
    (``Table.handle``), from ``load_table`` or ``create_table``.
    """

    def __init__(
        self,
        path: str,
        config: TableConfig,
        strategy: StorageStrategy,
        storage_options: StorageOptions | None = None,
        options: Mapping[str, str] | None = None,
    ) -> None:
        self.path = normalize_uri(path)
        self.config = config
        self.strategy = strategy
        self.storage_options = storage_options
        #: Runtime settings (heartbeat, file sizing, cleaning): the caller's over the table's.
        self.options: dict[str, str] = {**config, **{str(k): str(v) for k, v in (options or {}).items()}}
        P.check_options(self.options)
        check_supported(config, strategy)
        #: ``hoodie.properties``'s version stamp when it last said this handle's table version
        #: beside an upgrade's ``timeline/`` folder (``_stored_version_moved``).
        self._steady_config: tuple[Any, ...] | None = None

    @classmethod
    def open(cls: type[H], path: str, storage_options: StorageOptions | None = None) -> H:
        """The table at ``path`` as its config says (its persisted strategy, checked)."""
        table_path = normalize_uri(path)
        config = TableConfig.load(filesystem_for(table_path, storage_options), table_path)
        strategy = load_storage_strategy(table_path, config)
        check_storage_checksum(strategy, config)
        return cls(table_path, config, strategy, storage_options)

    def __getstate__(self) -> dict[str, Any]:
        """A handle pickled for an engine's tasks carries what defines the table; each
        process opens its own filesystem and caches."""
        keep = ("path", "config", "strategy", "storage_options", "options")
        return {name: self.__dict__[name] for name in keep}

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def handle(self) -> TableHandle:
        """This handle (a ``Table``'s is the one it holds): what ``handle_of`` returns."""
        return self

    @property
    def layout(self) -> TableLayout:
        """What the table's version decides: how its instant files are named and listed, how
        commit metadata is encoded, how log files are named (``fedcore.timeline.layout``)."""
        return layout_for(self.config.version, self.name)

    @cached_property
    def fs(self) -> FederatedFileSystem:
        """Every file of the table, addressed by logical path."""
        return FederatedFileSystem(self.path, self.strategy, self.storage_options)

    @cached_property
    def partition_scheme(self) -> PartitionScheme:
        return PartitionScheme.from_config(self.config)

    def with_options(self: H, options: Mapping[str, str] | None) -> H:
        """This table with runtime options (a writer's) over its own: every part of a write
        (heartbeat, file sizing, services) reads them from the table it is given, so none is
        silently ignored. Storage keys must describe the table's own layout
        (``StorageStrategyMismatchError`` otherwise); every value is checked now, before
        anything is written."""
        if not options:
            return self
        given = {str(k): str(v) for k, v in options.items()}
        if P.STORAGE_CHECKSUM in given:
            raise ConfigError(P.STORAGE_CHECKSUM, "is computed by fedcore, never given")
        known = P.RUNTIME_KEYS | set(P.STORAGE_KEYS) | self.strategy.accepted_keys
        for key in sorted(given):
            if key in known:
                continue
            if key in P.TABLE_KEYS or key in P.WRITE_DEFINITION_KEYS:
                held = defined_value(self.config, key)
                if given[key].strip() == held:
                    continue  # the table's own definition, repeated (as Hudi's jobs pass it)
                if key in (P.TABLE_VERSION, P.WRITE_TABLE_VERSION):
                    raise ConfigError(
                        key,
                        f"is {held!r} in table {self.name}'s {P.PROPERTIES_FILE}: a write does not change "
                        f"the table's version; give {held!r} or leave the option out (`fed upgrade "
                        "--table-version 8|9` moves a table to a later version)",
                    )
                raise ConfigError(
                    key,
                    f"is {held!r} in table {self.name}'s definition, fixed in its {P.PROPERTIES_FILE} "
                    f"when it was created: a write's options cannot change it; give {held!r} or leave "
                    "the option out (a new table, made with `fed migrate`, can have another)",
                )
            raise P.unknown_key(key, known, "is not an option fedcore reads when opening or writing a table")
        check_storage_properties(self.strategy, self.config, given)
        runtime = {k: v for k, v in given.items() if k not in P.STORAGE_KEYS}
        return self._copy({**self.options, **runtime})

    def _copy(self: H, options: Mapping[str, str]) -> H:
        table = type(self)(self.path, self.config, self.strategy, self.storage_options, options)
        for shared in ("fs", "index_cache", "_commits"):  # one filesystem and cache per table
            if shared in self.__dict__:
                table.__dict__[shared] = self.__dict__[shared]
        return table

    @property
    def heartbeat_interval_ms(self) -> int:
        return P.HEARTBEAT_INTERVAL_MS.of(self.options)

    @property
    def heartbeat_tolerable_misses(self) -> int:
        return P.HEARTBEAT_TOLERABLE_MISSES.of(self.options)

    # --- timeline and file index ---------------------------------------------------------

    def timeline(self, latest_read: bool = False) -> Timeline:
        """The timeline, listed now. ``latest_read``: for a read of the latest snapshot, which
        may list on from the timeline this handle listed last (``Timeline.load``'s ``since``)."""
        cache = self.index_cache
        since = cache.timeline if latest_read and not cache.co_written else None
        timeline = Timeline.load(self.fs.table_fs, self.path, self.layout.instants, since)
        # Another writer moved the table to a later version since this handle opened (Hudi
        # 1.x's writer upgrades a version-6 table at its defaults): its instants are in
        # ``.hoodie/timeline/`` now, and the old folder would show a table with nothing
        # written. While the config still says the old version (an upgrade under way moves
        # the instants before it switches the config) the old listing stands, as Hudi's own
        # readers of that version see it.
        if timeline.upgraded and self._stored_version_moved():
            cache = self.index_cache  # anew: take_stored_config forgot the old one
            timeline = Timeline.load(self.fs.table_fs, self.path, self.layout.instants)
        cache.timeline = timeline
        return timeline

    def _stored_version_moved(self) -> bool:
        """Whether ``hoodie.properties`` says another table version than this handle's now (the
        stored config is then taken: ``take_stored_config``). Read only when the file changed
        since it last said this handle's version: while an upgrade is under way, or a crashed
        one left its ``timeline/`` folder, every listing shows that folder, and a read of the
        file each time would cost a request per read for a config that stays as it is."""
        stamp = version_stamp(self.fs.table_fs, properties_path(self.path))
        if stamp is not None and stamp == self._steady_config:
            return False
        held = self.config.version
        if self.take_stored_config().version != held:
            return True
        # Taken from before the read: a change after it makes the next check read it again.
        self._steady_config = stamp
        return False

    def take_stored_config(self) -> TableConfig:
        """Take ``hoodie.properties`` as stored now in place of the config this handle loaded,
        which another writer may have changed since (keys a Hudi writer added, a metadata
        table moved, a later table version): the caller's own options kept, the file index
        opened anew where the table's version or metadata layout moved. A change the handle's
        reads and writes cannot go on with (record keys, partitioning, table type, storage
        keys, ...) is refused with ``InvalidTableConfigError``: open the table again.

        The config and options are swapped on this handle for every later operation; one
        running on another thread meanwhile may see either (a handle is not meant to be
        shared by threads that upgrade it)."""
        stored = TableConfig.load(self.fs.table_fs, self.path)
        held = self.config
        if dict(stored) == dict(held):
            return held
        check_supported(stored, self.strategy)
        check_storage_checksum(self.strategy, stored)
        for what, value in _IDENTITY:
            if value(stored) != value(held):
                raise InvalidTableConfigError(
                    what,
                    f"is {value(stored)!r} in {properties_path(self.path)}, but was {value(held)!r} when "
                    f"table {self.name} was opened: another writer changed the table's definition; "
                    "open the table again",
                )
        runtime = {key: value for key, value in self.options.items() if held.get(key) != value}
        moved = (stored.metadata_layout, stored.version) != (held.metadata_layout, held.version)
        self.config, self.options = stored, {**stored, **runtime}
        if moved:
            self.forget_file_index()
        return stored

    def log_slicing(self, timeline: Timeline, as_of: str | None = None) -> LogSlicing | None:
        """What places this table's log files in their slices as ``timeline`` shows it, for
        every reader, writer and service that groups them (``fedcore.files.file_group``):
        None where a log file's name says its slice (up to version 6); from version 8 (Hudi
        1.x) the completion times of the writes, the pending compactions, where the active
        timeline starts and the archived completion times. ``as_of``: the files are listed as
        of that instant, which lacks the base files of compactions after it: the groups each
        wrote, from its commit metadata (``LogSlicing.compacted``)."""
        if not self.layout.log_files.names_delta_commit:
            return None
        actions = self.write_actions
        history = self.layout.instants.history_folder(self.path)
        compacted: dict[tuple[str, str], set[str]] = {}
        if as_of is not None and self.config.merge_on_read:
            # On a merge-on-read table a commit is a compaction's completion (writes are delta
            # commits): its base files start the groups' new slices, at its instant.
            for instant in timeline.completed([COMMIT]):
                if instant.time <= as_of:
                    continue
                for stat in self.commit_metadata(instant).stats:
                    if BASE_FILE_RE.fullmatch(stat.path.rpartition("/")[2]) is not None:
                        compacted.setdefault((stat.partition_path, stat.file_id), set()).add(instant.time)
        return LogSlicing(
            {i.time: i.completed_at for i in timeline.completed(actions)},
            frozenset(i.time for i in timeline.pending() if i.action == COMPACTION),
            min((i.time for i in timeline if i.action in actions or i.action == COMPACTION), default=""),
            None if history is None else ArchivedCompletionTimes(self.fs.table_fs, history),
            {key: frozenset(starts) for key, starts in compacted.items()},
        )

    @property
    def metadata_enabled(self) -> bool:
        return self.config.metadata_enabled

    @cached_property
    def file_index(self) -> FileIndex:
        """The metadata table; a listing only for Hive-layout tables created without one."""
        return self._file_index(self.timeline)

    def file_index_at(self, timeline: Timeline) -> FileIndex:
        """The file index as a timeline already loaded shows the table: a read's snapshot,
        schema and files then come from one listing, and agree even if a commit lands meanwhile."""
        return self._file_index(lambda: timeline)

    @cached_property
    def index_cache(self) -> IndexCache:
        """What this handle's metadata-table lookups have read: a long-lived handle plans each
        query from its cache plus what changed (see ``fedcore.metadata.table``)."""
        return IndexCache()

    def _file_index(self, load_timeline: Callable[[], Timeline]) -> FileIndex:
        if self.metadata_enabled:
            return MetadataTable(
                self.fs.table_fs,
                self.path,
                load_timeline,
                layout=self.layout,
                folder=self.metadata_folder,
                cache=self.index_cache,
            )
        return ListingFileIndex(self.fs.table_fs, self.path, load_timeline, self.layout)

    @property
    def metadata_folder(self) -> str:
        """The metadata table's folder under the table path (``metadata.format.folder_of``)."""
        return folder_of(self.config.metadata_layout)

    def forget_file_index(self) -> None:
        """Open the metadata table anew on next use (an upgrade moved it)."""
        for name in ("file_index", "index_cache"):
            self.__dict__.pop(name, None)

    def metadata_table_or_none(self) -> MetadataTable | None:
        index = self.file_index
        return index if isinstance(index, MetadataTable) else None

    @cached_property
    def _commits(self) -> BoundedCache[str, CommitMetadata]:
        return BoundedCache(_CACHED_COMMIT_BYTES, _MAX_CACHED_COMMITS)

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """A completed instant's metadata (kept by the handle while it is among the recently
        used: it never changes)."""
        layout = self.layout
        path = layout.instants.path(self.path, instant)
        cached = self._commits.get(path) if instant.is_completed else None
        if cached is not None:
            return cached
        try:
            data = read_object(self.fs.table_fs, path)
        except FileNotFoundError:
            # Listed completed, gone now: another process's archival moved it out since the
            # listing (a write lists once and reads on), and it kept the same bytes; or lost.
            found = (
                archived_file(self.fs.table_fs, self.path, layout.instants, instant)
                if instant.is_completed
                else None
            )
            if found is None:
                raise
            data = found
        metadata = layout.commits.decode(data, path)
        if instant.is_completed:
            self._commits.put(path, metadata, len(data))
        return metadata

    @property
    def write_actions(self) -> frozenset[str]:
        """The actions whose instants make up a snapshot of this table (its writes)."""
        return MERGE_ON_READ_WRITE_ACTIONS if self.config.merge_on_read else WRITE_ACTIONS

    def schema(self, timeline: Timeline | None = None, as_of: str | None = None) -> pa.Schema | None:
        """The data schema (without Hudi's meta columns) as of ``as_of`` (None: now).

        From the newest base file, whose types are what reads return; for a merge-on-read
        table whose newest writes are log files, that file's schema evolved by the newest such
        write's Avro schema (columns it added, types it widened); for a table no write has
        completed on, from the schema it was created with (None if none)."""
        timeline = self.timeline() if timeline is None else timeline
        writes = timeline.completed(self.write_actions, as_of=as_of)
        logged: pa.Schema | None = None  # the newest log-only write's, newer than any base file
        for instant in reversed(writes):
            metadata = self.commit_metadata(instant)
            for stat in metadata.stats:
                if BASE_FILE_RE.fullmatch(stat.path.rpartition("/")[2]) is None:
                    continue  # a log file
                with self.fs.errors(stat.path), open_sized(self.fs, stat.path, stat.file_size) as handle:
                    found = strip_meta(read_parquet_schema(handle).empty_table()).schema.remove_metadata()
                found = self._with_dropped_partition_columns(found, metadata.schema)
                return found if logged is None else evolve(found, logged, fill_missing=True)
            if metadata.stats and logged is None and metadata.schema:
                logged = self._arrow_schema(metadata.schema)
        if logged is not None:
            return logged
        avro = self.commit_metadata(writes[-1]).schema if writes else self.config.get(P.CREATE_SCHEMA)
        return self._arrow_schema(avro) if avro else None

    def _with_dropped_partition_columns(self, found: pa.Schema, avro: str | None) -> pa.Schema:
        """A base file's schema with the partition columns its table leaves out of files
        (``hoodie.datasource.write.drop.partition.columns``), typed as the commit's schema
        has them, else as text (as Hudi's readers take them from paths), last."""
        if not P.DROP_PARTITION_COLUMNS.of(self.config):
            return found
        missing = [f for f in self.config.partition_fields if f not in found.names]
        if not missing:
            return found
        written = self._arrow_schema(avro) if avro else pa.schema([])
        return pa.schema(
            [*found, *(written.field(f) if f in written.names else pa.field(f, pa.string()) for f in missing)]
        )

    def _arrow_schema(self, avro: str) -> pa.Schema:
        """The data columns of an Avro schema, in Arrow."""
        try:
            schema = arrow_schema(avro)
        except (ValueError, KeyError, TypeError) as exc:
            raise UnsupportedTableError(f"table {self.name}'s Avro schema has no Arrow form: {exc}") from exc
        return pa.schema([f for f in schema if f.name not in META_COLUMNS])

    @cached_property
    def stored_key_columns(self) -> list[str]:
        """The columns of stored rows their record keys are read from: the meta column, or
        (a table without meta fields) the key fields."""
        return stored_key_columns(self.config.record_key_fields, P.POPULATE_META_FIELDS.of(self.config))

    def stored_keys(self, rows: pa.Table) -> pa.Array:
        """The record keys of stored rows (``records.stored_keys``: computed from the key
        fields for a table without meta fields)."""
        config = self.config
        generator = P.key_generator(config)
        return stored_keys(rows, config.record_key_fields, generator, P.POPULATE_META_FIELDS.of(config))

    def schema_with_meta_fields(self) -> pa.Schema | None:
        """``schema()`` with Hudi's five ``_hoodie_*`` columns first (strings), as reads return it."""
        schema = self.schema()
        return None if schema is None else with_meta_fields(schema)

    # --- protocol paths ----------------------------------------------------------------------

    def outcome_path(self, instant: str) -> str:
        return f"{self.path}/{P.HOODIE_FOLDER}/.fed/outcome/{instant}"

    def claim_path(self, name: str) -> str:
        return f"{self.path}/{P.HOODIE_FOLDER}/.fed/claims/{name}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, name={self.name!r}, strategy={self.strategy!r})"


def check_supported(config: TableConfig, strategy: StorageStrategy) -> None:
    layout = layout_for(config.version, config.name)  # the one check of the table version
    if layout.timeline_layout == 2:
        # Hudi 1.x's tables: what fedcore does not read yet is refused on opening, by name.
        folder = config.get(P.TIMELINE_PATH, P.DEFAULT_TIMELINE_FOLDER).strip()
        if folder != P.DEFAULT_TIMELINE_FOLDER:
            raise UnsupportedTableError(
                f"table {config.name} keeps its timeline in .hoodie/{folder} ({P.TIMELINE_PATH}); "
                f"fedcore reads it from .hoodie/{P.DEFAULT_TIMELINE_FOLDER}, Hudi's default"
            )
        history = config.get(P.TIMELINE_HISTORY_PATH, P.DEFAULT_HISTORY_FOLDER).strip()
        if history != P.DEFAULT_HISTORY_FOLDER:
            raise UnsupportedTableError(
                f"table {config.name} keeps its archived timeline in {history} "
                f"({P.TIMELINE_HISTORY_PATH}); fedcore reads it from {P.DEFAULT_HISTORY_FOLDER}, "
                "Hudi's default"
            )
    base_format = config.get(P.BASE_FILE_FORMAT, "PARQUET").strip().upper()
    if base_format != "PARQUET":
        raise UnsupportedTableError(
            f"table {config.name} has {base_format} base files; fedcore reads Parquet"
        )
    if not strategy.data_under_table_path and not config.metadata_enabled:
        raise MetadataTableRequiredError(
            P.METADATA_ENABLE, f"is false, but the {strategy.display_name()} layout needs the metadata table"
        )


#: What a handle's reads and writes are planned with: a stored config that differs in any of
#: these is another table as far as the handle is concerned (``TableHandle.take_stored_config``).
_IDENTITY: Final = (
    ("record key fields", lambda c: c.record_key_fields),
    ("partition fields", lambda c: c.partition_fields),
    ("precombine field", lambda c: c.precombine_field),
    ("table type (merge-on-read)", lambda c: c.merge_on_read),
    ("hive-style partitioning", lambda c: c.hive_style_partitioning),
    (P.KEY_GENERATOR_CLASS, P.key_generator),
    (str(P.POPULATE_META_FIELDS), P.POPULATE_META_FIELDS.of),
    (str(P.DROP_PARTITION_COLUMNS), P.DROP_PARTITION_COLUMNS.of),
    (P.URL_ENCODE_PARTITIONING, lambda c: c.get(P.URL_ENCODE_PARTITIONING, "")),
)


def defined_value(config: TableConfig, key: str) -> str:
    """What a table's config says for a key of its definition (``properties.TABLE_KEYS``), or
    for the Hudi write option that sets one (``properties.WRITE_DEFINITION_KEYS``), as Hudi
    spells it; "" when unset."""
    named = {
        "hoodie.datasource.write.recordkey.field": ",".join(config.record_key_fields),
        "hoodie.datasource.write.partitionpath.field": ",".join(config.partition_fields),
        "hoodie.datasource.write.precombine.field": config.precombine_field or "",
        "hoodie.datasource.write.keygenerator.class": P.key_generator(config),
        "hoodie.datasource.write.table.type": config.table_type,
        P.TABLE_TYPE: config.table_type,
        "hoodie.datasource.write.table.name": config.name,
        # Hudi 1.x's jobs pass the version they write on every write, as its table records it.
        P.WRITE_TABLE_VERSION: str(config.version),
    }
    return named[key] if key in named else config.get(key, "").strip()


def persisted_storage_properties(strategy: StorageStrategy, requested: Mapping[str, str]) -> dict[str, str]:
    """The storage keys written to a new table's config: the strategy's name and its settings."""
    spec = requested.get(P.STORAGE_STRATEGY_CLASS) or P.DEFAULT_STORAGE_STRATEGY
    return {P.STORAGE_STRATEGY_CLASS: strategy_spec(type(strategy), spec), **strategy.properties()}


def check_storage_properties(
    strategy: StorageStrategy, config: Mapping[str, str], requested: Mapping[str, str]
) -> None:
    """Raise StorageStrategyMismatchError if ``requested`` describes another layout than the table's."""
    storage_keys = set(P.STORAGE_KEYS) | strategy.accepted_keys
    asked = {str(k): str(v) for k, v in requested.items() if k in storage_keys}
    if not asked:
        return
    if P.STORAGE_STRATEGY_CLASS in asked:
        # A full description of a layout: compare it as given, not blended with the table's
        # (but for what fed computed and that layout reads: the table's folder is its own,
        # never a caller's).
        reads = named_strategy_class(asked).accepted_keys & P.COMPUTED_KEYS
        base = {k: v for k, v in config.items() if k not in storage_keys or k in reads}
    else:
        base = dict(config)
    wanted = load_storage_strategy(strategy.table_path, {**base, **asked})
    if wanted != strategy:
        raise StorageStrategyMismatchError(
            f"the table at {strategy.table_path} was created with storage "
            f"{persisted_storage_properties(strategy, config)}, but "
            f"{persisted_storage_properties(wanted, asked)} was asked for; a table changes storage "
            "strategy only by migration (re-bootstrapping it into a new table)"
        )


def storage_checksum(storage: Mapping[str, str]) -> str:
    """CRC32 over the storage keys and values, sorted: ``hoodie.storage.checksum``."""
    text = "\n".join(f"{key}={storage[key]}" for key in sorted(storage))
    return str(zlib.crc32(text.encode()))


def check_storage_checksum(strategy: StorageStrategy, config: Mapping[str, str]) -> None:
    """Raise StorageStrategyMismatchError if the storage keys were changed after creation."""
    keys = set(P.STORAGE_KEYS) | strategy.accepted_keys
    storage = {k: v for k, v in config.items() if k in keys}
    recorded = config.get(P.STORAGE_CHECKSUM)
    if not storage and recorded is None:
        return  # a Hive-layout table written by Hudi itself: no storage keys to protect
    if recorded != storage_checksum(storage):
        raise StorageStrategyMismatchError(
            f"the storage keys in {strategy.table_path}/{P.HOODIE_FOLDER}/{P.PROPERTIES_FILE} "
            f"({storage}) are not the ones the table was created with "
            f"({P.STORAGE_CHECKSUM} {'is missing' if recorded is None else 'does not match'}): "
            "they were edited by hand. Physical paths are derived from them, so the table would be "
            "read in the wrong places; restore the original values (a table changes storage only "
            "by migration)"
        )
