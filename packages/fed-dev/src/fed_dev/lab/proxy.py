"""A throttling S3 proxy on loopback: S3's per-partition limits in front of a real S3 server.

No S3-protocol server a test can run throttles (moto and SeaweedFS serve whatever they
are sent), so the lab puts this proxy between fedcore and one of them. Each request is
classified (PUT/POST/DELETE write, GET/HEAD read; a LIST reads its prefix) and put to
the partition model (``fed_dev.lab.partitions``): admitted, it is forwarded unchanged
(signature headers included, so the server sees what the client signed) and the
server's answer is passed back; rejected, the client gets what S3 sends, ``503 Slow
Down`` with S3's XML error body, and the server never sees it.

Path-style addressing only (``http://127.0.0.1:PORT/bucket/key``), which is what fedcore's
clients use with an ``endpoint_url``. The proxy counts, per second, what it admitted
and rejected of each class, for the lab's plots.
"""

from __future__ import annotations

import http.client
import multiprocessing
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Final, NamedTuple, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from fed_dev.lab.partitions import Limits, PartitionModel, Split
from fed_dev.servers import serve_in_thread, shut_down

#: Headers of one connection, not of the request: never passed on. ``Expect: 100-continue``
#: was answered here already (the body is in hand).
_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
    | {"expect"}
)
WRITE_METHODS: Final = frozenset({"PUT", "POST", "DELETE"})


def slow_down_body(resource: str) -> bytes:
    """S3's error body for a throttled request."""
    return error_body("SlowDown", "Please reduce your request rate.", resource)


class ProxyStats:
    """Requests by second (since the proxy started), bucket, class and outcome."""

    def __init__(self, start: float) -> None:
        self.start = start
        self._lock = threading.Lock()
        #: (second, bucket, "write"|"read", admitted) -> requests
        self.by_second: Counter[tuple[int, str, str, bool]] = Counter()
        #: bucket -> bytes sent to the server (request bodies), and bytes it sent back
        self.bytes_in: Counter[str] = Counter()
        self.bytes_out: Counter[str] = Counter()

    def add(
        self, now: float, bucket: str, write: bool, admitted: bool, bytes_in: int = 0, bytes_out: int = 0
    ) -> None:
        with self._lock:
            self.by_second[(int(now - self.start), bucket, "write" if write else "read", admitted)] += 1
            self.bytes_in[bucket] += bytes_in
            self.bytes_out[bucket] += bytes_out

    def total(self, kind: str | None = None, admitted: bool | None = None, bucket: str | None = None) -> int:
        with self._lock:
            return sum(
                n
                for (_, b, k, a), n in self.by_second.items()
                if (kind is None or k == kind) and (admitted is None or a == admitted) and bucket in (None, b)
            )


class Reply(NamedTuple):
    """An answer a relay gives in the store's place: its status, reason and S3 error body."""

    status: int
    reason: str
    body: bytes


def error_body(code: str, message: str, resource: str) -> bytes:
    """S3's XML error body."""
    request_id = uuid.uuid4().hex[:16].upper()
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<Resource>{resource}</Resource><RequestId>{request_id}</RequestId>"
        f"<HostId>{request_id}</HostId></Error>"
    ).encode()


class RelayProxy:
    """An S3 relay on loopback in front of a real S3 server: each request is offered to
    ``intercept`` (bucket, key, method), which may answer in the store's place; otherwise it
    is forwarded unchanged (signature headers included, so the server sees what the client
    signed) and the server's answer is passed back, through ``forwarded``. Start with
    ``start()`` (or as a context manager); point S3 clients at ``endpoint_url``."""

    name = "relay-proxy"

    def __init__(self, backend_url: str) -> None:
        parts = urlsplit(backend_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"backend must be an http:// URL, got {backend_url!r}")
        self.backend = (parts.hostname, parts.port or 80)
        self.endpoint_url = ""
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def intercept(self, method: str, bucket: str, key: str, resource: str) -> Reply | None:
        """An answer in the store's place, or None to forward the request."""
        return None

    def forwarded(self, method: str, bucket: str, sent: int, received: int) -> None:
        """Called after a request was forwarded and answered."""

    def start(self) -> RelayProxy:
        proxy = self
        local = threading.local()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go as separate writes

            def log_message(self, format: str, *args: object) -> None:
                return

            def _relay(self) -> None:
                body = self._body()
                url = urlsplit(self.path)
                bucket, _, key = unquote(url.path).lstrip("/").partition("/")
                if not key:  # a bucket-level request: LIST names its prefix
                    key = parse_qs(url.query).get("prefix", [""])[0]
                reply = proxy.intercept(self.command, bucket, key, url.path) if bucket else None
                if reply is not None:
                    self.send_response(reply.status, reply.reason)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(reply.body)
                    return
                status, reason, headers, data = self._forward(body)
                proxy.forwarded(self.command, bucket, len(body), len(data))
                self.send_response(status, reason)
                for name, value in headers:
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                length = dict((n.lower(), v) for n, v in headers).get("content-length")
                self.send_header(
                    "Content-Length", length if self.command == "HEAD" and length else str(len(data))
                )
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks: list[bytes] = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
                headers = {n: v for n, v in self.headers.items() if n.lower() not in _HOP_BY_HOP}
                if body or self.command in WRITE_METHODS:
                    headers["Content-Length"] = str(len(body))
                for attempt in range(2):  # a kept-alive connection the server closed: reconnect once
                    connection = getattr(local, "connection", None)
                    if connection is None:
                        connection = local.connection = http.client.HTTPConnection(*proxy.backend, timeout=60)
                    try:
                        connection.request(self.command, self.path, body=body, headers=headers)
                        response = connection.getresponse()
                        data = response.read()
                        return response.status, response.reason, response.getheaders(), data
                    except (http.client.HTTPException, ConnectionError):
                        connection.close()
                        local.connection = None
                        if attempt:
                            raise
                raise AssertionError("unreachable")

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread, self.endpoint_url = serve_in_thread(self._server, self.name)
        return self

    def stop(self) -> None:
        shut_down(self._server, self._thread)
        self._server = self._thread = None

    def __enter__(self: _Relay) -> _Relay:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


_Relay = TypeVar("_Relay", bound=RelayProxy)


class ThrottlingProxy(RelayProxy):
    """S3's per-partition limits in front of a real S3 server: a request the partition model
    rejects gets ``503 Slow Down``, as S3 answers it, and the server never sees it."""

    name = "throttling-proxy"

    def __init__(self, backend_url: str, model: PartitionModel) -> None:
        super().__init__(backend_url)
        self.model = model
        self.stats = ProxyStats(time.monotonic())

    def intercept(self, method: str, bucket: str, key: str, resource: str) -> Reply | None:
        write = method in WRITE_METHODS
        if self.model.admit(bucket, key, write):
            return None
        self.stats.add(time.monotonic(), bucket, write, False)
        return Reply(503, "Slow Down", slow_down_body(resource))

    def forwarded(self, method: str, bucket: str, sent: int, received: int) -> None:
        self.stats.add(time.monotonic(), bucket, method in WRITE_METHODS, True, sent, received)


@dataclass
class Snapshot:
    """What a proxy process saw: its stats, and each bucket's partition count by second."""

    #: When the proxy started (``time.monotonic()``, one clock for every process here).
    start: float
    by_second: Counter[tuple[int, str, str, bool]]
    partitions: dict[str, dict[int, int]]
    splits: list[Split]
    bytes_in: Counter[str]
    bytes_out: Counter[str]


class ProxyProcess:
    """A ``ThrottlingProxy`` in a process of its own, so the clients it throttles do not
    share its interpreter (one GIL would make the proxy the bottleneck it is measuring).
    ``snapshot()`` fetches its stats; it samples each bucket's partitions every 0.1 s."""

    def __init__(self, backend_url: str, limits: Limits, seed: int = 0) -> None:
        self._args = (backend_url, limits, seed)
        self._process: multiprocessing.process.BaseProcess | None = None
        self._pipe: Connection | None = None
        self.endpoint_url = ""

    def start(self) -> ProxyProcess:
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self._process = context.Process(target=_serve, args=(*self._args, theirs), daemon=True)
        self._process.start()
        self._pipe = ours
        self.endpoint_url = ours.recv()
        return self

    def snapshot(self) -> Snapshot:
        assert self._pipe is not None
        self._pipe.send("snapshot")
        snapshot: Snapshot = self._pipe.recv()
        return snapshot

    def stop(self) -> None:
        if self._pipe is not None:
            self._pipe.send("stop")
            self._pipe = None
        if self._process is not None:
            self._process.join(10)
            if self._process.is_alive():
                self._process.kill()
            self._process = None

    def __enter__(self) -> ProxyProcess:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def _serve(backend_url: str, limits: Limits, seed: int, pipe: Connection) -> None:
    model = PartitionModel(limits, time.monotonic, seed)
    partitions: dict[str, dict[int, int]] = {}
    done = threading.Event()
    with ThrottlingProxy(backend_url, model) as proxy:

        def sample() -> None:
            while not done.is_set():
                second = int(time.monotonic() - proxy.stats.start)
                for bucket in model.buckets():
                    seen = partitions.setdefault(bucket, {})
                    seen[second] = max(seen.get(second, 0), len(model.partitions(bucket)))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        pipe.send(proxy.endpoint_url)
        while pipe.recv() == "snapshot":
            stats = proxy.stats
            pipe.send(
                Snapshot(
                    stats.start,
                    Counter(stats.by_second),
                    {b: dict(s) for b, s in partitions.items()},
                    list(model.splits),
                    Counter(stats.bytes_in),
                    Counter(stats.bytes_out),
                )
            )
        done.set()
