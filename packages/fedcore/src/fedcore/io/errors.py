"""OSErrors from storage, turned into fedcore's typed errors with the path in the message.

fsspec filesystems raise whatever their backend raises: a local ``OSError`` with an
errno, botocore errors mapped by s3fs to ``FileNotFoundError`` or ``PermissionError``
with only a key in the message. Every storage call fedcore makes on a user's behalf
goes through ``storage_errors`` (the federated filesystem, exclusive creates, whole
object reads), so the CLI and the engines catch one hierarchy (``FedError``) and a
user reads which path failed and why. The typed errors subclass the matching built-in
ones (``FileNotFoundError``, ...), so code that handles a missing file is unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import botocore.exceptions
import pyarrow as pa

from fedcore.exceptions import (
    DataFileCorruptError,
    FedError,
    StorageError,
    StorageFileExistsError,
    StorageFileNotFoundError,
    StoragePermissionError,
    StorageUnavailableError,
)
from fedcore.files.filenames import BASE_FILE_RE


def undo_hint(path: str) -> str:
    """How a data file damaged or lost outside fedcore goes from the table: from a copy, or by
    rolling back the write that made it (named by the file's name, for a base file)."""
    match = BASE_FILE_RE.fullmatch(path.rpartition("/")[2])
    instant = match[3] if match is not None else "INSTANT"
    return (
        f"restore it from a copy, or roll back the write that made it with `fed rollback TABLE {instant}` "
        "if that is the table's latest write"
    )


_TYPED: tuple[tuple[type[OSError], type[StorageError]], ...] = (
    (FileNotFoundError, StorageFileNotFoundError),
    (FileExistsError, StorageFileExistsError),
    (PermissionError, StoragePermissionError),
)


def typed_storage_error(
    exc: OSError,
    path: str,
    physical: str | None = None,
    *,
    missing: type[StorageError] | None = None,
    hint: str = "",
) -> StorageError:
    """``exc`` as a ``StorageError`` naming ``path`` (and ``physical``, when it differs)."""
    kind: type[StorageError] = StorageError
    for builtin, typed in _TYPED:
        if isinstance(exc, builtin):
            kind = typed
            break
    if missing is not None and kind is StorageFileNotFoundError:
        kind = missing
    where = path if physical is None or physical == path else f"{path} (at {physical})"
    reason = exc.strerror or str(exc) or type(exc).__name__
    if hint and kind is missing:
        reason = f"{reason}; {hint}"
    if kind is StoragePermissionError:
        # s3fs raises the store's refusal from botocore's error, which names the request.
        operation = getattr(exc.__cause__, "operation_name", None)
        during = f" to {operation}" if operation else ""
        reason = f"access denied{during} ({reason}): check the credentials and the bucket's policy"
    error = kind(f"{where}: {reason}")
    error.errno = exc.errno
    error.filename = physical or path
    return error


def typed_client_error(exc: botocore.exceptions.BotoCoreError, path: str) -> StorageError:
    """An S3 client's own error (raised before any answer from the store) as a typed
    ``StorageError`` about ``path``: an endpoint that cannot be reached, or no credentials."""
    if isinstance(exc, botocore.exceptions.NoCredentialsError | botocore.exceptions.PartialCredentialsError):
        return StoragePermissionError(
            f"{path}: no credentials for the store ({exc}); give them as storage options or in the "
            "environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE)"
        )
    if isinstance(exc, botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectionError):
        return StorageUnavailableError(
            f"{path}: the storage endpoint cannot be reached ({exc}); check endpoint_url, the network, "
            "and that the store is running"
        )
    return StorageError(f"{path}: {type(exc).__name__}: {exc}")


def is_decode_failure(exc: BaseException) -> bool:
    """Whether pyarrow failed to decode bytes it was given (a truncated or overwritten
    Parquet file): an Arrow error, or the bare ``OSError`` (no errno) pyarrow raises for a
    footer it cannot deserialize; never an error of the storage request itself."""
    if isinstance(exc, pa.ArrowException) and not isinstance(exc, pa.ArrowMemoryError):
        return True
    return type(exc) is OSError and exc.errno is None and "Parquet" in str(exc)


@contextlib.contextmanager
def storage_errors(
    path: str,
    physical: str | None = None,
    *,
    missing: type[StorageError] | None = None,
    hint: str = "",
    data: bool = False,
) -> Iterator[None]:
    """Re-raise an OSError of the block as a typed ``StorageError`` about ``path``
    (``missing``, with ``hint`` in its message, when the path is not there); for a ``data``
    file, bytes pyarrow cannot decode as a ``DataFileCorruptError``."""
    try:
        yield
    except FedError:
        raise
    except botocore.exceptions.BotoCoreError as exc:
        raise typed_client_error(exc, path) from exc
    except (OSError, pa.ArrowException) as exc:
        if data and is_decode_failure(exc):
            where = path if physical is None or physical == path else f"{path} (at {physical})"
            raise DataFileCorruptError(
                f"{where} cannot be read as Parquet ({exc}): it was truncated or overwritten outside "
                f"fedcore; {undo_hint(path)} (`fed verify --deep TABLE` finds every such file)"
            ) from exc
        if not isinstance(exc, OSError):
            raise
        raise typed_storage_error(exc, path, physical, missing=missing, hint=hint) from exc
