"""A new table's config holds only keys fed reads or knowingly records: a misspelt key is
refused at create, naming the key meant, before anything is written. And the table type is
stored as federated exactly for the layouts whose data is not under the table path."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedcore import properties as P
from fedcore.cli.main import main
from fedcore.exceptions import ConfigError
from fedcore.table import create_table, load_table

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
