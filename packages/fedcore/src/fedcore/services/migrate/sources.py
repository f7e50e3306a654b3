"""What a migration copies: a source's config and the files of its latest snapshot, as units.

The planning half of ``fed migrate`` (``fedcore.services.migrate`` writes the units): each
kind of source (a Hudi table fedcore reads, a plain Hive-layout Parquet dataset) becomes a
``Source``, whose units are files to copy as
they are or slices and files to rewrite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.exceptions import (
    ConfigError,
    FedError,
    TableNotFoundError,
    UnsupportedTableError,
)
from fedcore.files.file_slice import VIRTUAL_META_COLUMNS, FileSlice
from fedcore.handle import TableHandle
from fedcore.handle.config import TableConfig
from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.log.merge import merge_rules
from fedcore.read.planner import ScanPlanner
from fedcore.schema.meta import META_COLUMNS

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


@dataclass(frozen=True)
class Unit:
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
    copies: tuple[Unit, ...] = ()


@dataclass
class Source:
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
    units: list[Unit]
    read: Callable[[Unit], pa.Table]


def open_source(
    source: str,
    options: StorageOptions | None,
    record_key_fields: Sequence[str] | None,
    partition_fields: Sequence[str] | None,
    precombine_field: str | None,
) -> Source:
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
        # Any table fedcore reads (versions 6, 8 and 9; what it does not read is refused
        # on opening, by name).
        return _fedcore_source(TableHandle.open(source, options))
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
        if generator_type not in P.KEY_GENERATOR_TYPES:
            raise UnsupportedTableError(f"key generator type {generator_type} has no Hudi 0.x class")
        carried[P.KEY_GENERATOR_CLASS] = P.KEY_GENERATOR_TYPES[generator_type]
    return carried


def _fedcore_source(table: TableHandle) -> Source:
    planner = ScanPlanner.open(table)
    plan = planner.plan()
    columns = [c for c in planner.column_names() if c not in META_COLUMNS and c not in VIRTUAL_META_COLUMNS]
    schema = planner.schema(columns) if columns else pa.schema([])
    # Files that already hold every column the target's files hold are copied as they are.
    copyable = planner.meta_fields and not P.DROP_PARTITION_COLUMNS.of(table.config)
    # A merge-on-read target takes a slice's log files as they are where every block in them
    # is of a committed write: fed's (one write per log file, a failed write's deleted by its
    # rollback), not Hudi's (whose log files may hold blocks of writes that failed); and
    # where a log file's name says its slice (up to version 6): a Hudi 1.x name carries its
    # delta commit, whose completion time (which places the file) the target's timeline lacks.
    logs_copyable = (
        copyable
        and table.metadata_table_or_none() is not None
        and not table.layout.log_files.names_delta_commit
    )
    records = _records_by_file(table, plan.slices)
    units = []
    for file_slice in plan.slices:
        base = None
        if copyable and file_slice.base_file_name is not None:
            target = table.fs.resolve(file_slice.path)
            base = Unit(
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
        copies: tuple[Unit, ...] = ()
        if logs_copyable and (base is not None or file_slice.base_file_name is None):
            copies = (*([base] if base is not None else []), *_log_units(table, file_slice))
        size = file_slice.size + sum(size for _, size in file_slice.log_files)
        units.append(
            Unit(file_slice.partition_path, None, table.fs, "", size, what=file_slice, copies=copies)
        )

    def read(unit: Unit) -> pa.Table:
        return plan.reader.read(unit.what, columns, [])

    return _of_config(
        "merge-on-read table" if table.config.merge_on_read else "table",
        table.config,
        schema,
        plan.instant,
        units,
        read,
    )


def _log_units(table: TableHandle, file_slice: FileSlice) -> list[Unit]:
    """Copies of a slice's log files."""
    units = []
    for (name, size), path in zip(file_slice.log_files, file_slice.log_paths, strict=True):
        parsed = table.layout.log_files.parse(name)
        assert parsed is not None, "a slice's log file"
        found = table.fs.resolve(path)
        units.append(
            Unit(
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
    units: list[Unit],
    read: Callable[[Unit], pa.Table],
) -> Source:
    """A Hudi table's source: keys, partitioning and what carries over from its config."""
    carried = _config_of(config)
    precombine_field = config.precombine_field
    if config.get(P.RECORD_MERGE_MODE, "").strip():
        # Hudi 1.x's merge mode, as the version-6 payload that merges records alike (the
        # one Hudi's own upgrade maps to that mode); a mode fedcore cannot merge is refused.
        rules = merge_rules(config.name, config, ())
        ordered = rules.payload == "ordering"
        carried[P.PAYLOAD_CLASS] = P.DEFAULT_HOODIE_PAYLOAD if ordered else P.OVERWRITE_WITH_LATEST_PAYLOAD
        carried[P.RECORD_MERGER_STRATEGY] = P.DEFAULT_RECORD_MERGER_STRATEGY
        precombine_field = rules.ordering_field if ordered else precombine_field
    return Source(
        kind=kind,
        name=config.name,
        record_key_fields=list(config.record_key_fields),
        partition_fields=list(config.partition_fields),
        precombine_field=precombine_field,
        hive_style=config.hive_style_partitioning,
        database=config.database or None,
        carried=carried,
        schema=schema,
        instant=instant,
        units=units,
        read=read,
    )


def _records_by_file(table: TableHandle, slices: Sequence[FileSlice]) -> dict[str, int]:
    """Rows per base file, from the commits that wrote them (0 where archived)."""
    timeline = table.timeline()
    out: dict[str, int] = {}
    for time_ in sorted({s.base_instant for s in slices}):
        instant = timeline.find(time_)
        if instant is None or not instant.is_completed or instant.action not in table.write_actions:
            continue
        for stat in table.commit_metadata(instant).stats:
            out[stat.path.rpartition("/")[2]] = stat.num_writes
    return out


def _parquet_source(
    source: str,
    fs: AbstractFileSystem,
    record_key_fields: list[str],
    partition_fields: Sequence[str] | None,
    precombine_field: str | None,
) -> Source:
    import pyarrow.dataset as ds  # here: it imports pandas, a fifth of a second of fedcore's import

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
        units.append(Unit(partition, None, fs, str(fragment.path), 0, what=fragment))

    def read(unit: Unit) -> pa.Table:
        table: pa.Table = unit.what.to_table(schema=schema)
        return table

    name = root.rsplit("/", 1)[-1]
    return Source(
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
