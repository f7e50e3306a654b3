"""Fixtures shared by every test suite in the repository.

Each test that touches storage runs twice: on local files and on S3 through a
moto server on loopback, with the table path and the storage path in two
different buckets, as in production.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fed_dev.hive import HiveServer2
from fed_dev.metastore import HiveMetastore
from fed_dev.servers import LoopbackS3
from fed_dev.testing import Backend
from fed_dev.trino import TrinoServer

#: Apache Hudi's test tables from hudi-rs (``tests/data/hudi-rs/NOTICE.md``).
HUDI_RS_TABLES = Path(__file__).resolve().parent / "tests" / "data" / "hudi-rs"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[LoopbackS3]:
    with LoopbackS3() as server:
        yield server


@pytest.fixture(scope="session")
def metastore(s3_server: LoopbackS3) -> Iterator[HiveMetastore]:
    """A real Hive 4.0.1 metastore on loopback (the engine suites' catalog)."""
    with HiveMetastore(s3_server) as server:
        yield server


@pytest.fixture(scope="session")
def trino_server(metastore: HiveMetastore, s3_server: LoopbackS3) -> Iterator[TrinoServer]:
    """A real Trino 476, its Iceberg catalog on ``metastore``."""
    with TrinoServer(metastore.uri, s3_server) as server:
        yield server


@pytest.fixture(scope="session")
def hiveserver2(metastore: HiveMetastore, s3_server: LoopbackS3) -> Iterator[HiveServer2]:
    """A real HiveServer2 4.0.1 on ``metastore``."""
    with HiveServer2(metastore.uri, s3_server) as server:
        yield server


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        return Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)
    server: LoopbackS3 = request.getfixturevalue("s3_server")
    tables, storage = server.create_bucket("tables"), server.create_bucket("storage")
    return Backend("s3", f"{tables}/trips", storage, server.storage_options())


@pytest.fixture(scope="session")
def hudi_rs_tables() -> Path:
    """The folder of Apache Hudi's test tables (zips) the repository carries."""
    if not HUDI_RS_TABLES.is_dir():
        pytest.fail(f"{HUDI_RS_TABLES} is missing from the repository")
    return HUDI_RS_TABLES


@pytest.fixture(autouse=True, scope="session")
def _no_ambient_aws_credentials() -> Iterator[None]:
    # Tests must reach only the loopback server, whatever the machine's AWS setup says.
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("AWS_")}
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    yield
    os.environ.pop("AWS_EC2_METADATA_DISABLED", None)
    os.environ.update(saved)
