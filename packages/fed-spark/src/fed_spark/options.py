"""What a ``format("fed")`` read is told, checked once: Hudi's option names where Hudi has one.

Spark hands a data source its options as strings, case-insensitively. Every key a read
accepts is bound here to its parser; any other key is refused (``ConfigError``) rather
than ignored, so a misspelt ``as.of.instant`` can never silently read the latest data.

Every key fed-spark reads (the data source's options, ``create_table``'s properties, the
Spark conf keys it consults) is named here once and declared in ``SPARK_OPTIONS``, from
which the configuration reference is generated. This module imports fedcore alone, never
PySpark: the docs build reads it without Spark installed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from fedcore import properties as P
from fedcore.engine import OPERATIONS, QUERY_TYPES, QueryType, StorageOptions, storage_options_of
from fedcore.exceptions import ConfigError, InvalidPathError
from fedcore.properties import TableType

PATH: Final = "path"
LOCATION: Final = "location"
#: Properties Spark's catalog keeps for every table and passes with a SQL table's options.
CATALOG_PROPERTIES: Final = ("provider", "owner", "comment", "external", "is_managed_location", "collation")
#: Hudi's time travel: the table as of this instant (``yyyyMMddHHmmss[SSS]``,
#: ``yyyy-MM-dd HH:mm:ss[.SSS]`` or ``yyyy-MM-dd``).
AS_OF_INSTANT: Final = "as.of.instant"
QUERY_TYPE: Final = "hoodie.datasource.query.type"
INCREMENTAL: Final = "incremental"
#: An incremental query's range: records written after the begin instant, up to the end one.
BEGIN_INSTANT: Final = "hoodie.datasource.read.begin.instanttime"
END_INSTANT: Final = "hoodie.datasource.read.end.instanttime"
#: fsspec options of the storage (``fed.storage.endpoint_url``, ``fed.storage.key``, ...), as
#: ``fed ... --storage-option``; what ``fed_spark.register`` was given comes first.
STORAGE_PREFIX: Final = "fed.storage."

#: Spark's defaults for packing files into input partitions (spark.sql.files.*).
DEFAULT_MAX_PARTITION_BYTES: Final = 128 * 2**20
DEFAULT_OPEN_COST_BYTES: Final = 4 * 2**20


@dataclass(frozen=True)
class SessionSettings:
    """What the session tells every read and write: bound at registration."""

    storage_options: StorageOptions | None = None
    parallelism: int = 2
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    open_cost_bytes: int = DEFAULT_OPEN_COST_BYTES

    def storage(self, given: Mapping[str, str]) -> StorageOptions | None:
        """The session's storage options with an operation's ``fed.storage.*`` over them."""
        extra = storage_options_of(given)
        if extra is None:
            return self.storage_options
        base = dict(self.storage_options or {})
        return {**base, "s3": {**base.get("s3", {}), **extra["s3"]}}


_GLOB = re.compile(r"[*?\[\]{}]")
_INSTANT_FORMATS: Final = (
    (re.compile(r"\d{17}"), ""),
    (re.compile(r"\d{14}"), "000"),
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}"), ""),
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"), "000"),
    (re.compile(r"\d{4}-\d{2}-\d{2}"), "000000000"),
)


@dataclass(frozen=True)
class ReadOptions:
    path: str
    as_of: str | None
    query_type: QueryType
    storage: dict[str, str]
    #: The options as given (without the catalog's properties), to be recorded with a SQL table.
    given: dict[str, str]
    #: An incremental query: records written after this instant (``as_of`` is its end).
    changed_after: str | None = None

    @classmethod
    def of(cls, options: Mapping[str, str]) -> ReadOptions:
        given = _given(options)
        recorded = {k: v for k, v in given.items() if k != LOCATION}
        path = _path_of(given)
        as_of = given.pop(AS_OF_INSTANT, None)
        query_type = given.pop(QUERY_TYPE, "snapshot").strip().lower()
        begin, end = given.pop(BEGIN_INSTANT, None), given.pop(END_INSTANT, None)
        if query_type == INCREMENTAL:
            if begin is None:
                raise ConfigError(BEGIN_INSTANT, "is needed by an incremental query")
            if as_of is not None:
                raise ConfigError(
                    AS_OF_INSTANT, f"is for snapshots; an incremental query ends at {END_INSTANT}"
                )
        elif begin is not None or end is not None:
            raise ConfigError(
                BEGIN_INSTANT if begin is not None else END_INSTANT,
                f"is for incremental queries: set {QUERY_TYPE}={INCREMENTAL}",
            )
        elif query_type not in QUERY_TYPES:
            raise ConfigError(
                QUERY_TYPE, f"{query_type!r} is not one of {', '.join([*QUERY_TYPES, INCREMENTAL])}"
            )
        storage = _storage_only(
            given, "a fed read", f"{PATH}, {AS_OF_INSTANT}, {QUERY_TYPE}, {BEGIN_INSTANT}, {END_INSTANT}"
        )
        recorded[PATH] = path
        if query_type == INCREMENTAL:
            assert begin is not None
            start = begin.strip() if not begin.strip().strip("0") else instant_of(begin, BEGIN_INSTANT)
            stop = None if end is None else instant_of(end, END_INSTANT)
            return cls(path, stop, "snapshot", storage, recorded, changed_after=start)
        instant = None if as_of is None else instant_of(as_of)
        return cls(path, instant, query_type, storage, recorded)  # type: ignore[arg-type]


def _storage_only(given: Mapping[str, str], what: str, options: str) -> dict[str, str]:
    """The fsspec options (``fed.storage.*``) left in ``given``, which must hold nothing else:
    any other key is refused rather than ignored."""
    unknown = sorted(k for k in given if not k.startswith(STORAGE_PREFIX))
    if unknown:
        raise ConfigError(
            unknown[0],
            f"is not an option of {what} (it would be ignored); the options are {options} and "
            f"{STORAGE_PREFIX}<fsspec option>",
        )
    return {k[len(STORAGE_PREFIX) :]: v for k, v in given.items()}


def _given(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's options, keys lower-cased, without the properties Spark's catalog keeps for
    every SQL table (a catalog entry's, not the operation's)."""
    given = {str(k).lower(): str(v) for k, v in options.items()}
    for reserved in CATALOG_PROPERTIES:
        given.pop(reserved, None)
    return given


def _path_of(given: dict[str, str]) -> str:
    """The table path, taken out of ``given``: ``path``, or ``location`` as a SQL table
    (``CREATE TABLE ... USING fed OPTIONS (path ...)``) passes it."""
    located = given.pop(LOCATION, None)
    path = given.pop(PATH, None) or located
    if located is not None and located != path:
        raise ConfigError(LOCATION, f"{located!r} differs from path {path!r}: give one table path")
    return table_path(path)


def table_path(path: str | None) -> str:
    """The table path a read or write names: one path, never a glob (the files come from the
    metadata table, so a pattern would match nothing meaningful)."""
    if path is None or not path.strip():
        raise InvalidPathError("no table path: pass it to load(...) or save(...), or as option 'path'")
    if _GLOB.search(path):
        raise InvalidPathError(
            f"{path!r} is a glob; pass the table path (the folder holding .hoodie): a fed table's "
            "files come from its metadata table, and partition filters select partitions"
        )
    return path.strip()


def instant_of(text: str, key: str = AS_OF_INSTANT) -> str:
    """Hudi's accepted time-travel formats as an instant time (``yyyyMMddHHmmssSSS``)."""
    text = text.strip()
    for pattern, suffix in _INSTANT_FORMATS:
        if pattern.fullmatch(text):
            return re.sub(r"\D", "", text) + suffix
    raise ConfigError(
        key,
        f"{text!r} is not an instant: use yyyyMMddHHmmssSSS, yyyyMMddHHmmss, "
        "'yyyy-MM-dd HH:mm:ss[.SSS]' or yyyy-MM-dd",
    )


TABLE_NAME: Final = P.TABLE_NAME
OPERATION: Final = P.OPERATION
RECORD_KEY_FIELD: Final = "hoodie.datasource.write.recordkey.field"
PARTITION_PATH_FIELD: Final = "hoodie.datasource.write.partitionpath.field"
PRECOMBINE_FIELD: Final = "hoodie.datasource.write.precombine.field"
HIVE_STYLE: Final = P.HIVE_STYLE_PARTITIONING
TABLE_TYPE: Final = "hoodie.datasource.write.table.type"
_WRITE_KEYS: Final = (
    TABLE_NAME,
    OPERATION,
    RECORD_KEY_FIELD,
    PARTITION_PATH_FIELD,
    PRECOMBINE_FIELD,
    HIVE_STYLE,
)


@dataclass(frozen=True)
class WriteOptions:
    """A ``format("fed")`` write's options: Hudi's names for the table and the operation;
    every other ``hoodie.*`` key goes to fedcore, which refuses keys it does not read."""

    path: str
    table_name: str | None
    operation: str | None  # None: Hudi's default for how the write came (upsert, or insert for SQL)
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] | None  # None: not given
    precombine_field: str | None
    hive_style: bool | None
    hoodie: dict[str, str]
    storage: dict[str, str]
    #: The type of a table the write creates (None: not given, Hudi's copy-on-write).
    table_type: TableType | None = None

    @classmethod
    def of(cls, options: Mapping[str, str]) -> WriteOptions:
        given = _given(options)
        path = _path_of(given)
        table_type = given.pop(TABLE_TYPE, None)
        if table_type is not None and table_type.strip().upper() not in P.TABLE_TYPES:
            raise ConfigError(TABLE_TYPE, f"{table_type!r} is not one of {', '.join(P.TABLE_TYPES)}")
        found = {key: given.pop(key) for key in _WRITE_KEYS if key in given}
        storage = {
            k[len(STORAGE_PREFIX) :]: given.pop(k) for k in list(given) if k.startswith(STORAGE_PREFIX)
        }
        for key in given:
            if not key.startswith("hoodie."):
                raise ConfigError(
                    key,
                    "is not an option of a fed write (it would be ignored); fed takes Hudi's hoodie.* keys",
                )
        hive = found.get(HIVE_STYLE)
        if hive is not None and hive.strip().lower() not in ("true", "false"):
            raise ConfigError(HIVE_STYLE, f"{hive!r} is not true or false")
        partitions = found.get(PARTITION_PATH_FIELD)
        if partitions is not None and ":" in partitions:
            raise ConfigError(
                PARTITION_PATH_FIELD,
                f"{partitions!r}: custom key generator types (field:type) are not supported",
            )
        return cls(
            path=path,
            table_name=found.get(TABLE_NAME),
            operation=found[OPERATION].strip().lower() if OPERATION in found else None,
            record_key_fields=_fields(found.get(RECORD_KEY_FIELD)),
            partition_fields=None if partitions is None else _fields(partitions),
            precombine_field=found.get(PRECOMBINE_FIELD) or None,
            hive_style=None if hive is None else hive.strip().lower() == "true",
            hoodie=given,
            storage=storage,
            table_type=None if table_type is None else _table_type(table_type),
        )


def _table_type(text: str) -> TableType:
    return next(t for t in P.TABLE_TYPES if t == text.strip().upper())


def _fields(text: str | None) -> tuple[str, ...]:
    return tuple(f.strip() for f in (text or "").split(",") if f.strip())


#: Spark's option naming a streaming query's checkpoint (Spark passes it to the sink).
CHECKPOINT_LOCATION: Final = "checkpointLocation"
#: Hudi's: who a streaming sink's batches are recorded as (default: the query's id, which Spark
#: keeps in the checkpoint, so it survives restarts and differs between queries).
STREAMING_IDENTIFIER: Final = "hoodie.datasource.write.streaming.checkpoint.identifier"
#: Hudi's: where a streaming read starts: ``earliest``, ``latest`` or an instant (inclusive).
START_OFFSET: Final = "hoodie.datasource.streaming.startOffset"
EARLIEST: Final = "earliest"
LATEST: Final = "latest"


@dataclass(frozen=True)
class StreamWriteOptions:
    """A ``writeStream.format("fed")``: a write's options, and where its batches are recorded."""

    write: WriteOptions
    checkpoint_location: str | None
    identifier: str | None

    @classmethod
    def of(cls, options: Mapping[str, str]) -> StreamWriteOptions:
        given = _given(options)
        checkpoint = given.pop(CHECKPOINT_LOCATION.lower(), None)
        identifier = given.pop(STREAMING_IDENTIFIER, None)
        if checkpoint is None and identifier is None:
            # Without either, a batch's id says nothing of which query wrote it: a new query
            # would skip batches an old one committed, or replay them twice.
            raise ConfigError(
                CHECKPOINT_LOCATION,
                "is needed by a fed streaming write (its query id makes each batch commit exactly once): "
                f"set it on writeStream, or name the writer with {STREAMING_IDENTIFIER}",
            )
        return cls(WriteOptions.of(given), checkpoint, identifier.strip() if identifier else None)


@dataclass(frozen=True)
class StreamReadOptions:
    """A ``readStream.format("fed")``: the table and where the stream starts."""

    path: str
    #: ``earliest``, ``latest``, or an instant time (records it wrote are read).
    start: str
    storage: dict[str, str]

    @classmethod
    def of(cls, options: Mapping[str, str]) -> StreamReadOptions:
        given = _given(options)
        path = _path_of(given)
        start = given.pop(START_OFFSET.lower(), EARLIEST).strip()
        if start.lower() in (EARLIEST, LATEST):
            start = start.lower()
        else:
            start = instant_of(start, START_OFFSET)
        return cls(path, start, _storage_only(given, "a fed streaming read", f"{PATH}, {START_OFFSET}"))


#: Hudi's Spark SQL table properties (``create_table``'s TBLPROPERTIES), read case-insensitively.
PRIMARY_KEY: Final = "primaryKey"
PRECOMBINE_PROPERTY: Final = "preCombineField"
TABLE_TYPE_PROPERTY: Final = "type"
#: The table types ``type`` names, and what they are in Hudi's write options.
TABLE_TYPE_NAMES: Final = {"cow": "COPY_ON_WRITE", "mor": "MERGE_ON_READ"}

#: Spark conf keys fed-spark reads: how a scan's files are packed into input partitions, as
#: Spark's file sources pack them (read at ``register``).
MAX_PARTITION_BYTES: Final = "spark.sql.files.maxPartitionBytes"
OPEN_COST_BYTES: Final = "spark.sql.files.openCostInBytes"
#: How many tasks a scan is spread over at least: the first of these that is set.
PARALLELISM_KEYS: Final = (
    "spark.sql.files.minPartitionNum",
    "spark.sql.leafNodeDefaultParallelism",
    "spark.default.parallelism",
)
#: Spark's switch for offering a Python source its filters (``register`` turns it on).
FILTER_PUSHDOWN: Final = "spark.sql.python.filterPushdown.enabled"
#: How many tasks ``fed_spark.write`` routes an upsert's or delete's rows over.
SHUFFLE_PARTITIONS: Final = "spark.sql.shuffle.partitions"
#: What a Spark Connect plan may hold (the server's setting; the client's channel alike).
CONNECT_MESSAGE_SIZE: Final = "spark.connect.grpc.maxInboundMessageSize"
#: What a Spark Connect plan may hold by default (``CONNECT_MESSAGE_SIZE`` on the server, the
#: client's channel alike).
CONNECT_MESSAGE_BYTES: Final = 128 * 2**20
#: ``fed_spark.register``'s argument: the session's storage options.
STORAGE_OPTIONS_ARGUMENT: Final = "storage_options"

#: Where a key applies: a ``format("fed")`` read (``spark.read``, a SQL table's or view's
#: OPTIONS), a write (``df.write.format("fed")``, ``fed_spark.write``'s options, SQL
#: ``INSERT``), a streaming read or write, ``fed_spark.create_table``'s statement,
#: ``fed_spark.register``'s arguments, or the session's Spark conf.
READ: Final = "read"
WRITE: Final = "write"
STREAM_READ: Final = "readStream"
STREAM_WRITE: Final = "writeStream"
CREATE_TABLE: Final = "create_table"
REGISTER: Final = "register"
SPARK_CONF: Final = "Spark conf"
SCOPES: Final = (READ, WRITE, STREAM_READ, STREAM_WRITE, CREATE_TABLE, REGISTER, SPARK_CONF)


@dataclass(frozen=True)
class SparkOption:
    """A key fed-spark reads: where it applies, what it takes, its default (None: none, or
    as the description says) and an example value."""

    name: str
    scopes: tuple[str, ...]
    kind: str
    default: str | None
    description: str
    example: str


def _mb(size: int) -> str:
    return f"{size // 2**20}m"


def _fewest_tasks(index: int) -> str:
    """What the ``index``-th of ``PARALLELISM_KEYS`` does: the first of them set counts."""
    before = " and ".join(f"`{k}`" for k in PARALLELISM_KEYS[:index])
    where = f", where {before} {'is' if index == 1 else 'are'} not set" if index else ""
    none = (
        " (none set: the cluster's cores, which a Spark Connect client counts with one small job)"
        if index + 1 == len(PARALLELISM_KEYS)
        else ""
    )
    return f"Read at `register`: the fewest tasks a scan is spread over{where}{none}."


_TABLE_OPTIONS: Final = (READ, WRITE, STREAM_READ, STREAM_WRITE)
_INSTANT_TEXT: Final = "`yyyyMMddHHmmss[SSS]`, `yyyy-MM-dd HH:mm:ss[.SSS]` or `yyyy-MM-dd`"

#: Every key fed-spark reads, in the order the configuration reference lists them. The names
#: are the constants the readers use, so the reference cannot name a key they do not read.
SPARK_OPTIONS: Final[tuple[SparkOption, ...]] = (
    SparkOption(
        PATH,
        _TABLE_OPTIONS,
        "path",
        None,
        "The table path (the folder holding `.hoodie`), as `load(path)` and `save(path)` give it; "
        f"a glob is refused. A SQL table's `{LOCATION}` is taken as its path (both given: the same).",
        "s3://lake/rides",
    ),
    SparkOption(
        f"{STORAGE_PREFIX}<option>",
        (*_TABLE_OPTIONS, CREATE_TABLE),
        "text",
        None,
        "A storage option, flat as the CLI's `--storage-option` takes it (S3's: `endpoint_url` and "
        "`region_name` go to the botocore client, any other key to s3fs; see Storage options), "
        "over those `fed_spark.register` was given. A SQL table keeps them with its path.",
        f"{STORAGE_PREFIX}endpoint_url=http://localhost:9000",
    ),
    SparkOption(
        AS_OF_INSTANT,
        (READ,),
        "instant",
        None,
        f"Time travel: the table as of this instant ({_INSTANT_TEXT}); not with an incremental "
        "query. Default: the latest completed instant.",
        "2024-01-31 12:00:00",
    ),
    SparkOption(
        QUERY_TYPE,
        (READ,),
        "choice",
        "snapshot",
        f"One of {', '.join(f'`{q}`' for q in (*QUERY_TYPES, INCREMENTAL))}: a merge-on-read "
        "table's base files alone (`read_optimized`), or the latest version of every record "
        f"written in a range of instants (`{INCREMENTAL}`).",
        INCREMENTAL,
    ),
    SparkOption(
        BEGIN_INSTANT,
        (READ,),
        "instant",
        None,
        f"An incremental query's start, exclusive (needed by one): records written after this "
        f"instant ({_INSTANT_TEXT}, or `000` for the first).",
        "20240131120000000",
    ),
    SparkOption(
        END_INSTANT,
        (READ,),
        "instant",
        None,
        "An incremental query's end, inclusive. Default: the latest completed instant.",
        "20240201000000000",
    ),
    SparkOption(
        START_OFFSET,
        (STREAM_READ,),
        "`earliest`, `latest` or an instant",
        EARLIEST,
        "Where a streaming read starts: the table's first instant, its latest (only what comes "
        "after), or an instant (read from it on, inclusive).",
        LATEST,
    ),
    SparkOption(
        TABLE_NAME,
        (WRITE, STREAM_WRITE),
        "text",
        None,
        "The name of a table the write creates (default: the path's last part); given to a "
        "table that exists, it must be its name.",
        "rides",
    ),
    SparkOption(
        OPERATION,
        (WRITE, STREAM_WRITE),
        "choice",
        "upsert",
        f"One of {', '.join(f'`{o}`' for o in OPERATIONS)}. SQL `INSERT INTO` inserts; the "
        "Overwrite save mode replaces the table, or with `insert_overwrite` the partitions written.",
        "bulk_insert",
    ),
    SparkOption(
        RECORD_KEY_FIELD,
        (WRITE, STREAM_WRITE, CREATE_TABLE),
        "list (comma-separated)",
        None,
        "The record key columns: needed to create a table; given to a table that exists, they "
        f"must be its. In `create_table`, `{PRIMARY_KEY}` says the same.",
        "ride_id",
    ),
    SparkOption(
        PARTITION_PATH_FIELD,
        (WRITE, STREAM_WRITE),
        "list (comma-separated)",
        None,
        "The partition columns of a table the write creates (default: none, unpartitioned); "
        "Hudi's `field:type` key generator types are refused.",
        "city",
    ),
    SparkOption(
        PRECOMBINE_FIELD,
        (WRITE, STREAM_WRITE, CREATE_TABLE),
        "text",
        None,
        "The column whose greatest value wins between records of one key. In `create_table`, "
        f"`{PRECOMBINE_PROPERTY}` says the same.",
        "ts",
    ),
    SparkOption(
        HIVE_STYLE,
        (WRITE, STREAM_WRITE),
        "boolean",
        "true",
        "Whether a new table's partition folders are named `column=value` (Hudi's default is "
        "false; fed's is true).",
        "false",
    ),
    SparkOption(
        TABLE_TYPE,
        (WRITE, STREAM_WRITE),
        "choice",
        P.TABLE_TYPES[0],
        f"One of {', '.join(f'`{t}`' for t in P.TABLE_TYPES)}: the type of a table the write "
        "creates; given to a table that exists, it must be its type.",
        "MERGE_ON_READ",
    ),
    SparkOption(
        "hoodie.*",
        (WRITE, STREAM_WRITE, CREATE_TABLE),
        "as the key's",
        None,
        "Any other `hoodie.*` key goes to fedcore: its runtime settings and table config (the "
        "tables above); a key fedcore does not read is refused.",
        "hoodie.parquet.compression.codec=zstd",
    ),
    SparkOption(
        CHECKPOINT_LOCATION,
        (STREAM_WRITE,),
        "path",
        None,
        "Spark's checkpoint of the query: the query id Spark keeps there names the writer of each "
        "batch, so a batch commits exactly once. This or the identifier below is needed.",
        "s3a://lake/checkpoints/bronze",
    ),
    SparkOption(
        STREAMING_IDENTIFIER,
        (STREAM_WRITE,),
        "text",
        None,
        "Who a streaming write's batches are recorded as (default: the query's id, from its "
        "checkpoint): for a query without its own `checkpointLocation` option.",
        "bronze-ingest",
    ),
    SparkOption(
        PRIMARY_KEY,
        (CREATE_TABLE,),
        "list (comma-separated)",
        None,
        f"TBLPROPERTIES: the record key columns (needed; or `{RECORD_KEY_FIELD}`).",
        "ride_id",
    ),
    SparkOption(
        PRECOMBINE_PROPERTY,
        (CREATE_TABLE,),
        "text",
        None,
        f"TBLPROPERTIES: the precombine column (or `{PRECOMBINE_FIELD}`).",
        "ts",
    ),
    SparkOption(
        TABLE_TYPE_PROPERTY,
        (CREATE_TABLE,),
        "choice",
        next(iter(TABLE_TYPE_NAMES)),
        "TBLPROPERTIES: "
        + ", ".join(f"`{short}` ({long})" for short, long in TABLE_TYPE_NAMES.items())
        + "; any other table property but `hoodie.*` keys and storage options is refused.",
        "mor",
    ),
    SparkOption(
        STORAGE_OPTIONS_ARGUMENT,
        (REGISTER,),
        "dict",
        None,
        "The session's storage options, per protocol or storage root, as `fedcore.load_table` "
        f"takes them (see Storage options); a read's or write's `{STORAGE_PREFIX}*` go over them.",
        '{"s3": {"profile": "lake", "client_kwargs": {"endpoint_url": "http://localhost:9000"}}}',
    ),
    SparkOption(
        MAX_PARTITION_BYTES,
        (SPARK_CONF,),
        "byte size",
        _mb(DEFAULT_MAX_PARTITION_BYTES),
        "Read at `register`: the most bytes of files one input partition of a scan packs, as "
        "Spark's file sources pack them.",
        "256m",
    ),
    SparkOption(
        OPEN_COST_BYTES,
        (SPARK_CONF,),
        "byte size",
        _mb(DEFAULT_OPEN_COST_BYTES),
        "Read at `register`: what opening a file counts as, in bytes, when a scan packs files.",
        "8m",
    ),
    *(
        SparkOption(
            key,
            (SPARK_CONF,),
            "integer",
            None,
            _fewest_tasks(index),
            "64",
        )
        for index, key in enumerate(PARALLELISM_KEYS)
    ),
    SparkOption(
        FILTER_PUSHDOWN,
        (SPARK_CONF,),
        "boolean",
        "true",
        "Set to true by `register`: without it Spark offers a Python source no filters, and no "
        "partition is pruned.",
        "true",
    ),
    SparkOption(
        SHUFFLE_PARTITIONS,
        (SPARK_CONF,),
        "integer",
        "200",
        "How many tasks `fed_spark.write` looks up an upsert's or delete's keys in the table "
        "with, and routes its rows over.",
        "400",
    ),
    SparkOption(
        CONNECT_MESSAGE_SIZE,
        (SPARK_CONF,),
        "byte size",
        _mb(CONNECT_MESSAGE_BYTES),
        "Over Spark Connect: the largest plan the server takes (the client's channel takes "
        f"{_mb(CONNECT_MESSAGE_BYTES)} at most). `fed_spark.write` refuses an upsert or delete "
        "whose key routes would take more than 90% of it, before it begins.",
        "256m",
    ),
)
