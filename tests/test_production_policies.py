"""The production guide's IAM policies (``docs/production.md``), applied: an S3 server that
enforces IAM (moto's, with its access control on) is given the guide's policy documents for a
writer, a reader, ``fed serve`` and ``fed sync``, and fed works under each exactly as far as
the guide says.

The writer creates a table on a federated layout, upserts, deletes, cleans and rolls back; the
reader reads every row and filters, and is refused (by name, with nothing changed) when it
tries to write. The REST catalog publishes the Iceberg view as it loads a table, which an
engine reads with the reader's credentials; ``fed sync --glue`` registers it in moto's Glue
(the same server) and moves it on after a write. Each of those is also run with one action
taken from its policy, and fails by name with nothing of it done.

moto checks each request's action and resource against the policy; it does not evaluate
conditions, so the documents carry none. Two differences from AWS are bridged here, not in
the documents: moto authorizes a bulk delete (DeleteObjects) as ``s3:DeleteObject`` on the
bucket, where AWS authorizes it key by key, so the writer is given that too
(``MOTO_BULK_DELETE``); without it, every bulk delete is refused key by key, which one test
uses: fed reports such a refusal instead of taking the keys for deleted. And moto authorizes
every Glue request against the resource ``*`` (it names no ARN), so the Glue statements are
given on ``*`` (``_moto_glue``): their actions are checked here, their resources are not.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog

from fed_dev.catalog import ServedCatalog
from fedcore import properties as P
from fedcore.catalog import GlueTarget, sync
from fedcore.catalog.entry import INSTANT_PARAMETER, METADATA_LOCATION
from fedcore.catalog.rest import ServedTable, Warehouse
from fedcore.cli.main import main
from fedcore.exceptions import MetastoreError, StoragePermissionError
from fedcore.iceberg import current_view, latest_instant
from fedcore.table import Table, create_table, load_table

GUIDE = Path(__file__).parents[1] / "docs" / "production.md"
REGION = "us-east-1"
TABLE_PREFIX, STORAGE_PREFIX = "lake", "data"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def iam_s3() -> Iterator[str]:
    """A moto server of its own (its access control is process-wide), on loopback."""
    port = _free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "admin", "AWS_SECRET_ACCESS_KEY": "admin"}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                requests.get(f"{url}/moto-api/", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _admin(url: str, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id="admin",
        aws_secret_access_key="admin",
    )


def _documented(role: str) -> str:
    """The policy the guide shows for ``role``: the JSON block after ``<!-- policy: role -->``."""
    found = re.search(rf"<!-- policy: {role} -->\n```json\n(.*?)\n```", GUIDE.read_text(), re.S)
    assert found is not None, f"the production guide shows no {role} policy"
    return found.group(1)


#: What moto needs to allow a bulk delete (AWS needs ``s3:DeleteObject`` on each key only).
MOTO_BULK_DELETE = {
    "Sid": "MotoBulkDelete",
    "Effect": "Allow",
    "Action": "s3:DeleteObject",
    "Resource": ["arn:aws:s3:::TABLE_BUCKET", "arn:aws:s3:::STORAGE_BUCKET"],
}


#: The Glue operations ``fed sync --glue`` calls (``fedcore.catalog.glue``).
GLUE_OPERATIONS = ("glue:GetTable", "glue:CreateDatabase", "glue:CreateTable", "glue:UpdateTable")

#: The users the tests act as: the guide's policy each is given, and one action taken from it
#: (None: the policy as the guide shows it).
USERS: dict[str, tuple[str, str | None]] = {
    "writer": ("writer", None),
    "writer-documented-only": ("writer", None),
    "reader": ("reader", None),
    "serve": ("serve", None),
    "serve-without-put": ("serve", "s3:PutObject"),
    "sync": ("sync", None),
    **{f"sync-without-{action[5:]}": ("sync", action) for action in GLUE_OPERATIONS},
}


def _actions(statement: dict[str, Any]) -> list[str]:
    given = statement["Action"]
    return list(given) if isinstance(given, list) else [given]


def _without(document: dict[str, Any], action: str) -> None:
    """Take ``action`` from every statement of ``document`` (it must be in one)."""
    found = False
    for statement in document["Statement"]:
        given = _actions(statement)
        found = found or action in given
        statement["Action"] = [a for a in given if a != action]
    assert found, f"the guide's policy has no {action} to take away"
    document["Statement"] = [s for s in document["Statement"] if s["Action"]]


def _moto_glue(document: dict[str, Any]) -> None:
    """The Glue statements on ``*``: moto authorizes Glue requests against no other resource."""
    for statement in document["Statement"]:
        if all(a.startswith("glue:") for a in _actions(statement)):
            statement["Resource"] = "*"


def _policy(name: str, tables: str, storage: str) -> str:
    role, taken = USERS[name]
    document = json.loads(_documented(role))
    if name == "writer":
        document["Statement"].append(MOTO_BULK_DELETE)
    _moto_glue(document)
    if taken is not None:
        _without(document, taken)
    text = json.dumps(document)
    for placeholder, value in (
        ("TABLE_BUCKET", tables),
        ("STORAGE_BUCKET", storage),
        ("TABLE_PREFIX", TABLE_PREFIX),
        ("STORAGE_PREFIX", STORAGE_PREFIX),
    ):
        text = text.replace(placeholder, value)
    json.loads(text)  # still a JSON document
    return text


@pytest.fixture(scope="module")
def principals(iam_s3: str) -> dict[str, Any]:
    """Buckets, a user per policy with its access key, then IAM enforced from here on."""
    s3, iam = _admin(iam_s3, "s3"), _admin(iam_s3, "iam")
    tables, storage = "fed-tables", "fed-storage"
    for bucket in (tables, storage):
        s3.create_bucket(Bucket=bucket)
    keys: dict[str, Any] = {"tables": tables, "storage": storage}
    for name in (*USERS, "nobody"):
        iam.create_user(UserName=name)
        if name != "nobody":  # no policy: nothing allowed
            iam.put_user_policy(
                UserName=name, PolicyName=f"fed-{name}", PolicyDocument=_policy(name, tables, storage)
            )
        key = iam.create_access_key(UserName=name)["AccessKey"]
        keys[name] = {
            "s3": {
                "key": key["AccessKeyId"],
                "secret": key["SecretAccessKey"],
                "client_kwargs": {"endpoint_url": iam_s3, "region_name": REGION},
            }
        }
    requests.post(f"{iam_s3}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    return keys


def _trips(ids: list[int], fare: float = 1.0) -> pa.Table:
    return pa.table(
        {
            "trip_id": pa.array(ids, pa.int64()),
            "country": ["us" if i % 2 else "de" for i in ids],
            "ts": pa.array([1] * len(ids), pa.int64()),
            "fare": [fare] * len(ids),
        }
    )


def _rows(table: Any, filters: Any = ()) -> Counter[tuple[Any, ...]]:
    found = table.read(filters, ["trip_id", "country", "fare"]).to_pylist()
    return Counter(tuple(row.values()) for row in found)


def _created(
    principals: dict[str, Any], name: str, user: str = "writer", properties: dict[str, str] | None = None
) -> Table:
    """A table ``user`` made at ``TABLE_PREFIX/name``, its files under the storage prefix."""
    return create_table(
        f"s3://{principals['tables']}/{TABLE_PREFIX}/{name}",
        name=name,
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={
            P.STORAGE_STRATEGY_CLASS: "object_store",
            P.STORAGE_PATH: f"s3://{principals['storage']}/{STORAGE_PREFIX}",
            **(properties or {}),
        },
        storage_options=principals[user],
    )


def test_the_writer_policy_runs_a_tables_writes_and_the_reader_policy_its_reads(
    principals: dict[str, Any],
) -> None:
    writer = principals["writer"]
    table = _created(principals, "trips", properties={P.CLEANER_COMMITS_RETAINED: "1"})
    path = table.path
    table.upsert(_trips([1, 2, 3, 4]))
    table.upsert(_trips([3, 4], fare=2.0))  # rewrites both groups; the clean deletes the old
    table.delete(_trips([4]))
    undone = table.upsert(_trips([9]))
    table.rollback(undone.instant)
    expected = Counter([(1, "us", 1.0), (2, "de", 1.0), (3, "us", 2.0)])
    assert _rows(load_table(path, storage_options=writer)) == expected
    assert table.verify().ok  # lists the storage path: every referenced file there, no orphan

    reader = load_table(path, storage_options=principals["reader"])
    assert _rows(reader) == expected
    assert _rows(reader, [("country", "=", "us")]) == Counter([(1, "us", 1.0), (3, "us", 2.0)])
    with pytest.raises(StoragePermissionError):
        reader.upsert(_trips([5]))
    assert _rows(load_table(path, storage_options=writer)) == expected  # the refused write left nothing

    with pytest.raises(StoragePermissionError):
        load_table(path, storage_options=principals["nobody"])


def test_a_delete_the_store_refuses_is_an_error_never_a_file_kept_quietly(principals: dict[str, Any]) -> None:
    """s3fs's bulk delete drops the answer's per-key errors: a rollback whose instant file the
    store kept reported success and left the undone write on the timeline, completed."""
    table = _created(principals, "refused", "writer-documented-only")  # moto refuses its bulk deletes
    table.upsert(_trips([1, 2]))
    undone = table.upsert(_trips([3]))
    with pytest.raises(StoragePermissionError, match="DeleteObjects"):
        table.rollback(undone.instant)


def _engine_rows(catalog: str, reader: dict[str, Any], name: str) -> Counter[tuple[Any, ...]]:
    """The rows an engine reads through the REST catalog at ``catalog``, with the reader's
    credentials (the catalog hands out none)."""
    s3 = reader["s3"]
    settings = {
        "s3.endpoint": s3["client_kwargs"]["endpoint_url"],
        "s3.region": REGION,
        "s3.access-key-id": s3["key"],
        "s3.secret-access-key": s3["secret"],
    }
    view = RestCatalog("fed", uri=catalog, **settings).load_table(f"{TABLE_PREFIX}.{name}")
    found = view.scan(selected_fields=("trip_id", "country", "fare")).to_arrow().to_pylist()
    return Counter(tuple(row.values()) for row in found)


def test_the_serve_policy_publishes_the_view_as_it_serves_it_and_no_more(principals: dict[str, Any]) -> None:
    table = _created(principals, "served")
    table.upsert(_trips([1, 2, 3, 4]))
    writer = principals["writer"]
    warehouse = Warehouse(f"s3://{principals['tables']}", principals["serve"])  # lists the bucket
    with ServedCatalog(warehouse=warehouse) as served:
        assert _engine_rows(served.uri, principals["reader"], "served") == _rows(table)
        table.upsert(_trips([4, 5], fare=3.0))  # the next load publishes it
        assert _engine_rows(served.uri, principals["reader"], "served") == _rows(table)
    assert current_view(table).instant == latest_instant(table)
    shown = current_view(table).location

    table.upsert(_trips([6]))
    refused = load_table(table.path, storage_options=principals["serve-without-put"])
    with ServedCatalog([ServedTable((TABLE_PREFIX,), "served", refused)]) as served:
        answer = requests.get(f"{served.uri}/v1/namespaces/{TABLE_PREFIX}/tables/served", timeout=60)
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert error["type"] == "ServerErrorException"
    assert "/.hoodie/iceberg/metadata/" in error["message"]  # the key the store refused
    assert current_view(load_table(table.path, storage_options=writer)).location == shown  # nothing published


def test_the_sync_policy_registers_the_view_in_glue_and_each_glue_action_is_needed(
    principals: dict[str, Any],
    iam_s3: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    table = _created(principals, "synced")
    table.upsert(_trips([1, 2, 3, 4]))
    user = principals["sync"]["s3"]
    glue = boto3.client(
        "glue",
        endpoint_url=iam_s3,
        region_name=REGION,
        aws_access_key_id=user["key"],
        aws_secret_access_key=user["secret"],
    )

    def registered() -> dict[str, str]:
        return dict(glue.get_table(DatabaseName=TABLE_PREFIX, Name="synced")["Table"]["Parameters"])

    # ``fed sync --glue``: the Glue client takes boto3's credentials, the table its storage options.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", user["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", user["secret"])
    options = {"key": user["key"], "secret": user["secret"], **user["client_kwargs"]}
    command = ["sync", table.path, "--glue", "--glue-region", REGION, "--glue-endpoint", iam_s3]
    command += ["--database", TABLE_PREFIX, *(f"--storage-option={k}={v}" for k, v in options.items())]
    assert main(command) == 0  # GetTable, CreateDatabase, CreateTable
    assert f"registered as {TABLE_PREFIX}.synced" in capsys.readouterr().out
    first = registered()
    assert first[METADATA_LOCATION] == current_view(table).location
    assert first[INSTANT_PARAMETER] == latest_instant(table)

    def refused(action: str, database: str, name: str) -> None:
        keys = principals[f"sync-without-{action}"]
        target = GlueTarget(
            database,
            name,
            region=REGION,
            endpoint_url=iam_s3,
            access_key=keys["s3"]["key"],
            secret_key=keys["s3"]["secret"],
        )
        with pytest.raises(MetastoreError, match=f"calling the {action} operation"):
            sync(load_table(table.path, storage_options=keys), target)

    refused("GetTable", TABLE_PREFIX, "synced")
    # A table Glue has not got: its database is created first, answered "exists" if it is.
    refused("CreateDatabase", TABLE_PREFIX, "other")
    refused("CreateTable", TABLE_PREFIX, "other")
    table.upsert(_trips([7]))
    refused("UpdateTable", TABLE_PREFIX, "synced")  # the view is published, Glue not moved
    assert current_view(table).instant == latest_instant(table)
    assert registered() == first

    assert main(command) == 0  # GetTable, UpdateTable
    moved = registered()
    assert moved[METADATA_LOCATION] == current_view(table).location
    assert moved["previous_metadata_location"] == first[METADATA_LOCATION]
    assert moved[INSTANT_PARAMETER] == latest_instant(table)
