"""A real SparkSession, shared by the suite: it takes seconds to start.

``--spark-target`` says where it runs: ``local`` (the default: ``local[2]`` in this process),
``cluster`` (a standalone master and worker on loopback, two executor processes working in
the worker's folder) or ``connect`` (a Spark Connect client of a Connect server on that
cluster). The whole suite runs locally; ``test_pipeline.py``, which covers every entry point,
runs on all three (``tox -e spark``).

Spark's Python workers run this interpreter (``PYSPARK_PYTHON``), so they import the
fedcore and fed-spark under test. The S3 tests' moto server runs in this process; the
workers reach it on loopback like any client.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import fed_spark
from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY, LoopbackS3
from fed_dev.spark_cluster import ConnectServer, SparkCluster
from fed_dev.testing import Backend

TARGETS = ("local", "cluster", "connect")
#: What every session of the suite sets, wherever it runs.
SESSION_CONF = {"spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--spark-target",
        choices=TARGETS,
        default="local",
        help="where the suite's SparkSession runs: local[2], a standalone cluster on loopback, "
        "or over Spark Connect to a server on that cluster",
    )


@pytest.fixture(scope="session")
def spark_target(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--spark-target"))


@pytest.fixture(scope="session")
def s3_environment(s3_server: LoopbackS3) -> dict[str, str]:
    """S3 credentials and endpoint as every process of a deployment takes them from its
    environment (the docs' way): the sessions' executors and the Connect server have them."""
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": s3_server.endpoint_url,
    }


@pytest.fixture(scope="session")
def spark(
    spark_target: str, s3_environment: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warehouse = tmp_path_factory.mktemp("warehouse")
    common = {
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={warehouse}",
        **SESSION_CONF,
        **{f"spark.executorEnv.{k}": v for k, v in s3_environment.items()},
    }
    if spark_target == "local":
        # Two cores; a failed task is retried once (the fault tests need that).
        yield from _classic({"spark.master": "local[2,2]", "spark.ui.enabled": "false", **common})
        return
    with SparkCluster() as cluster:
        if spark_target == "cluster":
            yield from _classic({**cluster.conf(), **common})
            return
        with ConnectServer(cluster, conf=common, env=s3_environment) as server:
            # As a user points a PySpark program at a Connect server: the builder makes a
            # Spark Connect client when SPARK_REMOTE is set.
            os.environ["SPARK_REMOTE"] = server.url
            remote = SparkSession.builder.getOrCreate()
            try:
                yield remote
            finally:
                remote.stop()
                for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
                    os.environ.pop(name, None)


def _classic(conf: dict[str, str]) -> Iterator[SparkSession]:
    session = SparkSession.builder.appName("fed-spark-tests").config(map=conf).getOrCreate()
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
