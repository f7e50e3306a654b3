"""``fed migrate``: re-bootstrap an existing table into a new table with another layout.

A table's storage strategy never changes in place (every physical path is computed
from it); moving a table onto a federated layout means writing a new table. The
source is only read:

- a table fedcore reads (any strategy; Apache Hudi's copy-on-write and merge-on-read
  tables of table version 6, with or without meta fields, any key generator);
- an Apache Hudi table of version 8 (copy-on-write): hudi-rs (``pip install
  'fedcore[migrate]'``) lists its latest file slices;
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
``hoodie.table.type=MERGE_ON_READ``; a merge-on-read target takes the log files of a
table fed wrote as they are, copied beside their base files (Hudi's may hold blocks of
failed writes, so its slices are merged). Copies and rewrites run in parallel, with progress.

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
from typing import Any, Final

import pyarrow as pa
import pyarrow.dataset as ds
from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.commit.file_group_writer import FileGroupWriter, NewFile
from fedcore.commit.file_writer import (
    copy_data_file,
    stats_columns,
    write_partition_metadata,
)
from fedcore.commit.transaction import roll_back_failed_writes
from fedcore.exceptions import (
    ConfigError,
    FedError,
    InstantConflictError,
    MissingDependencyError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedTableError,
)
from fedcore.files.file_slice import VIRTUAL_META_COLUMNS, FileSlice
from fedcore.files.filenames import data_file_id
from fedcore.handle.config import TableConfig
from fedcore.io.filesystems import StorageOptions, filesystem_for, open_sized
from fedcore.io.parquet import file_stats, read_parquet_metadata
from fedcore.io.uris import is_within, normalize_uri
from fedcore.read.planner import ScanPlanner
from fedcore.schema.meta import META_COLUMNS
from fedcore.steps import reached
from fedcore.table import Table, create_table, load_table
from fedcore.timeline.commit_metadata import WriteStat
from fedcore.write.job import BULK_INSERT, IO_THREADS, WriteJob

#: Source config keys that define how records are keyed, partitioned and merged.
_CARRIED: Final = frozenset(
    {
        P.KEY_GENERATOR_CLASS,
        P.URL_ENCODE_PARTITIONING,
        P.CREATE_SCHEMA,
        P.PAYLOAD_CLASS,
        P.RECORD_MERGER_STRATEGY,
        str(P.DROP_PARTITION_COLUMNS),
    }
)
#: Table version 8 names the key generator by type.
_KEY_GENERATOR_TYPES: Final = {
    "SIMPLE": P.SIMPLE_KEY_GENERATOR,
    "COMPLEX": P.COMPLEX_KEY_GENERATOR,
    "NON_PARTITION": P.NON_PARTITIONED_KEY_GENERATOR,
    "TIMESTAMP": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    "CUSTOM": "org.apache.hudi.keygen.CustomKeyGenerator",
}


@dataclass(frozen=True)
class _Unit:
    """One file of the target: a copy of a source file, or a rewrite of a slice or file."""

    partition: str
    #: Copies: the file name, kept. Rewrites: None (the writer names what it writes).
    name: str | None
    fs: AbstractFileSystem
    #: Copies: the source file's physical path.
    path: str
    size: int
    records: int = 0
    #: Rewrites: what to read (a FileSlice, or a Parquet fragment).
    what: Any = None
    #: Copied log files: their version, and the base instant and base file of their slice.
    log_version: int = 0
    base_instant: str = ""
    base_file: str = ""
    #: A merge-on-read slice that a merge-on-read target can take as it is: its files'
    #: copies (the rewrite otherwise).
    copies: tuple[_Unit, ...] = ()


@dataclass
class _Source:
    kind: str
    #: Config of the target: record keys, partition fields and everything carried.
    name: str
    record_key_fields: list[str]
    partition_fields: list[str]
    precombine_field: str | None
    hive_style: bool
    database: str | None
    carried: dict[str, str]
    schema: pa.Schema
    #: The newest instant of the source read (None for a plain dataset).
    instant: str | None
    units: list[_Unit]
    read: Callable[[_Unit], pa.Table]


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
    found = _open_source(source_uri, source_options, record_key_fields, partition_fields, precombine_field)
    report = MigrationReport(source_uri, target_uri, found.kind, "", found.instant)
    table = _target(found, source_uri, target_uri, storage, name, properties, target_options, options, report)
    if report.already_done:
        return report
    units = found.units
    if table.config.merge_on_read:  # slices with log files go over as they are
        units = [copy for unit in units for copy in (unit.copies or (unit,))]
    # The inflight plan and the commit's extraMetadata say what was migrated, and from where.
    migrated = {"source": source_uri, "kind": found.kind, "source_instant": found.instant or ""}
    extra = {f"fed.migration.{key}": value for key, value in migrated.items()}
    job = WriteJob.open(table, BULK_INSERT, found.schema, extra_metadata=extra)
    with job:  # an error rolls the instant back; a crash leaves it to the next run
        job.begin()
        report.instant = job.instant
        job.inflight()
        total = len(units)
        done = 0

        def tick(count: int = 1) -> None:
            nonlocal done
            done += count
            if progress is not None:
                progress(done, total)

        copies = [u for u in units if u.name is not None]
        rewrites = [u for u in units if u.name is None]
        write_partition_metadata(table.handle, sorted({u.partition for u in copies}), job.instant)
        stats: list[WriteStat] = []
        files = [NewFile(_relative(u), "APPEND" if u.log_version else "CREATE") for u in copies]
        writer = FileGroupWriter(table.handle, job.instant, IO_THREADS)
        copied = writer.write(
            files,
            copies,
            lambda unit: _copy(table, unit),
            "copies",
            marked=lambda: reached("data"),  # one step for the copies: they are not put through the job
            done=lambda _: tick(),
        )
        stats.extend(copied)
        report.copied = len(copies)
        report.bytes_copied = sum(u.size for u in copies)
        for task, unit in enumerate(rewrites):
            data = found.read(unit)
            report.rows_rewritten += data.num_rows
            if data.num_rows:
                stats.extend(job.write_new(data, task))
            tick()
        report.rewritten = len(rewrites)
        reached("copied")
        job.commit(stats)
    report.files_written = len(stats)
    report.seconds = time.monotonic() - start
    return report


def _relative(unit: _Unit) -> str:
    assert unit.name is not None
    return f"{unit.partition}/{unit.name}" if unit.partition else unit.name


def _copy(table: Table, unit: _Unit) -> WriteStat:
    """A source file copied as it is (server-side where the stores allow), with the column
    statistics its footer holds (read from the copy: the source gives no bytes), so scans
    skip copied files as they skip written ones."""
    assert unit.name is not None
    relative = _relative(unit)
    copy_data_file(table.handle, relative, unit.fs, unit.path)
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
    with table.fs.errors(relative), open_sized(table.fs, relative, unit.size) as handle:
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


def _target(
    found: _Source,
    source: str,
    target: str,
    storage: Mapping[str, str],
    name: str | None,
    properties: Mapping[str, str] | None,
    target_options: StorageOptions | None,
    options: Mapping[str, str] | None,
    report: MigrationReport,
) -> Table:
    """The new table; or the unfinished migration of this source at ``target``, with the
    pending instant of the run that died rolled back."""
    try:
        existing = load_table(target, storage_options=target_options)
    except TableNotFoundError:
        return create_table(
            target,
            name=name or found.name,
            record_key_fields=found.record_key_fields,
            partition_fields=found.partition_fields,
            precombine_field=found.precombine_field,
            hive_style_partitioning=found.hive_style,
            database=found.database,
            properties={**found.carried, **(properties or {}), **storage, P.MIGRATION_SOURCE: source},
            storage_options=target_options,
        ).with_options(options)
    if existing.config.get(P.MIGRATION_SOURCE) != source:
        raise TableAlreadyExistsError(
            f"a table already exists at {target} and it is not a migration of {source}: "
            "a migration writes a new table"
        )
    existing.with_options(storage)  # StorageStrategyMismatchError when asked for another layout
    existing = existing.with_options(options)  # the heartbeat settings that judge the dead run
    timeline = existing.timeline()
    written = timeline.completed(existing.handle.write_actions)
    if written:
        report.already_done = True
        report.instant = written[-1].time
        return existing
    pending = [i.time for i in timeline.pending()]
    report.rolled_back = roll_back_failed_writes(existing.handle, timeline)
    alive = sorted(set(pending) - set(report.rolled_back))
    if alive:
        raise InstantConflictError(
            f"another migration into {target} is running (instant {alive[0]}, heartbeat alive); "
            "run this again once it has finished or died"
        )
    return existing


# --- sources ---------------------------------------------------------------------------------


def _open_source(
    source: str,
    options: StorageOptions | None,
    record_key_fields: Sequence[str] | None,
    partition_fields: Sequence[str] | None,
    precombine_field: str | None,
) -> _Source:
    fs = filesystem_for(source, options)
    fs.invalidate_cache()
    if fs.exists(f"{source}/{P.HOODIE_FOLDER}/{P.PROPERTIES_FILE}"):
        for given, flag in (
            (record_key_fields, "record key fields"),
            (partition_fields, "partition fields"),
            (precombine_field, "precombine field"),
        ):
            if given:
                raise ConfigError(flag, f"come from the source table's config; {source} is a Hudi table")
        config = TableConfig.load(fs, source)
        if config.version == 8:
            return _hudi_rs_source(source, config, options)
        return _fedcore_source(load_table(source, storage_options=options))
    if not fs.isdir(source):
        raise TableNotFoundError(f"{source} is neither a Hudi table nor a folder of Parquet files")
    if not record_key_fields:
        raise ConfigError(
            "record key fields",
            f"{source} is a plain Parquet dataset: give its record key (--record-key, or record_key_fields=)",
        )
    return _parquet_source(source, fs, list(record_key_fields), partition_fields, precombine_field)


def _config_of(config: Mapping[str, str]) -> dict[str, str]:
    carried = {k: v for k, v in config.items() if k in _CARRIED or k.startswith(P.KEY_GENERATOR_PREFIXES)}
    generator_type = config.get(P.KEY_GENERATOR_TYPE, "").strip().upper()
    if P.KEY_GENERATOR_CLASS not in carried and generator_type:
        if generator_type not in _KEY_GENERATOR_TYPES:
            raise UnsupportedTableError(f"key generator type {generator_type} has no Hudi 0.x class")
        carried[P.KEY_GENERATOR_CLASS] = _KEY_GENERATOR_TYPES[generator_type]
    return carried


def _fedcore_source(table: Table) -> _Source:
    planner = ScanPlanner.open(table.handle)
    plan = planner.plan()
    columns = [c for c in planner.column_names() if c not in META_COLUMNS and c not in VIRTUAL_META_COLUMNS]
    schema = planner.schema(columns) if columns else pa.schema([])
    # Files that already hold every column the target's files hold are copied as they are.
    copyable = planner.meta_fields and not P.DROP_PARTITION_COLUMNS.of(table.config)
    # A merge-on-read target takes a slice's log files as they are where every block in them
    # is of a committed write: fed's (one write per log file, a failed write's deleted by its
    # rollback), not Hudi's (whose log files may hold blocks of writes that failed).
    logs_copyable = copyable and table.handle.metadata_table_or_none() is not None
    records = _records_by_file(table, plan.slices)
    units = []
    for file_slice in plan.slices:
        base = None
        if copyable and file_slice.base_file_name is not None:
            target = table.fs.resolve(file_slice.path)
            base = _Unit(
                file_slice.partition_path,
                file_slice.base_file_name,
                target.fs,
                target.path,
                file_slice.size,
                records.get(file_slice.base_file_name, 0),
            )
        if base is not None and not file_slice.log_files:
            units.append(base)
            continue
        copies: tuple[_Unit, ...] = ()
        if logs_copyable and (base is not None or file_slice.base_file_name is None):
            copies = (*([base] if base is not None else []), *_log_units(table, file_slice))
        size = file_slice.size + sum(size for _, size in file_slice.log_files)
        units.append(
            _Unit(file_slice.partition_path, None, table.fs, "", size, what=file_slice, copies=copies)
        )

    def read(unit: _Unit) -> pa.Table:
        return plan.reader.read(unit.what, columns, [])

    return _of_config(
        "merge-on-read table" if table.config.merge_on_read else "table",
        table.config,
        schema,
        plan.instant,
        units,
        read,
    )


def _log_units(table: Table, file_slice: FileSlice) -> list[_Unit]:
    """Copies of a slice's log files."""
    units = []
    for (name, size), path in zip(file_slice.log_files, file_slice.log_paths, strict=True):
        parsed = table.handle.layout.log_files.parse(name)
        assert parsed is not None, "a slice's log file"
        found = table.fs.resolve(path)
        units.append(
            _Unit(
                file_slice.partition_path,
                name,
                found.fs,
                found.path,
                size,
                log_version=parsed.version,
                base_instant=file_slice.base_instant,
                base_file=file_slice.base_file_name or "",
            )
        )
    return units


def _of_config(
    kind: str,
    config: TableConfig,
    schema: pa.Schema,
    instant: str | None,
    units: list[_Unit],
    read: Callable[[_Unit], pa.Table],
) -> _Source:
    """A Hudi table's source: keys, partitioning and what carries over from its config."""
    return _Source(
        kind=kind,
        name=config.name,
        record_key_fields=list(config.record_key_fields),
        partition_fields=list(config.partition_fields),
        precombine_field=config.precombine_field,
        hive_style=config.hive_style_partitioning,
        database=config.database or None,
        carried=_config_of(config),
        schema=schema,
        instant=instant,
        units=units,
        read=read,
    )


def _records_by_file(table: Table, slices: Sequence[FileSlice]) -> dict[str, int]:
    """Rows per base file, from the commits that wrote them (0 where archived)."""
    timeline = table.timeline()
    out: dict[str, int] = {}
    for time_ in sorted({s.base_instant for s in slices}):
        instant = timeline.find(time_)
        if instant is None or not instant.is_completed or instant.action not in table.handle.write_actions:
            continue
        for stat in table.commit_metadata(instant).stats:
            out[stat.path.rpartition("/")[2]] = stat.num_writes
    return out


def _hudi_rs_source(source: str, config: TableConfig, options: StorageOptions | None) -> _Source:
    try:
        import hudi
    except ImportError as exc:
        raise MissingDependencyError(
            f"{source} is a Hudi table-version 8 table: migrating it needs hudi-rs "
            f"(pip install 'fedcore[migrate]'): {exc}"
        ) from None
    if not source.startswith("file://"):
        raise UnsupportedTableError(
            f"{source}: table-version 8 sources are read from local files (copy the table first)"
        )
    table = hudi.HudiTableBuilder.from_base_uri(source.removeprefix("file://")).build()
    if config.table_type != P.TABLE_TYPE_COW:
        raise UnsupportedTableError(f"{source}: table-version 8 merge-on-read tables are not migrated yet")
    fs = filesystem_for(source, options)
    units = []
    for file_slice in table.get_file_slices():
        if file_slice.has_log_files():
            raise UnsupportedTableError(f"{source}: a copy-on-write file slice with log files")
        units.append(
            _Unit(
                file_slice.partition_path,
                file_slice.base_file_name,
                fs,
                f"{source}/{file_slice.base_file_relative_path()}",
                int(file_slice.base_file_size),
                int(file_slice.num_records),
            )
        )
    timeline = table.get_timeline()
    commits = timeline.get_completed_commits()
    instant = commits[-1].timestamp if commits else None
    return _of_config(
        "Hudi table-version 8 table",
        config,
        pa.schema(table.get_schema()),
        str(instant) if instant is not None else None,
        units,
        lambda unit: pa.table({}),  # every unit is a copy
    )


def _parquet_source(
    source: str,
    fs: AbstractFileSystem,
    record_key_fields: list[str],
    partition_fields: Sequence[str] | None,
    precombine_field: str | None,
) -> _Source:
    root = fs._strip_protocol(source).rstrip("/")
    try:
        dataset = ds.dataset(root, format="parquet", partitioning="hive", filesystem=fs)
    except (OSError, pa.ArrowException) as exc:
        raise FedError(f"{source}: not a readable Parquet dataset: {exc}") from exc
    schema = dataset.schema
    hive_fields = list(dataset.partitioning.schema.names) if dataset.partitioning is not None else []
    fields = list(partition_fields) if partition_fields else hive_fields
    for column in [*record_key_fields, *fields, *([precombine_field] if precombine_field else [])]:
        if column not in schema.names:
            raise ConfigError(column, f"is not a column of {source} ({', '.join(schema.names)})")
    units = []
    for fragment in dataset.get_fragments():
        relative = str(fragment.path)[len(root) + 1 :]
        partition = relative.rpartition("/")[0]
        units.append(_Unit(partition, None, fs, str(fragment.path), 0, what=fragment))

    def read(unit: _Unit) -> pa.Table:
        table: pa.Table = unit.what.to_table(schema=schema)
        return table

    name = root.rsplit("/", 1)[-1]
    return _Source(
        kind="Parquet dataset",
        name=name if name.isidentifier() else "migrated",
        record_key_fields=record_key_fields,
        partition_fields=fields,
        precombine_field=precombine_field,
        hive_style=True,
        database=None,
        carried={},
        schema=schema,
        instant=None,
        units=units,
        read=read,
    )
