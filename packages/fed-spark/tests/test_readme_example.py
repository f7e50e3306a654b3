"""The README's Spark example runs as written, after the tables example it continues."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

README = Path(__file__).resolve().parents[3] / "README.md"


def blocks(fence: str) -> list[str]:
    return re.findall(rf"^```{fence}\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


def test_the_spark_example(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    names: dict[str, Any] = {}
    exec(blocks("python")[0], names)  # creates lake/tables/trips, as the Spark example expects
    try:
        exec(blocks("python spark")[0], names)
        fares = {
            r[0]: r[1] for r in spark.sql("SELECT country, sum(fare) FROM trips GROUP BY country").collect()
        }
        assert fares == {"usa": 47.0}  # trip 2, the one in bra, was deleted
        assert sorted(r["trip_id"] for r in names["trips"].where("country = 'usa'").collect()) == [1, 3]
        assert names["then"].count() == 3
        assert sorted(r["fare"] for r in names["then"].collect()) == [12.5, 22.0, 30.0]
    finally:
        spark.sql("DROP TABLE IF EXISTS trips")
