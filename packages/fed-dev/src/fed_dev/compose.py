"""The ``docker/`` stack run by compose on this machine: ``Stack(folder).up()`` builds what
compose builds (the job's image), starts the services asked for with the ones they depend on,
and waits for every started service with a health check to be healthy; ``run``, ``exec``,
``restart`` and ``down`` are compose's. Works with ``docker compose`` (v2) and
``docker-compose`` (1.29): only the commands and flags both have."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from fed_dev.dockerd import DockerUnavailableError, compose_command

#: The compose project's name (what ``-p`` gives; the compose file names none, as 1.29 wants).
PROJECT = "fed"


class Stack:
    """The compose file in ``folder``, its images named by ``env_file`` (``local.env`` for the
    images ``fed_dev.images`` builds; None: the public images), more variables in ``env``
    (published ports, say)."""

    def __init__(
        self,
        folder: Path,
        *,
        env_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        project: str = PROJECT,
    ) -> None:
        self.folder = folder
        self.project = project
        #: The variables given (beyond this process's environment).
        self.variables = dict(env or {})
        self._env = {**os.environ, **self.variables}
        images = [] if env_file is None else ["--env-file", str(env_file)]
        #: The compose command line this stack's commands begin with.
        self.command = [*compose_command(), *images, "-p", project, "-f", str(folder / "compose.yaml")]

    def compose(
        self, *args: str, timeout: float = 900.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """One compose command; its output. ``check``: a failure is a ``DockerUnavailableError``
        carrying the end of what compose said."""
        done = subprocess.run(
            [*self.command, *args],
            capture_output=True,
            text=True,
            env=self._env,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if check and done.returncode != 0:
            raise DockerUnavailableError(
                f"compose {args[0]} failed: {(done.stderr or done.stdout).strip()[-2000:]}"
            )
        return done

    def up(self, *services: str, timeout: float = 600.0) -> None:
        """Start ``services`` (and what they depend on), the job's image (re)built first
        (Docker's layer cache keeps that quick when nothing changed); return once every running
        service with a health check is healthy."""
        self.compose("up", "-d", "--build", *services)
        self.wait_healthy(timeout)

    def containers(self) -> dict[str, str]:
        """Each running service's container id."""
        done = self.compose("ps", "-q")
        ids = done.stdout.split()
        out = {}
        for container in ids:
            inspected = subprocess.run(
                [
                    "docker",
                    "inspect",
                    "--format",
                    '{{index .Config.Labels "com.docker.compose.service"}}',
                    container,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if inspected.returncode == 0:
                out[inspected.stdout.strip()] = container
        return out

    def health(self, service: str) -> str:
        """``healthy``, ``starting``, ``unhealthy``; ``none`` without a health check; ``exited``
        for a container that ended; ``missing`` when the service has none."""
        container = self.containers().get(service)
        if container is None:
            return "missing"
        done = subprocess.run(
            [
                "docker",
                "inspect",
                "--format",
                "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}",
                container,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        state, _, health = done.stdout.strip().partition(" ")
        return health if state == "running" else state

    def wait_healthy(self, timeout: float = 600.0, services: Sequence[str] | None = None) -> None:
        """Wait until each of ``services`` (every running one when None) is healthy (or runs
        without a health check); an unhealthy or ended one is an error naming it, with its log."""
        deadline = time.monotonic() + timeout
        while True:
            names = list(services) if services is not None else list(self.containers())
            states = {name: self.health(name) for name in names}
            waiting = {n: s for n, s in states.items() if s not in ("healthy", "none")}
            if services is None:  # one-shot services (buckets) end by design
                waiting = {n: s for n, s in waiting.items() if s != "exited"}
            if not waiting:
                return
            bad = {n: s for n, s in waiting.items() if s in ("unhealthy", "exited", "dead", "missing")}
            if bad or time.monotonic() > deadline:
                name = next(iter(bad or waiting))
                raise DockerUnavailableError(f"service {name} is {waiting[name]}: {self.logs(name)[-3000:]}")
            time.sleep(1.0)

    def run(
        self, service: str, *args: str, deps: bool = True, timeout: float = 900.0
    ) -> subprocess.CompletedProcess[str]:
        """``run --rm service args``: the one-off container's exit code and output."""
        flags = ["--rm", "-T"] + ([] if deps else ["--no-deps"])
        return self.compose("run", *flags, service, *args, timeout=timeout, check=False)

    def exec(self, service: str, *command: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        """A command in the service's running container: its exit code and output."""
        return self.compose("exec", "-T", service, *command, timeout=timeout, check=False)

    def restart(self, service: str, timeout: float = 300.0) -> None:
        """Restart the service's container (its volumes and file system kept); wait until healthy."""
        self.compose("restart", service)
        self.wait_healthy(timeout, [service])

    def stop(self, service: str) -> None:
        self.compose("stop", service)

    def start(self, service: str, timeout: float = 300.0) -> None:
        self.compose("start", service)
        self.wait_healthy(timeout, [service])

    def logs(self, service: str) -> str:
        """The service's log (stdout and stderr)."""
        done = self.compose("logs", "--no-color", service, check=False)
        return done.stdout + done.stderr

    def down(self) -> None:
        """Stop and remove the stack: containers, its network and its volumes."""
        self.compose("down", "-v", "--remove-orphans", "--timeout", "20")

    def leftovers(self) -> list[str]:
        """Containers and volumes of this project still on the engine (none after ``down``)."""
        label = f"label=com.docker.compose.project={self.project}"
        found = []
        for kind in (["ps", "-a", "-q"], ["volume", "ls", "-q"]):
            done = subprocess.run(
                ["docker", *kind, "--filter", label], capture_output=True, text=True, check=True
            )
            found += done.stdout.split()
        return found
