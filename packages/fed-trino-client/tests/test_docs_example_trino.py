"""The docs' Trino example runs as written, pointed at this suite's servers (its host, port,
metastore, table path and storage options are the only things replaced)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fed_dev.metastore import HiveMetastore
from fed_dev.servers import LoopbackS3
from fed_dev.testing import trips
from fed_dev.trino import TrinoServer
from fedcore import create_table
from fedcore import properties as P


def test_the_trino_example(
    trino_server: TrinoServer,
    metastore: HiveMetastore,
    s3_server: LoopbackS3,
    docs_section: Callable[[str], str],
) -> None:
    block = docs_section("trino.py")
    tables, storage = s3_server.create_bucket("readme-tables"), s3_server.create_bucket("readme-storage")
    table = create_table(
        f"{tables}/trips",
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: storage},
        storage_options=s3_server.storage_options(),
    )
    table.write(trips(range(30), ["usa", "bra", "ind"] * 10), "bulk_insert")  # fares 10 + id
    replaced = {
        "port=8080": f"port={trino_server.port}",
        "thrift://localhost:9083": metastore.uri,
        "s3://lake/tables/trips": table.path,
        '{"s3": {"profile": "lake"}}': repr(s3_server.storage_options()),
    }
    for old, new in replaced.items():
        assert old in block
        block = block.replace(old, new)
    names: dict[str, Any] = {}
    exec(block, names)  # the first query publishes the table: nothing registered it before
    expected: dict[str, int] = {}
    for row in table.read(filters=[("fare", ">", 20.0)]).to_pylist():
        expected[row["country"]] = expected.get(row["country"], 0) + 1
    assert names["counts"] == expected
    assert sum(expected.values()) == 19
