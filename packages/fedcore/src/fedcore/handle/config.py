"""``.hoodie/hoodie.properties``: the table config, in Hudi's own format.

Written with Hudi's keys, Java-properties escaping and checksum so that Hudi
tools recognise a fedcore table, and read strictly (checksum verified) because
every physical path is derived from it: a corrupted storage key would send
readers and writers to the wrong place. A table whose data is not under its table
path stores a federated table type (``properties.FEDERATED_TABLE_TYPE_PREFIX``), so
that readers which would list the table path refuse it instead of reading it empty.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone, tzinfo

import javaproperties
from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.exceptions import InvalidTableConfigError, TableAlreadyExistsError, TableNotFoundError
from fedcore.io.atomic import create_exclusive, replace_atomic
from fedcore.io.errors import storage_errors

_TABLE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def table_checksum(table_name: str, database: str = "") -> int:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``<database>.<table>``."""
    return zlib.crc32(f"{database}.{table_name}".encode())


#: Hudi's copy of the config while it rewrites it (``HoodieTableConfig``).
_BACKUP_SUFFIX = ".backup"


def check_table_name(name: str) -> None:
    """Refuse a new table's name that Hudi's and Hive's rules (and a folder name) cannot hold."""
    if not _TABLE_NAME_RE.fullmatch(name or ""):
        raise InvalidTableConfigError(
            P.TABLE_NAME, f"{name!r} must start with a letter or '_' and hold only letters, digits, '_'"
        )


def properties_path(table_path: str) -> str:
    return f"{table_path}/{P.HOODIE_FOLDER}/{P.PROPERTIES_FILE}"


class TableConfig(Mapping[str, str]):
    """An immutable, validated view of a table's properties."""

    def __init__(self, properties: Mapping[str, str]) -> None:
        self._props = {str(k): str(v) for k, v in properties.items()}
        self._validate()

    @classmethod
    def create(
        cls,
        *,
        name: str,
        record_key_fields: Sequence[str],
        partition_fields: Sequence[str] = (),
        precombine_field: str | None = None,
        hive_style_partitioning: bool = True,
        database: str | None = None,
        properties: Mapping[str, str] | None = None,
        federated: bool = False,
    ) -> TableConfig:
        """A new table's config: Hudi's defaults for a copy-on-write table, then ``properties``;
        ``federated``: its data is not under its table path (the type is stored as federated)."""
        check_table_name(name)
        if not record_key_fields or any(not field.strip() for field in record_key_fields):
            raise InvalidTableConfigError(P.RECORD_KEY_FIELDS, "at least one record key field is required")
        props: dict[str, str] = {
            P.TABLE_NAME: name,
            P.TABLE_TYPE: P.TABLE_TYPE_COW,
            P.TABLE_VERSION: str(P.DEFAULT_TABLE_VERSION),
            P.TIMELINE_LAYOUT_VERSION: str(P.DEFAULT_TIMELINE_LAYOUT_VERSION),
            P.ARCHIVELOG_FOLDER: "archived",
            P.TIMELINE_TIMEZONE: "UTC",
            P.BASE_FILE_FORMAT: "PARQUET",
            P.RECORD_KEY_FIELDS: ",".join(f.strip() for f in record_key_fields),
            P.HIVE_STYLE_PARTITIONING: str(hive_style_partitioning).lower(),
            P.URL_ENCODE_PARTITIONING: "true",
            P.METADATA_ENABLE: str(P.METADATA_ENABLE.default).lower(),
            P.DROP_PARTITION_COLUMNS: "false",
            P.KEY_GENERATOR_CLASS: _key_generator(record_key_fields, partition_fields),
            # How log records update base records: Hudi's readers of a merge-on-read table
            # load this class (they fail without it); fed writes by its rule on either type.
            P.PAYLOAD_CLASS: P.OVERWRITE_WITH_LATEST_PAYLOAD,
            P.RECORD_MERGER_STRATEGY: P.DEFAULT_RECORD_MERGER_STRATEGY,
        }
        if partition_fields:
            props[P.PARTITION_FIELDS] = ",".join(f.strip() for f in partition_fields)
        if precombine_field:
            props[P.PRECOMBINE_FIELD] = precombine_field
        if database:
            props[P.DATABASE_NAME] = database
        given = dict(properties or {})
        for key, value in _version_keys(given, props).items():
            if value is None:  # a key of version 6's that the table's version renamed or dropped
                props.pop(key, None)
            else:
                props[key] = value
        props.update(given)
        props[P.METADATA_LAYOUT] = str(P.CURRENT_METADATA_LAYOUT)  # a new table's is always current
        props[P.TABLE_CHECKSUM] = str(table_checksum(props[P.TABLE_NAME], props.get(P.DATABASE_NAME, "")))
        config = cls(props)
        return config.marked_federated() if federated else config

    def marked_federated(self) -> TableConfig:
        """This config with its table type stored as federated (unchanged if it is already)."""
        if self.federated:
            return self
        return TableConfig({**self._props, P.TABLE_TYPE: P.FEDERATED_TABLE_TYPE_PREFIX + self.table_type})

    @classmethod
    def from_bytes(cls, data: bytes) -> TableConfig:
        try:
            props = javaproperties.loads(data.decode("latin-1"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidTableConfigError(P.PROPERTIES_FILE, f"is not a Java properties file: {exc}") from exc
        return cls(props)

    def to_bytes(self) -> bytes:
        saved_on = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        text: str = javaproperties.dumps(
            self._props, comments=f"Properties saved on {saved_on}", timestamp=True, sort_keys=True
        )
        return text.encode("latin-1")

    @classmethod
    def load(cls, fs: AbstractFileSystem, table_path: str) -> TableConfig:
        """The stored config. Apache Hudi's writers change it by writing
        ``hoodie.properties.backup``, then deleting and rewriting ``hoodie.properties``, then
        deleting the backup: a config missing or torn in between is read from the backup, as
        Hudi's own readers do."""
        path = properties_path(table_path)
        try:
            with storage_errors(path):
                return cls.from_bytes(bytes(fs.cat_file(path)))
        except (FileNotFoundError, InvalidTableConfigError) as exc:
            backup = f"{path}{_BACKUP_SUFFIX}"
            try:
                with storage_errors(backup):
                    data = bytes(fs.cat_file(backup))
            except FileNotFoundError:
                if isinstance(exc, InvalidTableConfigError):
                    raise exc from None
                raise TableNotFoundError(f"no table at {table_path} ({path} does not exist)") from None
            return cls.from_bytes(data)

    def save_new(self, fs: AbstractFileSystem, table_path: str) -> None:
        """Persist as a new table's config; exactly one of two racing creators succeeds."""
        try:
            create_exclusive(fs, properties_path(table_path), self.to_bytes())
        except FileExistsError:
            raise TableAlreadyExistsError(f"a table already exists at {table_path}") from None

    def save_replacing(self, fs: AbstractFileSystem, table_path: str) -> None:
        """Persist over the table's config (an upgrade): a reader sees the old file or this one,
        whole. Never for a change of the storage keys (a table moves only by migration)."""
        replace_atomic(fs, properties_path(table_path), self.to_bytes())

    # --- typed accessors --------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._props[P.TABLE_NAME]

    @property
    def database(self) -> str:
        return self._props.get(P.DATABASE_NAME, "")

    @property
    def table_type(self) -> str:
        """``COPY_ON_WRITE`` or ``MERGE_ON_READ``, whether or not it is stored as federated."""
        return self._props.get(P.TABLE_TYPE, P.TABLE_TYPE_COW).removeprefix(P.FEDERATED_TABLE_TYPE_PREFIX)

    @property
    def merge_on_read(self) -> bool:
        """A merge-on-read table: writes append log files, reads merge them."""
        return self.table_type == P.TABLE_TYPE_MOR

    @property
    def federated(self) -> bool:
        """Whether the stored table type is federated: readers that list the table path
        (Hudi's own, hudi-rs) refuse the table."""
        return self._props.get(P.TABLE_TYPE, "").startswith(P.FEDERATED_TABLE_TYPE_PREFIX)

    @property
    def version(self) -> int:
        return int(self._props[P.TABLE_VERSION])

    @property
    def timeline_zone(self) -> tzinfo | None:
        """The zone instant times are in (``hoodie.table.timeline.timezone``): UTC, or None for
        ``LOCAL``, each writer's local time, which Hudi writes into the tables it creates and
        assumes when the key is absent. fed creates its tables with UTC."""
        value = self._props.get(P.TIMELINE_TIMEZONE, "LOCAL").strip().upper()
        if value not in ("UTC", "LOCAL"):
            raise InvalidTableConfigError(P.TIMELINE_TIMEZONE, f"is {value!r}: one of UTC, LOCAL")
        return timezone.utc if value == "UTC" else None

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The columns a record's key and partition path are spelled from: their types are fixed."""
        return tuple(dict.fromkeys([*self.record_key_fields, *self.partition_fields]))

    @property
    def record_key_fields(self) -> tuple[str, ...]:
        return _split_fields(self._props.get(P.RECORD_KEY_FIELDS, ""))

    @property
    def partition_fields(self) -> tuple[str, ...]:
        return _split_fields(self._props.get(P.PARTITION_FIELDS, ""))

    @property
    def precombine_field(self) -> str | None:
        """The ordering field: ``hoodie.table.precombine.field``, or in a version-9 table
        ``hoodie.table.ordering.fields`` (several fields are refused where records merge)."""
        return self._props.get(P.PRECOMBINE_FIELD) or self._props.get(P.ORDERING_FIELDS) or None

    @property
    def metadata_enabled(self) -> bool:
        """Whether the table has fedcore's metadata table. A config without the key (a table
        written by Hudi itself) has none: its files are found by listing, as Hudi does."""
        return self._props.get(P.METADATA_ENABLE, "false").strip().lower() == "true"

    @property
    def metadata_layout(self) -> int:
        """Where the metadata table lives (``properties.METADATA_LAYOUT``; 1 when absent)."""
        return int(self._props.get(P.METADATA_LAYOUT, "1"))

    def with_metadata_layout(self, layout: int) -> TableConfig:
        return TableConfig({**self._props, P.METADATA_LAYOUT: str(layout)})

    def with_properties(self, properties: Mapping[str, str]) -> TableConfig:
        return TableConfig({**self._props, **properties})

    def without(self, keys: Iterable[str]) -> TableConfig:
        dropped = set(keys)
        return TableConfig({k: v for k, v in self._props.items() if k not in dropped})

    @property
    def hive_style_partitioning(self) -> bool:
        return self._props.get(P.HIVE_STYLE_PARTITIONING, "false").strip().lower() == "true"

    # --- Mapping ----------------------------------------------------------------------

    def __getitem__(self, key: str) -> str:
        return self._props[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._props)

    def __len__(self) -> int:
        return len(self._props)

    def __repr__(self) -> str:
        return f"TableConfig({self._props!r})"

    def _validate(self) -> None:
        if not self._props.get(P.TABLE_NAME):
            raise InvalidTableConfigError(P.TABLE_NAME, "is required")
        version = self._props.get(P.TABLE_VERSION, "")
        if not version.strip().isdigit():
            raise InvalidTableConfigError(P.TABLE_VERSION, f"{version!r} is not a table version number")
        if self.table_type not in (P.TABLE_TYPE_COW, P.TABLE_TYPE_MOR):
            raise InvalidTableConfigError(P.TABLE_TYPE, f"{self[P.TABLE_TYPE]!r} is not a Hudi table type")
        checksum = self._props.get(P.TABLE_CHECKSUM)
        if checksum is not None and checksum != str(table_checksum(self.name, self.database)):
            raise InvalidTableConfigError(
                P.TABLE_CHECKSUM,
                f"{checksum} does not match the table name and database: the file is corrupt",
            )
        for key in _FLAGS:
            value = self._props.get(key)
            if value is not None and value.strip().lower() not in ("true", "false"):
                raise InvalidTableConfigError(key, f"{value!r} is not true or false")
        if self._props.get(str(P.POPULATE_META_FIELDS), "true").strip().lower() == "false" and not (
            self.record_key_fields
        ):
            raise InvalidTableConfigError(
                P.RECORD_KEY_FIELDS, "is missing: a table without meta fields computes its keys from them"
            )
        self.timeline_zone  # noqa: B018 (UTC or LOCAL, checked on opening, not at a first commit)
        layout = self._props.get(P.METADATA_LAYOUT, "1").strip()
        if layout not in {str(n) for n in range(1, P.CURRENT_METADATA_LAYOUT + 1)}:
            raise InvalidTableConfigError(
                P.METADATA_LAYOUT,
                f"{layout!r} is not a metadata layout this fedcore knows (1 to {P.CURRENT_METADATA_LAYOUT}): "
                "a newer fed wrote this table; upgrade fedcore to read it",
            )
        for key in self._props:
            if P.SECRET_KEY_RE.search(key):
                # Reached on loading a table (a new one's keys are refused before: properties
                # ``check_table_keys``), so the one fix is in the stored file itself.
                raise InvalidTableConfigError(
                    key,
                    f"looks like a credential, stored in the clear in {P.HOODIE_FOLDER}/{P.PROPERTIES_FILE}: "
                    "remove it from that file (and replace the credential); give credentials as storage "
                    "options or a write's options",
                )


#: Flags a table's config may hold, read as true or false wherever they are used.
_FLAGS = (
    P.HIVE_STYLE_PARTITIONING,
    P.URL_ENCODE_PARTITIONING,
    str(P.POPULATE_META_FIELDS),
    str(P.DROP_PARTITION_COLUMNS),
    str(P.METADATA_ENABLE),
)


def _split_fields(value: str) -> tuple[str, ...]:
    return tuple(field.strip() for field in value.split(",") if field.strip())


def _key_generator(record_key_fields: Sequence[str], partition_fields: Sequence[str]) -> str:
    if not partition_fields:
        return P.NON_PARTITIONED_KEY_GENERATOR
    if len(record_key_fields) == 1 and len(partition_fields) == 1:
        return P.SIMPLE_KEY_GENERATOR
    return P.COMPLEX_KEY_GENERATOR


#: The table versions a new table may have: 6 (the default; Hudi 0.14 and 0.15 read it),
#: 8 (Hudi 1.0) and 9 (Hudi 1.1 and later).
CREATABLE_VERSIONS = (6, 8, 9)


def upgraded_merge_mode(payload: str, merge_on_read: bool, ordering_field: str | None) -> str:
    """The merge mode Hudi's upgrade to version 8 gives a version-6 table of ``payload`` (""
    for none: version 6's default, ``OverwriteWithLatestAvroPayload``), as
    ``SevenToEightUpgradeHandler`` maps it: ``DefaultHoodieRecordPayload``, and any payload of
    a merge-on-read table with an ordering field, order by event time; the rest by commit
    time. ``fed upgrade`` and a migration into version 8 or 9 both take it."""
    payload = payload.strip() or P.OVERWRITE_WITH_LATEST_PAYLOAD
    if payload == P.DEFAULT_HOODIE_PAYLOAD or (merge_on_read and ordering_field):
        return "EVENT_TIME_ORDERING"
    return "COMMIT_TIME_ORDERING"


def _version_keys(given: dict[str, str], defaults: Mapping[str, str]) -> dict[str, str | None]:
    """The keys a new table of the version ``given`` asks for (``hoodie.table.version`` or
    Hudi's writer option ``hoodie.write.table.version``, both popped from ``given``) records
    beside the defaults, as Apache Hudi's writer of that version records them; what ``given``
    holds for a key still wins, and version 6's keys that a later version renamed are dropped.

    Versions 8 and 9 order records by a merge mode (``hoodie.record.merge.mode``) where version
    6 names a payload class: Hudi 1.x's default, event-time ordering when the table has an
    ordering field (the greatest value wins, over stored records too), else commit-time
    ordering (the latest write wins)."""
    versions = {given.pop(key).strip() for key in (P.TABLE_VERSION, P.WRITE_TABLE_VERSION) if key in given}
    if len(versions) > 1:
        raise InvalidTableConfigError(
            P.TABLE_VERSION, f"is given twice with different values ({', '.join(sorted(versions))})"
        )
    value = versions.pop() if versions else str(P.DEFAULT_TABLE_VERSION)
    if value not in {str(v) for v in CREATABLE_VERSIONS}:
        raise InvalidTableConfigError(
            P.TABLE_VERSION,
            f"{value!r}: fed creates tables of version {', '.join(map(str, CREATABLE_VERSIONS))}",
        )
    version = int(value)
    ordering = (
        given.get(P.PRECOMBINE_FIELD) or given.get(P.ORDERING_FIELDS) or defaults.get(P.PRECOMBINE_FIELD)
    )
    if version == 6:
        for key in (P.RECORD_MERGE_MODE, P.ORDERING_FIELDS):
            if key in given:
                raise InvalidTableConfigError(
                    key, "is a key of table versions 8 and 9; version 6 orders records by its payload class"
                )
        return {P.TABLE_VERSION: value}
    mode = given.pop(P.RECORD_MERGE_MODE, "").strip().upper() or (
        "EVENT_TIME_ORDERING" if ordering else "COMMIT_TIME_ORDERING"
    )
    if mode not in P.MERGE_MODE_KEYS_V8:
        raise InvalidTableConfigError(
            P.RECORD_MERGE_MODE, f"{mode!r}: fed writes EVENT_TIME_ORDERING and COMMIT_TIME_ORDERING"
        )
    for key in (P.PAYLOAD_CLASS, P.RECORD_MERGER_STRATEGY):
        if key in given:
            raise InvalidTableConfigError(
                key, f"is a key of table version 6; version {version} merges by {P.RECORD_MERGE_MODE}"
            )
    keys: dict[str, str | None] = {
        P.TABLE_VERSION: value,
        P.TABLE_INITIAL_VERSION: value,
        P.TIMELINE_LAYOUT_VERSION: "2",
        P.TIMELINE_PATH: P.DEFAULT_TIMELINE_FOLDER,
        P.TIMELINE_HISTORY_PATH: "history",
        P.RECORD_MERGE_MODE: mode,
        # Dropped: the payload and merger keys of version 6 (renamed, or gone in version 9).
        P.PAYLOAD_CLASS: None,
        P.RECORD_MERGER_STRATEGY: None,
    }
    generator = (given.get(P.KEY_GENERATOR_CLASS) or defaults.get(P.KEY_GENERATOR_CLASS, "")).strip()
    if generator in P.KEY_GENERATOR_TYPE_OF:
        keys[P.KEY_GENERATOR_TYPE] = P.KEY_GENERATOR_TYPE_OF[generator]
    if version == 8:
        keys[P.PAYLOAD_CLASS], keys[P.RECORD_MERGE_STRATEGY_ID] = P.MERGE_MODE_KEYS_V8[mode]
    elif ordering:  # version 9 names the ordering fields anew
        keys[P.ORDERING_FIELDS] = given.pop(P.PRECOMBINE_FIELD, None) or ordering
        keys[P.PRECOMBINE_FIELD] = None
    return keys
