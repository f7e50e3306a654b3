"""Crash injection for fault tests: observers (``fedcore.steps``) that stop a process at a
named step of a write, archival, repair or migration.

``crash_at`` raises ``Crash`` (a ``BaseException``, so no ``except Exception`` of the
writer handles it: the writer's own cleanup does not run, as when the process dies, while
the test goes on in the same process); ``exit_at`` ends the process itself at once (no
``finally``, no ``atexit``, no heartbeat thread), for tests that run the writer as a child
process.
"""

from __future__ import annotations

import os

from fedcore.steps import StepObserver


class Crash(BaseException):
    """Stands for the death of the process: no handler of the writer runs."""


def crash_at(step: str) -> StepObserver:
    """An observer that raises ``Crash`` when ``step`` is reached."""

    def observe(reached: str) -> None:
        if reached == step:
            raise Crash(step)

    return observe


def exit_at(step: str, code: int) -> StepObserver:
    """An observer that ends the process with ``code`` when ``step`` is reached."""

    def observe(reached: str) -> None:
        if reached == step:
            os._exit(code)

    return observe
