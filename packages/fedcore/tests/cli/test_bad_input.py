"""The bad-input catalogue: every kind of bad input is one line on stderr and exit 2 from
the CLI (never a traceback), names what is wrong, and leaves the table as it was."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.cli.main import main
from fedcore.exceptions import DataFileMissingError
from fedcore.handle.config import properties_path
from fedcore.table import Table, load_table

from .test_cli_table import options


@dataclass
class Setup:
    backend: Backend
    table: Table
    folder: Path
    opts: list[str]

    def input(self, name: str, data: pa.Table) -> str:
        path = self.folder / name
        pq.write_table(data, path)
        return str(path)


def records(ids: list[int], countries: list[str | None] | None = None) -> pa.Table:
    return pa.table(
        {
            "trip_id": pa.array(ids, pa.int64()),
            "country": pa.array(countries or ["us"] * len(ids), pa.string()),
            "ts": pa.array([1] * len(ids), pa.int64()),
            "fare": pa.array([1.0] * len(ids), pa.float64()),
        }
    )


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def make_setup(backend: Backend, folder: Path, capsys: pytest.CaptureFixture[str]) -> Setup:
    opts = options(backend)
    layout = ["--storage-strategy", "object_store", "--storage-path", backend.storage_path]
    keys = ["--record-key", "trip_id", "--partition-by", "country", "--precombine", "ts"]
    code, _, err = run(capsys, ["create", backend.table_path, "--name", "trips", *keys, *layout, *opts])
    assert code == 0, err
    first = folder / "first.parquet"
    pq.write_table(records([1, 2, 3], ["us", "de", "us"]), first)
    code, _, err = run(capsys, ["write", backend.table_path, str(first), *opts])
    assert code == 0, err
    table = load_table(backend.table_path, storage_options=backend.storage_options)
    return Setup(backend, table, folder, opts)


@pytest.fixture
def setup(backend: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Setup:
    """A table on local files and, in a second run, on S3."""
    return make_setup(backend, tmp_path, capsys)


@pytest.fixture
def local_setup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Setup:
    backend = Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    return make_setup(backend, tmp_path, capsys)


Argv = Callable[[Setup], list[str]]


def _t(s: Setup) -> str:
    return s.backend.table_path


CASES: dict[str, Argv] = {
    # flags
    "read --limit -1": lambda s: ["read", _t(s), "--limit", "-1"],
    "read --limit x": lambda s: ["read", _t(s), "--limit", "x"],
    "read --output x.json": lambda s: ["read", _t(s), "--output", str(s.folder / "x.json")],
    "clean --retain 0": lambda s: ["clean", _t(s), "--retain", "0"],
    "clean --retain -3": lambda s: ["clean", _t(s), "--retain", "-3"],
    "create --storage-strategy ''": lambda s: [
        "create",
        str(s.folder / "new"),
        "--name",
        "n",
        "--record-key",
        "id",
        "--storage-strategy",
        "",
    ],
    "create --record-key ''": lambda s: ["create", str(s.folder / "new"), "--name", "n", "--record-key", ""],
    "write -p strategy=hive": lambda s: [
        "write",
        _t(s),
        s.input("a.parquet", records([9])),
        "-p",
        f"{P.STORAGE_STRATEGY_CLASS}=hive",
    ],
    "write -p storage.path": lambda s: [
        "write",
        _t(s),
        s.input("a.parquet", records([9])),
        "-p",
        f"{P.STORAGE_PATH}=s3://elsewhere",
    ],
    "write -p heartbeat=soon": lambda s: [
        "write",
        _t(s),
        s.input("a.parquet", records([9])),
        "-p",
        f"{P.HEARTBEAT_INTERVAL_MS}=soon",
    ],
    "write -p max.file.size=big": lambda s: [
        "write",
        _t(s),
        s.input("a.parquet", records([9])),
        "-p",
        f"{P.MAX_FILE_SIZE}=big",
    ],
    "write -p unknown key": lambda s: [
        "write",
        _t(s),
        s.input("a.parquet", records([9])),
        "-p",
        "hoodie.datasource.write.operation=insert",
    ],
    "write -p no-equals": lambda s: ["write", _t(s), s.input("a.parquet", records([9])), "-p", "novalue"],
    "write --operation merge": lambda s: [
        "write",
        _t(s),
        s.input("a.parquet", records([9])),
        "--operation",
        "merge",
    ],
    # filters
    "where empty": lambda s: ["read", _t(s), "--where", ""],
    "where blank": lambda s: ["read", _t(s), "--where", "   "],
    "where huge number": lambda s: ["read", _t(s), "--where", "ts = 99999999999999999999999"],
    "where unknown column": lambda s: ["read", _t(s), "--where", "nosuch = 1"],
    "where no value": lambda s: ["read", _t(s), "--where", "country ="],
    "where OR": lambda s: ["read", _t(s), "--where", "country = 'us' OR country = 'de'"],
    "where bad date literal": lambda s: ["read", _t(s), "--where", "fare = 'abc'"],
    "files --where bad": lambda s: ["files", _t(s), "--where", "country"],
    # columns and output
    "columns unknown": lambda s: ["read", _t(s), "--columns", "nosuch"],
    "columns twice": lambda s: ["read", _t(s), "--columns", "trip_id,trip_id"],
    "columns empty name": lambda s: ["read", _t(s), "--columns", "trip_id,,fare"],
    "output folder missing": lambda s: ["read", _t(s), "--output", str(s.folder / "nope" / "x.parquet")],
    "as-of garbage": lambda s: ["read", _t(s), "--as-of", "yesterday"],
    # records
    "input missing key column": lambda s: [
        "write",
        _t(s),
        s.input("b.parquet", records([9]).drop_columns(["trip_id"])),
    ],
    "input null key": lambda s: [
        "write",
        _t(s),
        s.input("b.parquet", records([9]).set_column(0, "trip_id", pa.array([None], pa.int64()))),
    ],
    "input wrong type": lambda s: [
        "write",
        _t(s),
        s.input("b.parquet", records([9]).set_column(3, "fare", pa.array(["x"]))),
    ],
    "input key 1.5": lambda s: [
        "write",
        _t(s),
        s.input("b.parquet", records([9]).set_column(0, "trip_id", pa.array([1.5]))),
    ],
    "input key as text": lambda s: [
        "write",
        _t(s),
        s.input("b.parquet", records([9]).set_column(0, "trip_id", pa.array(["9"]))),
    ],
    "input not parquet": lambda s: ["write", _t(s), str(_text_file(s.folder / "in.parquet"))],
    "input .txt": lambda s: ["write", _t(s), str(_text_file(s.folder / "in.txt"))],
    "input missing": lambda s: ["write", _t(s), str(s.folder / "absent.parquet")],
    # partition values
    "partition value 300 chars": lambda s: ["write", _t(s), s.input("c.parquet", records([9], ["x" * 300]))],
    # table files
    "create over a file": lambda s: [
        "create",
        str(_text_file(s.folder / "afile")),
        "--name",
        "a",
        "--record-key",
        "id",
    ],
    "create under /proc": lambda s: ["create", "/proc/fed-nope", "--name", "a", "--record-key", "id"],
    "create over the table": lambda s: ["create", _t(s), "--name", "trips", "--record-key", "trip_id"],
    "read a missing table": lambda s: ["read", str(s.folder / "no-table")],
    "rollback a non-instant": lambda s: ["rollback", _t(s), "20200101000000000"],
    "rollback garbage": lambda s: ["rollback", _t(s), "latest"],
}

#: Cases whose storage calls differ on S3: run there too.
STORAGE_CASES = (
    "write -p strategy=hive",
    "create over the table",
    "rollback a non-instant",
    "read a missing table",
)


def _text_file(path: Path) -> Path:
    path.write_text("not a table\n")
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_exit_2(
    case: str, local_setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    check_one_line_exit_2(CASES[case], local_setup, capsys)


@pytest.mark.parametrize("case", STORAGE_CASES)
def test_bad_input_on_each_storage_is_one_line_and_exit_2(
    case: str, setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    check_one_line_exit_2(CASES[case], setup, capsys)


def check_one_line_exit_2(case: Argv, setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    before = setup.table.read().sort_by("trip_id")
    argv = case(setup)
    if argv[0] != "create" or argv[1] == setup.backend.table_path:
        argv += setup.opts
    code, out, err = run(capsys, argv)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fed"), err
    assert "error:" in lines[0]
    after = load_table(setup.backend.table_path, storage_options=setup.backend.storage_options)
    assert after.read().sort_by("trip_id") == before
    assert after.timeline().pending() == []


def test_a_deleted_data_file_is_named_with_what_to_do(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    (victim,) = [s for s in setup.table.file_slices() if s.partition_path == "country=de"]
    physical = setup.table.fs.to_physical(victim.path)
    setup.table.fs.rm_file(victim.path)
    with pytest.raises(DataFileMissingError, match=victim.base_instant):
        setup.table.read()
    for argv in (
        ["read", setup.backend.table_path],
        ["write", setup.backend.table_path, setup.input("d.parquet", records([2], ["de"]))],
    ):
        code, _, err = run(capsys, [*argv, *setup.opts])
        assert code == 2
        (line,) = err.strip().splitlines()
        assert physical.split("://", 1)[-1] in line
        assert "fed rollback" in line
    # The failed write left nothing behind: the other partitions read as before.
    assert sorted(setup.table.read([("country", "=", "us")]).column("trip_id").to_pylist()) == [1, 3]
    assert (
        load_table(setup.backend.table_path, storage_options=setup.backend.storage_options)
        .timeline()
        .pending()
        == []
    )


def test_properties_file_damage_is_one_line(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    fs = setup.table.fs.table_fs
    path = properties_path(setup.table.path)
    original = bytes(fs.cat_file(path))
    for damaged in (
        original.replace(b"hoodie.storage.hash.function=xxh32", b"hoodie.storage.hash.function=xxh64"),
        original.replace(b"hoodie.table.version=6", b"hoodie.table.version=x"),
        b"\x00\xff garbage",
    ):
        fs.pipe_file(path, damaged)
        code, _, err = run(capsys, ["read", setup.backend.table_path, *setup.opts])
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1, err
    fs.pipe_file(path, original)
    code, _, err = run(capsys, ["read", setup.backend.table_path, *setup.opts])
    assert code == 0, err
