"""A store that does not honour S3's conditional writes is refused before a table is made on it.

fed's commit point is an exclusive create (``If-None-Match: *``). A store that ignores the
header overwrites instead, and two writers could both complete one instant without either
noticing. The store here is the loopback S3 server behind a proxy that drops the header, as
an S3-compatible store without conditional writes answers: every PUT succeeds.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from fed_dev.servers import LoopbackS3
from fedcore.exceptions import AtomicWriteUnsupportedError
from fedcore.table import create_table, load_table

_HOP = {"connection", "keep-alive", "transfer-encoding", "host"}


def _forwarding(target: str, dropped: frozenset[str]) -> type[BaseHTTPRequestHandler]:
    parts = urlsplit(target)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped | _HOP}
            upstream = http.client.HTTPConnection(parts.hostname or "", parts.port)
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP and key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            upstream.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, *args: object) -> None:
            pass

    return Forward


@pytest.fixture
def unconditional(s3_server: LoopbackS3) -> Iterator[str]:
    """The loopback S3 server's endpoint as a store without conditional writes."""
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), _forwarding(s3_server.endpoint_url, frozenset({"if-none-match"}))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_store_that_ignores_if_none_match_is_refused_at_create(
    s3_server: LoopbackS3, unconditional: str, tmp_path: Path
) -> None:
    bucket = s3_server.create_bucket("tables")
    options = s3_server.storage_options()
    options["s3"]["client_kwargs"]["endpoint_url"] = unconditional
    with pytest.raises(AtomicWriteUnsupportedError, match="does not honour S3's conditional writes"):
        create_table(f"{bucket}/t", name="t", record_key_fields=["id"], storage_options=options)
    listed = s3_server.client().list_objects_v2(Bucket=bucket.removeprefix("s3://"))
    assert listed.get("KeyCount", 0) == 0  # no config written, and the probe deleted


def test_a_store_that_honours_it_takes_the_table_and_keeps_no_probe(s3_server: LoopbackS3) -> None:
    bucket = s3_server.create_bucket("tables")
    create_table(
        f"{bucket}/t", name="t", record_key_fields=["id"], storage_options=s3_server.storage_options()
    )
    keys = [
        o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket.removeprefix("s3://"))["Contents"]
    ]
    assert not [k for k in keys if "probe" in k]
    assert load_table(f"{bucket}/t", storage_options=s3_server.storage_options()).name == "t"
