"""Table-property keys and their defaults, in one place.

Keys are Apache Hudi's own wherever Hudi has one, so that a table written by
fedcore is recognisable to Hudi tools. The storage keys follow Hudi's RFC-60
(federated storage layout) naming. The same keys are accepted wherever a user
passes options: the Python API, the CLI and the engine adapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from fedcore.exceptions import ConfigError

HOODIE_FOLDER: Final = ".hoodie"
PROPERTIES_FILE: Final = "hoodie.properties"
PARTITION_METADATA_FILE: Final = ".hoodie_partition_metadata"

# --- Hudi table config (hoodie.properties) ---------------------------------------
TABLE_NAME: Final = "hoodie.table.name"
DATABASE_NAME: Final = "hoodie.database.name"
TABLE_TYPE: Final = "hoodie.table.type"
TABLE_VERSION: Final = "hoodie.table.version"
RECORD_KEY_FIELDS: Final = "hoodie.table.recordkey.fields"
PARTITION_FIELDS: Final = "hoodie.table.partition.fields"
PRECOMBINE_FIELD: Final = "hoodie.table.precombine.field"
HIVE_STYLE_PARTITIONING: Final = "hoodie.datasource.write.hive_style_partitioning"
URL_ENCODE_PARTITIONING: Final = "hoodie.datasource.write.partitionpath.urlencode"
KEY_GENERATOR_CLASS: Final = "hoodie.table.keygenerator.class"
TIMELINE_LAYOUT_VERSION: Final = "hoodie.timeline.layout.version"
ARCHIVELOG_FOLDER: Final = "hoodie.archivelog.folder"
BASE_FILE_FORMAT: Final = "hoodie.table.base.file.format"
DROP_PARTITION_COLUMNS: Final = "hoodie.datasource.write.drop.partition.columns"
TABLE_CHECKSUM: Final = "hoodie.table.checksum"

TABLE_TYPE_COW: Final = "COPY_ON_WRITE"
TABLE_TYPE_MOR: Final = "MERGE_ON_READ"
DEFAULT_TABLE_VERSION: Final = 6
DEFAULT_TIMELINE_LAYOUT_VERSION: Final = 1

SIMPLE_KEY_GENERATOR: Final = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEY_GENERATOR: Final = "org.apache.hudi.keygen.ComplexKeyGenerator"
NON_PARTITIONED_KEY_GENERATOR: Final = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"

# --- Metadata table, writes, cleaning (Hudi's keys and defaults) --------------------
METADATA_ENABLE: Final = "hoodie.metadata.enable"
#: A new table gets the metadata table unless told otherwise (Hudi's default since 0.11);
#: an existing config without the key has none (``TableConfig.metadata_enabled``).
DEFAULT_METADATA_ENABLE_NEW_TABLE: Final = True
METADATA_COMPACT_DELTAS: Final = "hoodie.metadata.compact.max.delta.commits"
DEFAULT_METADATA_COMPACT_DELTAS: Final = 10
HEARTBEAT_INTERVAL_MS: Final = "hoodie.client.heartbeat.interval_in_ms"
DEFAULT_HEARTBEAT_INTERVAL_MS: Final = 60_000
HEARTBEAT_TOLERABLE_MISSES: Final = "hoodie.client.heartbeat.tolerable.misses"
DEFAULT_HEARTBEAT_TOLERABLE_MISSES: Final = 2
MAX_FILE_SIZE: Final = "hoodie.parquet.max.file.size"
DEFAULT_MAX_FILE_SIZE: Final = 120 * 2**20
SMALL_FILE_LIMIT: Final = "hoodie.parquet.small.file.limit"
DEFAULT_SMALL_FILE_LIMIT: Final = 100 * 2**20
RECORD_SIZE_ESTIMATE: Final = "hoodie.copyonwrite.record.size.estimate"
DEFAULT_RECORD_SIZE_ESTIMATE: Final = 1024
CLEANER_COMMITS_RETAINED: Final = "hoodie.cleaner.commits.retained"
DEFAULT_CLEANER_COMMITS_RETAINED: Final = 10
CLEAN_AUTOMATIC: Final = "hoodie.clean.automatic"
ARCHIVE_MIN_INSTANTS: Final = "hoodie.keep.min.commits"
DEFAULT_ARCHIVE_MIN_INSTANTS: Final = 20
ARCHIVE_MAX_INSTANTS: Final = "hoodie.keep.max.commits"
DEFAULT_ARCHIVE_MAX_INSTANTS: Final = 30
ARCHIVE_AUTOMATIC: Final = "hoodie.archive.automatic"

# --- Storage strategy (fedcore / RFC-60) ------------------------------------------
STORAGE_STRATEGY_CLASS: Final = "hoodie.storage.strategy.class"
STORAGE_PATH: Final = "hoodie.storage.path"
STORAGE_HASH_FUNCTION: Final = "hoodie.storage.hash.function"
STORAGE_HASH_INPUT: Final = "hoodie.storage.hash.input"
STORAGE_PREFIX_COUNT: Final = "hoodie.storage.prefix.count"
STORAGE_PARTITION_LOCATIONS: Final = "hoodie.storage.partition.locations"

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
)

#: CRC32 of the storage keys as the table was created with them: Hudi's own checksum covers
#: only the table name, and a hand-edited storage key would send every read to the wrong place.
STORAGE_CHECKSUM: Final = "hoodie.storage.checksum"

#: Entry-point group through which other packages register storage strategies by name.
STORAGE_STRATEGY_ENTRY_POINT_GROUP: Final = "fedcore.storage_strategies"


def property_as_int(options: Mapping[str, str], key: str, default: int, minimum: int | None = None) -> int:
    """An integer setting; a bad value is the caller's configuration error, named."""
    try:
        value = int(options.get(key, default))
    except (TypeError, ValueError):
        raise ConfigError(key, f"{options[key]!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ConfigError(key, f"{value} is below the least allowed value, {minimum}")
    return value


def property_as_bool(options: Mapping[str, str], key: str, default: bool = True) -> bool:
    value = str(options.get(key, default)).strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(key, f"{options[key]!r} is not true or false")
    return value == "true"


#: Integer settings a write and its table services read: (default, least allowed value).
INT_OPTIONS: Final[dict[str, tuple[int, int]]] = {
    METADATA_COMPACT_DELTAS: (DEFAULT_METADATA_COMPACT_DELTAS, 1),
    HEARTBEAT_INTERVAL_MS: (DEFAULT_HEARTBEAT_INTERVAL_MS, 1),
    HEARTBEAT_TOLERABLE_MISSES: (DEFAULT_HEARTBEAT_TOLERABLE_MISSES, 0),
    MAX_FILE_SIZE: (DEFAULT_MAX_FILE_SIZE, 1),
    SMALL_FILE_LIMIT: (DEFAULT_SMALL_FILE_LIMIT, 0),
    RECORD_SIZE_ESTIMATE: (DEFAULT_RECORD_SIZE_ESTIMATE, 1),
    CLEANER_COMMITS_RETAINED: (DEFAULT_CLEANER_COMMITS_RETAINED, 1),
    ARCHIVE_MIN_INSTANTS: (DEFAULT_ARCHIVE_MIN_INSTANTS, 1),
    ARCHIVE_MAX_INSTANTS: (DEFAULT_ARCHIVE_MAX_INSTANTS, 2),
}
BOOL_OPTIONS: Final = (CLEAN_AUTOMATIC, ARCHIVE_AUTOMATIC)
#: Every setting a caller may give when opening or writing a table (storage keys aside):
#: anything else would be silently ignored, so it is refused.
RUNTIME_KEYS: Final = frozenset([*INT_OPTIONS, *BOOL_OPTIONS])


def check_options(options: Mapping[str, str]) -> None:
    """Parse every runtime setting present, so a bad value fails before a write begins,
    never in a table service after its commit."""
    for key, (default, minimum) in INT_OPTIONS.items():
        if key in options:
            property_as_int(options, key, default, minimum)
    for key in BOOL_OPTIONS:
        if key in options:
            property_as_bool(options, key)
    keep_min = property_as_int(options, ARCHIVE_MIN_INSTANTS, DEFAULT_ARCHIVE_MIN_INSTANTS)
    keep_max = property_as_int(options, ARCHIVE_MAX_INSTANTS, DEFAULT_ARCHIVE_MAX_INSTANTS)
    if keep_min >= keep_max:
        raise ConfigError(
            ARCHIVE_MIN_INSTANTS, f"{keep_min} must be below {ARCHIVE_MAX_INSTANTS} ({keep_max})"
        )
