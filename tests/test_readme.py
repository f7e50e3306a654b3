"""The README's Python examples run as written (and do what their comments say)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fed_dev.servers import LoopbackS3
from fedcore.io.filesystems import options_for

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


def test_the_readme_has_the_examples_this_test_runs() -> None:
    assert len(python_blocks()) == 5


def test_tables_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    names: dict[str, Any] = {}
    exec(python_blocks()[0], names)
    assert sorted(names["scan"].to_arrow().to_pylist(), key=lambda r: r["trip_id"]) == [
        {"trip_id": 1, "fare": 25.0},
        {"trip_id": 3, "fare": 22.0},
    ]
    assert names["old"].count() == 3
    assert names["first"].inserted == 3
    assert {s.partition_path for s in names["scan"].plan_files()} == {"country=usa", "country=bra"}
    off_table = [p for p in (tmp_path / "lake" / "tables").rglob("*.parquet") if ".hoodie" not in p.parts]
    assert off_table == [], "data files stay off the table path"
    assert list((tmp_path / "lake" / "storage").rglob("*.parquet"))


def test_iceberg_view_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(python_blocks()[0], {})  # the table the view is published of
    names: dict[str, Any] = {}
    exec(python_blocks()[2], names)
    usa = names["usa"].select(["trip_id", "fare"]).sort_by("trip_id").to_pylist()
    fed = names["table"].read(filters=[("country", "=", "usa")], columns=["trip_id", "fare"])
    assert usa == fed.sort_by("trip_id").to_pylist()
    assert usa, "the example's table has trips in the usa"
    assert names["result"].snapshots == 1


def test_engine_api_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(python_blocks()[0], {})  # the table the engine example writes to
    names: dict[str, Any] = {}
    exec(python_blocks()[-1], names)
    assert names["result"].inserted == 2
    assert names["result"].files_written == 2
    read = sorted(r["trip_id"] for piece in names["pieces"] for r in piece.to_pylist())
    assert read == [1, 3, 5], "fares above 20: trips 1 (25.0), 3 (22.0) and the new 5 (41.0)"
    assert all(piece.schema.names == ["trip_id"] for piece in names["pieces"])


def test_storage_strategy_example(s3_server: LoopbackS3) -> None:
    client = s3_server.client()
    for bucket in ("lake-tables", "lake-storage"):
        client.create_bucket(Bucket=bucket)
    names: dict[str, Any] = {"storage_options": s3_server.storage_options()}
    exec(python_blocks()[1], names)
    physical = names["table"].fs.to_physical(
        "country=usa/9b1f0a4c-5d7e-4e2a-8f3b-1c2d3e4f5a6b-0_0-1-1_20260101000000000.parquet"
    )
    assert re.fullmatch(r"s3://lake-storage/[0-9a-f]{8}/trips/country=usa/9b1f0a4c-.*\.parquet", physical)


def test_storage_options_example() -> None:
    options = eval(python_blocks()[3])
    merged = options_for("s3://lake-eu/trips", options)
    assert merged["profile"] == "lake"
    assert merged["s3_additional_kwargs"]["SSEKMSKeyId"] == "key-eu"
    assert "s3_additional_kwargs" not in options_for("s3://lake-us/trips", options)


def test_merge_on_read_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (block,) = re.findall(r"^```python merge-on-read\n(.*?)^```$", README.read_text(), flags=re.S | re.M)
    before: dict[str, Any] = {}
    exec(block.split("done = ")[0], before)  # up to the compaction, as its comments say
    assert before["rides"].read().num_rows == 2
    assert before["rides"].scan(query_type="read_optimized").count() == 3
    monkeypatch.chdir(tmp_path / "lake")  # the whole example again, on a table of its own
    names: dict[str, Any] = {}
    exec(block, names)
    rides = names["rides"]
    assert names["done"].log_files == 2
    assert rides.read(columns=["ride_id", "fare"]).sort_by("ride_id").to_pylist() == [
        {"ride_id": 1, "fare": 10.0},
        {"ride_id": 2, "fare": 21.0},
    ]
    assert rides.scan(query_type="read_optimized").count() == 2
    assert not [s for s in rides.file_slices() if s.log_files]
    assert [i.action for i in rides.timeline()][-1] == "commit"
