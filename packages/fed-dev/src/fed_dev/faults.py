"""Storage faults for tests: an S3 relay on loopback that answers chosen requests in the
store's place (access denied, a server error, throttling) or slowly, in front of a real S3
server (moto), and counts what it answered.

A fault names the requests it applies to (method, a part of the key, a bucket) and how
many it answers; the rest are forwarded unchanged. Damaged objects (truncated, zeroed) are
not a proxy's business: tests write them to the store itself.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from fed_dev.lab.proxy import RelayProxy, Reply, error_body

#: S3's error code and reason for each status a fault answers with.
_ERRORS = {
    403: ("AccessDenied", "Forbidden", "Access Denied"),
    500: ("InternalError", "Internal Server Error", "We encountered an internal error. Please try again."),
    503: ("SlowDown", "Slow Down", "Please reduce your request rate."),
}


@dataclass
class Fault:
    """What the relay does to the requests it matches: answers ``status`` (403, 500, 503;
    0: forwards them) after ``delay`` seconds, for ``times`` requests (None: every one)."""

    status: int = 0
    delay: float = 0.0
    method: str | None = None  # GET, PUT, HEAD, DELETE, POST; None: any
    key: str = ""  # a part of the object key ("" any)
    bucket: str | None = None
    times: int | None = None
    hits: int = 0

    def matches(self, method: str, bucket: str, key: str) -> bool:
        return (
            (self.method is None or self.method == method)
            and (self.bucket is None or self.bucket == bucket)
            and self.key in key
            and (self.times is None or self.hits < self.times)
        )


class FaultProxy(RelayProxy):
    """Faults in front of the S3 server at ``backend_url`` (``add`` them; ``clear`` them)."""

    name = "fault-proxy"

    def __init__(self, backend_url: str) -> None:
        super().__init__(backend_url)
        self.faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def intercept(self, method: str, bucket: str, key: str, resource: str) -> Reply | None:
        with self._lock:
            fault = next((f for f in self.faults if f.matches(method, bucket, key)), None)
            if fault is not None:
                fault.hits += 1
        if fault is None:
            return None
        if fault.delay:
            time.sleep(fault.delay)
        if not fault.status:
            return None
        code, reason, message = _ERRORS[fault.status]
        return Reply(fault.status, reason, error_body(code, message, resource))
