"""Every error that tells the user what to do leads, done literally, to a correct table.

Each test triggers one hint, does what it says, and holds the table's rows as a multiset
(``Counter`` of row tuples, each with its partition path), so a key held twice, or held
under another partition, fails it; or, where the hint names a next step, checks that the
step now succeeds. Hints of pending table services, copied tables and orphans are followed
in ``test_merge_on_read_writes``, ``test_table_identity``, ``test_repair`` and (Apache Hudi's
compaction job run as its hint says) ``tests/foreign/hudi_spark/test_co_writers``.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend, trips
from fedcore import properties as P
from fedcore.cli.main import main
from fedcore.exceptions import (
    AtomicWriteUnsupportedError,
    CommitConflictError,
    ConfigError,
    DataFileCorruptError,
    DataFileMissingError,
    InvalidFilterError,
    InvalidPartitionValueError,
    InvalidRecordsError,
    InvalidStorageConfigError,
    InvalidTableConfigError,
    MetadataTableError,
    MetadataTableRequiredError,
    MissingDependencyError,
    RollbackError,
    SchemaMismatchError,
    StoragePermissionError,
    StorageStrategyMismatchError,
    TableAlreadyExistsError,
    TimelineMovedError,
    UnsupportedTableError,
)
from fedcore.handle.config import properties_path
from fedcore.io.filesystems import filesystem_for
from fedcore.metadata.format import FOLDER
from fedcore.metadata.table import MetadataTable
from fedcore.read.filters import Filter, parse_where
from fedcore.services.rollback import rollback
from fedcore.steps import observe_steps
from fedcore.table import Table, create_table, load_table
from fedcore.write.client import WriteClient
from fedcore.write.job import WriteJob
from fedcore.write.planner import WritePlanner

from ..commit.test_concurrency import busy_writer
from ..write.test_writes import make_table
from .test_cli_table import options as cli_options

#: A row as held: (partition path, trip_id, country, ts, fare).
Row = tuple[Any, ...]
COLUMNS = ["_hoodie_partition_path", "trip_id", "country", "ts", "fare"]
RECONCILE = {str(P.RECONCILE_SCHEMA): "true"}
SET_NULL = {str(P.SET_NULL_FOR_MISSING_COLUMNS): "true"}
_AS_WRITTEN = object()


def held(backend: Backend) -> Counter[Row]:
    """The table's rows as a fresh handle reads them, as a multiset."""
    table = load_table(backend.table_path, storage_options=backend.storage_options)
    return Counter(tuple(row[c] for c in COLUMNS) for row in table.read(columns=COLUMNS).to_pylist())


def row(trip_id: int, country: str, ts: int | None = 1, fare: float | object | None = _AS_WRITTEN) -> Row:
    """A trips row as held: fare ``10 + id`` (as ``trips`` writes it) unless given."""
    return (f"country={country}", trip_id, country, ts, 10.0 + trip_id if fare is _AS_WRITTEN else fare)


def writes(backend: Backend) -> int:
    table = load_table(backend.table_path, storage_options=backend.storage_options)
    return len(table.timeline().completed(table.write_actions))


def fed(*argv: str) -> int:
    """The CLI, as a user runs it (a ``FedError`` is a line on stderr and exit 2)."""
    try:
        return main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture
def local(tmp_path: Path) -> Backend:
    """A table on local files (for hints where the store plays no part)."""
    return Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)


@pytest.fixture
def two_countries(local: Backend) -> Table:
    table = make_table(local)
    table.upsert(trips([1, 2], ["us", "de"]))
    return table


# --- records: what an input lacks ----------------------------------------------------------


@pytest.mark.parametrize("column", ["country", "ts", "trip_id"])
@pytest.mark.parametrize("given", [{}, RECONCILE, SET_NULL], ids=["plain", "reconcile", "set_null"])
def test_a_missing_key_partition_or_ordering_column_is_refused_with_what_to_add(
    local: Backend, two_countries: Table, column: str, given: dict[str, str]
) -> None:
    """Hint: "the input has no column 'country', a partition field of the table: add it"
    (and so for a record key field and an upsert's ordering field), whatever
    reconcile.schema or set.null.for.missing.columns say. It used to advise
    reconcile.schema=true, which put key 1 under ``__HIVE_DEFAULT_PARTITION__`` beside its
    ``country=us`` copy (and, for the ordering field, only led to a second error)."""
    update = trips([1], "us", ts=2, fare=40.0)
    with pytest.raises(InvalidRecordsError) as refused:
        two_countries.upsert(update.drop_columns([column]), given)
    message = str(refused.value)
    assert f"the input has no column {column!r}" in message, message
    assert ": add it" in message, message
    assert "reconcile" not in message, message
    assert "set.null" not in message, message
    assert writes(local) == 1, "nothing written"

    two_countries.upsert(update, given)  # the column added, as told
    assert held(local) == Counter([row(1, "us", 2, 41.0), row(2, "de")])


@pytest.mark.parametrize("operation", ["insert", "bulk_insert", "insert_overwrite", "delete"])
def test_other_operations_refuse_a_missing_partition_column_too(
    local: Backend, two_countries: Table, operation: str
) -> None:
    """Hint: "the input has no column 'country', a partition field of the table: add it",
    for every operation, reconcile.schema set or not: an insert would put the record in
    ``__HIVE_DEFAULT_PARTITION__`` and a delete would look for it there."""
    data = trips([3], "us") if operation != "delete" else trips([1], "us")
    with pytest.raises(InvalidRecordsError, match=r"no column 'country', a partition field.*: add it"):
        two_countries.write(data.drop_columns(["country"]), operation, RECONCILE)  # type: ignore[arg-type]
    assert writes(local) == 1, "nothing written"

    two_countries.write(data, operation, RECONCILE)  # type: ignore[arg-type]
    expected = {
        "insert": [row(1, "us"), row(2, "de"), row(3, "us")],
        "bulk_insert": [row(1, "us"), row(2, "de"), row(3, "us")],
        "insert_overwrite": [row(2, "de"), row(3, "us")],  # country=us replaced
        "delete": [row(2, "de")],
    }[operation]
    assert held(local) == Counter(expected)


def test_a_missing_ordinary_column_is_written_as_null_when_reconciled(
    local: Backend, two_countries: Table
) -> None:
    """Hint: "the input has no column 'fare' of the table: set
    hoodie.datasource.write.reconcile.schema=true to write it as null" (a column no key,
    partition path or ordering is spelled from)."""
    update = trips([1, 3], "us", ts=2).drop_columns(["fare"])
    with pytest.raises(
        SchemaMismatchError, match=r"no column 'fare' of the table: set (\S+)=true"
    ) as refused:
        two_countries.upsert(update)
    key = re.search(r"set (\S+)=true", str(refused.value))[1]  # type: ignore[index]
    two_countries.upsert(update, {key: "true"})
    assert held(local) == Counter([row(1, "us", 2, None), row(2, "de"), row(3, "us", 2, None)])


def test_an_insert_without_the_ordering_column_takes_it_as_null_when_reconciled(
    local: Backend, two_countries: Table
) -> None:
    """Hint: "the input has no column 'ts' of the table: set ...reconcile.schema=true to
    write it as null", for an insert (which orders nothing, as in Hudi); a later upsert of
    the key still updates its one record."""
    with pytest.raises(SchemaMismatchError, match=r"no column 'ts' of the table: set "):
        two_countries.insert(trips([3], "us").drop_columns(["ts"]))
    two_countries.insert(trips([3], "us").drop_columns(["ts"]), RECONCILE)
    assert held(local) == Counter([row(1, "us"), row(2, "de"), row(3, "us", None)])
    two_countries.upsert(trips([3], "us", ts=5, fare=0.0))
    assert held(local) == Counter([row(1, "us"), row(2, "de"), row(3, "us", 5, 3.0)])


def test_a_partition_value_a_plain_path_cannot_hold_is_refused_with_no_setting_to_flip(
    tmp_path: Path,
) -> None:
    """Hint: "partition value 'x/y' of 'p' contains a path separator ...: write the value
    without them". It used to say "set ...partitionpath.urlencode=true": refused as a
    write option, and in hoodie.properties it would spell the stored partitions
    (``p=a:b``) another way (``p=a%3Ab``), so each upserted key would be held twice."""
    table = create_table(
        f"file://{tmp_path}/t",
        name="t",
        record_key_fields=["id"],
        partition_fields=["p"],
        precombine_field="ts",
        properties={P.URL_ENCODE_PARTITIONING: "false"},
    )
    table.upsert(pa.table({"id": [1], "p": ["a:b"], "ts": [1]}))
    with pytest.raises(
        InvalidPartitionValueError, match=r"'x/y' of 'p'.*write the value without them"
    ) as bad:
        table.upsert(pa.table({"id": [2], "p": ["x/y"], "ts": [1]}))
    assert "=true" not in str(bad.value)
    table.upsert(pa.table({"id": [2, 1], "p": ["x-y", "a:b"], "ts": [1, 2]}))
    found = table.read(columns=["_hoodie_partition_path", "id", "p", "ts"]).to_pylist()
    assert Counter(tuple(r.values()) for r in found) == Counter(
        [("p=a:b", 1, "a:b", 2), ("p=x-y", 2, "x-y", 1)]
    )


@pytest.mark.parametrize("follow", ["text key", "meta fields"])
def test_a_virtual_key_fedcore_cannot_spell_says_both_ways_out(tmp_path: Path, follow: str) -> None:
    """Hint: "record key field 'at' is double: a table without meta fields ...; give the
    key as text or integers, or keep meta fields for this table (...=true, fixed when a
    table is created)"."""
    virtual = {str(P.POPULATE_META_FIELDS): "false"}
    table = create_table(f"file://{tmp_path}/v", name="v", record_key_fields=["at"], properties=virtual)
    data = pa.table({"at": pa.array([1.5, 2.5]), "v": [1, 2]})
    with pytest.raises(UnsupportedTableError, match=r"give the key as text or integers, or keep meta fields"):
        table.upsert(data)
    if follow == "text key":
        data = data.set_column(0, "at", pa.array(["1.5", "2.5"]))
    else:
        table = create_table(f"file://{tmp_path}/m", name="m", record_key_fields=["at"])
    table.upsert(data)
    table.upsert(data.slice(1).set_column(1, "v", pa.array([20])))
    found = table.read(columns=["at", "v"]).to_pylist()
    assert Counter(tuple(r.values()) for r in found) == Counter(
        [(data[0][0].as_py(), 1), (data[0][1].as_py(), 20)]
    )


# --- configuration -------------------------------------------------------------------------


def test_a_credential_given_as_a_table_property_goes_to_a_writes_options(local: Backend) -> None:
    """Hint: "hoodie.aws.secret.key: is a credential: a table's config is stored in the
    clear, so give it to a write's options"."""
    secret = {str(P.AWS_SECRET_KEY): "not-stored"}
    with pytest.raises(ConfigError, match=r"give it to a write's options"):
        make_table(local, **secret)
    table = make_table(local)
    table.upsert(trips([1], "us"), secret)
    assert held(local) == Counter([row(1, "us")])
    assert "not-stored" not in Path(properties_path(local.table_path).removeprefix("file://")).read_text()


def test_a_credential_stored_in_hoodie_properties_is_removed_from_the_file(
    local: Backend, two_countries: Table
) -> None:
    """Hint: "...password: looks like a credential, stored in the clear in
    .hoodie/hoodie.properties: remove it from that file". It used to say "pass credentials
    as storage options", which no load of the table could do."""
    path = properties_path(local.table_path).removeprefix("file://")
    original = Path(path).read_text()
    Path(path).write_text(original + "hoodie.datasource.hive_sync.password=hunter2\n")
    with pytest.raises(InvalidTableConfigError, match=r"remove it from that file"):
        load_table(local.table_path)
    Path(path).write_text(
        Path(path).read_text().replace("hoodie.datasource.hive_sync.password=hunter2\n", "")
    )
    load_table(local.table_path).upsert(trips([3], "us"))
    assert held(local) == Counter([row(1, "us"), row(2, "de"), row(3, "us")])


@pytest.mark.parametrize("where", ["table property", "write option"])
def test_did_you_mean_names_the_key_that_was_meant(local: Backend, where: str) -> None:
    """Hint: "hoodie.datasource.write.reconcile.shema: ... so it would be ignored; did you
    mean hoodie.datasource.write.reconcile.schema?"."""
    typo = "hoodie.datasource.write.reconcile.shema"
    if where == "table property":
        with pytest.raises(ConfigError, match=r"did you mean (\S+)\?") as refused:
            make_table(local, **{typo: "true"})
        table = make_table(local, **{_meant(refused.value): "true"})
        table.upsert(trips([1, 2], "us"))
        table.upsert(trips([1], "us", ts=2).drop_columns(["fare"]))
    else:
        table = make_table(local)
        table.upsert(trips([1, 2], "us"))
        with pytest.raises(ConfigError, match=r"did you mean (\S+)\?") as refused:
            table.upsert(trips([1], "us", ts=2).drop_columns(["fare"]), {typo: "true"})
        table.upsert(trips([1], "us", ts=2).drop_columns(["fare"]), {_meant(refused.value): "true"})
    assert held(local) == Counter([row(1, "us", 2, None), row(2, "us")])


def _meant(error: BaseException) -> str:
    return re.search(r"did you mean (\S+)\?", str(error))[1]  # type: ignore[index]


@pytest.mark.parametrize(
    "key",
    ["hoodie.datasource.write.precombine.field", P.URL_ENCODE_PARTITIONING],
    ids=["precombine", "urlencode"],
)
def test_a_table_definition_key_given_to_a_write_suggests_no_unrelated_key(local: Backend, key: str) -> None:
    """Hint: "... is not an option fedcore reads when opening or writing a table, so it
    would be ignored; did you mean hoodie.datasource.write.reconcile.schema?": following it
    would set another key altogether (and reconcile.schema takes true or false)."""
    table = make_table(local)
    with pytest.raises(ConfigError, match=r"definition, fixed in its hoodie\.properties") as refused:
        table.upsert(trips([1], "us"), {key: "fare"})
    assert "did you mean" not in str(refused.value), str(refused.value)
    own = re.search(r"give '([^']*)' or leave the option out", str(refused.value))
    assert own is not None, str(refused.value)
    table.upsert(trips([1], "us"), {key: own[1]})  # the table's own value, as Hudi's jobs repeat it
    table.upsert(trips([2], "us"))  # or the option left out
    assert held(local) == Counter([row(1, "us"), row(2, "us")])


def test_storage_keys_edited_by_hand_are_restored(local: Backend, two_countries: Table) -> None:
    """Hint: "the storage keys in .../hoodie.properties (...) are not the ones the table was
    created with (...): they were edited by hand. ...; restore the original values (a table
    changes storage only by migration)"."""
    path = Path(properties_path(local.table_path).removeprefix("file://"))
    original = path.read_text()
    elsewhere = f"{P.STORAGE_PATH}=file\\:///elsewhere"  # as hoodie.properties escapes it
    path.write_text(re.sub(rf"^{re.escape(P.STORAGE_PATH)}=.*$", elsewhere, original, flags=re.MULTILINE))
    assert path.read_text() != original
    with pytest.raises(StorageStrategyMismatchError, match=r"restore the original values"):
        load_table(local.table_path)
    path.write_text(original)
    assert held(local) == Counter([row(1, "us"), row(2, "de")])


def test_a_layout_that_needs_the_metadata_table_says_which_key(local: Backend, two_countries: Table) -> None:
    """Hint: "hoodie.metadata.enable: is false, but the object-store layout needs the
    metadata table" (a hoodie.properties edited by hand, or by a Hudi writer): set it true."""
    path = Path(properties_path(local.table_path).removeprefix("file://"))
    key = str(P.METADATA_ENABLE)
    path.write_text(re.sub(rf"^{re.escape(key)}=.*$", f"{key}=false", path.read_text(), flags=re.MULTILINE))
    with pytest.raises(
        MetadataTableRequiredError, match=r"is false, but .* needs the metadata table"
    ) as told:
        load_table(local.table_path)
    assert told.value.key == key
    path.write_text(path.read_text().replace(f"{key}=false", f"{key}=true"))
    load_table(local.table_path).upsert(trips([3], "us"))
    assert held(local) == Counter([row(1, "us"), row(2, "de"), row(3, "us")])


def test_deprecated_names_point_at_the_ones_that_work(local: Backend, two_countries: Table) -> None:
    """Hints: "load_table(properties=...) is deprecated ...: use options="; "give options= alone"."""
    with pytest.warns(DeprecationWarning, match=r"use options="):
        by_properties = load_table(local.table_path, properties=RECONCILE)
    with (
        pytest.raises(ConfigError, match=r"give options= alone"),
        pytest.warns(DeprecationWarning, match="options="),
    ):
        load_table(local.table_path, properties=RECONCILE, options=RECONCILE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        by_options = load_table(local.table_path, options=RECONCILE)
    assert by_options.options == by_properties.options
    by_options.upsert(trips([1], "us", ts=2).drop_columns(["fare"]))  # reconciled, as asked
    assert held(local) == Counter([row(1, "us", 2, None), row(2, "de")])


def test_a_table_opened_before_another_writer_changed_its_definition_is_opened_again(
    local: Backend, two_countries: Table
) -> None:
    """Hint: "precombine field: is 'fare' in .../hoodie.properties, but was 'ts' when table
    trips was opened: another writer changed the table's definition; open the table again"."""
    path = Path(properties_path(local.table_path).removeprefix("file://"))
    path.write_text(path.read_text().replace(f"{P.PRECOMBINE_FIELD}=ts", f"{P.PRECOMBINE_FIELD}=fare"))
    with pytest.raises(InvalidTableConfigError, match=r"open the table again"):
        two_countries.upsert(trips([1], "us", ts=2, fare=30.0))
    assert writes(local) == 1, "nothing written"
    load_table(local.table_path).upsert(trips([1], "us", ts=2, fare=30.0))
    assert held(local) == Counter([row(1, "us", 2, 31.0), row(2, "de")])


def test_the_leftovers_of_an_earlier_table_go_with_start_over(local: Backend, two_countries: Table) -> None:
    """Hint: "... holds N entries of an earlier table ... but no hoodie.properties; creating
    a table there would adopt them. Pass start_over=True (fed create --start-over) to delete
    that metadata first"."""
    Path(properties_path(local.table_path).removeprefix("file://")).unlink()
    with pytest.raises(TableAlreadyExistsError, match=r"fed create --start-over"):
        make_table(local)
    args = ["create", local.table_path, "--name", "trips", "--record-key", "trip_id"]
    args += ["--partition-by", "country", "--precombine", "ts", "--start-over"]
    assert fed(*args) == 0
    assert not load_table(local.table_path).timeline().instants, "a table of its own, nothing adopted"
    load_table(local.table_path).upsert(trips([1], "fr"))
    assert held(local) == Counter([row(1, "fr")])


def test_every_extra_a_missing_dependency_names_exists() -> None:
    """Hints: "pip install 'fedcore[iceberg]'" (fed sync, the Iceberg view), "[serve]",
    "[glue]", "[plot]", and a read's "[pandas]" / "[polars]" / "[duckdb]":
    each names an extra fedcore's package declares."""
    source = Path(__file__).parents[2] / "src" / "fedcore"
    named = {
        extra
        for path in source.rglob("*.py")
        for extra in re.findall(r"pip install 'fedcore\[(\w+)\]'", path.read_text())
    }
    named |= {"pandas", "polars", "duckdb"}  # read.scan's "fedcore[{module}]"
    project = (source.parents[1] / "pyproject.toml").read_text()
    extras = project.split("[project.optional-dependencies]")[1].split("\n[")[0]
    declared = set(re.findall(r"^(\w+) = \[", extras, re.MULTILINE))
    assert named >= {"iceberg", "serve", "glue", "plot"}
    assert named <= declared, named - declared
    assert issubclass(MissingDependencyError, ImportError)


# --- reads ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "follow", "expected"),
    [
        (("country", "=", None), ("country", "IS NULL"), []),
        (("country", "!=", None), ("country", "IS NOT NULL"), [1, 2]),
        ("country = NULL", "country IS NULL", []),
        ("country = 'us' OR country = 'de'", "country IN ('us', 'de')", [1, 2]),
    ],
)
def test_a_filter_that_is_never_true_says_what_to_write(
    two_countries: Table, bad: Any, follow: Any, expected: list[int]
) -> None:
    """Hints: "country = NULL is never true in SQL; use IS NULL or IS NOT NULL", "comparing
    with NULL is never true; use IS NULL", "OR is not supported in filters; use AND and IN"."""
    with pytest.raises(InvalidFilterError, match=r"use (IS NULL|AND and IN)"):
        _filters(bad)
    found = two_countries.read(filters=_filters(follow), columns=["trip_id"]).column(0).to_pylist()
    assert sorted(found) == expected


@pytest.mark.parametrize(
    ("bad", "says", "follow"),
    [
        ("fare >> 1", "expected a value (a number, a 'quoted string', true or false), found '>'", "fare > 1"),
        ("country = us", "quote a string ('us')", "country = 'us'"),
    ],
)
def test_a_filter_typo_says_what_a_value_is(two_countries: Table, bad: str, says: str, follow: str) -> None:
    with pytest.raises(InvalidFilterError, match=re.escape(says)):
        parse_where(bad)
    found = two_countries.read(filters=parse_where(follow), columns=["trip_id"]).column(0).to_pylist()
    assert sorted(found) == ([1] if "us" in follow else [1, 2])


def test_a_scan_takes_no_filters_as_none_and_filters_as_text(two_countries: Table) -> None:
    """``scan(None)`` is every row (it was a ``TypeError``); text is ``fed read --where``'s."""

    def rows(filters: Any) -> Counter[tuple[Any, ...]]:
        found = two_countries.scan(filters, ["trip_id", "country"]).to_arrow().to_pylist()
        return Counter(tuple(row.values()) for row in found)

    assert rows(None) == rows(()) == Counter([(1, "us"), (2, "de")])
    assert rows("country = 'de'") == Counter([(2, "de")])


def test_a_key_fed_writes_into_every_table_may_be_given_at_create(local: Backend, tmp_path: Path) -> None:
    """``-p hoodie.table.timeline.timezone=UTC`` was refused ("did you mean
    hoodie.table.version?") although fed writes it into every table; a zone Hudi does not
    know is refused by name."""
    path = f"file://{tmp_path}/utc"
    given = ["-p", f"{P.TIMELINE_TIMEZONE}=UTC"]
    assert main(["create", path, "--name", "t", "--record-key", "id", *given]) == 0
    assert load_table(path).config[P.TIMELINE_TIMEZONE] == "UTC"
    with pytest.raises(InvalidTableConfigError, match="'EUROPE/PARIS': one of UTC, LOCAL"):
        create_table(
            f"file://{tmp_path}/paris",
            name="t",
            record_key_fields=["id"],
            properties={P.TIMELINE_TIMEZONE: "Europe/Paris"},
        )


def _filters(spec: Any) -> list[Filter]:
    return parse_where(spec) if isinstance(spec, str) else [Filter.of(spec)]


# --- damage done outside fedcore -------------------------------------------------------------


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
@pytest.mark.parametrize("follow", ["rollback", "restore"])
def test_a_data_file_damaged_outside_fedcore_goes_by_rollback_or_restore(
    backend: Backend, damage: str, follow: str
) -> None:
    """Hints: "... cannot be read as Parquet ...: restore it from a copy, or roll back the
    write that made it with `fed rollback TABLE <instant>` if that is the table's latest
    write" and "... the table references it (written by instant T) but it is not in storage
    ...: (the same)". The command is run as the message spells it."""
    table = make_table(backend)
    table.upsert(trips(range(3), "us"))
    before = held(backend)
    latest = table.upsert(trips([1], "us", ts=2, fare=50.0)).instant
    after = held(backend)
    physical = next(table.fs.to_physical(s.path) for s in table.file_slices() if s.base_instant == latest)
    fs = filesystem_for(physical, backend.storage_options)
    copy = fs.cat_file(physical)
    if damage == "corrupt":
        fs.pipe_file(physical, copy[: len(copy) // 2])
    else:
        fs.rm(physical)
    error = DataFileCorruptError if damage == "corrupt" else DataFileMissingError
    with pytest.raises(error) as broken:
        load_table(backend.table_path, storage_options=backend.storage_options).read()
    command = re.search(r"`fed rollback TABLE (\d+)`", str(broken.value))
    assert command is not None, str(broken.value)
    assert "restore it from a copy" in str(broken.value)
    if follow == "rollback":
        assert command[1] == latest
        assert fed("rollback", backend.table_path, command[1], *cli_options(backend)) == 0
        assert held(backend) == before
    else:
        fs.pipe_file(physical, copy)
        assert held(backend) == after


def test_fed_verify_names_the_rollback_that_undoes_a_lost_file(local: Backend) -> None:
    """Hint (``fed verify``): "Files the table references are gone: reads that need them fail.
    Restore them from a copy, or roll back the writes that made them (`fed rollback TABLE
    <instant>`, newest first)". Run as it is spelled, the table passes again."""
    table = make_table(local)
    table.upsert(trips(range(3), "us"))
    before = held(local)
    latest = table.upsert(trips([1], "us", ts=2, fare=50.0)).instant
    physical = next(table.fs.to_physical(s.path) for s in table.file_slices() if s.base_instant == latest)
    Path(physical.removeprefix("file://")).unlink()
    report = load_table(local.table_path).verify()
    assert not report.ok
    command = re.search(r"`fed rollback TABLE (\d+)`, newest first", report.format())
    assert command is not None, report.format()
    assert command[1] == latest
    assert fed("rollback", local.table_path, command[1]) == 0
    assert load_table(local.table_path).verify().ok
    assert held(local) == before


def test_a_rollback_of_an_older_write_goes_after_the_later_ones(local: Backend, two_countries: Table) -> None:
    """Hint: "... is not the latest write: ... came after it; roll that back first"."""
    older = two_countries.upsert(trips([1], "us", ts=2, fare=50.0)).instant
    later = two_countries.upsert(trips([2], "de", ts=2, fare=60.0)).instant
    assert fed("rollback", local.table_path, older) == 2
    with pytest.raises(
        RollbackError, match=rf"{later} commit \(completed\) came after it; roll that back first"
    ):
        rollback(load_table(local.table_path).handle, older)
    assert fed("rollback", local.table_path, later) == 0
    assert fed("rollback", local.table_path, older) == 0
    assert held(local) == Counter([row(1, "us"), row(2, "de")])


def test_a_damaged_metadata_table_is_rebuilt_by_fed_repair(backend: Backend) -> None:
    """Hint: "... is unreadable ...; run `fed repair TABLE` to rebuild the metadata table
    from storage" (``metadata.format.REPAIR_HINT``)."""
    table = make_table(backend, **{P.METADATA_COMPACT_DELTAS: "2"})
    for n in range(4):
        table.upsert(trips([n, 10 + n], ["us", "de"], fare=float(n)))
    expected = held(backend)
    index = MetadataTable(table.fs.table_fs, table.path, table.timeline, layout=table.handle.layout)
    shard = next(s for s in index.manifest(index.manifest_times()[-1]).shards if s)[0]
    table.fs.table_fs.pipe_file(f"{table.path}/{FOLDER}/base/{shard}", b"PAR1 not parquet")
    with pytest.raises(MetadataTableError, match=r"run `fed repair TABLE`") as broken:
        held(backend)
    command = re.search(r"`fed (repair) TABLE`", str(broken.value))
    assert command is not None
    assert fed(command[1], backend.table_path, *cli_options(backend)) == 0
    assert held(backend) == expected
    load_table(backend.table_path, storage_options=backend.storage_options).upsert(trips([0], "us", ts=2))
    assert held(backend) == expected - Counter([row(0, "us", 1, 0.0)]) + Counter([row(0, "us", 2)])


def test_missing_credentials_are_given_as_storage_options(s3_server: LoopbackS3, tmp_path: Path) -> None:
    """Hint: "...: no credentials for the store (...); give them as storage options or in
    the environment (AWS_ACCESS_KEY_ID, ...)" (an object store's: local files take none)."""
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    assert backend.storage_options is not None
    table = make_table(backend)
    table.upsert(trips([1], "us"))
    anonymous = {"s3": {k: v for k, v in backend.storage_options["s3"].items() if k not in ("key", "secret")}}
    with pytest.raises(StoragePermissionError, match=r"give them as storage options"):
        load_table(backend.table_path, storage_options=anonymous).read()
    assert held(backend) == Counter([row(1, "us")])  # ``held`` gives them as storage options


def test_a_storage_profile_is_used_and_an_unknown_one_is_refused(
    s3_server: LoopbackS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The storage option ``profile`` was passed over (s3fs reads it only into a session of
    its own, and fed gives it one): the store's credentials in a profile were never found,
    and with ``AWS_*`` variables set a nonexistent profile went unnoticed."""
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    assert backend.storage_options is not None
    make_table(backend).upsert(trips([1], "us"))
    given = backend.storage_options["s3"]
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[fedtest]\naws_access_key_id = {given['key']}\naws_secret_access_key = {given['secret']}\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    anonymous = {k: v for k, v in given.items() if k not in ("key", "secret")}
    by_profile = load_table(backend.table_path, storage_options={"s3": {**anonymous, "profile": "fedtest"}})
    assert Counter(by_profile.read(columns=["trip_id"]).column(0).to_pylist()) == Counter([1])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", given["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", given["secret"])
    with pytest.raises(InvalidStorageConfigError, match=r"'nope' is not a profile .*profiles there: fedtest"):
        load_table(backend.table_path, storage_options={"s3": {**anonymous, "profile": "nope"}})


@pytest.mark.parametrize(
    ("path", "properties"),
    [
        ("gs://bucket/t", {}),
        ("{tmp}/t", {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: "gs://bucket/s"}),
    ],
)
def test_a_store_fed_cannot_commit_to_is_refused_at_create(
    tmp_path: Path, path: str, properties: dict[str, str]
) -> None:
    """``gs://`` asked for gcsfs, then failed at the first commit: it is refused at once, with
    the stores that work, and nothing is written."""
    with pytest.raises(AtomicWriteUnsupportedError, match=r"local disks \(file://\) and S3-compatible"):
        create_table(path.format(tmp=tmp_path), name="t", record_key_fields=["id"], properties=properties)
    assert not any(tmp_path.iterdir())


# --- concurrent writers: "retry it" ----------------------------------------------------------


def _upsert_while(table: Table, step: str, meanwhile: Any, data: pa.Table) -> None:
    """``data`` upserted through a fresh handle of ``table``, ``meanwhile()`` run once when
    the write reaches ``step``."""
    ran = False

    def hook(reached: str) -> None:
        nonlocal ran
        if reached == step and not ran:
            ran = True
            meanwhile()

    with observe_steps(hook):
        WriteClient(load_table(table.path, storage_options=table.storage_options)).upsert(data)


def test_a_write_that_lost_a_file_group_to_another_is_retried(backend: Backend) -> None:
    """Hint: "instant T conflicts with instant U: both change file group version ...; retry
    the write on the new table state" (the claims at commit)."""
    table = make_table(backend)
    table.upsert(trips(range(3), "us"))
    other = WriteClient(load_table(table.path, storage_options=backend.storage_options))
    mine = trips([2], "us", ts=3, fare=70.0)
    with pytest.raises(CommitConflictError, match=r"retry the write on the new table state"):
        _upsert_while(table, "inflight", lambda: other.upsert(trips([1], "us", ts=2, fare=50.0)), mine)
    assert held(backend) == Counter([row(0, "us"), row(1, "us", 2, 51.0), row(2, "us")]), "nothing of it"
    WriteClient(load_table(table.path, storage_options=backend.storage_options)).upsert(mine)
    assert held(backend) == Counter([row(0, "us"), row(1, "us", 2, 51.0), row(2, "us", 3, 72.0)])


def test_a_write_whose_base_file_was_replaced_and_cleaned_is_retried(local: Backend) -> None:
    """Hint: "...: <file> was replaced while this upsert ran, by a write that completed since
    it began (instant T), and cleaned; nothing of this write is visible: retry it". (On local
    files, where the clean lands before the write reads the file; on S3 the same race ends in
    the claims' conflict, tested above.)"""
    table = make_table(local)
    table.upsert(trips(range(3), "us"))
    other = busy_writer(table, local)  # cleans all but the latest version

    def meanwhile() -> None:
        for fare in (100.0, 200.0, 300.0):
            other.upsert(trips([1], "us", ts=2, fare=fare))

    mine = trips([2], "us", ts=3, fare=70.0)
    with pytest.raises(CommitConflictError, match=r"and cleaned; nothing of this write is visible: retry it"):
        _upsert_while(table, "inflight", meanwhile, mine)
    WriteClient(load_table(table.path, storage_options=local.storage_options)).upsert(mine)
    assert held(local) == Counter([row(0, "us"), row(1, "us", 2, 301.0), row(2, "us", 3, 72.0)])


@pytest.mark.parametrize("change", ["partition", "schema"])
def test_a_write_that_another_outran_while_archiving_is_retried(backend: Backend, change: str) -> None:
    """Hints: "... a write that completed since this upsert began (instant T) changed a
    partition it writes; nothing of this write is visible: retry it" and "... changed its
    schema; ...: retry it" (a plan whose listing another writer archived meanwhile)."""
    table = make_table(backend)
    table.bulk_insert(trips(range(4), "us"))
    mine = trips([0], "us", ts=3, fare=7.0)
    job = WriteJob.open(table, "upsert", mine.schema)
    table.handle.forget_file_index()  # a driver that holds none of the deltas the plan needs
    other = busy_writer(table, backend)
    wider = trips(range(4), "us", ts=2).append_column("tip", pa.array([1.0] * 4))
    for fare in range(6):
        other.upsert(wider if change == "schema" else trips(range(4), "us", ts=2, fare=100.0 * fare))
    if change == "partition":
        job.begin()
        other.upsert(trips([2], "us", ts=3, fare=70.0))
    message = r"changed a partition it writes; " if change == "partition" else r"changed its schema; "
    with (
        pytest.raises(CommitConflictError, match=message + r"nothing of this write is visible: retry it"),
        job,
    ):
        WritePlanner(job).latest_base_files(["country=us"])
    expected = held(backend)
    retry = WriteClient(load_table(table.path, storage_options=backend.storage_options))
    if change == "schema":  # on the new schema, which has a column the input lacks: told what to do
        with pytest.raises(
            SchemaMismatchError, match=r"no column 'tip' of the table: set (\S+)=true"
        ) as told:
            retry.upsert(mine)
        retry = WriteClient(retry.table, {re.search(r"set (\S+)=true", str(told.value))[1]: "true"})  # type: ignore[index]
    retry.upsert(mine)
    old = next(r for r in expected if r[1] == 0)
    assert held(backend) == expected - Counter([old]) + Counter([row(0, "us", 3, 7.0)])


def test_a_view_whose_timeline_was_archived_meanwhile_lists_it_again(local: Backend) -> None:
    """Hint: "... of the timeline this view was listed with have no metadata-table delta,
    and archival has moved instants out since the listing; list the timeline again"."""
    table = make_table(local)
    table.upsert(trips(range(3), "us"))
    table.upsert(trips(range(3), "de"))
    listed = table.timeline()
    table.handle.forget_file_index()
    other = busy_writer(table, local)
    for fare in range(6):
        other.upsert(trips([1], "us", ts=2, fare=100.0 * fare))
    with pytest.raises(TimelineMovedError, match=r"list the timeline again"):
        table.handle.file_index_at(listed).files(None)
    again = table.handle.file_index_at(table.timeline()).files(None)
    assert sorted(again) == ["country=de", "country=us"]
    assert held(local) == Counter([row(0, "us"), row(1, "us", 2, 501.0), row(2, "us"), *map(_de, range(3))])


def _de(trip_id: int) -> Row:
    return row(trip_id, "de")


# --- the CLI -----------------------------------------------------------------------------------


def test_fed_version_says_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    import fedcore

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"fed {fedcore.__version__}\n"


def test_the_cli_says_which_argument_to_give(
    local: Backend, two_countries: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hints: "give either a TABLE or --preview" (fed layout) and "<path>: input must be a
    .parquet or .csv file" (fed write)."""
    assert fed("layout") == 2
    assert "give either a TABLE or --preview" in capsys.readouterr().err
    assert fed("layout", local.table_path) == 0
    text = tmp_path / "more.json"
    text.write_text("{}")
    assert fed("write", local.table_path, str(text)) == 2
    assert "input must be a .parquet or .csv file" in capsys.readouterr().err
    pq.write_table(trips([3], "us"), tmp_path / "more.parquet")
    assert fed("write", local.table_path, str(tmp_path / "more.parquet")) == 0
    assert held(local) == Counter([row(1, "us"), row(2, "de"), row(3, "us")])


def test_a_plain_parquet_dataset_migrates_once_given_its_record_key(
    local: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hint: "record key fields: <source> is a plain Parquet dataset: give its record key
    (--record-key)"."""
    source = tmp_path / "plain"
    for country, ids in (("us", [1, 2]), ("de", [3, 4])):
        (source / f"country={country}").mkdir(parents=True)
        pq.write_table(
            trips(ids, country).drop_columns(["country"]), source / f"country={country}" / "a.parquet"
        )
    move = ["migrate", str(source), local.table_path, "--storage-strategy", "hive"]
    assert fed(*move) == 2
    error = capsys.readouterr().err
    flag = re.search(r"give its record key \((--[\w-]+)", error)
    assert flag is not None, error
    assert fed(*move, flag[1], "trip_id") == 0
    assert held(local) == Counter([row(1, "us"), row(2, "us"), row(3, "de"), row(4, "de")])
