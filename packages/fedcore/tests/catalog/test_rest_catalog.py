"""``fed serve``, the Iceberg REST catalog: PyIceberg's ``RestCatalog`` (a real REST client)
lists and loads the served tables and reads exactly fedcore's rows, a write's rows with no
sync in between; and the service is safe by default: tokens and client credentials, the
spec's error model, writes refused, only the given tables, bounded requests."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, OAuthError, UnauthorizedError

from fed_dev.catalog import ServedCatalog
from fed_dev.process import free_port, listening
from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY, LoopbackS3
from fed_dev.testing import trips_table
from fedcore import properties as P
from fedcore.catalog.rest import MAX_BODY_BYTES, Access, ServedTable, Warehouse
from fedcore.cli.main import main
from fedcore.table import Table, create_table

from ..write.test_writes import trips

TOKEN = "s3cr3t-token"


def make(path: Path, name: str = "trips", folder: str = "tables") -> Table:
    table = create_table(
        f"file://{path}/{folder}/{name}",
        name=name,
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={
            P.STORAGE_STRATEGY_CLASS: "object_store",
            P.STORAGE_PATH: f"file://{path}/storage/{name}",
        },
    )
    table.upsert(trips(range(20), ["us", "de"] * 10))
    return table


class Served(ServedCatalog):
    """The catalog on loopback, and raw HTTP calls to it."""

    def call(
        self, method: str, path: str, token: str | None = TOKEN, body: bytes | None = None
    ) -> tuple[int, Any]:
        request = urllib.request.Request(self.uri + path, data=body, method=method)
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                raw = answer.read()
                return answer.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, json.loads(raw) if raw else None


@pytest.fixture
def tables(tmp_path: Path) -> list[Table]:
    return [make(tmp_path, "trips"), make(tmp_path, "fares")]


@pytest.fixture
def served(tables: list[Table]) -> Iterator[Served]:
    given = [ServedTable(("lake",), "trips", tables[0]), ServedTable(("lake", "finance"), "fares", tables[1])]
    with Served(given, Access(token=TOKEN, credentials={"engine": "engine-secret"})) as server:
        yield server


def ordered(data: pa.Table) -> pa.Table:
    names = sorted(data.column_names)
    return data.select(names).sort_by([("trip_id", "ascending"), ("_hoodie_commit_time", "ascending")])


def test_pyiceberg_reads_exactly_fedcores_rows_and_a_write_with_no_sync(
    served: Served, tables: list[Table]
) -> None:
    catalog = RestCatalog("fed", uri=served.uri, token=TOKEN)
    assert catalog.list_namespaces() == [("lake",)]
    assert catalog.list_namespaces(("lake",)) == [("lake", "finance")]
    assert catalog.list_tables("lake") == [("lake", "trips")]
    assert catalog.list_tables(("lake", "finance")) == [("lake", "finance", "fares")]
    trips_table = tables[0]
    view = catalog.load_table("lake.trips")
    assert ordered(view.scan().to_arrow()) == ordered(trips_table.read())
    assert view.scan().to_arrow().num_rows == 20
    # A write, then a load: the catalog publishes what the table moved on to.
    written = trips_table.upsert(trips([0, 1, 100], ["us", "de", "fr"], fare=500.0))
    again = catalog.load_table("lake.trips").scan().to_arrow()
    assert ordered(again) == ordered(trips_table.read())
    assert again.num_rows == 21
    assert set(again.column("_hoodie_commit_time").to_pylist()) >= {written.instant}
    fares = catalog.load_table(("lake", "finance", "fares")).scan().to_arrow()
    assert ordered(fares) == ordered(tables[1].read())
    assert catalog.table_exists("lake.trips")
    assert not catalog.table_exists("lake.nothing")


def test_a_client_credential_is_exchanged_for_a_token(served: Served, tables: list[Table]) -> None:
    catalog = RestCatalog("fed", uri=served.uri, credential="engine:engine-secret")
    assert ordered(catalog.load_table("lake.trips").scan().to_arrow()) == ordered(tables[0].read())
    with pytest.raises(OAuthError, match="invalid_client"):
        RestCatalog("fed", uri=served.uri, credential="engine:wrong")


def test_a_token_is_renewed_by_exchanging_it(served: Served) -> None:
    """Iceberg's Java client renews its token before it expires with OAuth2's token exchange."""
    form = urllib.parse.urlencode(
        {"grant_type": "client_credentials", "client_id": "engine", "client_secret": "engine-secret"}
    ).encode()
    status, issued = served.call("POST", "/v1/oauth/tokens", token=None, body=form)
    assert status == 200
    exchange = {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": issued["access_token"],
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
    }
    status, renewed = served.call(
        "POST", "/v1/oauth/tokens", token=None, body=urllib.parse.urlencode(exchange).encode()
    )
    assert status == 200
    assert renewed["access_token"] != issued["access_token"]
    assert served.call("GET", "/v1/namespaces", token=renewed["access_token"])[0] == 200
    exchange["subject_token"] = "not-one-of-ours"
    status, refused = served.call(
        "POST", "/v1/oauth/tokens", token=None, body=urllib.parse.urlencode(exchange).encode()
    )
    assert (status, refused["error"]) == (401, "invalid_grant")


def test_malformed_requests_get_the_error_model_not_a_crash(served: Served) -> None:
    """Bytes no well-formed client sends (a non-ASCII token, a Content-Length of "²")."""
    for head in (
        b"GET /v1/namespaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xe9t\xe9\r\n\r\n",
        b"GET /v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Length: \xc2\xb2\r\n\r\n",
    ):
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as connection:
            connection.sendall(head)
            connection.shutdown(socket.SHUT_WR)  # the whole answer, then the server closes
            received = b""
            while chunk := connection.recv(65536):
                received += chunk
            answer = received.decode("latin-1")
        status = int(answer.split(" ", 2)[1])
        assert status in (400, 401, 413), answer
        if status != 400:  # (400: refused by the HTTP layer itself, before the catalog)
            assert '"error"' in answer, answer


def test_requests_without_a_valid_token_are_refused(served: Served, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="fedcore.catalog.rest")
    for token in (None, "wrong", ""):
        status, body = served.call("GET", "/v1/namespaces/lake/tables/trips", token=token)
        assert status == 401
        assert body["error"]["type"] == "NotAuthorizedException"
        assert body["error"]["code"] == 401
    with pytest.raises(UnauthorizedError):
        RestCatalog("fed", uri=served.uri, token="wrong").load_table("lake.trips")
    status, _ = served.call("GET", "/v1/config")
    assert status == 200
    # Each refusal logged: what, from where, why; never a token, given or configured.
    refusals = [r.getMessage() for r in caplog.records if r.name == "fedcore.catalog.rest"]
    asked = "refused GET '/v1/namespaces/lake/tables/trips' from 127.0.0.1"
    assert f"{asked}: no bearer token" in refusals
    assert f"{asked}: its bearer token is not valid" in refusals
    assert len(refusals) == 4  # three by hand, one by PyIceberg
    assert not any("wrong" in r or TOKEN in r for r in refusals)


def test_errors_follow_the_specs_model(served: Served) -> None:
    catalog = RestCatalog("fed", uri=served.uri, token=TOKEN)
    with pytest.raises(NoSuchTableError):
        catalog.load_table("lake.nothing")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("elsewhere")
    status, body = served.call("GET", "/v1/namespaces/lake/tables/nothing")
    assert (status, body["error"]["type"], body["error"]["code"]) == (404, "NoSuchTableException", 404)


def test_every_change_is_refused(served: Served, tables: list[Table]) -> None:
    catalog = RestCatalog("fed", uri=served.uri, token=TOKEN)
    # The config lists only reads: a client that reads it does not even ask.
    with pytest.raises(NotImplementedError, match="POST"):
        catalog.create_namespace("other")
    with pytest.raises(NotImplementedError, match="DELETE"):
        catalog.drop_table("lake.trips")
    # One that asks is refused.
    for method, path in [
        ("POST", "/v1/namespaces"),
        ("DELETE", "/v1/namespaces/lake/tables/trips"),
        ("POST", "/v1/namespaces/lake/tables/trips"),
        ("POST", "/v1/tables/rename"),
    ]:
        status, body = served.call(method, path, body=b"{}")
        assert status == 406, (method, path)
        assert body["error"]["type"] == "UnsupportedOperationException"
    assert ordered(catalog.load_table("lake.trips").scan().to_arrow()) == ordered(tables[0].read())


def test_only_the_given_tables_are_served_and_bodies_are_bounded(served: Served, tmp_path: Path) -> None:
    make(tmp_path / "other", "secret")  # a table the catalog was not given
    for path in [
        "/v1/namespaces/lake/tables/secret",
        "/v1/namespaces/lake/tables/..%2Fsecret",
        "/v1/namespaces/..%2F..%2Fother/tables/secret",
        "/v1/namespaces/lake%1F..%1Fother/tables/secret",
        f"/v1/namespaces/{tmp_path}/tables/trips",
    ]:
        status, body = served.call("GET", path)
        assert status == 404, path
        assert "error" in body
    status, body = served.call("POST", "/v1/oauth/tokens", token=None, body=b"x" * (MAX_BODY_BYTES + 1))
    assert status == 413


def test_the_command_refuses_what_it_cannot_serve_safely(
    tables: list[Table], capsys: pytest.CaptureFixture[str]
) -> None:
    uri = tables[0].path
    assert main(["serve", "--table", f"lake.trips={uri}", "--host", "0.0.0.0", "--token", ""]) == 2
    assert "beyond the loopback needs --token or --credential" in capsys.readouterr().err
    assert main(["serve", "--table", f"trips={uri}"]) == 2
    assert "expected NAMESPACE.NAME=TABLE_URI" in capsys.readouterr().err
    assert main(["serve", "--table", f"lake.trips={uri}", "--credential", "no-secret"]) == 2
    error = capsys.readouterr().err
    assert "expected CLIENT_ID:SECRET" in error
    assert "no-secret" not in error  # a malformed credential may be a bare secret
    assert main(["serve", "--table", f"lake.a/b={uri}"]) == 2
    assert "no '/'" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--table", f"lake.trips={uri}", "--port", str(port)]) == 2
        assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_a_load_reads_metadata_never_the_data_storage_and_serves_no_credential(s3_server: LoopbackS3) -> None:
    table, storage = trips_table(s3_server, "object_store", "served")
    table.upsert(trips(range(12), ["us", "de", "fr"] * 4))
    with Served([ServedTable(("lake",), "trips", table)], Access(token=TOKEN)) as server:
        status, first = server.call("GET", "/v1/namespaces/lake/tables/trips")
        assert status == 200
        assert first["config"] == {}
        assert SECRET_KEY not in json.dumps(first)
        table.upsert(trips([1, 2], ["de", "fr"], fare=3.0))
        s3_server.requests.reset()
        status, second = server.call("GET", "/v1/namespaces/lake/tables/trips")
        assert status == 200
        assert second["metadata-location"] != first["metadata-location"]  # published on the load
        data = storage.removeprefix("s3://")
        assert not [p for p in s3_server.requests.listed if p.startswith(data)], s3_server.requests.listed
        assert s3_server.requests.by_method["GET"] + s3_server.requests.by_method["HEAD"] > 0
        s3_server.requests.reset()
        status, third = server.call("GET", "/v1/namespaces/lake/tables/trips")
        assert third["metadata-location"] == second["metadata-location"]
        assert s3_server.requests.by_method["PUT"] == 0  # nothing new: nothing published


def test_the_command_serves_its_tables(tables: list[Table]) -> None:
    port = free_port()
    command = [sys.executable, "-m", "fedcore", "serve", "--table", f"lake.trips={tables[0].path}"]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--token", TOKEN], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        assert f"1 table(s) at http://127.0.0.1:{port}" in server.stdout.readline()
        deadline = time.monotonic() + 30
        while not listening(port):
            assert server.poll() is None, "fed serve exited"
            assert time.monotonic() < deadline, "fed serve did not listen"
            time.sleep(0.1)
        catalog = RestCatalog("fed", uri=f"http://127.0.0.1:{port}", token=TOKEN)
        assert ordered(catalog.load_table("lake.trips").scan().to_arrow()) == ordered(tables[0].read())
    finally:
        server.terminate()
        server.wait(10)


def test_a_warehouse_serves_the_tables_in_it_and_those_made_later(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    trips_table = make(tmp_path, "trips", "warehouse/lake")
    fares_table = make(tmp_path, "fares", "warehouse/finance.db")  # Hive's and Spark's naming
    (warehouse / "lake" / "notes").mkdir()  # a folder that is no table
    (warehouse / "lake" / "notes" / "readme.txt").write_text("not a table")
    (warehouse / ".trash" / "old").mkdir(parents=True)
    with Served(warehouse=Warehouse(f"file://{warehouse}", rescan_s=0.0)) as server:
        catalog = RestCatalog("fed", uri=server.uri)
        assert catalog.list_namespaces() == [("finance",), ("lake",)]
        assert catalog.list_tables("lake") == [("lake", "trips")]
        assert ordered(catalog.load_table("lake.trips").scan().to_arrow()) == ordered(trips_table.read())
        assert ordered(catalog.load_table("finance.fares").scan().to_arrow()) == ordered(fares_table.read())
        with pytest.raises(NoSuchTableError):
            catalog.load_table("lake.notes")
        # A table made after the catalog started, and a write to one it serves: no restart, no sync.
        later = make(tmp_path, "later", "warehouse/lake")
        trips_table.upsert(trips([0, 100], ["us", "fr"], fare=7.0))
        assert catalog.list_tables("lake") == [("lake", "later"), ("lake", "trips")]
        assert ordered(catalog.load_table("lake.later").scan().to_arrow()) == ordered(later.read())
        assert ordered(catalog.load_table("lake.trips").scan().to_arrow()) == ordered(trips_table.read())
        # A table removed from the warehouse is no longer served.
        shutil.rmtree(warehouse / "finance.db" / "fares")
        with pytest.raises(NoSuchTableError):
            catalog.load_table("finance.fares")
        assert catalog.list_namespaces() == [("lake",)]


def test_a_warehouse_on_s3_is_looked_into_by_folder_never_by_table_files(s3_server: LoopbackS3) -> None:
    root = s3_server.create_bucket("warehouse")
    table = create_table(  # the Hive layout: data files under the table's own folder
        f"{root}/lake/trips",
        name="trips",
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        precombine_field="ts",
        storage_options=s3_server.storage_options(),
    )
    table.upsert(trips(range(12), ["us", "de", "fr"] * 4))
    warehouse = Warehouse(root, s3_server.storage_options(), rescan_s=0.0)
    with Served(warehouse=warehouse) as server:
        s3_server.requests.reset()
        reader = {  # a reader brings its own storage credentials: the catalog serves none
            "s3.endpoint": s3_server.endpoint_url,
            "s3.access-key-id": ACCESS_KEY,
            "s3.secret-access-key": SECRET_KEY,
            "s3.region": REGION,
        }
        catalog = RestCatalog("fed", uri=server.uri, **reader)
        assert catalog.list_tables("lake") == [("lake", "trips")]
        listed = s3_server.requests.listed
        assert listed, "the warehouse was listed"
        assert not [p for p in listed if "trips/" in p], listed
        assert ordered(catalog.load_table("lake.trips").scan().to_arrow()) == ordered(table.read())


def test_the_command_serves_a_warehouse_and_needs_something_to_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve"]) == 2
    assert "--warehouse" in capsys.readouterr().err
    given = make(tmp_path, "trips", "warehouse/lake")
    clash = ["serve", "--warehouse", str(tmp_path / "warehouse"), "--table", f"lake.trips={given.path}"]
    assert main(clash) == 2
    assert "also found in the warehouse" in capsys.readouterr().err
    port = free_port()
    command = [sys.executable, "-m", "fedcore", "serve", "--warehouse", str(tmp_path / "warehouse")]
    server = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        assert "the warehouse" in server.stdout.readline()
        deadline = time.monotonic() + 30
        while not listening(port):
            assert server.poll() is None, "fed serve exited"
            assert time.monotonic() < deadline, "fed serve did not listen"
            time.sleep(0.1)
        catalog = RestCatalog("fed", uri=f"http://127.0.0.1:{port}")
        assert ordered(catalog.load_table("lake.trips").scan().to_arrow()) == ordered(given.read())
    finally:
        server.terminate()
        server.wait(10)
