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


class MissingDependencyError(FedError, ImportError):
    """A feature needs an optional dependency that is not installed; the message names the
    extra to install."""


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


class CopiedTableError(FedError):
    """The table at this path is a copy of a table that still exists (its ``.hoodie/`` folder
    copied, its data files that table's): fed neither writes nor deletes files through it. The
    message names the source and the command that gives the copy files of its own."""


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


class StorageError(FedError, OSError):
    """A storage request failed; the message names the path (logical and physical when known).

    Raised in place of the OSError the filesystem gave, at the filesystem layer, so that
    callers catch one hierarchy. The subclasses below are also the matching built-in
    errors, so code that handles a missing file keeps working.
    """

    def __str__(self) -> str:
        # OSError renders "[Errno N] strerror: filename" once errno is set; the message
        # already says all of that in words.
        return str(self.args[0]) if self.args else super().__str__()


class StorageFileNotFoundError(StorageError, FileNotFoundError):
    """A file or folder fedcore expected in storage is not there."""


class StorageFileExistsError(StorageError, FileExistsError):
    """A file fedcore was to create is already there (or a file stands where a folder must)."""


class StoragePermissionError(StorageError, PermissionError):
    """Storage refused access to a path."""


class StorageUnavailableError(StorageError, ConnectionError):
    """The storage endpoint cannot be reached: it refuses connections, its host does not
    resolve, or it timed out on every retry."""


class DataFileMissingError(StorageFileNotFoundError):
    """A data file the table's metadata references is not in storage (deleted outside fedcore)."""


class DataFileCorruptError(StorageError):
    """A data file the table's metadata references cannot be decoded: truncated, overwritten,
    or not a Parquet file (damaged outside fedcore). The message names it and what to do."""


class UnsupportedTableVersionError(FedError):
    """The table was written in a Hudi table version fedcore does not read or write."""


class UnsupportedTableError(FedError):
    """The table uses a Hudi feature fedcore cannot read exactly (a timeline action it does
    not interpret, a base file format other than Parquet, a record payload it cannot merge
    by) or write (a key generator fed does not make paths with): it is refused rather than
    read or written wrongly."""


class UnsupportedLogBlockError(UnsupportedTableError):
    """A merge-on-read log file holds a block fedcore cannot apply exactly (HFile or CDC data,
    a log-compacted or partial-update block, an older block or log format version)."""


class CorruptLogFileError(UnsupportedTableError):
    """A log block's framing or content cannot be decoded (not a block Hudi could have skipped)."""


# --- timeline and commits -------------------------------------------------------------


class InvalidInstantError(FedError, ValueError):
    """A string is not an instant time, or names no instant of the table."""


class InstantConflictError(FedError):
    """An instant file already exists: another writer got there first."""


class CommitConflictError(FedError):
    """Another writer changed the same file groups first; this write left no visible data.

    Writers are optimistic: each claims the file-group versions it supersedes, and
    of two writers that supersede the same version exactly one commits.
    """


class RollbackError(FedError):
    """An instant cannot be rolled back (it is not the latest write, or not a write at all)."""


# --- data -------------------------------------------------------------------------------


class InvalidRecordsError(FedError, ValueError):
    """Input records cannot be written: missing key columns, null keys, unreadable input."""


class SchemaMismatchError(InvalidRecordsError):
    """Input records do not fit the table's schema."""


class InvalidPartitionValueError(InvalidRecordsError):
    """A partition value would make a folder name outside its partition (``..``, ``/``)."""


class InvalidFilterError(FedError, ValueError):
    """A read filter names an unknown column, an unsupported operator or a bad literal."""


class InvalidColumnsError(FedError, ValueError):
    """A projection names a column the table does not have, or a column twice."""


class TableServiceWarning(UserWarning):
    """A table service (clean, compaction, archival) failed after a write had committed.

    Never raised: the write succeeded and is visible; the service runs again after the
    next write. Attached to the write's result and logged."""


class MetastoreError(FedError):
    """A Hive metastore could not be reached, or refused to register a table's Iceberg view."""


class MetastoreBusyError(MetastoreError):
    """Another publisher held the table's metastore lock past the wait (another URI of the
    same metastore would wait on the same lock, so none is tried)."""


# --- metadata table ----------------------------------------------------------------------


class MetadataTableError(FedError):
    """The metadata table cannot be read; there is no fallback to listing storage."""


class RepairError(FedError):
    """The metadata table cannot be rebuilt from storage as asked: files the timeline records
    are missing, the table has no metadata table, or a compaction raced the repair."""


class MetadataTableRequiredError(ConfigError):
    """A layout that spreads data over prefixes cannot work without the metadata table."""


class InstantNotRetainedError(FedError):
    """Time travel to an instant whose files were already cleaned."""


class TimelineMovedError(FedError):
    """A timeline listed earlier names instants that are gone from the active timeline now:
    another writer archived (or rolled back) them since, with the metadata-table deltas that
    recorded them. A view as of that listing cannot be built any more: list again."""
