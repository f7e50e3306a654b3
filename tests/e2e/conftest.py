"""The whole stack on loopback, each part started once for the suite: the moto S3 server, a
Hive 4.0.1 metastore, Trino 476, HiveServer2 4.0.1 and a local SparkSession (PySpark 4)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from fed_dev.hive import HiveServer2
from fed_dev.metastore import HiveMetastore
from fed_dev.servers import LoopbackS3
from fed_dev.trino import TrinoServer


@pytest.fixture(scope="session")
def metastore(s3_server: LoopbackS3) -> Iterator[HiveMetastore]:
    with HiveMetastore(s3_server) as server:
        yield server


@pytest.fixture(scope="session")
def trino_server(metastore: HiveMetastore, s3_server: LoopbackS3) -> Iterator[TrinoServer]:
    with TrinoServer(metastore.uri, s3_server) as server:
        yield server


@pytest.fixture(scope="session")
def hiveserver2(metastore: HiveMetastore, s3_server: LoopbackS3) -> Iterator[HiveServer2]:
    with HiveServer2(metastore.uri, s3_server) as server:
        yield server


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warehouse: Path = tmp_path_factory.mktemp("warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("fed-e2e")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
