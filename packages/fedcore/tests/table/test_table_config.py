"""The table config (``hoodie.properties``): Hudi's keys and checksum, read and written as Hudi
does; a new table's config holds only keys fed reads or knowingly records (a misspelt key is
refused at create, naming the key meant), and its table type is federated exactly for the
layouts whose data is not under the table path."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from fedcore import properties as P
from fedcore.cli.main import main
from fedcore.exceptions import ConfigError, InvalidTableConfigError, TableNotFoundError
from fedcore.handle.config import TableConfig, table_checksum
from fedcore.table import create_table, load_table

REAL_TABLES = {
    "v6_complexkeygen_hivestyle": (6, ("id", "name"), ("byteField", "shortField"), True),
    "v6_simplekeygen_nonhivestyle": (6, ("id",), ("byteField",), False),
    "v6_nonpartitioned": (6, ("id",), (), True),
    "v8_complexkeygen_hivestyle": (8, ("id", "name"), ("byteField", "shortField"), True),
    "v8_nonpartitioned": (8, ("id",), (), None),
}


def real_properties(hudi_rs_tables: Path, table: str) -> bytes:
    with zipfile.ZipFile(hudi_rs_tables / f"{table}.zip") as archive:
        (name,) = [
            n for n in archive.namelist() if n.endswith(".hoodie/hoodie.properties") and "__MACOSX" not in n
        ]
        return archive.read(name)


@pytest.mark.parametrize("table", sorted(REAL_TABLES))
def test_reads_hudi_written_configs_and_agrees_on_their_checksum(hudi_rs_tables: Path, table: str) -> None:
    version, keys, partitions, hive_style = REAL_TABLES[table]
    config = TableConfig.from_bytes(real_properties(hudi_rs_tables, table))
    assert config.name == table
    assert config.version == version
    assert config.record_key_fields == keys
    assert config.partition_fields == partitions
    assert config.precombine_field == "longField"
    if hive_style is not None:
        assert config.hive_style_partitioning is hive_style
    # Hudi computed this checksum in Java; ours must agree.
    assert int(config[P.TABLE_CHECKSUM]) == table_checksum(table, config.database)
    assert '"type":"record"' in config["hoodie.table.create.schema"]  # \: escapes decoded


def test_new_config_carries_hudi_keys_and_round_trips() -> None:
    config = TableConfig.create(
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: "s3://lake-storage"},
    )
    text = config.to_bytes().decode("latin-1")
    assert text.startswith("#Properties saved on ")
    assert "hoodie.storage.path=s3\\://lake-storage" in text  # Java properties escaping, as Hudi writes
    for key, value in {
        P.TABLE_NAME: "trips",
        P.TABLE_TYPE: "COPY_ON_WRITE",
        P.TABLE_VERSION: "6",
        P.RECORD_KEY_FIELDS: "trip_id",
        P.PARTITION_FIELDS: "country",
        P.PRECOMBINE_FIELD: "ts",
        P.HIVE_STYLE_PARTITIONING: "true",
        P.KEY_GENERATOR_CLASS: "org.apache.hudi.keygen.SimpleKeyGenerator",
        P.TIMELINE_LAYOUT_VERSION: "1",
        P.TABLE_CHECKSUM: str(table_checksum("trips")),
    }.items():
        assert config[key] == value
    assert TableConfig.from_bytes(config.to_bytes()) == config


@pytest.mark.parametrize(
    ("keys", "partitions", "generator"),
    [
        (["a"], [], P.NON_PARTITIONED_KEY_GENERATOR),
        (["a"], ["p"], P.SIMPLE_KEY_GENERATOR),
        (["a", "b"], ["p"], P.COMPLEX_KEY_GENERATOR),
        (["a"], ["p", "q"], P.COMPLEX_KEY_GENERATOR),
    ],
)
def test_key_generator_follows_hudi(keys: list[str], partitions: list[str], generator: str) -> None:
    config = TableConfig.create(name="t", record_key_fields=keys, partition_fields=partitions)
    assert config[P.KEY_GENERATOR_CLASS] == generator


def test_corrupt_checksum_is_rejected() -> None:
    text = TableConfig.create(name="trips", record_key_fields=["id"]).to_bytes()
    tampered = text.replace(b"hoodie.table.name=trips", b"hoodie.table.name=trups")
    with pytest.raises(InvalidTableConfigError) as raised:
        TableConfig.from_bytes(tampered)
    assert raised.value.key == P.TABLE_CHECKSUM


@pytest.mark.parametrize(
    "key", ["s3.secret_key", "hoodie.aws.access.key", "fs.azure.sas.token", "db.password", "gcs.credentials"]
)
def test_credentials_are_never_persisted(key: str) -> None:
    with pytest.raises(InvalidTableConfigError) as raised:
        TableConfig.create(name="t", record_key_fields=["id"], properties={key: "hunter2"})
    assert raised.value.key == key


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"name": "bad name", "record_key_fields": ["id"]}, P.TABLE_NAME),
        ({"name": "t", "record_key_fields": []}, P.RECORD_KEY_FIELDS),
    ],
)
def test_invalid_new_configs_name_the_key(kwargs: dict, key: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InvalidTableConfigError) as raised:
        TableConfig.create(**kwargs)
    assert raised.value.key == key


def test_garbage_is_not_a_config() -> None:
    with pytest.raises(InvalidTableConfigError):
        TableConfig.from_bytes(io.BytesIO(b"\x00\x01").read())


def test_a_key_generator_written_with_blanks_spells_keys_as_without(tmp_path: Path) -> None:
    """Java properties keep a value's trailing blanks; Hudi trims the key generator's class
    name, and so does every rule of fed's that depends on it: a single-field key of the
    complex generator stays ``a:1``, never ``1``."""
    table = create_table(
        f"file://{tmp_path}/t", name="t", record_key_fields=["a"], partition_fields=["p", "q"]
    )
    fs = table.fs.table_fs
    padded = {**table.config, P.KEY_GENERATOR_CLASS: f"{P.COMPLEX_KEY_GENERATOR}  "}
    TableConfig(padded).save_replacing(fs, table.path)
    reopened = load_table(table.path)
    assert reopened.config[P.KEY_GENERATOR_CLASS].endswith(" ")
    reopened.upsert(pa.table({"a": [1, 2], "p": ["x", "y"], "q": ["z", "z"]}))
    keys = sorted(load_table(table.path).read(columns=["_hoodie_record_key"]).column(0).to_pylist())
    assert keys == ["a:1", "a:2"]


def test_a_config_hudi_is_rewriting_is_read_from_its_backup(tmp_path: Path) -> None:
    """Hudi rewrites ``hoodie.properties`` through ``hoodie.properties.backup``: while the
    file is gone or torn, the backup is the config (as Hudi's readers take it)."""
    table = create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["a"], partition_fields=["p"])
    table.upsert(pa.table({"a": [1], "p": ["x"]}))
    main = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    backup = main.with_name("hoodie.properties.backup")
    backup.write_bytes(main.read_bytes())
    main.unlink()  # Hudi deleted it and has not written the new one yet
    assert load_table(table.path).read(columns=["a"]).column(0).to_pylist() == [1]
    main.write_bytes(backup.read_bytes()[:-40])  # torn: the checksum no longer holds
    assert load_table(table.path).config.record_key_fields == ("a",)
    backup.unlink()
    with pytest.raises(InvalidTableConfigError):
        load_table(table.path)
    main.unlink()
    with pytest.raises(TableNotFoundError, match="no table at"):
        load_table(table.path)


OBJECT_STORE = {P.STORAGE_STRATEGY_CLASS: P.STORAGE_STRATEGY_OBJECT_STORE}


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("hoodie.storage.hash.prefix.count", P.STORAGE_PREFIX_COUNT),
        ("hoodie.storage.prefixcount", P.STORAGE_PREFIX_COUNT),
        ("hoodie.storage.strategy.clas", P.STORAGE_STRATEGY_CLASS),
        ("hoodie.storage.pth", P.STORAGE_PATH),
        ("hoodie.parquet.max.filesize", str(P.MAX_FILE_SIZE)),
        ("hoodie.table.precombine.fields", P.PRECOMBINE_FIELD),
    ],
)
def test_a_misspelt_key_is_refused_naming_the_key_meant(tmp_path: Path, given: str, meant: str) -> None:
    properties = {**OBJECT_STORE, P.STORAGE_PATH: f"file://{tmp_path}/storage", given: "16"}
    with pytest.raises(ConfigError, match=f"did you mean {meant}") as refused:
        create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["id"], properties=properties)
    assert refused.value.key == given
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("key", ["hoodie.index.type", "fed.storage.endpoint_url", "compression"])
def test_a_key_fed_does_not_read_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(
        ConfigError, match="is not a table property fed reads or records, so it would be ignored"
    ):
        create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["id"], properties={key: "x"})
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("key", [P.TABLE_CHECKSUM, P.STORAGE_CHECKSUM])
def test_a_computed_key_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError, match="is computed by fed, never given"):
        create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["id"], properties={key: "1"})


def test_keys_fed_reads_or_records_are_kept(tmp_path: Path) -> None:
    given = {
        str(P.MAX_FILE_SIZE): "1048576",  # a runtime option: the table's default
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",  # a key generator's setting
        P.CREATE_SCHEMA: '{"type": "record", "name": "t", "fields": []}',
    }
    table = create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["id"], properties=given)
    config = load_table(table.path).config
    assert {key: config[key] for key in given} == given


def test_the_table_type_is_federated_exactly_when_the_data_is_not_under_the_table_path(
    tmp_path: Path,
) -> None:
    hive = create_table(f"file://{tmp_path}/hive", name="h", record_key_fields=["id"])
    spread = create_table(
        f"file://{tmp_path}/spread",
        name="s",
        record_key_fields=["id"],
        # given as federated or not, the layout decides
        properties={
            **OBJECT_STORE,
            P.STORAGE_PATH: f"file://{tmp_path}/storage",
            P.TABLE_TYPE: "copy_on_write",
        },
    )
    assert (hive.config[P.TABLE_TYPE], hive.config.federated) == (P.TABLE_TYPE_COW, False)
    assert (spread.config[P.TABLE_TYPE], spread.config.federated) == ("FEDERATED_COPY_ON_WRITE", True)
    assert load_table(spread.path).config.table_type == hive.config.table_type == P.TABLE_TYPE_COW


def test_the_cli_refuses_a_misspelt_key_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The case a user met: a Hive-layout table created, exit 0, from a misspelt prefix count."""
    code = main(
        [
            "create",
            str(tmp_path / "t"),
            "--name",
            "t",
            "--record-key",
            "id",
            "-p",
            "hoodie.storage.prefixcount=16",
        ]
    )
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert line == (
        "fed: error: hoodie.storage.prefixcount: is not a table property fed reads or records, so it "
        f"would be ignored; did you mean {P.STORAGE_PREFIX_COUNT}?"
    )
    assert not (tmp_path / "t").exists()


def test_a_misspelt_write_option_names_the_option_meant(tmp_path: Path) -> None:
    table = create_table(f"file://{tmp_path}/t", name="t", record_key_fields=["id"])
    with pytest.raises(ConfigError, match=f"did you mean {P.MAX_FILE_SIZE}"):
        table.with_options({"hoodie.parquet.max.file.sizes": "10"})
