"""A real S3-protocol endpoint on loopback, for tests, benchmarks and demos.

moto's server mode speaks the S3 wire protocol over HTTP on 127.0.0.1, so the
code under test goes through s3fs and botocore exactly as it would against a
cloud bucket (signing, conditional PUTs, listings), with nothing patched.
Needs the ``test`` extra (``moto[server]``, ``boto3``).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from fedcore.io.filesystems import StorageOptions, filesystem_for

ACCESS_KEY = "fed-testing"
SECRET_KEY = "fed-testing-secret"
REGION = "us-east-1"


class RequestCount:
    """Requests the server answered, by HTTP method: what a benchmark reports as cost.

    Counted at the server, so every request the client stack sends (listing
    pages, retries, HEADs before GETs) is in, whatever library sent it. A
    listing counts as "LIST", not "GET": S3 bills and throttles it as a write-class
    request, and it is what a layout wants to keep off hot prefixes; ``listed``
    counts listings by bucket and prefix."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_method: Counter[str] = Counter()
        self.listed: Counter[str] = Counter()

    def add(self, method: str, path: str = "", query: str = "") -> None:
        arguments = parse_qs(query)
        listing = method == "GET" and "list-type" in arguments
        with self._lock:
            self.by_method["LIST" if listing else method] += 1
            if listing:
                self.listed[f"{path.strip('/')}/{arguments.get('prefix', [''])[0]}"] += 1

    @property
    def total(self) -> int:
        return sum(self.by_method.values())

    def reset(self) -> None:
        with self._lock:
            self.by_method.clear()
            self.listed.clear()


class LoopbackS3:
    """Start with ``start()`` (or as a context manager); stop with ``stop()``."""

    def __init__(self) -> None:
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.endpoint_url = ""
        self.requests = RequestCount()

    def start(self) -> LoopbackS3:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        # werkzeug logs every request unless told otherwise.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        app = DomainDispatcherApplication(create_backend_app)
        count = self.requests

        def counted(environ: dict[str, Any], start_response: Any) -> Any:
            count.add(
                environ.get("REQUEST_METHOD", "?"),
                environ.get("PATH_INFO", ""),
                environ.get("QUERY_STRING", ""),
            )
            return app(environ, start_response)

        self._server = make_server("127.0.0.1", 0, counted, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="loopback-s3")
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> LoopbackS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self) -> Any:
        """A boto3 S3 client on the endpoint, for checking what really landed where."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def create_bucket(self, prefix: str = "fed") -> str:
        """A new, empty bucket with a unique name; returns its ``s3://`` URI."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    def storage_options(self) -> StorageOptions:
        """Options that point every S3 root at this endpoint."""
        return {
            "s3": {
                "key": ACCESS_KEY,
                "secret": SECRET_KEY,
                "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": REGION},
            }
        }


@dataclass
class Backend:
    """Where a test's table and its storage live, and the options that reach them."""

    name: str
    table_path: str
    storage_path: str
    storage_options: StorageOptions | None

    def exists(self, uri: str) -> bool:
        """Whether a physical object exists, asked of the store directly (no listing cache)."""
        fs = filesystem_for(uri, self.storage_options)
        fs.invalidate_cache()
        return bool(fs.exists(uri))

    def read(self, uri: str) -> bytes:
        return bytes(filesystem_for(uri, self.storage_options).cat_file(uri))
