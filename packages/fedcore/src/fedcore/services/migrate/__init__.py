"""``fed migrate``: re-bootstrap an existing table into a new table with another layout.

A table's storage strategy never changes in place (every physical path is computed
from it); moving a table onto a federated layout means writing a new table. The
source is only read:

- a table fedcore reads (any strategy; Apache Hudi's copy-on-write and merge-on-read
  tables of table versions 6, 8 and 9, with or without meta fields, any key generator);
- a plain Hive-layout Parquet dataset (``dataset/date=2026-01-01/part-0.parquet``),
  given its record key (partition fields: the ``key=value`` folders).

The target gets the latest snapshot only, as **one instant** on a new timeline (a
``bulk_insert`` commit, so every engine reads it as Hudi reads a commit) and a new
metadata table. Base files that already hold the table's columns (meta fields
included) are **copied** to their new physical locations, keeping their names, so
``_hoodie_file_name`` and each row's commit time stay true; where both ends are one
S3 endpoint the copy is server-side (CopyObject), no bytes through this process.
What must change is **rewritten** through the file writer: a merge-on-read slice
(base and log files merged into one base file), a file without meta fields, a plain
Parquet file. The target is copy-on-write unless ``properties`` say
``hoodie.table.type=MERGE_ON_READ``; a merge-on-read target of version 6 takes the log
files of a version-6 table fed wrote as they are, copied beside their base files (Hudi's may
hold blocks of failed writes, and a Hudi 1.x log file is placed by its delta commit's
completion time, which the target's timeline does not have: those slices are merged).
Copies and rewrites run in parallel, with progress.

The new instant is later than every copied file's commit, so Hudi counts those files
as committed before its timeline starts, as it counts archived commits.

Crash safety is the commit protocol's: files go in marker first under the migration's
instant, and the target becomes readable only when that instant completes. The
target's config names its source (``hoodie.fed.migration.source``). Run again after
an interruption, a migration finds the target unfinished, rolls its pending instant
back once the heartbeat of the process that died has expired, and starts over; a
target already migrated from the same source is reported done; any other existing
table at the target is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa

from fedcore import properties as P
from fedcore.commit.file_group_writer import IO_THREADS, FileGroupWriter, NewFile, write_file_groups
from fedcore.commit.file_writer import (
    InputChunk,
    copy_data_file,
    file_names,
    new_groups,
    parquet_options,
    sampled_record_size,
    stats_columns,
    write_partition_metadata,
    written_record_size,
)
from fedcore.commit.pending import wait_for_services
from fedcore.commit.transaction import Transaction, roll_back_failed_writes, stat_claims
from fedcore.commit.upgrade import upgrade_config
from fedcore.exceptions import (
    ConfigError,
    InstantConflictError,
    InvalidTableConfigError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from fedcore.files.filenames import data_file_id
from fedcore.handle import TableHandle
from fedcore.handle.config import upgraded_merge_mode
from fedcore.handle.create import create_handle
from fedcore.io.filesystems import StorageOptions, open_sized
from fedcore.io.parquet import file_stats, footer_from_tail, read_parquet_metadata
from fedcore.io.uris import is_within, normalize_uri
from fedcore.keygen.grouping import partition_rows
from fedcore.keygen.keys import check_keys, check_required_columns, virtual_key_types_error
from fedcore.metadata.operations import commit_ops
from fedcore.schema.avro import to_avro_json
from fedcore.schema.evolution import conform, evolve
from fedcore.schema.meta import strip_meta
from fedcore.services.after_commit import run_table_services
from fedcore.services.migrate.sources import Source, Unit, open_source
from fedcore.steps import observers_now, reached
from fedcore.timeline import COMMIT, DELTA_COMMIT, Timeline
from fedcore.timeline.commit_metadata import CommitMetadata, WriteStat

__all__ = ["MigrationReport", "migrate"]

#: The commit's operation: the target's one instant reads as Hudi reads a bulk insert.
BULK_INSERT: Final = "BULK_INSERT"


@dataclass
class MigrationReport:
    source: str
    target: str
    kind: str
    instant: str
    source_instant: str | None = None
    copied: int = 0
    rewritten: int = 0
    files_written: int = 0
    bytes_copied: int = 0
    rows_rewritten: int = 0
    #: An interrupted migration's instant this run rolled back first.
    rolled_back: list[str] = field(default_factory=list)
    already_done: bool = False
    seconds: float = 0.0

    @property
    def files_per_second(self) -> float:
        return self.files_written / self.seconds if self.seconds > 0 else 0.0

    def format(self) -> str:
        if self.already_done:
            return f"{self.target} already holds the migration of {self.source} (instant {self.instant})."
        lines = []
        if self.rolled_back:
            lines.append(f"Rolled back the interrupted migration {', '.join(self.rolled_back)} first.")
        lines.append(
            f"Migrated {self.kind} {self.source}"
            + (f" as of {self.source_instant}" if self.source_instant else "")
            + f" to {self.target} in instant {self.instant}: {self.copied:,} files copied "
            f"({self.bytes_copied:,} bytes), {self.rewritten:,} slices or files rewritten into "
            f"{self.files_written - self.copied:,} files ({self.rows_rewritten:,} rows)."
        )
        lines.append(
            f"{self.files_written:,} files in {self.seconds:.1f} s ({self.files_per_second:,.0f} files/s)."
        )
        return "\n".join(lines)


def migrate(
    source: str,
    target: str,
    *,
    storage: Mapping[str, str],
    name: str | None = None,
    properties: Mapping[str, str] | None = None,
    options: Mapping[str, str] | None = None,
    record_key_fields: Sequence[str] | None = None,
    partition_fields: Sequence[str] | None = None,
    precombine_field: str | None = None,
    source_options: StorageOptions | None = None,
    target_options: StorageOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> MigrationReport:
    """Migrate ``source`` into a new table at ``target`` (see the module docstring).

    Args:
        storage: the target's storage keys (``hoodie.storage.strategy.class``, its path...).
        name: the target's table name (default: the source's; a plain dataset's folder).
        properties: more target table properties.
        options: runtime options of the migration's write (heartbeat, file sizing).
        record_key_fields, partition_fields, precombine_field: a plain dataset's (a Hudi
            table's come from its config: giving them is an error).
        progress: ``(files done, files in all)`` as the migration goes.

    Steps (``fedcore.steps``): the commit protocol's, and "copied" once every file is in.
    """
    start = time.monotonic()
    source_uri, target_uri = normalize_uri(source), normalize_uri(target)
    if is_within(target_uri, source_uri) or is_within(source_uri, target_uri):
        raise ConfigError(
            "target", f"{target_uri} and the source {source_uri} overlap; the source is never modified"
        )
    found = open_source(source_uri, source_options, record_key_fields, partition_fields, precombine_field)
    report = MigrationReport(source_uri, target_uri, found.kind, "", found.instant)
    table = _target(found, source_uri, target_uri, storage, name, properties, target_options, options, report)
    if report.already_done:
        return report
    units = found.units
    # Slices with log files go over as they are onto a merge-on-read target whose log file
    # names say their slice, as the source's do (up to version 6); merged otherwise (a Hudi
    # 1.x name carries its delta commit, which the target's timeline does not have).
    if table.config.merge_on_read and not table.layout.log_files.names_delta_commit:
        units = [copy for unit in units for copy in (unit.copies or (unit,))]
    # The inflight plan and the commit's extraMetadata say what was migrated, and from where.
    migrated = {"source": source_uri, "kind": found.kind, "source_instant": found.instant or ""}
    extra = {f"fed.migration.{key}": value for key, value in migrated.items()}
    rewrite = _Rewrite.open(table, found.schema)
    action = DELTA_COMMIT if table.config.merge_on_read else COMMIT
    # An error rolls the instant back; a crash leaves it to the next run.
    with Transaction(table, action, observers_now()) as transaction:
        instant = rewrite.instant = report.instant = transaction.time
        transaction.inflight(table.layout.commits.encode_inflight(BULK_INSERT, (), extra))
        total = len(units)
        done = 0

        def tick(count: int = 1) -> None:
            nonlocal done
            done += count
            if progress is not None:
                progress(done, total)

        copies = [u for u in units if u.name is not None]
        rewrites = [u for u in units if u.name is None]
        write_partition_metadata(table, sorted({u.partition for u in copies}), instant)
        stats: list[WriteStat] = []
        files = [NewFile(_relative(u), "APPEND" if u.log_version else "CREATE") for u in copies]
        writer = FileGroupWriter(table, instant, IO_THREADS)
        copied = writer.write(
            files,
            copies,
            lambda unit: _copy(table, unit),
            "copies",
            marked=lambda: reached("data"),  # one step for the copies: the transaction puts none
            done=lambda _: tick(),
        )
        stats.extend(copied)
        report.copied = len(copies)
        report.bytes_copied = sum(u.size for u in copies)
        for task, unit in enumerate(rewrites):
            data = found.read(unit)
            report.rows_rewritten += data.num_rows
            if data.num_rows:
                stats.extend(rewrite.write(data, task, transaction))
            tick()
        report.rewritten = len(rewrites)
        reached("copied")
        metadata = CommitMetadata(
            operation=BULK_INSERT,
            stats=stats,
            schema=to_avro_json(rewrite.schema, table.name),
            extra=extra,
        )
        claims = [claim for s in stats for claim in stat_claims(s, table.config.merge_on_read)]
        transaction.commit(
            table.layout.commits.encode(metadata), commit_ops(instant, metadata), claims, metadata.schema
        )
        run_table_services(table)  # as after any write: the one commit may call for them
    report.files_written = len(stats)
    report.seconds = time.monotonic() - start
    return report


class _Rewrite:
    """Rows the migration rewrites (merged slices, files without meta fields, plain Parquet),
    written as a bulk insert writes new file groups: conformed to the target's schema, split
    by partition and by file size, each batch marked then written."""

    def __init__(self, table: TableHandle, timeline: Timeline, schema: pa.Schema) -> None:
        self.table = table
        #: The target's data schema once the migration commits (the source's, or the create
        #: schema it carried evolved by the source's).
        self.schema = schema
        written = written_record_size(table, timeline)
        self.record_size = written or P.RECORD_SIZE_ESTIMATE.of(table.options)
        #: Still to be measured on the first rows (as a write sizes a new table's files).
        self.unsized = written is None and P.RECORD_SIZE_ESTIMATE not in table.options
        self.parquet = parquet_options(table.options, self.record_size)
        self.instant = ""

    @classmethod
    def open(cls, table: TableHandle, source_schema: pa.Schema) -> _Rewrite:
        """What a write checks before it begins, for rows of ``source_schema``: keys to write
        by, a readable timeline, no write left failed, no table service pending."""
        config = table.config
        if not config.record_key_fields:
            raise InvalidTableConfigError(
                P.RECORD_KEY_FIELDS,
                f"is missing from table {table.name}'s hoodie.properties: fedcore writes tables whose "
                "records have keys (a table written with Hudi's generated keys is read, not written)",
            )
        check_required_columns(source_schema.names, config.record_key_fields, config.partition_fields, None)
        upgrade_config(table)  # before anything of the migration's instant exists
        timeline = table.timeline()
        timeline.check_readable(table.name, config.merge_on_read)
        if roll_back_failed_writes(table, timeline):
            timeline = table.timeline()
        timeline = wait_for_services(table, timeline, "the write")
        table_schema = table.schema(timeline)
        given = strip_meta(source_schema.empty_table()).schema
        fill = P.RECONCILE_SCHEMA.of(table.options) or P.SET_NULL_FOR_MISSING_COLUMNS.of(table.options)
        schema = (
            given
            if table_schema is None
            else evolve(table_schema, given, fill_missing=fill, keys=table.config.key_columns)
        )
        if not P.POPULATE_META_FIELDS.of(config):
            error = virtual_key_types_error(schema, config.record_key_fields)
            if error is not None:
                raise error
        return cls(table, timeline, schema)

    def write(self, data: pa.Table, task: int, transaction: Transaction) -> list[WriteStat]:
        """Rows as new file groups, named by ``task`` (the rewrite's place among the units)."""
        table = self.table
        data = conform(data, self.schema, table.config.key_columns)
        partitions = partition_rows(data, table.partition_scheme)
        check_keys(data, table.config.record_key_fields)
        if self.unsized and data.num_rows:
            self.record_size = sampled_record_size(table, self._chunk(data))
            self.parquet = parquet_options(table.options, self.record_size)
            self.unsized = False
        per_file = max(1, P.MAX_FILE_SIZE.of(table.options) // self.record_size)
        groups = [
            group
            for partition, rows in sorted(partitions.groups().items())
            for group in new_groups(partition, rows, per_file)
        ]
        names = file_names(self.instant, len(groups), task=task)
        chunk = self._chunk(data)
        return write_file_groups(
            table, self.instant, groups, chunk, names, transaction.write_file, IO_THREADS
        )

    def _chunk(self, data: pa.Table) -> InputChunk:
        return InputChunk(self.instant, data, None, self.schema, self.parquet)


def _relative(unit: Unit) -> str:
    assert unit.name is not None
    return f"{unit.partition}/{unit.name}" if unit.partition else unit.name


#: The bytes a streamed copy keeps of a file's end: its footer when it is this small (a
#: copy with a larger footer reads it from the copy, as a server-side copy does).
_FOOTER_TAIL: Final = 64 * 2**10


def _copy(table: TableHandle, unit: Unit) -> WriteStat:
    """A source file copied as it is (server-side where the stores allow), with the column
    statistics its footer holds, so scans skip copied files as they skip written ones: taken
    from the bytes a streamed copy passed on, else read from the copy (a server-side copy
    gives no bytes)."""
    assert unit.name is not None
    relative = _relative(unit)
    tail = copy_data_file(table, relative, unit.fs, unit.path, tail=0 if unit.log_version else _FOOTER_TAIL)
    file_id = data_file_id(unit.name)
    assert file_id is not None
    if unit.log_version:  # a log file: no footer, no statistics
        return WriteStat(
            file_id=file_id,
            path=relative,
            partition_path=unit.partition,
            prev_commit=unit.base_instant,
            total_write_bytes=unit.size,
            file_size=unit.size,
            log_version=unit.log_version,
            base_file=unit.base_file,
        )
    with table.fs.errors(relative):
        footer = footer_from_tail(tail) if tail is not None else None
        if footer is None:
            with open_sized(table.fs, relative, unit.size) as handle:
                footer = read_parquet_metadata(handle)
    names = footer.schema.to_arrow_schema().names
    return WriteStat(
        file_id=file_id,
        path=relative,
        partition_path=unit.partition,
        num_writes=unit.records,
        num_inserts=unit.records,
        total_write_bytes=unit.size,
        file_size=unit.size,
        column_stats=file_stats(footer, stats_columns(table.options, names)),
    )


def _merging_for_target(
    carried: Mapping[str, str], properties: Mapping[str, str], ordering_field: str | None
) -> dict[str, str]:
    """The source's carried keys, its merging said in the target's table version: a source's
    merging is carried as version 6's payload class, which a target of version 8 or 9 says as
    the merge mode Hudi's upgrade gives a table of that payload and type (``fed upgrade``'s
    too: ``handle.config.upgraded_merge_mode``; a merge-on-read target with an ordering field
    orders by event time), unless ``properties`` name one."""
    asked = {properties.get(key, "").strip() for key in (P.TABLE_VERSION, P.WRITE_TABLE_VERSION)}
    if not asked & {"8", "9"}:
        return dict(carried)
    merging = {k: v for k, v in carried.items() if k not in (P.PAYLOAD_CLASS, P.RECORD_MERGER_STRATEGY)}
    if P.RECORD_MERGE_MODE not in properties:
        merge_on_read = properties.get(P.TABLE_TYPE, "").strip().upper() == P.TABLE_TYPE_MOR
        payload = carried.get(P.PAYLOAD_CLASS, "")
        merging[P.RECORD_MERGE_MODE] = upgraded_merge_mode(payload, merge_on_read, ordering_field)
    return merging


def _target(
    found: Source,
    source: str,
    target: str,
    storage: Mapping[str, str],
    name: str | None,
    properties: Mapping[str, str] | None,
    target_options: StorageOptions | None,
    options: Mapping[str, str] | None,
    report: MigrationReport,
) -> TableHandle:
    """The new table; or the unfinished migration of this source at ``target``, with the
    pending instant of the run that died rolled back."""
    try:
        existing = TableHandle.open(target, target_options)
    except TableNotFoundError:
        return create_handle(
            target,
            name=name or found.name,
            record_key_fields=found.record_key_fields,
            partition_fields=found.partition_fields,
            precombine_field=found.precombine_field,
            hive_style_partitioning=found.hive_style,
            database=found.database,
            properties={
                **_merging_for_target(found.carried, properties or {}, found.precombine_field),
                **(properties or {}),
                **storage,
                P.MIGRATION_SOURCE: source,
            },
            storage_options=target_options,
            copies_paths=True,
        ).with_options(options)
    if existing.config.get(P.MIGRATION_SOURCE) != source:
        raise TableAlreadyExistsError(
            f"a table already exists at {target} and it is not a migration of {source}: "
            "a migration writes a new table"
        )
    existing.with_options(storage)  # StorageStrategyMismatchError when asked for another layout
    existing = existing.with_options(options)  # the heartbeat settings that judge the dead run
    timeline = existing.timeline()
    written = timeline.completed(existing.write_actions)
    if written:
        report.already_done = True
        report.instant = written[-1].time
        return existing
    pending = [i.time for i in timeline.pending()]
    report.rolled_back = roll_back_failed_writes(existing, timeline)
    alive = sorted(set(pending) - set(report.rolled_back))
    if alive:
        raise InstantConflictError(
            f"another migration into {target} is running (instant {alive[0]}, heartbeat alive); "
            "run this again once it has finished or died"
        )
    return existing
