from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedcore.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_starts_without_importing_pandas() -> None:
    """Every ``fed`` command imports fedcore and its CLI first: pandas (a fifth of a second)
    is left to what uses it, and a parquet read needs none."""
    script = (
        "import sys\n"
        "import fedcore.cli.main\n"
        "from fedcore.io.parquet import read_parquet\n"
        "import pyarrow as pa, pyarrow.parquet as pq, io\n"
        "sink = io.BytesIO()\n"
        "pq.write_table(pa.table({'n': pa.nulls(3, pa.int64())}), sink)\n"
        "assert read_parquet(sink.getvalue()).num_rows == 3\n"
        "print(sorted(m for m in sys.modules if m == 'pandas' or m.startswith('pandas.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_preview_defaults_to_the_object_store_layout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "layout", "--preview", "--files", "5000", "--samples", "3")
    assert code == 0
    placed = r"-> (s3://lake-storage/([0-9a-f]{8})/trips-<table id>/day=2026-01-0\d/\S+\.parquet)"
    arrows = re.findall(placed, out)  # a new table's folder holds its id, drawn at creation
    assert len(arrows) == 3
    assert "Prefixes used: 5,000" in out or "Prefixes used: 4,99" in out


def test_preview_of_bounded_prefixes_reports_an_even_spread(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "layout", "--preview", "--files", "20000", "-p", "hoodie.storage.prefix.count=128"
    )
    assert code == 0
    assert "Prefixes used: 128" in out
    match = re.search(r"chi-square/df ([0-9.]+) \(1.0 = uniform\), p = ([0-9.e-]+)", out)
    assert match is not None
    assert 0.7 < float(match.group(1)) < 1.3
    assert float(match.group(2)) > 0.001
    assert "even (consistent with uniform placement)" in out


def test_preview_of_the_hive_layout_warns_of_one_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "layout", "--preview", "--storage-strategy", "hive", "--files", "100")
    assert code == 0
    assert "Prefixes used: 1\n" in out
    assert "-> s3://lake-tables/trips/day=2026-01-01/" in out
    assert "one prefix" in out


def test_preview_of_a_partition_map(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "layout",
        "--preview",
        "--storage-strategy",
        "partition_map",
        "--files",
        "300",
        "-p",
        'hoodie.storage.partition.locations={"country=us": "s3://lake-us", "country=de": "s3://lake-de"}',
        "--partition",
        "country=us",
        "--partition",
        "country=de",
        "--partition",
        "country=us",
    )
    assert code == 0
    assert "Prefixes used: 2\n" in out
    assert "max 200" in out
    assert "min 100" in out


def test_preview_draws_a_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "prefixes.png"
    code, out, _ = run(
        capsys,
        "layout",
        "--preview",
        "--files",
        "2000",
        "-p",
        "hoodie.storage.prefix.count=64",
        "--plot",
        str(target),
    )
    assert code == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert target.stat().st_size > 5_000
    assert f"Plot written to {target}" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-p", "hoodie.storage.prefix.count=zero"], "hoodie.storage.prefix.count: 'zero' is not an integer"),
        (["--storage-strategy", "nope"], "hoodie.storage.strategy.class: 'nope' is not a built-in strategy"),
        (["--storage-path", "s3://lake-tables/trips/data"], "hoodie.storage.path: "),
        (["-p", "novalue"], "expected KEY=VALUE"),
    ],
)
def test_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "layout", "--preview", *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("fed: error: ")
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.parametrize("prefixes", [1, 2, 3, 40])
def test_the_layout_plot_labels_prefixes_with_whole_numbers(prefixes: int) -> None:
    import matplotlib.pyplot as plt

    from fedcore.storage.layout import preview_layout
    from fedcore.storage.loader import load_storage_strategy

    properties = {
        "hoodie.table.name": "trips",
        "hoodie.storage.strategy.class": "object_store",
        "hoodie.storage.path": "s3://lake-storage",
        "hoodie.storage.prefix.count": str(prefixes),
    }
    strategy = load_storage_strategy("s3://lake-tables/trips", properties)
    figure = preview_layout(strategy, ["day=2026-01-01"], 500).figure()
    try:
        low, high = figure.axes[0].get_xlim()
        ticks = [t for t in figure.axes[0].get_xticks() if low <= t <= high]
        assert len(ticks) >= 1
        assert all(float(t).is_integer() for t in ticks), ticks
    finally:
        plt.close(figure)
