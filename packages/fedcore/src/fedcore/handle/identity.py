"""A table's identity: which table a ``.hoodie/`` folder is, and whether it is a copy.

fed draws a UUID for every table it creates (``properties.TABLE_ID``) and records the table
path beside it (``properties.TABLE_ID_PATH``). Two things rest on it:

- **Whose files are whose.** A strategy that places files by table puts them in a folder
  named ``<table name>-<table id>`` (``properties.STORAGE_TABLE_FOLDER``), so two tables never
  share a folder, even of one name on one storage path.
- **Copies.** A table copied with its ``.hoodie/`` folder (``cp -r``, ``aws s3 sync``) holds
  the same id and, on a federated layout, the very same data files: its storage keys are the
  source's. A write or a cleanup through the copy would put files among the source's and
  delete files the source still reads. So a table opened at a path other than the one its
  identity records is checked: if the recorded path still holds a table of the same id, this
  one is a copy, and fed refuses to write or delete through it (``CopiedTableError``); if not,
  the table was moved, and the next write records its new path. A copy reads as its source
  did when it was copied, until the source's cleans delete files it references.

What it cannot tell: a table copied before it had an id (each side's first write draws its
own), or a copy and its source both moved before either wrote. Such tables share a folder;
whose file is whose is then told by their timelines (``services.history``), and ``fed
upgrade`` on every federated table made before gives each its id now.

A Hive-layout table keeps its data under its table path, so a copy of it is a table of its
own: only layouts whose data lives elsewhere are checked.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping

from fedcore import properties as P
from fedcore.exceptions import CopiedTableError, FedError, TableNotFoundError
from fedcore.handle.config import TableConfig, properties_path
from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.io.uris import normalize_uri, protocol_of
from fedcore.storage.base import StorageStrategy

#: Schemes that name one store: Hadoop's connectors spell S3 three ways.
_SAME_STORE = {"s3a": "s3", "s3n": "s3"}


def new_identity(table_path: str) -> dict[str, str]:
    """A new table's identity keys: a fresh id, and the path it belongs to."""
    return {P.TABLE_ID: str(uuid.uuid4()), P.TABLE_ID_PATH: table_path}


def folder_for(name: str, table_id: str) -> str:
    """The folder a new table's files go in under each storage location. The '-' cannot occur
    in a table name, so no table created before (whose folder is its bare name) can hold it."""
    return f"{name}-{table_id}"


def same_location(first: str, second: str) -> bool:
    """Whether two table paths name one place: ``s3a://b/t`` is ``s3://b/t``; local paths are
    one if their ``hoodie.properties`` is one file (links, bind mounts and case-insensitive
    disks resolved)."""
    first, second = _store_uri(first), _store_uri(second)
    if first == second:
        return True
    if protocol_of(first) == protocol_of(second) == "file":
        paths = [properties_path(uri).removeprefix("file://") for uri in (first, second)]
        try:
            return os.path.samefile(*paths)
        except OSError:
            return False
    return False


def _store_uri(uri: str) -> str:
    """``uri`` normalised, in the scheme fed's filesystems use for its store."""
    normal = normalize_uri(uri)
    scheme, _, rest = normal.partition("://")
    return f"{_SAME_STORE.get(scheme, scheme)}://{rest}"


def copied_from(
    table_path: str,
    config: Mapping[str, str],
    strategy: StorageStrategy,
    storage_options: StorageOptions | None,
) -> str | None:
    """The path of the table this one is a copy of (see the module docstring), or None: it is
    the table its identity records, or was moved there, or keeps its data under its own path."""
    recorded = config.get(P.TABLE_ID_PATH)
    if strategy.data_under_table_path or not recorded or same_location(recorded, table_path):
        return None
    source_path = _store_uri(recorded)
    try:
        source = TableConfig.load(filesystem_for(source_path, storage_options), source_path)
    except TableNotFoundError:
        return None  # moved: nothing is left at the old path
    except FedError as exc:
        raise CopiedTableError(
            f"the table at {table_path} was made at {recorded} ({P.TABLE_ID_PATH}), which cannot be "
            f"read from here ({exc}), so fed cannot tell whether this table is a copy of one still "
            f"there (whose data files it would share) or was moved: if it was moved, set "
            f"{P.TABLE_ID_PATH}={table_path} in {properties_path(table_path)}"
        ) from exc
    return recorded if source.get(P.TABLE_ID) == config.get(P.TABLE_ID) else None


def check_not_a_copy(
    table_path: str,
    config: Mapping[str, str],
    strategy: StorageStrategy,
    storage_options: StorageOptions | None,
) -> None:
    """Refuse a write or a cleanup through a copy of another table (``CopiedTableError``)."""
    source = copied_from(table_path, config, strategy, storage_options)
    if source is None:
        return
    raise CopiedTableError(
        f"the table at {table_path} is a copy of the table at {source} (table id "
        f"{config.get(P.TABLE_ID)}): its data files are that table's, so fed neither writes nor "
        f"deletes files through it. Read it as it is, write to {source}, or make it a table of its "
        f"own, with files of its own: `fed migrate {table_path} NEW_TABLE_PATH {_layout_arguments(strategy)}`"
    )


def _layout_arguments(strategy: StorageStrategy) -> str:
    """``fed migrate``'s arguments for a new layout of the strategy's kind."""
    arguments = [f"--storage-strategy {strategy.display_name()}"]
    if P.STORAGE_PARTITION_LOCATIONS in strategy.accepted_keys:
        arguments.append(f"-p {P.STORAGE_PARTITION_LOCATIONS}=NEW_LOCATIONS_JSON")
    elif P.STORAGE_PATH in strategy.accepted_keys:
        arguments.append("--storage-path NEW_STORAGE_PATH")
    return " ".join(arguments)


def recorded_identity(table_path: str, config: TableConfig, strategy: StorageStrategy) -> dict[str, str]:
    """The identity keys a table's config lacks or holds stale, as they should be stored:
    a federated table created before fed drew ids gets one; a moved table (``copied_from``
    found no source) gets its new path. Empty: nothing to record."""
    if strategy.data_under_table_path:
        return {}
    if P.TABLE_ID not in config:
        return new_identity(table_path)
    recorded = config.get(P.TABLE_ID_PATH)
    if not recorded or not same_location(recorded, table_path):
        return {P.TABLE_ID_PATH: table_path}
    return {}
