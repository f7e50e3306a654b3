"""The table commands of ``fed``, run as a user runs them (through ``main``), locally and on S3."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fed_dev.testing import Backend
from fedcore.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def options(backend: Backend) -> list[str]:
    if backend.storage_options is None:
        return []
    s3 = backend.storage_options["s3"]
    return [
        "--storage-option",
        f"endpoint_url={s3['client_kwargs']['endpoint_url']}",
        "--storage-option",
        f"key={s3['key']}",
        "--storage-option",
        f"secret={s3['secret']}",
    ]


def test_create_write_read_files_timeline_clean_rollback(
    backend: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = options(backend)
    table = backend.table_path
    layout = ["--storage-strategy", "object_store", "--storage-path", backend.storage_path]
    keys = ["--record-key", "trip_id", "--partition-by", "country", "--precombine", "ts"]
    code, out, err = run(capsys, "create", table, "--name", "trips", *keys, *layout, *opts)
    assert code == 0, err
    first, second = tmp_path / "first.parquet", tmp_path / "second.csv"
    pq.write_table(
        pa.table(
            {"trip_id": [1, 2, 3], "country": ["us", "de", "us"], "ts": [1, 1, 1], "fare": [5.0, 6.0, 7.0]}
        ),
        first,
    )
    second.write_text("trip_id,country,ts,fare\n1,us,2,50.0\n")
    assert run(capsys, "write", table, str(first), "--operation", "bulk_insert", *opts)[0] == 0
    code, out, _ = run(capsys, "write", table, str(second), *opts)
    assert code == 0
    instant = re.search(r"Committed (\d{17})", out)[1]  # type: ignore[index]

    code, out, _ = run(capsys, "read", table, "--where", "country = 'us'", "--columns", "trip_id,fare", *opts)
    assert code == 0
    assert sorted(re.findall(r"^(\d)\s+([\d.]+)\s*$", out, flags=re.M)) == [("1", "50.0"), ("3", "7.0")]
    assert "(2 rows)" in out

    code, out, err = run(capsys, "files", table, "--where", "country IN ('de')", "--physical", *opts)
    assert code == 0
    assert out.count("\n") == 1
    assert re.match(re.escape(backend.storage_path) + r"/[0-9a-f]{8}/trips-[0-9a-f-]{36}/country=de/", out)

    code, out, _ = run(capsys, "timeline", table, *opts)
    assert [line.split()[1:4] for line in out.splitlines()] == [
        ["commit", "completed", "bulk_insert"],
        ["commit", "completed", "upsert"],
    ]

    code, out, _ = run(capsys, "rollback", table, instant, *opts)
    assert code == 0
    code, out, _ = run(capsys, "read", table, "--where", "trip_id = 1", "--columns", "fare", *opts)
    assert re.search(r"^5\.0\s*$", out, flags=re.M)

    output = tmp_path / "all.parquet"
    assert run(capsys, "read", table, "--output", str(output), *opts)[0] == 0
    assert pq.read_table(output).num_rows == 3
    code, out, _ = run(capsys, "clean", table, "--retain", "5", *opts)
    assert code == 0
    assert "Nothing to clean" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["read", "{table}", "--where", "country = us"], "is not a value: quote a string"),
        (["read", "{table}", "--where", "country = 'us' OR 1 = 1"], "OR is not supported"),
        (["rollback", "{table}", "20200101000000000"], "no instant 20200101000000000"),
        (["write", "{table}", "{missing}"], "cannot read"),
        (["read", "{table}", "--as-of", "yesterday"], "is not an instant time"),
        (["layout", "{table}", "--preview"], "either a TABLE or --preview"),
    ],
)
def test_errors_print_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    table = str(tmp_path / "t")
    assert (
        run(capsys, "create", table, "--name", "t", "--record-key", "id", "--partition-by", "country")[0] == 0
    )
    filled = [a.format(table=table, missing=tmp_path / "missing.parquet") for a in argv]
    code, _, err = run(capsys, *filled)
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("fed: error: ")
    assert message in err


def test_reading_a_missing_table_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "read", str(tmp_path / "nothing"))
    assert code == 2
    assert "no table at" in err
