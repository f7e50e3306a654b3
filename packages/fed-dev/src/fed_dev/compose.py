"""The ``docker/`` stack run by compose on this machine: ``Stack(folder).up(...)`` (re)builds
the job's image, starts the services asked for with the ones they depend on, and waits until
every service is healthy; ``run``, ``exec``, ``recreate`` and ``down`` are compose's. Works with
``docker compose`` (v2) and ``docker-compose`` (1.29): only the commands and flags both have."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fed_dev.dockerd import StackError, compose_command

#: The compose project's name (what ``-p`` gives; the compose file names none, as 1.29 wants).
PROJECT = "fed"
#: Services that run to their end (the buckets are made, then it exits 0).
ONE_SHOT = frozenset({"buckets"})


@dataclass(frozen=True)
class State:
    """A service's container: ``running``, ``exited``...; its health (``healthy``,
    ``starting``, ``unhealthy``, or ``none`` without a check); its exit code once ended."""

    status: str
    health: str
    exit_code: int

    @property
    def ready(self) -> bool:
        return self.status == "running" and self.health in ("healthy", "none")


class Stack:
    """The compose file in ``folder``, its images named by ``env_file`` (``local.env`` for the
    images ``fed_dev.images`` builds; None: the public images), more variables in ``env``
    (published ports, say), under the compose project ``project``."""

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
        """One compose command; its output. ``check``: a failure is a ``StackError`` carrying
        the end of what compose said."""
        try:
            done = subprocess.run(
                [*self.command, *args],
                capture_output=True,
                text=True,
                env=self._env,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"compose {args[0]} did not end within {timeout:.0f} s") from exc
        if check and done.returncode != 0:
            said = (done.stderr or done.stdout).strip()[-2000:]
            raise StackError(f"compose {args[0]} failed: {said}")
        return done

    def up(self, *services: str, timeout: float = 600.0) -> None:
        """Start ``services`` (and what they depend on), the job's image (re)built first
        (Docker's layer cache keeps that quick when nothing changed); return once every
        service started is healthy (a one-shot: ended with 0)."""
        self.compose("up", "-d", "--build", *services)
        self.wait_ready(timeout)

    def states(self) -> dict[str, State]:
        """Each service's container state (ended ones too; not ``run``'s one-off containers)."""
        ids = self.compose("ps", "-a", "-q").stdout.split()
        if not ids:
            return {}
        form = (
            '{{index .Config.Labels "com.docker.compose.oneoff"}} '
            '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} '
            "{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{.State.ExitCode}}"
        )
        done = subprocess.run(
            ["docker", "inspect", "--format", form, *ids], capture_output=True, text=True, check=False
        )
        states = {}
        for line in done.stdout.splitlines():
            oneoff, service, status, health, code = line.split()
            if oneoff != "True":
                states[service] = State(status, health, int(code))
        return states

    def wait_ready(self, timeout: float = 600.0, services: frozenset[str] | None = None) -> None:
        """Wait until each of ``services`` (every service with a container when None) is ready:
        healthy, or running without a check, or, for a one-shot, ended with 0. One that ended
        otherwise, turned unhealthy or is still waiting at ``timeout`` is a ``StackError``
        naming it, with the end of its log."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.states()
            names = states.keys() if services is None else services
            waiting = {}
            for name in names:
                state = states.get(name, State("missing", "none", 0))
                if name in ONE_SHOT and state.status == "exited" and state.exit_code == 0:
                    continue
                if not state.ready:
                    waiting[name] = state
            if not waiting:
                return
            failed = {
                n: s for n, s in waiting.items() if s.status in ("exited", "dead") or s.health == "unhealthy"
            }
            if failed or time.monotonic() > deadline:
                name, state = next(iter((failed or waiting).items()))
                said = f"{state.status}, {state.health}" + (
                    f", exit code {state.exit_code}" if failed else ""
                )
                raise StackError(f"service {name} is {said}: {self.logs(name)[-3000:]}")
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

    def recreate(self, service: str, timeout: float = 300.0) -> None:
        """Replace the service's container with a new one (what its volumes hold is all that
        stays); wait until it is ready."""
        self.compose("up", "-d", "--no-deps", "--force-recreate", service)
        self.wait_ready(timeout, frozenset({service}))

    def stop(self, service: str) -> None:
        self.compose("stop", service)

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
