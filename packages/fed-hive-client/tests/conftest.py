"""A real HiveServer2 (Apache Hive 4.0.1) on a real Hive metastore (4.0.1) and the moto S3
server, each started once for the suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fed_dev.hive import HiveServer2
from fed_dev.metastore import HiveMetastore
from fed_dev.servers import LoopbackS3


@pytest.fixture(scope="session")
def metastore(s3_server: LoopbackS3) -> Iterator[HiveMetastore]:
    with HiveMetastore(s3_server) as server:
        yield server


@pytest.fixture(scope="session")
def hiveserver2(metastore: HiveMetastore, s3_server: LoopbackS3) -> Iterator[HiveServer2]:
    with HiveServer2(metastore.uri, s3_server) as server:
        yield server
