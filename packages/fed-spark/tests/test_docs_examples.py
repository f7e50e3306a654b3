"""The docs' Spark examples and fed-spark's README example run as written, on the suite's
local SparkSession, and do what their comments say."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from fedcore.table import load_table

README = Path(__file__).resolve().parent.parent / "README.md"
Run = Callable[..., dict[str, Any]]


def test_readme_example(local_fed: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (block,) = re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.S | re.M)
    names: dict[str, Any] = {}
    exec(compile(block, "packages/fed-spark/README.md", "exec"), names)
    rows = local_fed.read.format("fed").load(names["path"]).select("ride_id", "city", "fare").collect()
    assert sorted(tuple(r) for r in rows) == [(1, "sfo", 12.5), (2, "nyc", 30.0)]


def test_the_spark_pipeline(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs_example: Run
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        names = docs_example("spark_batch.py")
        assert sorted(tuple(r) for r in names["sfo"].collect()) == [(1, 25.0), (3, 22.0)]
        assert sorted(r["ride_id"] for r in names["then"].collect()) == [1, 2, 3]
        assert sorted((r["ride_id"], r["fare"]) for r in names["since"].collect()) == [(1, 25.0), (4, 9.5)]
        table = load_table(str(tmp_path / "lake" / "tables" / "rides"))
        assert sorted(table.read(columns=["ride_id"]).column(0).to_pylist()) == [1, 3, 4]
        operations = [table.commit_metadata(i).operation for i in table.timeline().completed()]
        assert operations == ["BULK_INSERT", "UPSERT", "DELETE", "INSERT"]
        off_table = [p for p in (tmp_path / "lake" / "tables").rglob("*.parquet") if ".hoodie" not in p.parts]
        assert off_table == [], "data files stay off the table path"
    finally:
        spark.sql("DROP TABLE IF EXISTS rides")


def test_the_streaming_pipeline(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs_example: Run
) -> None:
    """Bronze gets every landed row (ride 1 upserted to its later version); silver the
    bronze rows that pass the filter; running it again (nothing new) changes nothing."""
    monkeypatch.chdir(tmp_path)
    docs_example("spark_streaming.py")
    bronze = load_table(str(tmp_path / "lake" / "tables" / "bronze"))
    silver = load_table(str(tmp_path / "lake" / "tables" / "silver"))
    assert sorted(bronze.read(columns=["ride_id", "fare"]).to_pylist(), key=str) == [
        {"ride_id": 1, "fare": 14.0},
        {"ride_id": 2, "fare": -1.0},
    ]
    assert silver.read(columns=["ride_id", "ts", "fare"]).to_pylist() == [
        {"ride_id": 1, "ts": 2, "fare": 14.0}
    ]
    assert bronze.config.table_type == "MERGE_ON_READ"
    timeline = [i.time for i in silver.timeline().completed()]
    docs_example("spark_streaming.py")
    assert [
        i.time for i in load_table(str(tmp_path / "lake" / "tables" / "silver")).timeline().completed()
    ] == timeline
