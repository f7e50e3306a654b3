"""The production guide's IAM policies (``docs/production.md``), applied: an S3 server that
enforces IAM (moto's, with its access control on) is given the guide's policy documents for a
writer and a reader, and fed works under each exactly as far as the guide says.

The writer creates a table on a federated layout, upserts, deletes, cleans and rolls back; the
reader reads every row and filters, and is refused (by name, with nothing changed) when it
tries to write. moto checks each request's action and resource against the policy; it does
not evaluate conditions, so the documents carry none. One difference from AWS is bridged
here, not in the documents: moto authorizes a bulk delete (DeleteObjects) as
``s3:DeleteObject`` on the bucket, where AWS authorizes it key by key, so the writer is given
that too (``MOTO_BULK_DELETE``); without it, every bulk delete is refused key by key, which
the last test uses: fed reports such a refusal instead of taking the keys for deleted.
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

from fedcore import properties as P
from fedcore.exceptions import StoragePermissionError
from fedcore.table import create_table, load_table

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


def _policy(name: str, tables: str, storage: str) -> str:
    document = json.loads(_documented(name.removesuffix("-documented-only")))
    if name == "writer":
        document["Statement"].append(MOTO_BULK_DELETE)
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
    for name in ("writer", "writer-documented-only", "reader", "nobody"):
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


def test_the_writer_policy_runs_a_tables_writes_and_the_reader_policy_its_reads(
    principals: dict[str, Any],
) -> None:
    path = f"s3://{principals['tables']}/{TABLE_PREFIX}/trips"
    writer = principals["writer"]
    table = create_table(
        path,
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={
            P.STORAGE_STRATEGY_CLASS: "object_store",
            P.STORAGE_PATH: f"s3://{principals['storage']}/{STORAGE_PREFIX}",
            P.CLEANER_COMMITS_RETAINED: "1",
        },
        storage_options=writer,
    )
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
    path = f"s3://{principals['tables']}/lake/refused"
    writer = principals["writer-documented-only"]  # moto refuses its bulk deletes, key by key
    table = create_table(
        path,
        name="refused",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        properties={
            P.STORAGE_STRATEGY_CLASS: "object_store",
            P.STORAGE_PATH: f"s3://{principals['storage']}/{STORAGE_PREFIX}",
        },
        storage_options=writer,
    )
    table.upsert(_trips([1, 2]))
    undone = table.upsert(_trips([3]))
    with pytest.raises(StoragePermissionError, match="DeleteObjects"):
        table.rollback(undone.instant)
