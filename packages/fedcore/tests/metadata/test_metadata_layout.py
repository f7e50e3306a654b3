"""Where fed keeps its metadata table: ``.hoodie/.fed/metadata/`` (layout 2), out of the
``.hoodie/metadata/`` folder Apache Hudi's writers own and delete whole when they drop or
rebuild their metadata table; and the upgrade of tables that kept it there (layout 1), by
hand (``fed upgrade``) and by the next write, safe beside a writer still on the old folder."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fed_dev.testing import Backend, rows, trips
from fedcore import properties as P
from fedcore.exceptions import ConfigError, InvalidTableConfigError, MetadataTableError
from fedcore.handle.config import TableConfig, properties_path
from fedcore.metadata.format import FOLDER, LEGACY_FOLDER
from fedcore.services.verify import verify_table
from fedcore.table import Table, load_table
from fedcore.write.client import WriteClient

from ..catalog.test_hive_sync import cli_options
from ..write.test_writes import make_table

HUDI_METADATA = ".hoodie/metadata"


def fresh(backend: Backend) -> Table:
    return load_table(backend.table_path, storage_options=backend.storage_options)


def objects(table: Table, folder: str) -> list[str]:
    fs = table.fs.table_fs
    root = fs._strip_protocol(f"{table.path}/{folder}")
    fs.invalidate_cache(root)
    return sorted(path[len(root) + 1 :] for path in fs.find(root))


def as_layout_1(table: Table, backend: Backend) -> Table:
    """Turn a table into one an older fedcore made: its metadata table inside Hudi's folder,
    no layout in its config."""
    fs = table.fs.table_fs
    new, old = f"{table.path}/{FOLDER}", f"{table.path}/{LEGACY_FOLDER}"
    for name in objects(table, FOLDER):
        fs.pipe_file(f"{old}/{name}", fs.cat_file(f"{new}/{name}"))
    fs.rm(new, recursive=True)
    props = {k: v for k, v in table.config.items() if k != P.METADATA_LAYOUT}
    TableConfig(props).save_replacing(fs, table.path)
    return fresh(backend)


def test_a_new_table_keeps_its_metadata_out_of_hudis_folder_and_survives_hudi_dropping_it(
    backend: Backend,
) -> None:
    table = make_table(backend, **{P.METADATA_COMPACT_DELTAS: "2"})
    for n in range(5):
        WriteClient(table).upsert(trips([n, 10 + n], ["us", "de"], fare=float(n)))
    assert table.config.metadata_layout == 2
    assert any(name.startswith("manifests/") for name in objects(table, FOLDER))
    expected = rows(fresh(backend))
    # What Hudi's writers do when they drop their metadata table (``deleteMetadataTable``).
    fs = table.fs.table_fs
    fs.pipe_file(f"{table.path}/{HUDI_METADATA}/.hoodie/hoodie.properties", b"hoodie.table.name=x\n")
    fs.rm(f"{table.path}/{HUDI_METADATA}", recursive=True)
    assert rows(fresh(backend)) == expected
    assert verify_table(fresh(backend)).ok


def test_the_layout_is_fed_s_to_set_and_a_newer_one_is_refused(backend: Backend) -> None:
    with pytest.raises(ConfigError, match=P.METADATA_LAYOUT.replace(".", r"\.")):
        make_table(backend, **{P.METADATA_LAYOUT: "1"})
    table = make_table(backend)
    text = table.config.to_bytes().replace(
        f"{P.METADATA_LAYOUT}=2".encode(), f"{P.METADATA_LAYOUT}=3".encode()
    )
    table.fs.table_fs.pipe_file(properties_path(table.path), text)
    with pytest.raises(InvalidTableConfigError, match="a newer fed wrote this table"):
        fresh(backend)


def test_fed_upgrade_moves_the_metadata_table_and_reads_stay_exact(backend: Backend) -> None:
    table = make_table(backend, **{P.METADATA_COMPACT_DELTAS: "3"})
    for n in range(5):
        WriteClient(table).upsert(trips([n, 10 + n], ["us", "de"], fare=float(n)))
    expected = rows(fresh(backend))
    old = as_layout_1(table, backend)
    assert old.config.metadata_layout == 1
    legacy = objects(old, LEGACY_FOLDER)
    assert any(name.startswith("manifests/") for name in legacy)
    assert any(name.startswith("deltas/") for name in legacy)
    assert rows(old) == expected  # layout 1 is read where it is

    done = subprocess.run(
        [sys.executable, "-m", "fedcore", "upgrade", backend.table_path, *cli_options(backend)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"{P.METADATA_LAYOUT} 1 -> 2" in done.stdout
    upgraded = fresh(backend)
    assert upgraded.config.metadata_layout == 2
    assert objects(upgraded, FOLDER) == legacy  # every file, as it was
    assert rows(upgraded) == expected
    # Hudi deleting its folder (with the old copy in it) changes nothing any more.
    upgraded.fs.table_fs.rm(f"{upgraded.path}/{HUDI_METADATA}", recursive=True)
    WriteClient(fresh(backend)).upsert(trips([1, 30], ["us", "fr"], fare=50.0))
    assert rows(fresh(backend)) == {**expected, 1: ("us", 51.0), 30: ("fr", 80.0)}
    assert verify_table(fresh(backend)).ok
    again = subprocess.run(
        [sys.executable, "-m", "fedcore", "upgrade", backend.table_path, *cli_options(backend)],
        capture_output=True,
        text=True,
    )
    assert "is up to date" in again.stdout


def test_a_write_upgrades_and_a_writer_still_on_the_old_folder_loses_nothing(backend: Backend) -> None:
    table = make_table(backend, **{P.METADATA_COMPACT_DELTAS: "100"})
    WriteClient(table).upsert(trips([1, 2], ["us", "de"]))
    old = as_layout_1(table, backend)
    straggler = WriteClient(fresh(backend))  # loaded before

    WriteClient(fresh(backend)).upsert(trips([3], "fr"))  # upgrades, then writes
    assert fresh(backend).config.metadata_layout == 2
    # A process that loaded the config before the switch writes its delta into the old folder.
    straggler.upsert(trips([4], "nl"))
    assert any(n.startswith("deltas/") for n in objects(old, LEGACY_FOLDER))
    expected = {1: ("us", 11.0), 2: ("de", 12.0), 3: ("fr", 13.0), 4: ("nl", 14.0)}
    assert rows(fresh(backend)) == expected
    # Even with the old folder gone, its commit says what it wrote.
    old.fs.table_fs.rm(f"{old.path}/{HUDI_METADATA}", recursive=True)
    assert rows(fresh(backend)) == expected
    WriteClient(fresh(backend), {P.METADATA_COMPACT_DELTAS: "1"}).upsert(trips([5], "it"))  # folds them in
    assert rows(fresh(backend)) == {**expected, 5: ("it", 15.0)}
    assert verify_table(fresh(backend)).ok


def test_a_reader_left_on_the_old_folder_after_archival_is_refused_not_short(backend: Backend) -> None:
    table = make_table(backend, **{P.METADATA_COMPACT_DELTAS: "2"})
    for n in range(3):
        WriteClient(table).upsert(trips([n], "us", fare=float(n)))
    old = as_layout_1(table, backend)
    assert any(name.startswith("manifests/") for name in objects(old, LEGACY_FOLDER))
    rows(old)  # the old handle's view now starts from the old folder's manifest
    often = {
        P.METADATA_COMPACT_DELTAS: "1",
        P.ARCHIVE_MIN_INSTANTS: "2",
        P.ARCHIVE_MAX_INSTANTS: "3",
    }
    for n in range(6):  # upgraded by the first; compacted and archived in the new folder
        WriteClient(fresh(backend), often).upsert(trips([10 + n], "de", fare=float(n)))
    assert fresh(backend).timeline().archived_through is not None
    expected = {
        **{n: ("us", 2.0 * n) for n in range(3)},
        **{10 + n: ("de", 10.0 + 2 * n) for n in range(6)},
    }
    assert rows(fresh(backend)) == expected
    with pytest.raises(MetadataTableError, match="archived through"):
        old.read()


def test_a_handle_opened_before_another_writer_changed_the_config_writes_from_the_stored_one(
    backend: Backend,
) -> None:
    """A handle keeps the config it loaded; another writer (a Hudi job) may change
    ``hoodie.properties`` since. Each write works from the stored file: Hudi's metadata table,
    built since the handle opened, is dropped (config key, then folder), a key the other
    writer added is kept rather than overwritten by the handle's older copy, and a change to
    the table's definition is refused by name, before anything is written."""
    kept = make_table(backend)
    kept.upsert(trips(range(4), ["us", "de"] * 2))
    fs = kept.fs.table_fs
    stored = TableConfig.load(fs, kept.path)
    hudi_keys = {P.HUDI_METADATA_PARTITIONS: "files", "hoodie.table.initial.version": "6"}
    TableConfig({**stored, **hudi_keys}).save_replacing(fs, kept.path)
    fs.pipe_file(f"{kept.path}/{HUDI_METADATA}/files/.files-0000_00000000000000000.log.1_0-0-0", b"x")
    assert P.HUDI_METADATA_PARTITIONS not in kept.config  # the handle's copy is from before
    kept.upsert(trips([2, 7], "us", ts=2, fare=3.0))
    after = TableConfig.load(fs, kept.path)
    assert P.HUDI_METADATA_PARTITIONS not in after, "Hudi's metadata table was dropped from the config"
    assert after["hoodie.table.initial.version"] == "6", "the other writer's key was kept"
    assert objects(kept, HUDI_METADATA) == [], "and its folder went"
    assert kept.config["hoodie.table.initial.version"] == "6"
    expected = rows(fresh(backend))
    assert expected[7] == ("us", 10.0)
    TableConfig({**after, P.RECORD_KEY_FIELDS: "country"}).save_replacing(fs, kept.path)
    timeline = [i.time for i in kept.timeline().instants]
    with pytest.raises(InvalidTableConfigError, match=r"record key fields.*open the table again"):
        kept.upsert(trips([0], "us", ts=3))
    assert [i.time for i in kept.timeline().instants] == timeline, "nothing was written"
