"""A Docker engine and a compose program on this machine, for the ``docker/`` stack.

``engine()`` answers at once when a Docker engine already runs. Otherwise, as root, it
installs Debian's ``docker.io`` when ``dockerd`` is missing and starts ``dockerd`` in the
background (its log beside the fed-dev cache); anything else is a ``StackError``
saying, in one line, what is missing. ``compose_command()`` is ``docker compose`` (v2) when the
plugin is there, else Debian's ``docker-compose`` (1.29), installed the same way."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass

from fed_dev.maven import CACHE


class StackError(RuntimeError):
    """The docker stack cannot go on: no Docker engine runs here and none can be started (not
    root, no package), an image does not build, or a service does not come up."""


@dataclass
class Engine:
    """A Docker engine that answers ``docker`` commands; ``daemon``: the ``dockerd`` this
    process started (``stop()`` stops it), None when one was running already (left alone)."""

    daemon: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(30)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()


def answers() -> bool:
    """Whether a Docker engine answers here."""
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(["docker", "info"], capture_output=True, check=False)
    return done.returncode == 0


def apt_install(*packages: str, why: str) -> None:
    """Install Debian ``packages`` (as root); ``why``: what needs them, for the error."""
    if os.geteuid() != 0:
        raise StackError(f"{why}: install {' '.join(packages)} (needs root), or start one")
    if shutil.which("apt-get") is None:
        raise StackError(f"{why}: install {' '.join(packages)} (no apt-get here)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *packages]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise StackError(f"{why}: `{' '.join(command)}` failed: {last}")


def engine(timeout: float = 60.0) -> Engine:
    """A Docker engine that answers, started (and installed) here when none does."""
    if answers():
        return Engine()
    why = "no Docker engine runs here"
    if shutil.which("dockerd") is None:
        apt_install("docker.io", why=why)
    if os.geteuid() != 0:
        raise StackError(f"{why}: start dockerd (needs root)")
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "dockerd.log").open("ab") as log:  # the daemon keeps its own descriptor
        daemon = subprocess.Popen(
            ["dockerd"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while not answers():
        if daemon.poll() is not None or time.monotonic() > deadline:
            daemon.kill()
            daemon.wait()
            raise StackError(f"{why}: dockerd did not start (its log: {CACHE / 'dockerd.log'})")
        time.sleep(0.5)
    return Engine(daemon=daemon)


def compose_command() -> list[str]:
    """How compose is run here: ``docker compose`` (v2) or ``docker-compose`` (1.29+)."""
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if plugin.returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose") is None:
        apt_install("docker-compose", why="no compose program here (docker compose or docker-compose)")
    found = shutil.which("docker-compose")
    if found is None:
        raise StackError("no compose program here (docker compose or docker-compose)")
    return [found]
