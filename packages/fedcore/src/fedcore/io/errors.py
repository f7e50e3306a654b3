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

from fedcore.exceptions import (
    FedError,
    StorageError,
    StorageFileExistsError,
    StorageFileNotFoundError,
    StoragePermissionError,
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
    error = kind(f"{where}: {reason}")
    error.errno = exc.errno
    error.filename = physical or path
    return error


@contextlib.contextmanager
def storage_errors(
    path: str,
    physical: str | None = None,
    *,
    missing: type[StorageError] | None = None,
    hint: str = "",
) -> Iterator[None]:
    """Re-raise an OSError of the block as a typed ``StorageError`` about ``path``
    (``missing``, with ``hint`` in its message, when the path is not there)."""
    try:
        yield
    except FedError:
        raise
    except OSError as exc:
        raise typed_storage_error(exc, path, physical, missing=missing, hint=hint) from exc
