"""What both sides of the Spark benchmark share: the rows and the timing. PySpark alone, so
that fed-spark's side (``spark.py``, PySpark 4.3) and Apache Hudi's (``hudi_writer.py``,
PySpark 3.5, in a process of its own) write the same values, timed the same way."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession


def rows(spark: SparkSession, n: int, partitions: int, ts: int = 1, start: int = 0) -> DataFrame:
    """``id`` (the record key), ``p`` (one of ``partitions``), ``ts`` (the precombine field), a
    double and a string: the same values under any Spark version (``rand`` is seeded)."""
    return spark.range(start, start + n).selectExpr(
        "id",
        f"concat('p', lpad(cast(id % {partitions} AS string), 4, '0')) AS p",
        f"{ts}L AS ts",
        "rand(7) AS v",
        "concat('name-', cast(id % 1000 AS string)) AS s",
    )


def best(action: Callable[[int], Any], repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``action(attempt)``, in seconds."""
    times = []
    for attempt in range(repeats):
        start = time.perf_counter()
        action(attempt)
        times.append(time.perf_counter() - start)
    return min(times)
