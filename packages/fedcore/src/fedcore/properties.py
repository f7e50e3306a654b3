"""Table-property keys and their defaults, in one place.

Keys are Apache Hudi's own wherever Hudi has one, so that a table written by
fedcore is recognisable to Hudi tools. The storage keys follow Hudi's RFC-60
(federated storage layout) naming. The same keys are accepted wherever a user
passes options: the Python API, the CLI and the engine adapters.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Final, Literal, get_args

from fedcore.exceptions import ConfigError

HOODIE_FOLDER: Final = ".hoodie"
PROPERTIES_FILE: Final = "hoodie.properties"
PARTITION_METADATA_FILE: Final = ".hoodie_partition_metadata"

# --- Hudi table config (hoodie.properties) ---------------------------------------
#: The table's name: Hudi's, and the default name it is registered under in a catalog.
TABLE_NAME: Final = "hoodie.table.name"
#: The database the table belongs to (a catalog's); with the name, it makes Hudi's table checksum.
DATABASE_NAME: Final = "hoodie.database.name"
#: ``COPY_ON_WRITE`` (the default) or ``MERGE_ON_READ``; stored with the prefix ``FEDERATED_`` when
#: the data files are not under the table path (see ``FEDERATED_TABLE_TYPE_PREFIX``).
TABLE_TYPE: Final = "hoodie.table.type"
#: Hudi's table version: how instant files, commit metadata and log files are named and encoded
#: (``fedcore.timeline.layout``): 6 (Hudi 0.14/0.15, a new table's default), 8 (Hudi 1.0) or 9
#: (Hudi 1.1 and later).
TABLE_VERSION: Final = "hoodie.table.version"
#: Hudi's writer option for the version of a table it creates; at creation, the same as
#: ``hoodie.table.version`` (a table's config records the latter).
WRITE_TABLE_VERSION: Final = "hoodie.write.table.version"
#: Table versions 8 and 9: the version the table was created at.
TABLE_INITIAL_VERSION: Final = "hoodie.table.initial.version"
#: The record key: one column or several (comma-separated, a complex key); a write upserts by it.
RECORD_KEY_FIELDS: Final = "hoodie.table.recordkey.fields"
#: The partition columns, comma-separated (none: a non-partitioned table).
PARTITION_FIELDS: Final = "hoodie.table.partition.fields"
#: The ordering column: among records of one key in a write, and under the event-time payload
#: between a log record and the record it updates, the greatest value wins.
PRECOMBINE_FIELD: Final = "hoodie.table.precombine.field"
#: The write operation (upsert, insert, bulk_insert, delete, insert_overwrite, ...).
OPERATION: Final = "hoodie.datasource.write.operation"
#: Partition folders named ``field=value`` (``true``, fed's default) or by the value alone.
HIVE_STYLE_PARTITIONING: Final = "hoodie.datasource.write.hive_style_partitioning"
#: Partition values URL-encoded in folder names, so a ``/`` in a value never makes a folder.
URL_ENCODE_PARTITIONING: Final = "hoodie.datasource.write.partitionpath.urlencode"
#: Hudi's key generator class: how record keys and partition paths are made from columns (simple,
#: complex, non-partitioned, timestamp-based, custom).
KEY_GENERATOR_CLASS: Final = "hoodie.table.keygenerator.class"
#: The key generator by type name (``SIMPLE``, ``COMPLEX``, ...), as later Hudi versions record it.
KEY_GENERATOR_TYPE: Final = "hoodie.table.keygenerator.type"

#: Hudi's timeline layout: 1 for table version 6 (instant files in ``.hoodie/``), 2 for versions
#: 8 and 9 (in ``.hoodie/timeline/``, completed ones named by their completion times).
TIMELINE_LAYOUT_VERSION: Final = "hoodie.timeline.layout.version"
#: Table versions 8 and 9 (timeline layout 2): the folder in ``.hoodie/`` that holds the
#: timeline (``timeline``, the only one fed reads).
TIMELINE_PATH: Final = "hoodie.timeline.path"
DEFAULT_TIMELINE_FOLDER: Final = "timeline"
#: Table versions 8 and 9: the folder in the timeline folder that holds the archived
#: timeline (``history``, the only one fed reads).
TIMELINE_HISTORY_PATH: Final = "hoodie.timeline.history.path"
DEFAULT_HISTORY_FOLDER: Final = "history"
#: The folder in ``.hoodie/`` archival moves old instants to (``archived``).
ARCHIVELOG_FOLDER: Final = "hoodie.archivelog.folder"
#: The zone of instant times: ``UTC`` (fed's tables, so that Hudi's writers of them make UTC
#: times too) or ``LOCAL`` (each writer's local clock: what Hudi writes into the tables it
#: creates, and assumes when the key is absent); fed makes and reads instant times in it.
TIMELINE_TIMEZONE: Final = "hoodie.table.timeline.timezone"
#: The base files' format: ``PARQUET`` (the only one fed writes and reads).
BASE_FILE_FORMAT: Final = "hoodie.table.base.file.format"
TABLE_CHECKSUM: Final = "hoodie.table.checksum"
#: The table's Avro schema at creation: the schema of a table no write has completed on.
CREATE_SCHEMA: Final = "hoodie.table.create.schema"
#: How merge-on-read log records update base records (see ``log.merge``).
PAYLOAD_CLASS: Final = "hoodie.compaction.payload.class"
#: The payload classes whose merge fedcore reproduces (``log.merge``): the newest record
#: wins (Hudi's default), or the one with the greatest ordering value.
OVERWRITE_WITH_LATEST_PAYLOAD: Final = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_HOODIE_PAYLOAD: Final = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
#: Hudi's record-merger strategy id: with the payload class, how a reader merges log records onto
#: base records (fed writes Hudi's default).
RECORD_MERGER_STRATEGY: Final = "hoodie.compaction.record.merger.strategy"
#: Hudi's default merger strategy (``HoodieAvroRecordMerger``: the payload class decides).
DEFAULT_RECORD_MERGER_STRATEGY: Final = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
#: Table version 8: the merger strategy, under its version-8 name, which goes with the merge
#: mode: the event-time id above, or this one for commit-time ordering.
RECORD_MERGE_STRATEGY_ID: Final = "hoodie.record.merge.strategy.id"
COMMIT_TIME_MERGE_STRATEGY: Final = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
#: Table versions 8 and 9 (Hudi 1.x): how records of one key merge, in place of the payload
#: class: ``COMMIT_TIME_ORDERING`` (the latest write wins), ``EVENT_TIME_ORDERING`` (the
#: greatest ordering value wins; a tie goes to the latest write) or ``CUSTOM`` (a payload
#: class or merger of the user's, which fed does not run).
RECORD_MERGE_MODE: Final = "hoodie.record.merge.mode"
#: Table version 9, upgraded from 8: the payload class version 8 named, kept for the record
#: (the merge mode decides how records merge).
LEGACY_PAYLOAD_CLASS: Final = "hoodie.table.legacy.payload.class"
#: Table version 9 (Hudi 1.1 and later): the ordering fields, in place of
#: ``hoodie.table.precombine.field`` (fed reads one field).
ORDERING_FIELDS: Final = "hoodie.table.ordering.fields"
#: Table version 9: whether updates carry some columns only (``NONE``, the only mode fed
#: reads; ``IGNORE_DEFAULTS`` and ``FILL_UNAVAILABLE`` merge column by column).
PARTIAL_UPDATE_MODE: Final = "hoodie.table.partial.update.mode"
#: Table version 9: settings of the merge mode (keys after this prefix), such as the column
#: and value that mark a record as a delete; fed reads tables without them.
MERGE_PROPERTY_PREFIX: Final = "hoodie.record.merge.property."

TABLE_TYPE_COW: Final = "COPY_ON_WRITE"
TABLE_TYPE_MOR: Final = "MERGE_ON_READ"
#: Hudi's two table types: copy-on-write rewrites a file group's base file on each update;
#: merge-on-read appends the update to a log file beside it (compaction folds logs in later).
TableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
TABLE_TYPES: Final[tuple[TableType, ...]] = get_args(TableType)
#: A table whose data files are not under its table path (every storage strategy but
#: ``hive``) stores its type as ``FEDERATED_COPY_ON_WRITE`` / ``FEDERATED_MERGE_ON_READ``.
#: Readers that do not implement fed's storage strategies list the table path, find no data
#: files there, and would return an empty table without an error; the table type is the one
#: key that Apache Hudi's Spark reader (0.15 and 1.0) and hudi-rs all parse, as an enum,
#: before they list anything, so an unknown type makes each of them refuse the table. The
#: docs page "Other engines" (docs/engines.md) gives what each reader prints and why
#: no other key does this (the table version and the base file format do not).
FEDERATED_TABLE_TYPE_PREFIX: Final = "FEDERATED_"
DEFAULT_TABLE_VERSION: Final = 6
DEFAULT_TIMELINE_LAYOUT_VERSION: Final = 1

SIMPLE_KEY_GENERATOR: Final = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEY_GENERATOR: Final = "org.apache.hudi.keygen.ComplexKeyGenerator"
NON_PARTITIONED_KEY_GENERATOR: Final = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
#: Tables of versions 8 and 9 name the key generator by type: the class of each type.
KEY_GENERATOR_TYPES: Final = {
    "SIMPLE": SIMPLE_KEY_GENERATOR,
    "COMPLEX": COMPLEX_KEY_GENERATOR,
    "NON_PARTITION": NON_PARTITIONED_KEY_GENERATOR,
    "TIMESTAMP": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    "CUSTOM": "org.apache.hudi.keygen.CustomKeyGenerator",
}
#: The type of each key generator class (what versions 8 and 9 record beside the class).
KEY_GENERATOR_TYPE_OF: Final = {cls: name for name, cls in KEY_GENERATOR_TYPES.items()}
#: What a version-8 table records for each merge mode fed writes: (payload class, merge
#: strategy id), as Hudi 1.0 records them.
MERGE_MODE_KEYS_V8: Final = {
    "EVENT_TIME_ORDERING": (DEFAULT_HOODIE_PAYLOAD, DEFAULT_RECORD_MERGER_STRATEGY),
    "COMMIT_TIME_ORDERING": (OVERWRITE_WITH_LATEST_PAYLOAD, COMMIT_TIME_MERGE_STRATEGY),
}

# --- Metadata table, writes, cleaning (Hudi's keys and defaults) --------------------
# Each runtime setting is its key bound once to its type, default and parser
# (``IntOption`` / ``BoolOption`` below): ``MAX_FILE_SIZE.of(options)``, never a
# default or a parse at the call site. The options are ``str``s, so they stay usable
# as keys: ``{MAX_FILE_SIZE: "1048576"}``.


class IntOption(str):
    """A Hudi key whose value is a whole number, with its default and least allowed value."""

    default: int
    minimum: int

    def __new__(cls, key: str, default: int = 0, minimum: int = 0) -> IntOption:
        option = super().__new__(cls, key)
        option.default, option.minimum = default, minimum
        return option

    def __reduce__(self) -> tuple[type[IntOption], tuple[str, int, int]]:
        return (type(self), (str(self), self.default, self.minimum))

    def of(self, options: Mapping[str, str]) -> int:
        """The setting in ``options`` (the default when absent); ``ConfigError`` names the key."""
        raw = options.get(self)
        if raw is None:
            return self.default
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise ConfigError(self, f"{raw!r} is not an integer") from None
        if value < self.minimum:
            raise ConfigError(self, f"{value} is below the least allowed value, {self.minimum}")
        return value


class FloatOption(str):
    """A Hudi key whose value is a number, with its default and least allowed value."""

    default: float
    minimum: float

    def __new__(cls, key: str, default: float = 0.0, minimum: float = 0.0) -> FloatOption:
        option = super().__new__(cls, key)
        option.default, option.minimum = default, minimum
        return option

    def __reduce__(self) -> tuple[type[FloatOption], tuple[str, float, float]]:
        return (type(self), (str(self), self.default, self.minimum))

    def of(self, options: Mapping[str, str]) -> float:
        """The setting in ``options`` (the default when absent); ``ConfigError`` names the key."""
        raw = options.get(self)
        if raw is None:
            return self.default
        try:
            value = float(str(raw).strip())
        except ValueError:
            raise ConfigError(self, f"{raw!r} is not a number") from None
        if not value >= self.minimum:  # (NaN too)
            raise ConfigError(self, f"{value} is below the least allowed value, {self.minimum}")
        return value


class BoolOption(str):
    """A Hudi key whose value is ``true`` or ``false``, with its default."""

    default: bool

    def __new__(cls, key: str, default: bool = False) -> BoolOption:
        option = super().__new__(cls, key)
        option.default = default
        return option

    def __reduce__(self) -> tuple[type[BoolOption], tuple[str, bool]]:
        return (type(self), (str(self), self.default))

    def of(self, options: Mapping[str, str]) -> bool:
        raw = options.get(self)
        if raw is None:
            return self.default
        value = str(raw).strip().lower()
        if value not in ("true", "false"):
            raise ConfigError(self, f"{raw!r} is not true or false")
        return value == "true"


class ChoiceOption(str):
    """A Hudi key whose value is one of a few names (any case), each standing for a value."""

    default: str
    choices: Mapping[str, str]

    def __new__(cls, key: str, default: str, choices: Mapping[str, str]) -> ChoiceOption:
        option = super().__new__(cls, key)
        option.default, option.choices = default, dict(choices)
        return option

    def __reduce__(self) -> tuple[type[ChoiceOption], tuple[str, str, Mapping[str, str]]]:
        return (type(self), (str(self), self.default, self.choices))

    def of(self, options: Mapping[str, str]) -> str:
        raw = options.get(self)
        name = self.default if raw is None else str(raw).strip().lower()
        if name not in self.choices:
            raise ConfigError(self, f"{raw!r} is not one of {', '.join(sorted(self.choices))}")
        return self.choices[name]


class ListOption(str):
    """A Hudi key whose value is a comma-separated list of names (None when not set)."""

    def __reduce__(self) -> tuple[type[ListOption], tuple[str]]:
        return (type(self), (str(self),))

    def of(self, options: Mapping[str, str]) -> tuple[str, ...] | None:
        raw = options.get(self)
        if raw is None:
            return None
        names = tuple(name.strip() for name in str(raw).split(","))
        if any(not name for name in names):
            raise ConfigError(self, f"{raw!r} is not a comma-separated list of names")
        return names


class TextOption(str):
    """A Hudi key whose value is one non-empty name (None when not set)."""

    def __reduce__(self) -> tuple[type[TextOption], tuple[str]]:
        return (type(self), (str(self),))

    def of(self, options: Mapping[str, str]) -> str | None:
        raw = options.get(self)
        if raw is None:
            return None
        if not str(raw).strip():
            raise ConfigError(self, "must not be empty")
        return str(raw).strip()


#: Partition columns kept only in folder names, not in data files (Hudi's option; fed reads
#: such tables and writes them so).
DROP_PARTITION_COLUMNS: Final = BoolOption("hoodie.datasource.write.drop.partition.columns", False)
#: Whether data files hold Hudi's ``_hoodie_*`` meta columns (``false``: virtual keys, computed
#: from the record key columns on read).
POPULATE_META_FIELDS: Final = BoolOption("hoodie.populate.meta.fields", True)

#: Whether a table has fedcore's metadata table. A new table gets it unless told otherwise
#: (Hudi's default since 0.11); an existing config without the key has none
#: (``TableConfig.metadata_enabled``).
METADATA_ENABLE: Final = BoolOption("hoodie.metadata.enable", True)
#: Compact fed's metadata table (fold its deltas into one manifest) once this many deltas are on
#: top of the last one.
METADATA_COMPACT_DELTAS: Final = IntOption("hoodie.metadata.compact.max.delta.commits", 10, 1)
#: How often a writer refreshes its instant's heartbeat (ms); the next writer rolls back an instant
#: whose heartbeat stopped for the tolerable misses plus one intervals.
HEARTBEAT_INTERVAL_MS: Final = IntOption("hoodie.client.heartbeat.interval_in_ms", 60_000, 1)
#: Heartbeats a writer may miss before its pending instant counts as a dead writer's.
HEARTBEAT_TOLERABLE_MISSES: Final = IntOption("hoodie.client.heartbeat.tolerable.misses", 2, 0)
#: The greatest size of a base file in bytes: a write splits its rows over files of at most this
#: many (by the table's record size).
MAX_FILE_SIZE: Final = IntOption("hoodie.parquet.max.file.size", 120 * 2**20, 1)
#: Base files smaller than this (bytes) take an insert's or upsert's new records before new file
#: groups are made; 0: never top up.
SMALL_FILE_LIMIT: Final = IntOption("hoodie.parquet.small.file.limit", 100 * 2**20, 0)
#: Bytes per record assumed for file sizing until a commit large enough has measured the table's
#: own.
RECORD_SIZE_ESTIMATE: Final = IntOption("hoodie.copyonwrite.record.size.estimate", 1024, 1)
#: A commit teaches the record size only when it wrote more than this times the small file
#: limit (Hudi's rule: a small commit's bytes per record are mostly footers).
RECORD_SIZE_ESTIMATION_THRESHOLD: Final = FloatOption("hoodie.record.size.estimation.threshold", 1.0, 0.0)
#: Base files' codec, as pyarrow names it. fedcore's default is snappy (Spark's and pyarrow's),
#: not Hudi 0.x's gzip, which writes several times slower; Hudi reads all of these. LZO has
#: no pyarrow writer; Hudi's lz4 is written as LZ4_RAW, the framing Parquet now specifies.
PARQUET_COMPRESSION_CODEC: Final = ChoiceOption(
    "hoodie.parquet.compression.codec",
    "snappy",
    {"snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "lz4": "lz4", "lz4_raw": "lz4", "brotli": "brotli",
     "uncompressed": "none"},
)  # fmt: skip
#: Bytes of a Parquet row group in base files (converted to rows with the table's record size).
PARQUET_BLOCK_SIZE: Final = IntOption("hoodie.parquet.block.size", 120 * 2**20, 1)
#: Bytes of a Parquet data page in base files.
PARQUET_PAGE_SIZE: Final = IntOption("hoodie.parquet.page.size", 2**20, 1)
#: Per-file column statistics (least, greatest, nulls) recorded in the metadata table, so that
#: reads skip files no row of which can match their filters. The columns: those listed, or
#: the first ``DEFAULT_STATS_COLUMNS`` data columns (as Delta Lake's default).
COLUMN_STATS_ENABLE: Final = BoolOption("hoodie.metadata.index.column.stats.enable", True)
#: The columns whose statistics are recorded, comma-separated (default: the first 32 data columns).
COLUMN_STATS_COLUMNS: Final = ListOption("hoodie.metadata.index.column.stats.column.list")
DEFAULT_STATS_COLUMNS: Final = 32
#: Cleaning keeps every file version the latest this many writes need: time travel and incremental
#: reads reach that far back.
CLEANER_COMMITS_RETAINED: Final = IntOption("hoodie.cleaner.commits.retained", 10, 1)
#: Clean after each commit (``fed clean`` otherwise).
CLEAN_AUTOMATIC: Final = BoolOption("hoodie.clean.automatic", True)
#: Archival keeps at least this many completed instants on the active timeline.
ARCHIVE_MIN_INSTANTS: Final = IntOption("hoodie.keep.min.commits", 20, 1)
#: Archival runs once the active timeline holds more completed instants than this.
ARCHIVE_MAX_INSTANTS: Final = IntOption("hoodie.keep.max.commits", 30, 2)
#: Archive after each commit.
ARCHIVE_AUTOMATIC: Final = BoolOption("hoodie.archive.automatic", True)
#: Schema evolution on write: an input without one of the table's (nullable) columns writes
#: it as null (Hudi's reconciliation, or its narrower switch); otherwise it is refused.
RECONCILE_SCHEMA: Final = BoolOption("hoodie.datasource.write.reconcile.schema", False)
#: Write a table column the input lacks (it must be nullable) as null, without the rest of schema
#: reconciliation.
SET_NULL_FOR_MISSING_COLUMNS: Final = BoolOption("hoodie.write.set.null.for.missing.columns", False)
#: Merge-on-read: compact after a write once this many delta commits completed since the last
#: compaction (Hudi's inline compaction; off by default, as in Hudi's batch writers).
COMPACT_INLINE: Final = BoolOption("hoodie.compact.inline", False)
#: Merge-on-read inline compaction runs after this many delta commits since the last compaction.
COMPACT_INLINE_MAX_DELTA_COMMITS: Final = IntOption("hoodie.compact.inline.max.delta.commits", 5, 1)
#: How long a write waits for a compaction another fed writer is running on the table
#: (``fedcore.commit.pending``): longer than a heartbeat's expiry at Hudi's defaults (3 minutes),
#: so a compaction whose writer died is rolled back within the wait. 0: never wait.
COMPACTION_WAIT_MS: Final = IntOption("hoodie.fed.write.compaction.wait.ms", 300_000, 0)
#: Merge-on-read: how a log file's data block encodes its records (Parquet, or Avro as Hudi's
#: writers default to for Parquet tables).
LOG_DATA_BLOCK_FORMAT: Final = ChoiceOption(
    "hoodie.logfile.data.block.format", "parquet", {"parquet": "parquet", "avro": "avro"}
)
#: Hudi's Hive sync, done fed's way: after each commit, the Iceberg view is published and
#: registered in a Hive metastore (``fedcore.catalog.meta_sync``). Only the metastore mode exists;
#: the URIs are tried in order; the table name defaults to the fed table's.
HIVE_SYNC_ENABLE: Final = BoolOption("hoodie.datasource.hive_sync.enable", False)
#: How Hive sync registers the table: ``hms`` (a Hive metastore, the one mode fed has).
HIVE_SYNC_MODE: Final = ChoiceOption("hoodie.datasource.hive_sync.mode", "hms", {"hms": "hms"})
#: The Hive metastores' Thrift URIs (``thrift://host:9083``), comma-separated, tried in order.
HIVE_SYNC_METASTORE_URIS: Final = ListOption("hoodie.datasource.hive_sync.metastore.uris")
#: The database the table is registered in (default ``default``).
HIVE_SYNC_DATABASE: Final = TextOption("hoodie.datasource.hive_sync.database")
#: The name the table is registered under (default: the table's name).
HIVE_SYNC_TABLE: Final = TextOption("hoodie.datasource.hive_sync.table")
DEFAULT_HIVE_SYNC_DATABASE: Final = "default"
#: Hudi's meta sync: after each commit, sync with each tool named (Hudi's class names: its
#: Hive sync, a Hive metastore, and its Glue sync, AWS Glue); the database and table names are
#: the Hive sync's keys, as Hudi's Glue sync reads them.
META_SYNC_ENABLE: Final = BoolOption("hoodie.datasource.meta.sync.enable", False)
#: The sync tools to run after each commit, by Hudi's class names (``HIVE_SYNC_TOOL``,
#: ``GLUE_SYNC_TOOL``), comma-separated.
META_SYNC_TOOLS: Final = ListOption("hoodie.meta.sync.client.tool.class")
HIVE_SYNC_TOOL: Final = "org.apache.hudi.hive.HiveSyncTool"
GLUE_SYNC_TOOL: Final = "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"
SYNC_TOOLS: Final = (HIVE_SYNC_TOOL, GLUE_SYNC_TOOL)
#: Where AWS Glue is, and the credentials to reach it (default: boto3's chain: environment,
#: profile, instance role). The credentials are a write's options only, never a table's config.
AWS_GLUE_ENDPOINT: Final = TextOption("hoodie.aws.glue.endpoint")
#: The AWS region of the Glue catalog (default: boto3's).
AWS_GLUE_REGION: Final = TextOption("hoodie.aws.glue.region")
#: The access key id for Glue (a write's option, never stored).
AWS_ACCESS_KEY: Final = TextOption("hoodie.aws.access.key")
#: The secret access key for Glue (a write's option, never stored).
AWS_SECRET_KEY: Final = TextOption("hoodie.aws.secret.key")
#: The session token of temporary credentials for Glue (a write's option, never stored).
AWS_SESSION_TOKEN: Final = TextOption("hoodie.aws.session.token")
CREDENTIAL_KEYS: Final = frozenset({str(AWS_ACCESS_KEY), str(AWS_SECRET_KEY), str(AWS_SESSION_TOKEN)})

# --- Storage strategy (fedcore / RFC-60) ------------------------------------------
#: Where data files go: ``hive`` (under the table path, the default), ``object_store`` (hashed
#: prefixes under the storage path), ``partition_map`` (a location per partition), an entry point
#: of group ``fedcore.storage_strategies`` or a class path.
STORAGE_STRATEGY_CLASS: Final = "hoodie.storage.strategy.class"
#: The root data files go under: required by ``object_store``; for ``partition_map``, the location
#: of partitions no entry maps.
STORAGE_PATH: Final = "hoodie.storage.path"
#: The hash that names an ``object_store`` prefix: ``xxh32`` (8 hex characters, the default) or
#: ``xxh64`` (16).
STORAGE_HASH_FUNCTION: Final = "hoodie.storage.hash.function"
#: What is hashed: ``file_id`` (the default: a file group's files share a prefix) or
#: ``partition_and_file_id``.
STORAGE_HASH_INPUT: Final = "hoodie.storage.hash.input"
#: N > 0: the hash modulo N, as fixed-width hex (fewer, denser prefixes); unset: the whole hash.
STORAGE_PREFIX_COUNT: Final = "hoodie.storage.prefix.count"
#: ``partition_map``'s JSON object: partition-path prefix -> location URI; the longest whole-
#: segment match wins.
STORAGE_PARTITION_LOCATIONS: Final = "hoodie.storage.partition.locations"
#: The folder under each storage location that holds this table's partitions: fed sets it to
#: ``<table name>-<table id>`` when it creates a table whose strategy places files by table, so
#: two tables never share a folder, whatever their names and storage paths. Tables created
#: before it existed have none, and their strategies use the bare table name.
STORAGE_TABLE_FOLDER: Final = "hoodie.storage.table.folder"

STORAGE_STRATEGY_HIVE: Final = "hive"
STORAGE_STRATEGY_OBJECT_STORE: Final = "object_store"
STORAGE_STRATEGY_PARTITION_MAP: Final = "partition_map"
DEFAULT_STORAGE_STRATEGY: Final = STORAGE_STRATEGY_HIVE

HASH_XXH32: Final = "xxh32"
HASH_XXH64: Final = "xxh64"
HASH_FUNCTIONS: Final = (HASH_XXH32, HASH_XXH64)
DEFAULT_HASH_FUNCTION: Final = HASH_XXH32

HASH_INPUT_FILE_ID: Final = "file_id"
HASH_INPUT_PARTITION_AND_FILE_ID: Final = "partition_and_file_id"
HASH_INPUTS: Final = (HASH_INPUT_FILE_ID, HASH_INPUT_PARTITION_AND_FILE_ID)
DEFAULT_HASH_INPUT: Final = HASH_INPUT_FILE_ID

#: Every key that defines where data files live. A table's values for these are
#: fixed at creation; a caller passing other values gets StorageStrategyMismatchError.
STORAGE_KEYS: Final = (
    STORAGE_STRATEGY_CLASS,
    STORAGE_PATH,
    STORAGE_HASH_FUNCTION,
    STORAGE_HASH_INPUT,
    STORAGE_PREFIX_COUNT,
    STORAGE_PARTITION_LOCATIONS,
    STORAGE_TABLE_FOLDER,
)

#: CRC32 of the storage keys as the table was created with them: Hudi's own checksum covers
#: only the table name, and a hand-edited storage key would send every read to the wrong place.
STORAGE_CHECKSUM: Final = "hoodie.storage.checksum"

#: Where the table keeps fedcore's metadata table (``metadata.format.folder_of``): 1 (or absent)
#: inside Hudi's ``.hoodie/metadata/``, 2 in fed's own ``.hoodie/.fed/``. Set by fedcore, never
#: given; ``fedcore.commit.upgrade`` moves a table from 1 to 2.
METADATA_LAYOUT: Final = "hoodie.fed.metadata.layout"
CURRENT_METADATA_LAYOUT: Final = 2

#: The partitions of Apache Hudi's own metadata table (``.hoodie/metadata/``) that Hudi's
#: readers may use, and those a Hudi writer is building: a table Hudi's writers also write may
#: have one. fed's writes do not maintain it, so each drops it first (``fedcore.commit.upgrade``).
HUDI_METADATA_PARTITIONS: Final = "hoodie.table.metadata.partitions"
HUDI_METADATA_PARTITIONS_INFLIGHT: Final = "hoodie.table.metadata.partitions.inflight"
#: Where Hudi keeps its metadata table, under the table path.
HUDI_METADATA_FOLDER: Final = f"{HOODIE_FOLDER}/metadata"

#: The table a migration copied (``fed migrate``): recorded in the target's config.
MIGRATION_SOURCE: Final = "hoodie.fed.migration.source"

#: The table's identity: a UUID fed draws when it creates the table (or, for a table made
#: before, on its first write under this fedcore), and the table path it belongs to. A table
#: copied with its ``.hoodie/`` folder carries both, and is told apart from its source by the
#: path (``fedcore.handle.identity``). Set by fed, never given.
TABLE_ID: Final = "hoodie.fed.table.id"
TABLE_ID_PATH: Final = "hoodie.fed.table.path"

#: Entry-point group through which other packages register storage strategies by name.
STORAGE_STRATEGY_ENTRY_POINT_GROUP: Final = "fedcore.storage_strategies"


#: The settings a caller may give when opening or writing a table (storage keys aside):
#: anything else would be silently ignored, so it is refused.
RUNTIME_OPTIONS: Final[
    tuple[IntOption | FloatOption | BoolOption | ChoiceOption | ListOption | TextOption, ...]
] = (
    METADATA_COMPACT_DELTAS,
    COLUMN_STATS_ENABLE,
    COLUMN_STATS_COLUMNS,
    HEARTBEAT_INTERVAL_MS,
    HEARTBEAT_TOLERABLE_MISSES,
    MAX_FILE_SIZE,
    SMALL_FILE_LIMIT,
    RECORD_SIZE_ESTIMATE,
    RECORD_SIZE_ESTIMATION_THRESHOLD,
    PARQUET_COMPRESSION_CODEC,
    PARQUET_BLOCK_SIZE,
    PARQUET_PAGE_SIZE,
    CLEANER_COMMITS_RETAINED,
    CLEAN_AUTOMATIC,
    ARCHIVE_MIN_INSTANTS,
    ARCHIVE_MAX_INSTANTS,
    ARCHIVE_AUTOMATIC,
    COMPACT_INLINE,
    COMPACT_INLINE_MAX_DELTA_COMMITS,
    COMPACTION_WAIT_MS,
    LOG_DATA_BLOCK_FORMAT,
    RECONCILE_SCHEMA,
    SET_NULL_FOR_MISSING_COLUMNS,
    HIVE_SYNC_ENABLE,
    HIVE_SYNC_MODE,
    HIVE_SYNC_METASTORE_URIS,
    HIVE_SYNC_DATABASE,
    HIVE_SYNC_TABLE,
    META_SYNC_ENABLE,
    META_SYNC_TOOLS,
    AWS_GLUE_ENDPOINT,
    AWS_GLUE_REGION,
    AWS_ACCESS_KEY,
    AWS_SECRET_KEY,
    AWS_SESSION_TOKEN,
)
RUNTIME_KEYS: Final = frozenset(str(option) for option in RUNTIME_OPTIONS)


def key_generator(config: Mapping[str, str]) -> str:
    """The table's key generator class (``KEY_GENERATOR_CLASS``, or the class of its
    ``KEY_GENERATOR_TYPE`` where only a type is given, as in Hudi 1.x's tables), surrounding
    blanks dropped as Hudi's config drops them; "" when unset. Every rule that depends on it
    reads it here."""
    named = config.get(KEY_GENERATOR_CLASS, "").strip()
    if named:
        return named
    return KEY_GENERATOR_TYPES.get(config.get(KEY_GENERATOR_TYPE, "").strip().upper(), "")


def sync_tools(options: Mapping[str, str]) -> tuple[str, ...]:
    """The catalogs a commit syncs with (``SYNC_TOOLS``' names), as Hudi picks them: sync is on
    with ``META_SYNC_ENABLE`` or ``HIVE_SYNC_ENABLE``; the tools are ``META_SYNC_TOOLS`` (default:
    the Hive sync), and the Hive sync too when ``HIVE_SYNC_ENABLE``. Each tool once; a tool fed
    does not have is refused, never skipped, and so are tools named with sync off."""
    named = META_SYNC_TOOLS.of(options)
    if not META_SYNC_ENABLE.of(options) and not HIVE_SYNC_ENABLE.of(options):
        if named is not None:
            raise ConfigError(
                META_SYNC_TOOLS,
                f"names sync tools, but neither {META_SYNC_ENABLE} nor {HIVE_SYNC_ENABLE} is true",
            )
        return ()
    tools = list(dict.fromkeys(named or (HIVE_SYNC_TOOL,)))
    for tool in tools:
        if tool not in SYNC_TOOLS:
            raise ConfigError(META_SYNC_TOOLS, f"{tool!r}: fed syncs with {' and '.join(SYNC_TOOLS)} only")
    if HIVE_SYNC_ENABLE.of(options) and HIVE_SYNC_TOOL not in tools:
        tools.insert(0, HIVE_SYNC_TOOL)
    return tuple(tools)


def check_options(options: Mapping[str, str]) -> None:
    """Parse every runtime setting present, so a bad value fails before a write begins,
    never in a table service after its commit."""
    for option in RUNTIME_OPTIONS:
        option.of(options)
    if HIVE_SYNC_TOOL in sync_tools(options) and not HIVE_SYNC_METASTORE_URIS.of(options):
        enabled = HIVE_SYNC_ENABLE if HIVE_SYNC_ENABLE.of(options) else META_SYNC_TOOLS
        raise ConfigError(HIVE_SYNC_METASTORE_URIS, f"is required to sync to a Hive metastore ({enabled})")
    keep_min, keep_max = ARCHIVE_MIN_INSTANTS.of(options), ARCHIVE_MAX_INSTANTS.of(options)
    if keep_min >= keep_max:
        raise ConfigError(
            ARCHIVE_MIN_INSTANTS, f"{keep_min} must be below {ARCHIVE_MAX_INSTANTS} ({keep_max})"
        )


#: Table-config keys a new table may be given: the Hudi keys fedcore reads from a table's
#: config, and those it records for other tools without reading them (the Avro schema at
#: creation; the table a migration copied). Runtime options and storage keys are accepted
#: too; the checksums are computed. Any other key would be stored and never read, which for
#: a misspelt storage key means a table created in the wrong layout for its whole life.
TABLE_KEYS: Final = frozenset(
    {
        TABLE_NAME,
        DATABASE_NAME,
        TABLE_TYPE,
        TABLE_VERSION,
        WRITE_TABLE_VERSION,
        RECORD_KEY_FIELDS,
        PARTITION_FIELDS,
        PRECOMBINE_FIELD,
        ORDERING_FIELDS,
        RECORD_MERGE_MODE,
        HIVE_STYLE_PARTITIONING,
        URL_ENCODE_PARTITIONING,
        KEY_GENERATOR_CLASS,
        KEY_GENERATOR_TYPE,
        TIMELINE_LAYOUT_VERSION,
        TIMELINE_TIMEZONE,
        ARCHIVELOG_FOLDER,
        BASE_FILE_FORMAT,
        CREATE_SCHEMA,
        PAYLOAD_CLASS,
        RECORD_MERGER_STRATEGY,
        str(DROP_PARTITION_COLUMNS),
        str(POPULATE_META_FIELDS),
        str(METADATA_ENABLE),
        MIGRATION_SOURCE,
    }
)
#: Key-generator settings (a timestamp-based key generator's formats, ...): recorded with the
#: key generator they configure, as Hudi records them.
KEY_GENERATOR_PREFIXES: Final = ("hoodie.keygen.", "hoodie.deltastreamer.keygen.")
#: Keys fedcore computes; a value given for one is refused rather than overwritten.
COMPUTED_KEYS: Final = frozenset(
    {TABLE_CHECKSUM, STORAGE_CHECKSUM, METADATA_LAYOUT, TABLE_ID, TABLE_ID_PATH, STORAGE_TABLE_FOLDER}
)


def check_table_keys(properties: Iterable[str], strategy_keys: Iterable[str] = ()) -> None:
    """Refuse any key a new table's config may not hold (see ``TABLE_KEYS``): ``ConfigError``
    names the key and the known key nearest to it."""
    known = TABLE_KEYS | RUNTIME_KEYS | set(STORAGE_KEYS) | set(strategy_keys)
    for key in sorted(properties):
        if key in COMPUTED_KEYS:
            raise ConfigError(key, "is computed by fed, never given")
        if key in CREDENTIAL_KEYS:
            raise ConfigError(
                key,
                "is a credential: a table's config is stored in the clear, so give it to a write's options",
            )
        if key not in known and not key.startswith(KEY_GENERATOR_PREFIXES):
            raise unknown_key(key, known, "is not a table property fed reads or records")


#: Keys that look like they hold a secret: never stored in a table's config, never suggested.
SECRET_KEY_RE: Final = re.compile(
    r"secret|password|passwd|credential|access[._-]?key|session[._-]?token|sas[._-]?token", re.I
)
#: Hudi's write options that define a table (as its Spark writer takes them): fixed in
#: ``hoodie.properties`` when the table is created.
WRITE_DEFINITION_KEYS: Final = frozenset(
    {
        "hoodie.datasource.write.recordkey.field",
        "hoodie.datasource.write.partitionpath.field",
        "hoodie.datasource.write.precombine.field",
        "hoodie.datasource.write.keygenerator.class",
        "hoodie.datasource.write.table.type",
        "hoodie.datasource.write.table.name",
    }
)


def unknown_key(key: str, known: Iterable[str], what: str) -> ConfigError:
    """The error for a key fed would not read: ``what`` it is not, and the nearest known key
    (none for a key that holds a secret: no key it resembles would take one)."""
    if SECRET_KEY_RE.search(key):
        return ConfigError(
            key,
            f"{what}, so it would be ignored; it looks like a credential: give credentials as storage "
            "options (key, secret, token, profile) or the environment's AWS_* variables",
        )
    nearest = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    hint = f"; did you mean {nearest[0]}?" if nearest else ""
    return ConfigError(key, f"{what}, so it would be ignored{hint}")
