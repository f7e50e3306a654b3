"""A real Trino (476, Java 25) with an Iceberg catalog on a real Hive metastore (4.0.1) and the
moto S3 server, each started once for the suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
