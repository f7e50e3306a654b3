"""``fedcore.Table``: a table as a user meets it, and ``create_table`` / ``load_table``.

A ``Table`` holds a ``TableHandle`` (config, strategy, filesystem, timeline, file
index) with the reads and writes a Python data engineer expects: ``scan`` (and
its shorthands ``read``, ``read_batches``, ``file_slices``), and ``upsert``,
``insert``, ``bulk_insert``, ``delete``, ``insert_overwrite``. It is the top of
fedcore's layers: it imports the scan and the writer; nothing below imports it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from functools import partial

import pyarrow as pa

from fedcore import properties as P
from fedcore.commit.upgrade import upgrade_config
from fedcore.commit.version_upgrade import upgrade_table_version
from fedcore.exceptions import ConfigError
from fedcore.files.file_slice import FileSlice, QueryType
from fedcore.handle import HasHandle, TableHandle
from fedcore.handle.config import TableConfig
from fedcore.handle.create import create_handle
from fedcore.io.filesystems import StorageOptions
from fedcore.read.filters import FilterSpec
from fedcore.read.scan import DataScan
from fedcore.schema.input import WriteInput
from fedcore.services.archival import archive
from fedcore.services.cleaning import CleanResult, clean
from fedcore.services.compaction import CompactionResult, compact
from fedcore.services.repair import RepairReport, repair_metadata
from fedcore.services.rollback import rollback
from fedcore.services.verify import VerifyReport, delete_orphans, verify_table
from fedcore.storage.base import StorageStrategy
from fedcore.storage.federated import FederatedFileSystem
from fedcore.storage.layout import LayoutReport, placed_layout
from fedcore.timeline import Instant, Timeline
from fedcore.timeline.commit_metadata import CommitMetadata
from fedcore.write.client import Operation, WriteClient, WriteResult


class Table:
    """A table: reads through ``scan``, writes through ``upsert``, ``insert``, ``bulk_insert``,
    ``delete`` and ``insert_overwrite``, maintenance through ``compact``, ``clean``,
    ``archive``, ``rollback``, ``repair`` and ``verify``. Get one from ``load_table`` or
    ``create_table``.

    It holds the table's handle (``handle``: config, strategy, filesystem, timeline, file
    index), what fedcore's services work on; users, the CLI and engine adapters need only
    the ``Table`` (adapters: with ``fedcore.engine``).

    Attributes:
        path: the table path (metadata lives under ``<path>/.hoodie``).
        config: ``hoodie.properties``, validated.
        strategy: where data files go (persisted at creation).
        options: runtime settings: the caller's over the table's.
    """

    def __init__(self, handle: TableHandle) -> None:
        self._handle = handle

    @property
    def handle(self) -> TableHandle:
        """The handle this table holds: what the engine API and the services work on."""
        return self._handle

    # --- what a table is ---------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._handle.path

    @property
    def name(self) -> str:
        return self._handle.name

    @property
    def config(self) -> TableConfig:
        return self._handle.config

    @property
    def strategy(self) -> StorageStrategy:
        return self._handle.strategy

    @property
    def options(self) -> dict[str, str]:
        return self._handle.options

    @property
    def storage_options(self) -> StorageOptions | None:
        return self._handle.storage_options

    @property
    def fs(self) -> FederatedFileSystem:
        """The federated filesystem: logical paths (``<partition>/<file>``) in, the physical
        files under the strategy's roots out (``fs.to_physical``)."""
        return self._handle.fs

    def with_options(self, options: Mapping[str, str] | None) -> Table:
        """This table with runtime options (Hudi's keys) over its own; storage keys must be
        the table's (``StorageStrategyMismatchError`` otherwise)."""
        return Table(self._handle.with_options(options))

    def schema(self, timeline: Timeline | None = None, as_of: str | None = None) -> pa.Schema | None:
        """The table's schema as of its latest instant (or ``as_of``), meta fields first;
        None before the first write."""
        return self._handle.schema(timeline, as_of)

    def timeline(self) -> Timeline:
        """The table's timeline (Hudi's instants under ``.hoodie/``), listed now."""
        return self._handle.timeline()

    @property
    def write_actions(self) -> frozenset[str]:
        """The timeline actions of this table's writes (``commit``, ``replacecommit``; on a
        merge-on-read table ``deltacommit`` too): ``timeline().completed(table.write_actions)``
        lists the writes a snapshot is made of."""
        return self._handle.write_actions

    def partitions(self, as_of: str | None = None) -> list[str]:
        """Every partition path holding files as of ``as_of`` (None: now), sorted; from the
        metadata table (a listing only for a Hive-layout table created without one)."""
        return self._handle.file_index.partitions(as_of)

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """What a completed instant recorded: its write stats, schema and extra metadata."""
        return self._handle.commit_metadata(instant)

    def __repr__(self) -> str:
        return f"Table({self._handle.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Table) and other._handle is self._handle

    def __hash__(self) -> int:
        return id(self._handle)

    # --- reads (see ``scan``) ------------------------------------------------------------

    def scan(
        self,
        filters: Sequence[FilterSpec] | str | None = (),
        columns: Sequence[str] | None = None,
        *,
        as_of: str | None = None,
        limit: int | None = None,
        with_meta_fields: bool = True,
        query_type: QueryType = "snapshot",
    ) -> DataScan:
        """A read of this table, run by its ``plan_files``, ``to_arrow``, ``to_arrow_batch_reader``,
        ``count``, ``to_pandas``, ``to_polars`` or ``to_duckdb``.

        Args:
            filters: ``(column, op, value)`` triples joined by AND; ops ``=, !=, <, <=, >, >=, IN``,
                ``IS NULL``, ``IS NOT NULL``; or the same as text (``"region = 'eu' AND fare > 1"``,
                as ``fed read --where`` takes it); None or empty: every row. Partition-column
                filters prune partitions through the metadata table; every filter skips the
                files and row groups whose column statistics prove that no row matches.
            columns: columns to return, in order; None for all.
            as_of: time travel to an instant (``yyyyMMddHHmmssSSS``).
            limit: at most this many rows.
            with_meta_fields: include the ``_hoodie_*`` columns (as Hudi's readers do).
            query_type: ``"snapshot"`` or ``"read_optimized"`` (merge-on-read tables: base
                files only, without the log files written since the last compaction).
        """
        return DataScan.of(self._handle, filters, columns, as_of, limit, with_meta_fields, query_type)

    def changes(
        self,
        begin: str,
        end: str | None = None,
        filters: Sequence[FilterSpec] = (),
        columns: Sequence[str] | None = None,
    ) -> DataScan:
        """An incremental query (Hudi's ``hoodie.datasource.query.type=incremental``): the
        latest version, as of ``end`` (default: now), of every record written by the instants
        after ``begin`` and up to ``end``. Deleted records are not returned (as in Hudi).

        On tables of versions 8 and 9 (Hudi 1.x) ``begin`` and ``end`` are completion times, as
        Hudi 1.x reads them: the instants that completed after ``begin`` and by ``end``."""
        return self.scan(filters, columns, as_of=end).update(changed_after=begin)

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
        slice of every file group the filters keep, for engines (on merge-on-read tables with
        the log files a snapshot merges onto the base file: ``FileSlice.files()``)."""
        return self.scan(filters, as_of=as_of).plan_files()

    # --- writes (see ``write.client``) -------------------------------------------------------

    def write(
        self, data: WriteInput, operation: Operation, options: Mapping[str, str] | None = None
    ) -> WriteResult:
        """Shorthand for ``WriteClient(self, options).write(data, operation)``: one instant.

        ``data`` is a pyarrow Table, RecordBatch or RecordBatchReader, or anything exporting an
        Arrow stream (polars, pandas); ``options`` are Hudi's keys for this write only."""
        return WriteClient(self._handle, options).write(data, operation)

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

    def insert_overwrite_table(
        self, data: WriteInput, options: Mapping[str, str] | None = None
    ) -> WriteResult:
        """Replace every file group of the table with ``data``."""
        return self.write(data, "insert_overwrite_table", options)

    # --- maintenance -------------------------------------------------------------------------

    def compact(self) -> CompactionResult | None:
        """Merge-on-read: fold every file slice's log files into a new base file of its group,
        as Hudi's compaction does (``fedcore.services.compaction``); None when no slice has any."""
        return compact(self._handle)

    def clean(self, retained: int | None = None) -> CleanResult:
        """Delete the file versions no retained write needs (Hudi's cleaner): those older than
        the latest ``retained`` writes (default ``hoodie.cleaner.commits.retained``). What it
        did: its ``instant`` is None when nothing was old enough."""
        kept = P.CLEANER_COMMITS_RETAINED.of(self.options) if retained is None else retained
        return clean(self._handle, kept)

    def archive(self) -> list[str]:
        """Move the oldest instants out of the active timeline once it holds more than
        ``hoodie.keep.max.commits`` (Hudi's archival); the instant times archived."""
        return archive(self._handle)

    def rollback(self, instant: str) -> str:
        """Undo a write (``fed rollback``): its files deleted, its instant rolled back; the
        rollback instant's time."""
        return rollback(self._handle, instant)

    def repair(
        self,
        *,
        dry_run: bool = False,
        allow_missing: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> RepairReport:
        """Rebuild the metadata table from the timeline and storage (``fed repair``).

        ``allow_missing``: rebuild even when files holding the newest version of their file
        group are missing; ``progress`` gets the count of objects each listed folder added."""
        return repair_metadata(self._handle, dry_run=dry_run, allow_missing=allow_missing, progress=progress)

    def verify(self, *, deep: bool = False, progress: Callable[[int], None] | None = None) -> VerifyReport:
        """Hold the metadata table against storage (``fed verify``); ``deep`` reads every
        referenced file back; ``progress`` gets the count of objects each listed folder added."""
        return verify_table(self._handle, progress, deep=deep)

    def upgrade(self, table_version: int | None = None) -> dict[str, tuple[str, str]]:
        """Persist what the table's config lacks as this fedcore writes it (``fed upgrade``):
        the keys changed, each with its old and new value; empty when it was up to date. A
        change fedcore cannot write on with is refused (``fedcore.commit.upgrade``).

        ``table_version``: 8 or 9 also moves a table of version 6 (or 8) to Hudi 1.x's table
        version, as Apache Hudi's upgrade does (``fedcore.commit.version_upgrade``: a
        merge-on-read table compacted first, the timeline into ``.hoodie/timeline/`` with
        completion times, Avro metadata, the version's keys); refused while an instant is
        pending."""
        if table_version is None:
            return upgrade_config(self._handle)
        # A merge-on-read table is compacted first, as Hudi's upgrade does, once the upgrade
        # is known to go ahead.
        return upgrade_table_version(self._handle, table_version, partial(compact, self._handle))

    def delete_orphans(self, report: VerifyReport, older_than: timedelta) -> list[str]:
        """Delete the orphans ``verify`` reported that were last modified more than
        ``older_than`` ago (``fed verify --delete-orphans``); their paths."""
        return delete_orphans(self._handle, report, older_than)


def create_table(
    path: str,
    *,
    name: str,
    record_key_fields: Sequence[str],
    partition_fields: Sequence[str] = (),
    precombine_field: str | None = None,
    hive_style_partitioning: bool = True,
    database: str | None = None,
    table_type: P.TableType | None = None,
    schema: pa.Schema | None = None,
    properties: Mapping[str, str] | None = None,
    storage_options: StorageOptions | None = None,
    start_over: bool = False,
) -> Table:
    """Create a table and persist its storage strategy; fails if a table is already there
    (``TableAlreadyExistsError``), or if an earlier table's timeline is, unless ``start_over``
    (which deletes that timeline and metadata first).

    ``table_type``: ``COPY_ON_WRITE`` (the default, as in Hudi) or ``MERGE_ON_READ`` (upserts
    and deletes append log files; ``hoodie.table.type`` in ``properties`` says the same).
    ``schema``: the table's columns before its first write (Hudi's ``hoodie.table.create.schema``,
    as a SQL ``CREATE TABLE`` gives them): reads of the empty table return them, and the first
    write evolves them like any later one."""
    return Table(
        create_handle(
            path,
            name=name,
            record_key_fields=record_key_fields,
            partition_fields=partition_fields,
            precombine_field=precombine_field,
            hive_style_partitioning=hive_style_partitioning,
            database=database,
            table_type=table_type,
            schema=schema,
            properties=properties,
            storage_options=storage_options,
            start_over=start_over,
        )
    )


def load_table(
    path: str,
    *,
    options: Mapping[str, str] | None = None,
    storage_options: StorageOptions | None = None,
    properties: Mapping[str, str] | None = None,
) -> Table:
    """Open an existing table.

    Args:
        path: the table path (local path, ``file://`` or ``s3://`` URI).
        options: runtime settings (Hudi's keys, as a write's ``options`` takes them) over the
            table's own; storage keys among them must match the persisted ones.
        storage_options: fsspec options per protocol or storage root.
        properties: the old name of ``options``; deprecated.
    """
    if properties is not None:
        warnings.warn(
            "load_table(properties=...) is deprecated and goes in the next release: use options=",
            DeprecationWarning,
            stacklevel=2,
        )
        if options is not None:
            raise ConfigError("properties", "give options= alone (properties= is its old name)")
        options = properties
    return Table(TableHandle.open(path, storage_options).with_options(options))


def table_layout(table: HasHandle, samples: int = 3) -> LayoutReport:
    """Files and bytes per storage location of every file the table's metadata holds."""
    handle = table.handle
    index = handle.file_index
    files = {partition: found.files for partition, found in index.files().items()}
    return placed_layout(
        handle.strategy, index.partitions(), files, handle.fs.to_physical, handle.name, samples
    )
