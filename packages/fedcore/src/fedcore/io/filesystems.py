"""One fsspec filesystem per root, each with the options the caller gave for it.

Storage options are credentials and endpoints, so they come from the caller (or
the environment, which s3fs and botocore read themselves) and are never written
to the table. They are keyed by protocol (``"s3"``: every S3 root) or by URI
prefix (``"s3://lake-eu"``: that bucket only); for a root, the protocol's options
apply first and then each matching URI's, shortest first, so the most specific
wins. Dict values (``client_kwargs``, ``s3_additional_kwargs``) merge one level
deep, so a bucket can add its own KMS key without repeating the endpoint.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import fsspec
from fsspec import AbstractFileSystem
from fsspec.spec import AbstractBufferedFile

from fedcore.exceptions import InvalidStorageConfigError
from fedcore.io.errors import storage_errors
from fedcore.io.uris import has_scheme, is_within, normalize_uri, protocol_of

StorageOptions: TypeAlias = Mapping[str, Mapping[str, Any]]


def options_for(uri: str, storage_options: StorageOptions | None) -> dict[str, Any]:
    if not storage_options:
        return {}
    uri = normalize_uri(uri)
    layers: list[Mapping[str, Any]] = []
    if protocol_of(uri) in storage_options:
        layers.append(storage_options[protocol_of(uri)])
    scoped = sorted(
        ((normalize_uri(key), value) for key, value in storage_options.items() if has_scheme(key)),
        key=lambda item: len(item[0]),
    )
    layers.extend(value for key, value in scoped if is_within(uri, key))
    merged: dict[str, Any] = {}
    for layer in layers:
        for name, value in layer.items():
            if isinstance(value, Mapping) and isinstance(merged.get(name), Mapping):
                merged[name] = {**merged[name], **value}
            else:
                merged[name] = value
    return merged


def filesystem_for(uri: str, storage_options: StorageOptions | None = None) -> AbstractFileSystem:
    """The fsspec filesystem serving ``uri``, built with that root's options."""
    protocol = protocol_of(uri)
    options = options_for(uri, storage_options)
    if protocol == "file":
        # Object stores have no folders; on local disk a file's folders must exist first.
        options.setdefault("auto_mkdir", True)
    try:
        return fsspec.filesystem(protocol, **options)
    except (ImportError, ValueError) as exc:
        raise InvalidStorageConfigError(
            f"storage options for {uri}", f"no usable filesystem for protocol {protocol!r}: {exc}"
        ) from exc


def read_object(fs: AbstractFileSystem, path: str) -> bytes:
    """A whole (small) object in one request.

    s3fs asks for an object's size (a HEAD) before a plain ``cat_file``, to decide
    whether to download it in parallel parts; a ranged GET from byte 0 skips that
    and halves the requests of reading timeline and metadata-table files. An empty
    object cannot satisfy a range, so it is read plainly."""
    with storage_errors(path):
        try:
            return bytes(fs.cat_file(path, start=0))
        except FileNotFoundError:
            raise
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            return bytes(fs.cat_file(path))


def open_sized(fs: AbstractFileSystem, path: str, size: int | None) -> Any:
    """Open for reading a data file whose size the file index already knows.

    An object-store file asks for its details (a HEAD) before its first read:
    for the size, and in s3fs for an ETag to check later reads against, which
    guards against a file rewritten in place. Data files are never rewritten
    (each version has its own name), and the metadata table and commit metadata
    hold their sizes, so a read of N file slices makes N fewer requests. An
    unknown size (None or 0) falls back to asking."""
    if not size:
        return fs.open(path, "rb")
    handle = fs.open(path, "rb", size=size)
    if isinstance(handle, AbstractBufferedFile):
        handle.details = {"name": path, "size": size, "type": "file"}
    return handle


def read_objects(fs: AbstractFileSystem, paths: Sequence[str]) -> list[bytes]:
    """Several whole (small) objects: concurrently on an object store, so reading N
    costs about one round trip rather than N. Raises FileNotFoundError for a missing one."""
    if len(paths) < 2:
        return [read_object(fs, p) for p in paths]
    with storage_errors(paths[0]):
        found = fs.cat_ranges(list(paths), [0] * len(paths), [None] * len(paths), on_error="return")
    results = []
    for path, data in zip(paths, found, strict=True):
        if isinstance(data, FileNotFoundError):
            with storage_errors(path):
                raise data
        results.append(read_object(fs, path) if isinstance(data, BaseException) else bytes(data))
    return results


def remove_files(fs: AbstractFileSystem, paths: Sequence[str]) -> None:
    """Delete files in one bulk request where the store has one; a file already gone is
    no error: table services are idempotent, and two writers' services may race to the
    same deletions."""
    if not paths:
        return
    with storage_errors(paths[0]):
        try:
            fs.rm(list(paths))
            return
        except FileNotFoundError:
            pass  # a local rm of a list stops at the first missing file: go one by one
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                fs.rm_file(path)
