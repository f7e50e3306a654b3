"""A Docker engine and a compose program on this machine, for the ``docker/`` stack.

``engine()`` answers at once when a Docker engine already runs. Otherwise, as root, it
installs Debian's ``docker.io`` when ``dockerd`` is missing and starts ``dockerd`` in the
background (its log beside the fed-dev cache); anything else is a ``DockerUnavailableError``
saying, in one line, what is missing. ``compose_command()`` is ``docker compose`` (v2) when the
plugin is there, else Debian's ``docker-compose`` (1.29), installed the same way."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from fed_dev.maven import CACHE


class DockerUnavailableError(RuntimeError):
    """No Docker engine runs here and none can be started (not root, no package, no daemon)."""


@dataclass
class Engine:
    """A Docker engine that answers ``docker`` commands; ``started``: whether this process
    started its daemon (``stop()`` then stops it; one that was running is left alone)."""

    started: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        if self.started is not None and self.started.poll() is None:
            self.started.terminate()
            try:
                self.started.wait(30)
            except subprocess.TimeoutExpired:
                self.started.kill()
                self.started.wait()


def _answers() -> bool:
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(["docker", "info"], capture_output=True, check=False)
    return done.returncode == 0


def _apt_install(*packages: str, why: str) -> None:
    if os.geteuid() != 0:
        raise DockerUnavailableError(f"{why}: install {' '.join(packages)} (needs root), or start one")
    if shutil.which("apt-get") is None:
        raise DockerUnavailableError(f"{why}: install {' '.join(packages)} (no apt-get here)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *packages]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise DockerUnavailableError(f"{why}: `{' '.join(command)}` failed: {last}")


def engine(timeout: float = 60.0) -> Engine:
    """A Docker engine that answers, started (and installed) here when none does."""
    if _answers():
        return Engine()
    why = "no Docker engine runs here"
    if shutil.which("dockerd") is None:
        _apt_install("docker.io", why=why)
    if os.geteuid() != 0:
        raise DockerUnavailableError(f"{why}: start dockerd (needs root)")
    CACHE.mkdir(parents=True, exist_ok=True)
    log = (CACHE / "dockerd.log").open("ab")
    daemon = subprocess.Popen(
        ["dockerd"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + timeout
    while not _answers():
        if daemon.poll() is not None or time.monotonic() > deadline:
            daemon.kill()
            raise DockerUnavailableError(f"{why}: dockerd did not start (its log: {CACHE / 'dockerd.log'})")
        time.sleep(0.5)
    return Engine(started=daemon)


def compose_command() -> list[str]:
    """How compose is run here: ``docker compose`` (v2) or ``docker-compose`` (1.29+)."""
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if plugin.returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose") is None:
        _apt_install("docker-compose", why="no compose program here (docker compose or docker-compose)")
    found = shutil.which("docker-compose")
    if found is None:
        raise DockerUnavailableError("no compose program here (docker compose or docker-compose)")
    return [found]


def debootstrap(folder: Path, suite: str = "bookworm") -> None:
    """A minimal Debian ``suite`` root in ``folder``, from the mirror apt uses here."""
    if shutil.which("debootstrap") is None:
        _apt_install("debootstrap", why="the stack's base image is made with debootstrap")
    command = ["debootstrap", "--variant=minbase", suite, str(folder), _mirror()]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stdout.strip().splitlines() or ["no output"])[-1]
        raise DockerUnavailableError(f"debootstrap failed: {last}")


def _mirror() -> str:
    """The Debian mirror apt is configured with (deb.debian.org when none is found)."""
    for path in (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")):
        if path.exists():
            for line in path.read_text().splitlines():
                words = line.split()
                if words[:1] == ["URIs:"] and len(words) > 1:
                    return words[1]
                if words[:1] == ["deb"] and len(words) > 2 and "security" not in line:
                    return next(w for w in words[1:] if "://" in w)
    return "http://deb.debian.org/debian"
