"""A table handle: its config, its storage strategy and its federated filesystem.

The strategy is fixed when the table is created and persisted in its config;
every later open rebuilds it from there. A caller that passes storage keys on
open (a writer's options, a CLI flag) is checked against the persisted ones,
because the same table read through two strategies would look for its files in
two different places.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

import pyarrow as pa
from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.commit_metadata import CommitMetadata
from fedcore.exceptions import (
    ConfigError,
    InvalidPathError,
    MetadataTableRequiredError,
    StorageError,
    StorageStrategyMismatchError,
    TableAlreadyExistsError,
    UnsupportedTableVersionError,
)
from fedcore.io.errors import storage_errors
from fedcore.io.federated import FederatedFileSystem
from fedcore.io.filesystems import StorageOptions, filesystem_for, open_sized, read_object
from fedcore.io.parquet import read_parquet_schema
from fedcore.io.uris import normalize_uri
from fedcore.metadata import FileIndex, ListingFileIndex, MetadataTable
from fedcore.partitioning import PartitionScheme
from fedcore.reader import FileSlice, FilterSpec
from fedcore.records import META_COLUMNS, strip_meta
from fedcore.storage.base import StorageStrategy
from fedcore.storage.loader import load_storage_strategy, strategy_spec
from fedcore.table_config import TableConfig
from fedcore.timeline import WRITE_ACTIONS, Instant, Timeline, instant_path
from fedcore.transaction import is_failed, roll_back_pending

if TYPE_CHECKING:
    from fedcore.records import WriteInput
    from fedcore.scan import DataScan
    from fedcore.write_client import Operation, WriteResult


class Table:
    """A table: its config, storage strategy and federated filesystem; reads through
    ``scan`` and writes through ``upsert``, ``insert``, ``bulk_insert``, ``delete`` and
    ``insert_overwrite``. Get one from ``load_table`` or ``create_table``.

    Attributes:
        path: the table path (metadata lives under ``<path>/.hoodie``).
        config: ``hoodie.properties``, validated.
        strategy: where data files go (persisted at creation).
        options: runtime settings: the caller's over the table's.
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

    @property
    def name(self) -> str:
        return self.config.name

    @cached_property
    def fs(self) -> FederatedFileSystem:
        """Every file of the table, addressed by logical path."""
        return FederatedFileSystem(self.path, self.strategy, self.storage_options)

    @cached_property
    def partition_scheme(self) -> PartitionScheme:
        return PartitionScheme.from_config(self.config)

    def option(self, key: str, default: int) -> int:
        return P.property_as_int(self.options, key, default)

    def with_options(self, options: Mapping[str, str] | None) -> Table:
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
            if key not in known:
                raise ConfigError(
                    key,
                    "is not an option fedcore reads when opening or writing a table, so it would be "
                    f"ignored; the options are {', '.join(sorted(P.RUNTIME_KEYS))} and the storage keys",
                )
        check_storage_properties(self.strategy, self.config, given)
        runtime = {k: v for k, v in given.items() if k not in P.STORAGE_KEYS}
        table = Table(
            self.path, self.config, self.strategy, self.storage_options, {**self.options, **runtime}
        )
        if "fs" in self.__dict__:
            table.__dict__["fs"] = self.fs  # one filesystem per table handle: keep its connections
        return table

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.option(P.HEARTBEAT_INTERVAL_MS, P.DEFAULT_HEARTBEAT_INTERVAL_MS)

    @property
    def heartbeat_tolerable_misses(self) -> int:
        return self.option(P.HEARTBEAT_TOLERABLE_MISSES, P.DEFAULT_HEARTBEAT_TOLERABLE_MISSES)

    # --- timeline and file index ---------------------------------------------------------

    def timeline(self) -> Timeline:
        return Timeline.load(self.fs.table_fs, self.path)

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

    def _file_index(self, load_timeline: Callable[[], Timeline]) -> FileIndex:
        if self.metadata_enabled:
            return MetadataTable(self.fs.table_fs, self.path, load_timeline)
        return ListingFileIndex(self.fs.table_fs, self.path, load_timeline)

    def metadata_table_or_none(self) -> MetadataTable | None:
        index = self.file_index
        return index if isinstance(index, MetadataTable) else None

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        path = instant_path(self.path, instant)
        return CommitMetadata.from_bytes(read_object(self.fs.table_fs, path), path)

    def schema(self, timeline: Timeline | None = None) -> pa.Schema | None:
        """The data schema (without Hudi's meta columns), from the newest base file; None when empty."""
        timeline = self.timeline() if timeline is None else timeline
        for instant in reversed(timeline.completed(WRITE_ACTIONS)):
            for stat in self.commit_metadata(instant).stats:
                with self.fs.errors(stat.path), open_sized(self.fs, stat.path, stat.file_size) as handle:
                    return strip_meta(read_parquet_schema(handle).empty_table()).schema.remove_metadata()
        return None

    def schema_with_meta_fields(self) -> pa.Schema | None:
        """``schema()`` with Hudi's five ``_hoodie_*`` columns first (strings), as reads return it."""
        schema = self.schema()
        if schema is None:
            return None
        return pa.schema([pa.field(name, pa.string()) for name in META_COLUMNS] + list(schema))

    # --- reads (see ``scan``) ------------------------------------------------------------

    def scan(
        self,
        filters: Sequence[FilterSpec] = (),
        columns: Sequence[str] | None = None,
        *,
        as_of: str | None = None,
        limit: int | None = None,
        with_meta_fields: bool = True,
    ) -> DataScan:
        """A read of this table, run by its ``plan_files``, ``to_arrow``, ``to_arrow_batch_reader``,
        ``count``, ``to_pandas``, ``to_polars`` or ``to_duckdb``.

        Args:
            filters: ``(column, op, value)`` triples joined by AND; ops ``=, !=, <, <=, >, >=, IN``.
                Partition-column filters prune partitions through the metadata table.
            columns: columns to return, in order; None for all.
            as_of: time travel to an instant (``yyyyMMddHHmmssSSS``).
            limit: at most this many rows.
            with_meta_fields: include the ``_hoodie_*`` columns (as Hudi's readers do).
        """
        from fedcore.scan import DataScan

        return DataScan.of(self, filters, columns, as_of, limit, with_meta_fields)

    def read(
        self,
        filters: Sequence[FilterSpec] = (),
        columns: Sequence[str] | None = None,
        as_of: str | None = None,
    ) -> pa.Table:
        """Shorthand for ``scan(filters, columns, as_of=as_of).to_arrow()``."""
        return self.scan(filters, columns, as_of=as_of).to_arrow()

    def read_batches(
        self,
        filters: Sequence[FilterSpec] = (),
        columns: Sequence[str] | None = None,
        as_of: str | None = None,
    ) -> pa.RecordBatchReader:
        """Shorthand for ``scan(filters, columns, as_of=as_of).to_arrow_batch_reader()``."""
        return self.scan(filters, columns, as_of=as_of).to_arrow_batch_reader()

    def file_slices(self, filters: Sequence[FilterSpec] = (), as_of: str | None = None) -> list[FileSlice]:
        """Shorthand for ``scan(filters, as_of=as_of).plan_files()``: the latest committed file
        slice of every file group the filters keep, for engines."""
        return self.scan(filters, as_of=as_of).plan_files()

    # --- writes (see ``write_client``) -------------------------------------------------------

    def write(
        self, data: WriteInput, operation: Operation, options: Mapping[str, str] | None = None
    ) -> WriteResult:
        """Shorthand for ``WriteClient(self, options).write(data, operation)``: one instant.

        ``data`` is a pyarrow Table, RecordBatch or RecordBatchReader, or anything exporting an
        Arrow stream (polars, pandas); ``options`` are Hudi's keys for this write only."""
        from fedcore.write_client import WriteClient

        return WriteClient(self, options).write(data, operation)

    def upsert(self, data: WriteInput, options: Mapping[str, str] | None = None) -> WriteResult:
        """Update the rows whose keys exist, insert the others (idempotent)."""
        return self.write(data, "upsert", options)

    def insert(self, data: WriteInput, options: Mapping[str, str] | None = None) -> WriteResult:
        """Insert without looking keys up: an existing key gets a second row, as in Hudi."""
        return self.write(data, "insert", options)

    def bulk_insert(self, data: WriteInput, options: Mapping[str, str] | None = None) -> WriteResult:
        """Like ``insert``, into new file groups only (for a first load)."""
        return self.write(data, "bulk_insert", options)

    def delete(self, data: WriteInput, options: Mapping[str, str] | None = None) -> WriteResult:
        """Delete the rows whose keys (record key and partition columns) appear in ``data``."""
        return self.write(data, "delete", options)

    def insert_overwrite(self, data: WriteInput, options: Mapping[str, str] | None = None) -> WriteResult:
        """Replace every file group of the partitions ``data`` touches with ``data``."""
        return self.write(data, "insert_overwrite", options)

    # --- protocol paths ----------------------------------------------------------------------

    def marker_folder(self, instant: str) -> str:
        return f"{self.path}/{P.HOODIE_FOLDER}/.temp/{instant}"

    def outcome_path(self, instant: str) -> str:
        return f"{self.path}/{P.HOODIE_FOLDER}/.fed/outcome/{instant}"

    def claim_path(self, name: str) -> str:
        return f"{self.path}/{P.HOODIE_FOLDER}/.fed/claims/{name}"

    def roll_back_if_failed(self, instant_time: str) -> bool:
        """Roll back ``instant_time`` if it is pending and its writer is dead; True if it was."""
        instant = self.timeline().find(instant_time)
        if instant is None or instant.is_completed or not is_failed(self, instant):
            return False
        roll_back_pending(self, instant)
        return True

    def __repr__(self) -> str:
        return f"Table({self.path!r}, name={self.name!r}, strategy={self.strategy!r})"


def create_table(
    path: str,
    *,
    name: str,
    record_key_fields: Sequence[str],
    partition_fields: Sequence[str] = (),
    precombine_field: str | None = None,
    hive_style_partitioning: bool = True,
    database: str | None = None,
    properties: Mapping[str, str] | None = None,
    storage_options: StorageOptions | None = None,
    start_over: bool = False,
) -> Table:
    """Create a table and persist its storage strategy; fails if a table is already there
    (``TableAlreadyExistsError``), or if an earlier table's timeline is, unless ``start_over``
    (which deletes that timeline and metadata first)."""
    table_path = normalize_uri(path)
    requested = {str(k): str(v) for k, v in (properties or {}).items()}
    strategy = load_storage_strategy(table_path, {**requested, P.TABLE_NAME: name})
    wanted = P.property_as_bool(requested, P.METADATA_ENABLE, P.DEFAULT_METADATA_ENABLE_NEW_TABLE)
    if not strategy.data_under_table_path and not wanted:
        raise MetadataTableRequiredError(
            P.METADATA_ENABLE,
            f"the {strategy.display_name()} layout spreads data files over storage prefixes that "
            "cannot be listed; the metadata table is the only record of them and cannot be disabled",
        )
    other = {
        k: v for k, v in requested.items() if k not in P.STORAGE_KEYS and k not in strategy.accepted_keys
    }
    if P.STORAGE_CHECKSUM in other:
        raise ConfigError(P.STORAGE_CHECKSUM, "is computed by fedcore, never given")
    storage = persisted_storage_properties(strategy, requested)
    config = TableConfig.create(
        name=name,
        record_key_fields=record_key_fields,
        partition_fields=partition_fields,
        precombine_field=precombine_field,
        hive_style_partitioning=hive_style_partitioning,
        database=database,
        properties={**other, **storage, P.STORAGE_CHECKSUM: storage_checksum(storage)},
    )
    P.check_options(config)
    fs = filesystem_for(table_path, storage_options)
    _prepare_new_table_path(fs, table_path, start_over)
    config.save_new(fs, table_path)
    return Table(table_path, config, strategy, storage_options)


def _prepare_new_table_path(fs: AbstractFileSystem, table_path: str, start_over: bool) -> None:
    """Refuse a path that is a file or that holds an earlier table's timeline.

    A ``.hoodie/`` whose ``hoodie.properties`` is gone still holds instants written
    through some storage strategy; adopting them under a new config would read their
    files in the wrong places. ``start_over`` deletes that metadata first (never a
    table that still has its config)."""
    folder = f"{table_path}/{P.HOODIE_FOLDER}"
    try:
        with storage_errors(folder):
            names = [name.rsplit("/", 1)[-1] for name in fs.ls(folder, detail=False, refresh=True)]
    except FileNotFoundError:
        return
    except StorageError as exc:
        if isinstance(exc.__cause__, NotADirectoryError):
            raise InvalidPathError(f"cannot create a table at {table_path}: it is a file") from None
        raise
    if P.PROPERTIES_FILE in names:
        raise TableAlreadyExistsError(f"a table already exists at {table_path}")
    if not names:
        return
    if not start_over:
        raise TableAlreadyExistsError(
            f"{folder} holds {len(names)} entries of an earlier table (its timeline or metadata) but "
            f"no {P.PROPERTIES_FILE}; creating a table there would adopt them. Pass start_over=True "
            "(fed create --start-over) to delete that metadata first; data files the earlier table "
            "wrote are not deleted"
        )
    with storage_errors(folder):
        fs.rm(folder, recursive=True)


def load_table(
    path: str,
    *,
    properties: Mapping[str, str] | None = None,
    storage_options: StorageOptions | None = None,
) -> Table:
    """Open an existing table; storage keys in ``properties`` must match the persisted ones."""
    table_path = normalize_uri(path)
    config = TableConfig.load(filesystem_for(table_path, storage_options), table_path)
    strategy = load_storage_strategy(table_path, config)
    check_storage_checksum(strategy, config)
    return Table(table_path, config, strategy, storage_options).with_options(properties)


def check_supported(config: TableConfig, strategy: StorageStrategy) -> None:
    if config.version != P.DEFAULT_TABLE_VERSION:
        raise UnsupportedTableVersionError(
            f"table {config.name} has table version {config.version}; fedcore reads and writes "
            f"version {P.DEFAULT_TABLE_VERSION} (Hudi 0.14/0.15)"
        )
    if not strategy.data_under_table_path and not config.metadata_enabled:
        raise MetadataTableRequiredError(
            P.METADATA_ENABLE, f"is false, but the {strategy.display_name()} layout needs the metadata table"
        )


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
        # A full description of a layout: compare it as given, not blended with the table's.
        base = {k: v for k, v in config.items() if k not in storage_keys}
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
