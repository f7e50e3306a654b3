"""The federated filesystem: logical table paths in, physical storage paths out.

Writers, readers and engines address a table by logical paths
(``country=us/<fileId>_<token>_<instant>.parquet`` relative to the table path, or
the same under the table path URI), exactly as in a Hive-layout table. This
filesystem computes each physical path on the fly through the table's storage
strategy and delegates to the filesystem of the root it falls under; nothing
physical is ever stored, so a table's files can be spread over many prefixes,
buckets or clouds without any catalogue of locations to keep in sync.

Routing, by the last path segment:
- ``.hoodie/...`` and ``.hoodie_partition_metadata``: the table path, as is;
- a Hudi data file name: the location the strategy gives its file id;
- anything else (folders): the table path. Writing any other file is refused,
  so the table path keeps only metadata.

Listing data folders is refused unless the strategy keeps data under the table
path: a partition's files are spread over prefixes, so a folder listing would
silently miss them. Files are found through the table's metadata instead.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.exceptions import (
    DataFileMissingError,
    InvalidFileNameError,
    InvalidPathError,
    ListingNotSupportedError,
)
from fedcore.files.filenames import BASE_FILE_RE, LOG_FILE_RE, is_partition_metadata
from fedcore.io.atomic import create_exclusive
from fedcore.io.errors import storage_errors, undo_hint
from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.io.uris import check_relative_path, is_within, normalize_uri
from fedcore.storage.base import StorageStrategy

_COPY_BUFFER = 8 * 2**20
_SAFE_FOLDER_CACHE = 100_000
_HOODIE_PREFIX = P.HOODIE_FOLDER + "/"


class Target(NamedTuple):
    """Where a logical path lives: the filesystem to call and the physical path to pass it."""

    fs: AbstractFileSystem
    path: str
    is_data: bool


def _check_name(name: str) -> None:
    if name in (".", "..") or "\\" in name or not name.isprintable():
        check_relative_path(name)  # raises, with the explanation


def _copy_across(
    source_fs: AbstractFileSystem,
    source_path: str,
    target_fs: AbstractFileSystem,
    target_path: str,
    *,
    tail: int = 0,
    **kwargs: Any,
) -> bytes | None:
    """One object copied: server-side where one filesystem serves both (S3 CopyObject: fsspec
    shares the instance between one endpoint's same options; ``kwargs`` go to it), returning
    None, no byte having passed through here; else streamed through this process, returning
    its last ``tail`` bytes."""
    if source_fs is target_fs:
        target_fs.cp_file(source_path, target_path, **kwargs)
        return None
    kept = b""
    with source_fs.open(source_path, "rb") as reader, target_fs.open(target_path, "wb") as writer:
        while chunk := reader.read(_COPY_BUFFER):
            writer.write(chunk)
            kept = (kept + chunk[-tail:])[-tail:] if tail else b""
    return kept


class FederatedFileSystem(AbstractFileSystem):  # type: ignore[misc]  # fsspec ships no types
    protocol = "fed"
    root_marker = ""
    cachable = False  # bound to one table; fsspec's instance cache would share it by repr

    def __init__(
        self,
        table_path: str,
        strategy: StorageStrategy,
        storage_options: StorageOptions | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_path = normalize_uri(table_path)
        if strategy.table_path != self.table_path:
            raise InvalidPathError(
                f"strategy was built for {strategy.table_path}, not for the table at {self.table_path}"
            )
        self.strategy = strategy
        self._place = strategy.place
        self._options = storage_options
        #: The raw table-path filesystem: timeline, table config and metadata go through it.
        self.table_fs = filesystem_for(self.table_path, storage_options)
        self._table_prefix = self.table_path + "/"
        self._table_stripped = self.table_fs._strip_protocol(self.table_path)
        self._stripped_prefix = self._table_stripped + "/"
        self._root_fs: dict[str, AbstractFileSystem] = {}
        self._safe_folders: set[str] = set()

    # --- path conversion ----------------------------------------------------------

    def to_physical(self, path: str) -> str:
        """The physical URI of a logical path (relative to the table, or under its URI)."""
        return self._locate(path)[1]

    def to_logical(self, physical_path: str) -> str:
        """The table-relative logical path of a physical URI; the inverse of ``to_physical``."""
        physical = normalize_uri(physical_path)
        if is_within(physical, self.table_path):
            return physical[len(self._table_prefix) :]
        partition, name = self.strategy.split_physical(physical)
        return f"{partition}/{name}" if partition else name

    def filesystem_for_root(self, root: str) -> AbstractFileSystem:
        """The underlying filesystem of a storage root, created on first use with its options."""
        fs = self._root_fs.get(root)
        if fs is None:
            fs = self._root_fs[root] = filesystem_for(root, self._options)
        return fs

    def relative(self, path: str) -> str:
        """Normalise any accepted spelling of a logical path to its table-relative form."""
        rel = self._strip_table(path)
        folder, _, name = rel.rpartition("/")
        if folder not in self._safe_folders:
            self._check_folder(folder)
        _check_name(name)
        return rel

    def _strip_table(self, path: str) -> str:
        if path.startswith(self._table_prefix):
            return path[len(self._table_prefix) :].rstrip("/")
        if "://" not in path and not path.startswith("/"):
            return path.rstrip("/")
        if path.startswith("fed://"):
            return path[6:].rstrip("/")
        if path.rstrip("/") in (self.table_path, self._table_stripped):
            return ""
        if path.startswith("/") and path.startswith(self._stripped_prefix):
            return path[len(self._stripped_prefix) :].rstrip("/")  # a local path without its scheme
        raise InvalidPathError(f"{path!r} is outside the table at {self.table_path}")

    def _check_folder(self, folder: str) -> None:
        # A table has far fewer folders (partitions) than files: each is checked once.
        if folder:
            check_relative_path(folder)
        if len(self._safe_folders) >= _SAFE_FOLDER_CACHE:
            self._safe_folders.clear()
        self._safe_folders.add(folder)

    def _locate(self, path: str, writing: bool = False) -> tuple[str | None, str]:
        """``(storage root, physical path)``; the root is None for the table path itself.

        The hot path of every file operation, so written flat: one split, one
        regex, one strategy call. A data file name needs no further checks, as
        its pattern admits no separators.
        """
        if "://" in path or path.startswith("/"):
            rel = self._strip_table(path)
        else:
            rel = path.rstrip("/")  # already relative: the common case, no call
        folder, _, name = rel.rpartition("/")
        if folder not in self._safe_folders:
            self._check_folder(folder)
        # filenames.data_file_id, inlined: a call is a twentieth of the conversion budget. Not the
        # table's LogFileNaming: every Hudi version puts the file id at the same place, and a
        # location that depended on the version would move every data file on an upgrade.
        match = (LOG_FILE_RE if name.startswith(".") else BASE_FILE_RE).fullmatch(name)
        if match is not None and not rel.startswith(_HOODIE_PREFIX):
            return self._place(folder, match[1], rel)
        _check_name(name)
        if writing and not (
            rel.startswith(_HOODIE_PREFIX) or rel == P.HOODIE_FOLDER or is_partition_metadata(name)
        ):
            raise InvalidFileNameError(
                f"{rel!r}: outside {P.HOODIE_FOLDER}/ a table holds only data files "
                f"and {P.PARTITION_METADATA_FILE}"
            )
        return None, self._table_prefix + rel if rel else self.table_path

    def _resolve(self, path: str, writing: bool = False) -> Target:
        root, physical = self._locate(path, writing)
        if root is None:
            return Target(self.table_fs, physical, False)
        return Target(self.filesystem_for_root(root), physical, True)

    def errors(self, path: str, target: Target | None = None) -> contextlib.AbstractContextManager[None]:
        """Storage errors on ``path`` as typed ``StorageError``s naming it; a data file that is
        not there is a ``DataFileMissingError`` that says what a user can do about it."""
        target = self._resolve(path) if target is None else target
        if not target.is_data:
            return storage_errors(path, target.path)
        return storage_errors(
            f"data file {path}",
            target.path,
            missing=DataFileMissingError,
            hint=_missing_data_hint(path),
            data=True,
        )

    def _listable(self, rel: str) -> bool:
        return self.strategy.data_under_table_path or rel == P.HOODIE_FOLDER or rel.startswith(_HOODIE_PREFIX)

    def _logical_name(self, stripped: str) -> str:
        if stripped == self._table_stripped:
            return ""
        if stripped.startswith(self._stripped_prefix):
            return stripped[len(self._stripped_prefix) :]
        raise InvalidPathError(f"{stripped!r} is not under the table path {self.table_path}")

    # --- fsspec API -----------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        target = self._resolve(path, writing=any(flag in mode for flag in "wxa+"))
        with self.errors(path, target):
            return target.fs.open(
                target.path,
                mode,
                block_size=block_size,
                cache_options=cache_options,
                autocommit=autocommit,
                **kwargs,
            )

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        rel = self.relative(path)
        return self._info(self._resolve(rel), rel, **kwargs)

    def _info(self, target: Target, rel: str, **kwargs: Any) -> dict[str, Any]:
        with self.errors(rel, target):
            return {**target.fs.info(target.path, **kwargs), "name": rel}

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        rel = self.relative(path)
        target = self._resolve(rel)
        if target.is_data:
            entries = [self._info(target, rel)]
        elif not self._listable(rel):
            raise ListingNotSupportedError(
                f"cannot list {rel or 'the table root'!r}: with the {self.strategy.display_name()} "
                "layout a partition's data files are spread over storage prefixes; "
                "find them through the table's metadata"
            )
        else:
            with self.errors(rel, target):
                listed = target.fs.ls(target.path, detail=True, **kwargs)
            entries = [{**entry, "name": self._logical_name(entry["name"])} for entry in listed]
        return entries if detail else [entry["name"] for entry in entries]

    def exists(self, path: str, **kwargs: Any) -> bool:
        target = self._resolve(path)
        with self.errors(path, target):
            return bool(target.fs.exists(target.path, **kwargs))

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        target = self._resolve(path)
        with self.errors(path, target):
            return bytes(target.fs.cat_file(target.path, start=start, end=end, **kwargs))

    def pipe_file(
        self, path: str, value: bytes, mode: str = "overwrite", *, owned: bool = False, **kwargs: Any
    ) -> None:
        """Write a whole file; ``mode="create"`` is atomic and exclusive, and ``owned`` says
        only this caller writes ``path`` (see ``io.atomic.create_exclusive``)."""
        if owned and mode != "create":
            raise ValueError("owned applies to mode='create' only")
        target = self._resolve(path, writing=True)
        with self.errors(path, target):
            if mode == "create":
                create_exclusive(target.fs, target.path, value, owned=owned)
            else:
                target.fs.pipe_file(target.path, value, **kwargs)

    def put_file(self, lpath: str, rpath: str, **kwargs: Any) -> None:
        target = self._resolve(rpath, writing=True)
        with self.errors(rpath, target):
            target.fs.put_file(lpath, target.path, **kwargs)

    def get_file(self, rpath: str, lpath: str, **kwargs: Any) -> None:
        target = self._resolve(rpath)
        with self.errors(rpath, target):
            target.fs.get_file(target.path, lpath, **kwargs)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        source, destination = self._resolve(path1), self._resolve(path2, writing=True)
        _copy_across(source.fs, source.path, destination.fs, destination.path, **kwargs)

    def copy_in(
        self, source_fs: AbstractFileSystem, source_path: str, path: str, *, tail: int = 0
    ) -> bytes | None:
        """Copy an object of another filesystem to the logical ``path`` (``_copy_across``),
        returning a streamed copy's last ``tail`` bytes (what its caller would otherwise fetch
        again, such as a Parquet footer), None for a server-side copy."""
        destination = self._resolve(path, writing=True)
        with self.errors(path, destination):
            return _copy_across(source_fs, source_path, destination.fs, destination.path, tail=tail)

    def resolve(self, path: str) -> Target:
        """The filesystem serving a logical path, and the physical path to pass it."""
        return self._resolve(path)

    def rm_file(self, path: str) -> None:
        target = self._resolve(path)
        with self.errors(path, target):
            target.fs.rm_file(target.path)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(self, path: str | list[str], recursive: bool = False, maxdepth: int | None = None) -> None:
        for one in [path] if isinstance(path, str) else path:
            rel = self.relative(one)
            target = self._resolve(rel)
            if recursive and not target.is_data and not self._listable(rel):
                raise ListingNotSupportedError(
                    f"cannot delete {rel or 'the table root'!r} recursively: its data files are "
                    "spread over storage prefixes and are deleted through the table's metadata"
                )
            with self.errors(rel, target):
                target.fs.rm(target.path, recursive=recursive, maxdepth=maxdepth)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        target = self._resolve(path)
        target.fs.mkdir(target.path, create_parents=create_parents, **kwargs)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        target = self._resolve(path)
        target.fs.makedirs(target.path, exist_ok=exist_ok)

    def rmdir(self, path: str) -> None:
        target = self._resolve(path)
        target.fs.rmdir(target.path)

    def created(self, path: str) -> Any:
        target = self._resolve(path)
        return target.fs.created(target.path)

    def modified(self, path: str) -> Any:
        target = self._resolve(path)
        return target.fs.modified(target.path)

    def sign(self, path: str, expiration: int = 100, **kwargs: Any) -> str:
        target = self._resolve(path)
        return str(target.fs.sign(target.path, expiration=expiration, **kwargs))


def _missing_data_hint(path: str) -> str:
    match = BASE_FILE_RE.fullmatch(path.rpartition("/")[2])
    written_by = f" (written by instant {match[3]})" if match is not None else ""
    return (
        f"the table references it{written_by} but it is not in storage: it was deleted or moved "
        f"outside fedcore; {undo_hint(path)}"
    )
