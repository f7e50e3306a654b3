"""What the servers tests run as child processes share: a private folder, a log, a clean stop."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

_Server = TypeVar("_Server", bound="ProcessServer")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` different TCP ports on 127.0.0.1 nothing listens on now: each probe is held
    until all are bound (one released at once may be handed out again, as it was to
    SeaweedFS's master and its S3 server)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            probe = stack.enter_context(socket.socket())
            probe.bind(("127.0.0.1", 0))
            ports.append(int(probe.getsockname()[1]))
        return ports


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class ProcessServer:
    """A server in a child process with a temporary folder of its own (removed on ``stop``),
    whose output goes to ``log`` there. ``start()`` it, or use a with-block."""

    #: Seconds ``stop`` waits after SIGTERM before it kills.
    grace = 20.0

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None

    @property
    def folder(self) -> Path:
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix=f"fed-{type(self).__name__.lower()}-")
        return Path(self._folder.name)

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    def start(self: _Server) -> _Server:
        raise NotImplementedError

    def spawn(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        self._process = subprocess.Popen(
            list(command), stdout=self.log.open("wb"), stderr=subprocess.STDOUT, cwd=self.folder, env=env
        )
        return self._process

    def failed(self, what: str) -> RuntimeError:
        """Stop, and the error saying ``what`` did not start, with the log's tail."""
        tail = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
        self.stop()
        return RuntimeError(f"{what} did not start:\n{tail}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(self.grace)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def __enter__(self: _Server) -> _Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
