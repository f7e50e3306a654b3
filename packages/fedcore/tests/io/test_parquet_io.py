"""Parquet reads through ``fedcore.io.parquet``: same data as pyarrow's, and a clean exit.

pyarrow's threaded reads of Python-owned sources abort a short-lived process at
exit now and then (exit 134); the CLI is such a process. The exit test runs a
read just before the interpreter exits, many times over: with pyarrow's default
``pq.read_table`` about one run in ten aborted on this machine.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from fedcore.io.parquet import (
    footer_from_tail,
    open_parquet,
    read_parquet,
    read_parquet_schema,
    read_row_groups,
)

RUNS = 40


def _sample(path: Path) -> pa.Table:
    table = pa.table({"id": list(range(1000)), "city": [f"c{i % 7}" for i in range(1000)]})
    pq.write_table(table, path, row_group_size=250)
    return table


def test_every_source_reads_as_pyarrow_does(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    table = _sample(path)
    data = path.read_bytes()
    with fsspec.filesystem("file").open(str(path), "rb") as handle:
        from_handle = read_parquet(handle, ["city"])
    assert read_parquet(data).equals(pq.read_table(path))
    assert read_parquet(str(path)).equals(table.replace_schema_metadata(read_parquet(data).schema.metadata))
    assert from_handle.column_names == ["city"]
    assert from_handle.column(0).to_pylist() == table.column("city").to_pylist()
    assert read_parquet_schema(data).names == ["id", "city"]
    parquet = open_parquet(data)
    assert parquet.metadata.num_row_groups == 4
    assert read_row_groups(parquet, [1, 3]).column("id").to_pylist() == [
        *range(250, 500),
        *range(750, 1000),
    ]


def test_a_process_that_reads_just_before_exiting_exits_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    _sample(path)
    script = (
        "import sys, fsspec\n"
        "from fedcore.io.parquet import read_parquet\n"
        "path = sys.argv[1]\n"
        "data = open(path, 'rb').read()\n"
        "with fsspec.filesystem('file').open(path, 'rb') as handle:\n"
        "    n = read_parquet(handle).num_rows\n"
        "print(n + read_parquet(data).num_rows)\n"
    )

    def run(_: int) -> tuple[int, str, str]:
        done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True)
        return done.returncode, done.stdout.strip(), done.stderr.strip()

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(run, range(RUNS)))
    failed = [o for o in outcomes if o[:2] != (0, "2000")]
    assert not failed, f"{len(failed)} of {RUNS} runs failed; first: {failed[0]}"


def test_a_footer_is_read_from_a_files_last_bytes_when_they_hold_it(tmp_path: Path) -> None:
    _sample(tmp_path / "a.parquet")
    data = (tmp_path / "a.parquet").read_bytes()
    whole = pq.read_metadata(tmp_path / "a.parquet")
    length = int.from_bytes(data[-8:-4], "little")
    for kept in (data, data[-(length + 8) :]):
        footer = footer_from_tail(kept)
        assert footer is not None
        assert footer.equals(whole)
        assert footer.row_group(2).column(0).statistics.min == 500
    # Too few bytes to hold the footer, or not a Parquet file's end: read it from the file.
    assert footer_from_tail(data[-(length + 7) :]) is None
    assert footer_from_tail(b"") is None
    assert footer_from_tail(data[:-1]) is None
