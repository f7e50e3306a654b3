"""Atomic exclusive create: the one primitive every commit in fedcore rests on.

"Exclusive" so that two writers can never both create the same file (table
config, completed instant); "atomic" so that a reader sees the whole file or no
file. S3 gives both with a conditional PUT (``If-None-Match: *``); a local disk
with a fully written temporary file hard-linked into place (``link`` fails if
the name exists and never exposes a partial file). Any other filesystem is
refused rather than written to unsafely.

``replace_atomic`` is the one overwrite: the repair tool switches a metadata-table
manifest to a rebuilt one, and a reader must see the old or the new one whole.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from typing import Final

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from fedcore.exceptions import AtomicWriteUnsupportedError, StorageError
from fedcore.io.errors import storage_errors
from fedcore.io.uris import protocol_of


def create_exclusive(fs: AbstractFileSystem, path: str, data: bytes, *, owned: bool = False) -> None:
    """Write ``data`` to ``path`` if nothing is there; raise FileExistsError if something is
    (a ``StorageFileExistsError``); any other storage failure is a ``StorageError``.

    ``owned``: only this caller ever writes ``path`` (it is named by an instant the caller
    owns), so an object already there holding exactly ``data`` is this call's own write.
    On S3 that happens when a request lands but its response is lost (a timeout under
    load): the client retries, and the retry's condition fails on the first attempt's
    object. (A local create is never retried, but the rule is the same there.) Never for
    paths whose creation decides who owns something."""
    if isinstance(fs, LocalFileSystem):
        with storage_errors(path):
            try:
                _local_create_exclusive(fs._strip_protocol(path), data)
            except FileExistsError:
                if not (owned and _holds(fs, path, data)):
                    raise
    elif "s3" in _protocols(fs):
        with storage_errors(path):
            try:
                fs.pipe_file(path, data, mode="create")
            except OSError as exc:
                # The request carried one condition (If-None-Match: *), so a failed
                # precondition means the object exists. s3fs says so only when the error
                # body names the condition, which AWS's and moto's do and SeaweedFS's not.
                if not isinstance(exc, FileExistsError) and not _precondition_failed(exc):
                    raise
                if owned and _holds(fs, path, data):
                    return
                raise FileExistsError(errno.EEXIST, f"{path} exists", path) from exc
    else:
        raise AtomicWriteUnsupportedError(
            f"{type(fs).__name__} offers no atomic exclusive create; "
            "fedcore commits to local files and S3-compatible stores"
        )


#: Where fedcore can commit (an exclusive create and an atomic overwrite): local disks and
#: S3-compatible stores with conditional writes (``If-None-Match``).
COMMITTING_PROTOCOLS: Final = ("file", "s3", "s3a")


def check_commits_supported(uri: str, what: str = "a table") -> None:
    """Refuse, before anything is written, a location fedcore cannot commit to (a table's
    data is written with the same guarantees): ``AtomicWriteUnsupportedError`` naming the
    schemes it can. Without it, ``gs://`` asked for gcsfs, then failed at the first commit."""
    protocol = protocol_of(uri)
    if protocol not in COMMITTING_PROTOCOLS:
        raise AtomicWriteUnsupportedError(
            f"{uri}: fedcore cannot keep {what} on {protocol}:// (its commits need an atomic "
            "exclusive create); it keeps tables on local disks (file://) and S3-compatible "
            "stores with conditional writes (s3://, s3a://)"
        )


def check_conditional_create(fs: AbstractFileSystem, folder: str) -> None:
    """Refuse an object store that does not honour S3's conditional writes
    (``If-None-Match: *``), once, before a table is created on it: fed's commit point is an
    exclusive create, and a store that answers every such PUT by overwriting would let two
    writers both complete one instant, silently. A probe object is created twice under
    ``folder`` (the second must be refused), then deleted. Local disks need no probe."""
    if "s3" not in _protocols(fs):
        return
    probe = f"{folder}/.fed/conditional-write-probe-{uuid.uuid4().hex}"
    try:
        create_exclusive(fs, probe, b"first")
        try:
            create_exclusive(fs, probe, b"second")
        except FileExistsError:
            return
        raise AtomicWriteUnsupportedError(
            f"{folder}: the object store overwrote an object a conditional write (If-None-Match: *) "
            "should have left alone: it does not honour S3's conditional writes, which fed's commits "
            "need (AWS S3 and recent S3-compatible stores do; see the production guide)"
        )
    finally:
        with contextlib.suppress(OSError):  # a probe left behind is harmless; the answer is not
            fs.rm_file(probe)


def replace_atomic(fs: AbstractFileSystem, path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whether or not something is there; a reader sees the old
    content or the new, never a part (an S3 PUT; a local temporary file renamed into place)."""
    if isinstance(fs, LocalFileSystem):
        with storage_errors(path):
            local = fs._strip_protocol(path)
            directory = os.path.dirname(local)
            os.makedirs(directory, exist_ok=True)
            temporary = os.path.join(directory, f".{os.path.basename(local)}.{uuid.uuid4().hex}.tmp")
            with open(temporary, "xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, local)
            # Hadoop's local file system (Apache Hudi's writers on file:// tables) keeps a
            # checksum of what it wrote beside it and fails reads that do not match it: the
            # old content's is stale now. Without one, Hadoop reads unchecked.
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(directory, f".{os.path.basename(local)}.crc"))
            _fsync_directory(directory)
    elif "s3" in _protocols(fs):
        with storage_errors(path):
            fs.pipe_file(path, data)
    else:
        raise AtomicWriteUnsupportedError(
            f"{type(fs).__name__} offers no atomic overwrite; fedcore writes to local files and "
            "S3-compatible stores"
        )


def _holds(fs: AbstractFileSystem, path: str, data: bytes) -> bool:
    """Whether the object at ``path`` holds exactly ``data`` (the size first, then the bytes)."""
    if fs.size(path) != len(data):
        return False
    return bytes(fs.cat_file(path)) == data


def _precondition_failed(error: OSError) -> bool:
    return error.errno == errno.EINVAL and "pre-condition" in str(error).lower()


def _protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    return (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)


def _local_create_exclusive(path: str, data: bytes) -> None:
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        # A file where a folder must be: not "the file to create exists".
        raise StorageError(f"cannot create folder {directory}: a file is in the way ({exc})") from exc
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise
    except OSError as exc:
        raise AtomicWriteUnsupportedError(
            f"the disk under {directory} does not support hard links, needed for atomic commits: {exc}"
        ) from exc
    finally:
        os.unlink(temporary)
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
