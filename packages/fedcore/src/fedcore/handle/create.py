"""A new table: its config and persisted storage strategy written, as ``create_table`` asks.

At the handle level so that what opens tables below ``fedcore.table`` (a migration, which
creates its target) creates them the one way ``fedcore.create_table`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.exceptions import (
    InvalidPathError,
    InvalidTableConfigError,
    MetadataTableRequiredError,
    StorageError,
    TableAlreadyExistsError,
)
from fedcore.handle import TableHandle, persisted_storage_properties, storage_checksum
from fedcore.handle.config import TableConfig, check_table_name
from fedcore.handle.identity import folder_for, new_identity
from fedcore.io.atomic import check_commits_supported, check_conditional_create
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import StorageOptions, filesystem_for, remove_tree
from fedcore.io.uris import normalize_uri
from fedcore.keygen.partitioning import VALUE_ENCODING_KEY_GENERATORS, PartitionScheme, fed_makes_paths
from fedcore.schema.avro import to_avro_json
from fedcore.schema.meta import META_COLUMNS
from fedcore.storage.loader import load_storage_strategy, named_strategy_class


def create_handle(
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
    copies_paths: bool = False,
) -> TableHandle:
    """Create a table (``fedcore.create_table``'s work) and persist its storage strategy; fails
    if a table is already there (``TableAlreadyExistsError``), or if an earlier table's timeline
    is, unless ``start_over`` (which deletes that timeline and metadata first).

    ``table_type``: ``COPY_ON_WRITE`` (the default, as in Hudi) or ``MERGE_ON_READ`` (upserts
    and deletes append log files; ``hoodie.table.type`` in ``properties`` says the same).
    ``schema``: the table's columns before its first write (Hudi's ``hoodie.table.create.schema``,
    as a SQL ``CREATE TABLE`` gives them): reads of the empty table return them, and the first
    write evolves them like any later one. ``copies_paths``: the table is made of files copied
    with their partition paths (a migration), so its key generator may be one whose paths fed
    does not make (such a table is read and never written: ``WriteJob`` refuses it)."""
    table_path = normalize_uri(path)
    check_commits_supported(table_path)
    check_table_name(name)  # before it names a folder
    requested = {str(k): str(v) for k, v in (properties or {}).items()}
    if schema is not None:
        data = pa.schema([f for f in schema if f.name not in META_COLUMNS])
        missing = [c for c in [*record_key_fields, *partition_fields] if c not in data.names]
        if missing:
            raise InvalidTableConfigError(
                P.CREATE_SCHEMA, f"has no column {missing[0]!r} (a key or partition field)"
            )
        requested[P.CREATE_SCHEMA] = to_avro_json(data, name)
    if table_type is not None:
        given = requested.get(P.TABLE_TYPE, table_type).strip().upper()
        if table_type not in P.TABLE_TYPES or given.removeprefix(P.FEDERATED_TABLE_TYPE_PREFIX) != table_type:
            raise InvalidTableConfigError(
                P.TABLE_TYPE,
                f"table_type={table_type!r} with {P.TABLE_TYPE}={given!r}: one of "
                f"{', '.join(P.TABLE_TYPES)}, given once",
            )
        requested[P.TABLE_TYPE] = table_type
    # Before the strategy is built: a misspelt storage key must be named as such, not
    # surface as a missing one (or, worse, leave the default layout chosen silently).
    strategy_class = named_strategy_class(requested)
    P.check_table_keys(requested, strategy_class.accepted_keys)
    identity = new_identity(table_path)
    if P.STORAGE_TABLE_FOLDER in strategy_class.accepted_keys:  # a folder of its own, by its id
        requested[P.STORAGE_TABLE_FOLDER] = folder_for(name, identity[P.TABLE_ID])
    strategy = load_storage_strategy(table_path, {**requested, P.TABLE_NAME: name})
    for root in strategy.roots():
        check_commits_supported(root, "a table's data")
    wanted = P.METADATA_ENABLE.of(requested)
    if not strategy.data_under_table_path and not wanted:
        raise MetadataTableRequiredError(
            P.METADATA_ENABLE,
            f"the {strategy.display_name()} layout spreads data files over storage prefixes that "
            "cannot be listed; the metadata table is the only record of them and cannot be disabled",
        )
    other = {
        k: v for k, v in requested.items() if k not in P.STORAGE_KEYS and k not in strategy.accepted_keys
    }
    if P.TABLE_TYPE in other:  # stored as federated below exactly when the layout is
        other[P.TABLE_TYPE] = other[P.TABLE_TYPE].strip().upper().removeprefix(P.FEDERATED_TABLE_TYPE_PREFIX)
    storage = persisted_storage_properties(strategy, requested)
    config = TableConfig.create(
        name=name,
        record_key_fields=record_key_fields,
        partition_fields=partition_fields,
        precombine_field=precombine_field,
        hive_style_partitioning=hive_style_partitioning,
        database=database,
        properties={**other, **identity, **storage, P.STORAGE_CHECKSUM: storage_checksum(storage)},
        federated=not strategy.data_under_table_path,
    )
    P.check_options(config)
    check_file_shape(config, copies_paths)
    fs = filesystem_for(table_path, storage_options)
    _prepare_new_table_path(fs, table_path, start_over)
    check_conditional_create(fs, f"{table_path}/{P.HOODIE_FOLDER}")
    config.save_new(fs, table_path)
    handle = TableHandle(table_path, config, strategy, storage_options)
    if handle.layout.timeline_layout == 2:
        # Hudi 1.x makes its timeline and history folders with the table, and its readers list
        # them (a store without folders makes nothing here).
        timeline = handle.layout.instants.folder(table_path)
        with storage_errors(timeline):
            fs.makedirs(f"{timeline}/{P.DEFAULT_HISTORY_FOLDER}", exist_ok=True)
    index = handle.metadata_table_or_none()
    if index is not None:
        index.point_to_no_manifest()
    return handle


def check_file_shape(config: TableConfig, copies_paths: bool = False) -> None:
    """Refuse, at creation, what a table without meta fields or without partition columns in
    its files could not be written and read back exactly by (Hudi refuses the first too):
    virtual keys on a merge-on-read table (Hudi's readers merge by meta fields), computed by
    a key generator other than Hudi's simple, complex or non-partitioned ones, or from a
    column its files leave out; partition paths fed does not make (a timestamp-based, custom
    or user's key generator: fed spells the columns' values; unless ``copies_paths``: a migration
    copies files with their paths); partition columns left out of
    files whose paths do not spell their values, or that the table orders records by."""
    fields = set(config.partition_fields)
    dropped = P.DROP_PARTITION_COLUMNS.of(config)
    generator = P.key_generator(config)
    if not P.POPULATE_META_FIELDS.of(config):
        if generator not in VALUE_ENCODING_KEY_GENERATORS:
            raise InvalidTableConfigError(
                str(P.POPULATE_META_FIELDS),
                f"false needs a simple, complex or non-partitioned key generator (Hudi's rule); "
                f"the table's is {generator or 'not set'}",
            )
        if config.merge_on_read:
            raise InvalidTableConfigError(
                str(P.POPULATE_META_FIELDS),
                "false is for copy-on-write tables: Apache Hudi's merge-on-read readers merge log "
                "records by their meta fields (1.0 reads _hoodie_record_key; 0.15 only a text key)",
            )
        if dropped and fields & set(config.record_key_fields):
            raise InvalidTableConfigError(
                str(P.DROP_PARTITION_COLUMNS),
                "true leaves a record key field out of the files, from which a table without meta "
                "fields computes its keys",
            )
    if not copies_paths and not fed_makes_paths(config):
        raise InvalidTableConfigError(
            P.KEY_GENERATOR_CLASS,
            f"{generator}: fed writes partition paths that spell the columns' values (Hudi's simple, "
            "complex and non-partitioned key generators); a table partitioned another way is written "
            "with Apache Hudi",
        )
    if not dropped:
        return
    if not PartitionScheme.from_config(config).encodes_values:
        raise InvalidTableConfigError(
            str(P.DROP_PARTITION_COLUMNS),
            "true needs partition paths that spell the columns' values (a simple or complex key "
            "generator): readers take the values from the paths",
        )
    if config.precombine_field in fields:
        raise InvalidTableConfigError(
            str(P.DROP_PARTITION_COLUMNS),
            f"true would leave the ordering field {config.precombine_field!r} out of the files",
        )


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
    remove_tree(fs, folder)
