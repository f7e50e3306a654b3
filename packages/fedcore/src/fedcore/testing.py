"""A real S3-protocol endpoint on loopback, for tests, benchmarks and demos.

moto's server mode speaks the S3 wire protocol over HTTP on 127.0.0.1, so the
code under test goes through s3fs and botocore exactly as it would against a
cloud bucket (signing, conditional PUTs, listings), with nothing patched.
Needs the ``test`` extra (``moto[server]``, ``boto3``).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from fedcore.io.filesystems import StorageOptions, filesystem_for

ACCESS_KEY = "fed-testing"
SECRET_KEY = "fed-testing-secret"
REGION = "us-east-1"


class LoopbackS3:
    """Start with ``start()`` (or as a context manager); stop with ``stop()``."""

    def __init__(self) -> None:
        self._server: Any = None
        self.endpoint_url = ""

    def start(self) -> LoopbackS3:
        from moto.server import ThreadedMotoServer

        # moto's werkzeug server logs every request whatever ``verbose`` says.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

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
