"""Every error fedcore raises on purpose.

One module so that callers (the CLI, engine adapters) can catch ``FedError`` and
print one line, and so that each failure has a name a user can search for.
Errors about configuration carry the offending key, because the fix is always
"change that key".
"""

from __future__ import annotations


class FedError(Exception):
    """Base of all fedcore errors."""


class ConfigError(FedError, ValueError):
    """A configuration value is missing or invalid; ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}")


class InvalidStorageConfigError(ConfigError):
    """The storage strategy configuration cannot describe a valid layout."""


class UnknownStorageStrategyError(InvalidStorageConfigError):
    """``hoodie.storage.strategy.class`` names nothing fedcore can load."""


class InvalidTableConfigError(ConfigError):
    """``hoodie.properties`` is malformed or violates Hudi's rules."""


class StorageStrategyMismatchError(FedError):
    """A table was opened with a storage strategy other than the one it was created with.

    Physical paths are derived, never stored, so reading a table through another
    strategy would look for every file in the wrong place.
    """


class TableNotFoundError(FedError, FileNotFoundError):
    """No ``.hoodie/hoodie.properties`` at the given table path."""


class TableAlreadyExistsError(FedError, FileExistsError):
    """A table already exists at the path where one was to be created."""


class InvalidPathError(FedError, ValueError):
    """A path cannot belong to this table (escapes it, or is not a table path at all)."""


class InvalidFileNameError(InvalidPathError):
    """A name is not a Hudi data file name, so no storage location can be derived for it."""


class UnmappedPartitionError(FedError, LookupError):
    """A partition-map strategy has no location for a partition and no default location."""


class ListingNotSupportedError(FedError):
    """Listing data folders was asked of a layout whose data is not under the table path.

    The files of a federated table are known from its metadata, never from listing:
    a partition's files are spread over many storage prefixes.
    """


class AtomicWriteUnsupportedError(FedError):
    """The filesystem offers no atomic exclusive create, so a commit cannot be made safely."""
