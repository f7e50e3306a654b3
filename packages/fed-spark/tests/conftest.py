"""A real local SparkSession (two cores), shared by the suite: it takes seconds to start.

Spark's Python workers run this interpreter (``PYSPARK_PYTHON``), so they import the
fedcore and fed-spark under test. The S3 tests' moto server runs in this process; the
workers reach it on loopback like any client.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import fed_spark
from fed_dev.testing import Backend


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (
        # Two cores; a failed task is retried once (the fault tests need that).
        SparkSession.builder.master("local[2,2]")
        .appName("fed-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def fed(spark: SparkSession, backend: Backend) -> SparkSession:
    """The session with ``fed`` registered for this test's backend (local files or S3)."""
    fed_spark.register(spark, storage_options=backend.storage_options)
    return spark


@pytest.fixture
def local_fed(spark: SparkSession, tmp_path: Path) -> SparkSession:
    fed_spark.register(spark)
    return spark
