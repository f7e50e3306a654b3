"""What storage holds for a table: every data file under its strategy's roots, listed.

The one place fedcore lists data folders: reads and writes never do (the metadata
table says which files exist), but the repair tool and ``fed verify`` must see
storage as it is. Each root is listed one level deep, and every folder found
there is listed recursively in its own thread: with a hashed layout those are
the hash prefixes, which an object store serves from different partitions, so
the listing runs as wide as the layout is spread.

A listed object counts as one of this table's data files only if the strategy,
asked to place the file its name describes, gives back the very path listed
(``StorageStrategy.split_physical``): other tables sharing a storage path (each in a
folder of its own), foreign objects and partition metadata are passed by, whatever the
strategy. Whether a data file in the table's own folders is the table's is for its
timeline to say (``History.judge``): tables created before each got a folder of their own
may share one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from fedcore import properties as P
from fedcore.exceptions import FedError, InvalidPathError
from fedcore.files.filenames import file_instant
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import read_object
from fedcore.log.blocks import read_blocks

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

    from fedcore.handle import TableHandle

#: Folders listed at once: listing is latency-bound, not CPU-bound.
LIST_THREADS: Final = 16


@dataclass(frozen=True)
class StoredFile:
    partition: str
    name: str
    size: int
    #: Last modification, seconds since the epoch (0 when the store gives none).
    modified: float
    #: Physical URI.
    path: str


@dataclass
class Inventory:
    """This table's data files in storage, by (partition, file name)."""

    files: dict[tuple[str, str], StoredFile] = field(default_factory=dict)
    #: Objects under the roots that are not this table's data files.
    foreign: int = 0
    #: Folders listed.
    folders: int = 0
    seconds: float = 0.0

    @property
    def files_per_second(self) -> float:
        return len(self.files) / self.seconds if self.seconds > 0 else 0.0


def take_inventory(table: TableHandle, progress: Callable[[int], None] | None = None) -> Inventory:
    """List every data file of ``table`` in storage; ``progress`` gets the count of objects
    each listed folder added."""
    start = time.monotonic()
    inventory = Inventory()
    strategy = table.strategy
    tasks: list[tuple[str, AbstractFileSystem, str]] = []  # (root, fs, folder to list)
    for root in strategy.roots():
        fs = table.fs.filesystem_for_root(root)
        fs.invalidate_cache()
        stripped = fs._strip_protocol(root).rstrip("/")
        try:
            with storage_errors(root):
                entries = fs.ls(root, detail=True, refresh=True)
        except FileNotFoundError:
            continue
        for entry in entries:
            name = str(entry["name"]).rstrip("/")
            if name.rpartition("/")[2] == P.HOODIE_FOLDER and strategy.data_under_table_path:
                continue
            if entry.get("type") == "directory":
                tasks.append((root, fs, name))
            else:
                _add(inventory, strategy.split_physical, root, stripped, name, entry)
    if progress is not None and inventory.files:
        progress(len(inventory.files))

    def listed(task: tuple[str, AbstractFileSystem, str]) -> tuple[str, str, dict[str, Any]]:
        root, fs, folder = task
        with storage_errors(folder):
            found: dict[str, Any] = fs.find(folder, detail=True)
        return root, fs._strip_protocol(root).rstrip("/"), found

    with ThreadPoolExecutor(LIST_THREADS) as pool:
        for root, stripped, found in pool.map(listed, tasks):
            inventory.folders += 1
            for name, entry in found.items():
                _add(inventory, strategy.split_physical, root, stripped, str(name), entry)
            if progress is not None:
                progress(len(found))
    inventory.seconds = time.monotonic() - start
    return inventory


def _add(
    inventory: Inventory,
    split: Callable[[str], tuple[str, str]],
    root: str,
    stripped_root: str,
    listed: str,
    entry: dict[str, Any],
) -> None:
    if entry.get("type") == "directory":
        return
    physical = root + listed[len(stripped_root) :]
    try:
        partition, name = split(physical)
    except InvalidPathError:
        inventory.foreign += 1
        return
    inventory.files[(partition, name)] = StoredFile(
        partition, name, int(entry.get("size") or 0), _modified(entry), physical
    )


def _modified(entry: dict[str, Any]) -> float:
    """Seconds since the epoch from a listing entry (local ``mtime``, S3 ``LastModified``)."""
    value = entry.get("mtime", entry.get("LastModified"))
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return 0.0


def writer_instant(table: TableHandle, stored: StoredFile) -> str | None:
    """The instant that wrote a stored data file. A base file's name carries it; a log file's
    name carries only the slice it was written onto, so its blocks are read (a file nothing
    references is rare: an orphan, a write's in flight, another table's). None when they do
    not decode (a write torn mid-file): it is judged by its slice's instant then."""
    if not stored.name.startswith("."):
        return file_instant(stored.name)
    logical = f"{stored.partition}/{stored.name}" if stored.partition else stored.name
    try:
        data = read_object(table.fs, logical)
    except FileNotFoundError:
        return None  # gone since the listing
    try:  # a storage fault is raised, typed: a file is never judged by a read that failed
        blocks = read_blocks(data, logical)
    except FedError:
        return None
    return next((block.instant for block in blocks if block.instant), None)
