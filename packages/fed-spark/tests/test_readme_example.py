"""The README's Spark pipeline runs as written and does what its comments say."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from fedcore.table import load_table

README = Path(__file__).resolve().parents[3] / "README.md"


def blocks(fence: str) -> list[str]:
    return re.findall(rf"^```{fence}\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


def test_the_spark_pipeline(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    names: dict[str, Any] = {}
    try:
        exec(blocks("python spark")[0], names)
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


def test_the_streaming_pipeline(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bronze gets every landed row (ride 1 upserted to its later version); silver the
    bronze rows that pass the filter; running it again (nothing new) changes nothing."""
    monkeypatch.chdir(tmp_path)
    block = blocks("python streaming")[0]
    exec(block, {})
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
    exec(block, {})
    assert [
        i.time for i in load_table(str(tmp_path / "lake" / "tables" / "silver")).timeline().completed()
    ] == timeline
