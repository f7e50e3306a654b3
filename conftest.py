"""Fixtures shared by every test suite in the repository.

Each test that touches storage runs twice: on local files and on S3 through a
moto server on loopback, with the table path and the storage path in two
different buckets, as in production.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # fed-dev is imported where a fixture needs it: fedcore's own tests run without it
    from fed_dev.hive import HiveServer2
    from fed_dev.metastore import HiveMetastore
    from fed_dev.servers import LoopbackS3
    from fed_dev.testing import Backend
    from fed_dev.trino import TrinoServer
    from fedcore import Table

#: Apache Hudi's test tables from hudi-rs (``tests/data/hudi-rs/NOTICE.md``).
HUDI_RS_TABLES = Path(__file__).resolve().parent / "tests" / "data" / "hudi-rs"


@pytest.fixture
def docs_section() -> Callable[[str], str]:
    """The code of the docs' block titled so (``fed_dev.docs``): a test runs an example by
    its name, never by its position."""
    from fed_dev.docs import block

    return lambda title: block(title).code


@pytest.fixture
def docs_example() -> Callable[..., dict[str, object]]:
    """Runs the docs' block titled so; returns the names it defined (``names``: those of the
    blocks it goes on from)."""
    from fed_dev.docs import block

    def run(title: str, names: dict[str, object] | None = None) -> dict[str, object]:
        names = {} if names is None else names
        found = block(title)
        exec(compile(found.code, found.where, "exec"), names)
        return names

    return run


@pytest.fixture(scope="session")
def s3_server() -> Iterator[LoopbackS3]:
    from fed_dev.servers import LoopbackS3

    with LoopbackS3() as server:
        yield server


@pytest.fixture(scope="session")
def metastore(s3_server: LoopbackS3) -> Iterator[HiveMetastore]:
    """A real Hive 4.0.1 metastore on loopback (the engine suites' catalog)."""
    from fed_dev.metastore import HiveMetastore

    with HiveMetastore(s3_server) as server:
        yield server


@pytest.fixture(scope="session")
def metastore3(s3_server: LoopbackS3) -> Iterator[HiveMetastore]:
    """A real Hive 3.1.3 metastore on loopback: before 4.0, fed publishes there under locks."""
    from fed_dev.metastore import HiveMetastore

    with HiveMetastore(s3_server, version="3.1.3") as server:
        yield server


#: The bearer token of the REST catalog the engine suites serve.
REST_TOKEN = "fed-rest-token"


@pytest.fixture(scope="session")
def served_table(s3_server: LoopbackS3) -> Table:
    """A trips table on S3 that ``rest_catalog`` serves as ``lake.trips``."""
    from fed_dev.testing import trips_table

    table, _ = trips_table(s3_server, "object_store", "served")
    return table


@pytest.fixture(scope="session")
def rest_warehouse(s3_server: LoopbackS3) -> str:
    """A bucket ``rest_catalog`` serves as a warehouse: a table at ``NAMESPACE/NAME`` in it is
    ``NAMESPACE.NAME`` there (the docker stack's catalog serves its table bucket so)."""
    return s3_server.create_bucket("rest-warehouse")


@pytest.fixture(scope="session")
def rest_catalog(served_table: Table, rest_warehouse: str, s3_server: LoopbackS3) -> Iterator[Any]:
    """fed's Iceberg REST catalog (``fed serve``) on loopback, serving ``served_table`` as
    ``lake.trips`` and the tables of ``rest_warehouse``."""
    from fed_dev.catalog import ServedCatalog  # fedcore[serve]: the engine suites only
    from fedcore.catalog.rest import Access, ServedTable, Warehouse

    with ServedCatalog(
        [ServedTable(("lake",), "trips", served_table)],
        Access(token=REST_TOKEN),
        warehouse=Warehouse(rest_warehouse, s3_server.storage_options()),
    ) as served:
        yield served


@pytest.fixture(scope="session")
def trino_server(
    metastore: HiveMetastore, metastore3: HiveMetastore, s3_server: LoopbackS3, rest_catalog: Any
) -> Iterator[TrinoServer]:
    """A real Trino 476: its Iceberg catalog on ``metastore``, catalog ``hive3`` on the Hive 3.1.3
    ``metastore3``, ``fed`` on fed's REST catalog (``rest_catalog``), and ``glue`` on the
    loopback server's AWS Glue."""
    from fed_dev import stack
    from fed_dev.glue import check_table_versions
    from fed_dev.metastore import s3_settings
    from fed_dev.trino import TrinoServer

    check_table_versions()  # the loopback server's Glue, as Glue checks updates
    rest = stack.trino_rest_catalog(uri=rest_catalog.uri, token=REST_TOKEN, s3=s3_settings(s3_server))
    glue = stack.trino_glue_catalog(endpoint_url=s3_server.endpoint_url, s3=s3_settings(s3_server))
    hive3 = stack.trino_iceberg_catalog(metastore_uri=metastore3.uri, s3=s3_settings(s3_server))
    catalogs = {"fed": rest, "glue": glue, "hive3": hive3}
    with TrinoServer(metastore.uri, s3_server, catalogs=catalogs) as server:
        yield server


@pytest.fixture(scope="session")
def hiveserver2(metastore: HiveMetastore, s3_server: LoopbackS3) -> Iterator[HiveServer2]:
    """A real HiveServer2 4.0.1 on ``metastore``."""
    from fed_dev.hive import HiveServer2

    with HiveServer2(metastore.uri, s3_server) as server:
        yield server


@pytest.fixture(scope="session")
def hiveserver2_3(metastore3: HiveMetastore, s3_server: LoopbackS3) -> Iterator[HiveServer2]:
    """A real HiveServer2 3.1.3 on ``metastore3``."""
    from fed_dev.hive import HiveServer2

    with HiveServer2(metastore3.uri, s3_server, version="3.1.3") as server:
        yield server


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    from fed_dev.testing import Backend

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
