"""The steps of fedcore's multi-step operations, observable as they are reached.

A write's commit protocol reaches ``requested``, ``inflight``, ``data``, ``metadata``,
``claims``, ``outcome`` and ``completed`` (``fedcore.commit.transaction``); an inline
compaction the same; archival ``written``, ``pending-states`` and ``moved``; the repair
tool ``listed`` and its rebuild's steps; a migration ``data`` and ``copied``.

An observer registered with ``observe_steps`` sees the steps reached in its context: its
thread (or task), and the pool threads of an operation begun there (``observers_now``).
Uses: tracing, progress, and the crash tests that stop a process at a step
(``fed_dev.crash``). What an observer itself runs (another writer, say) is not observed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

StepObserver = Callable[[str], None]

_OBSERVERS: ContextVar[tuple[StepObserver, ...]] = ContextVar("fedcore_step_observers", default=())


@contextlib.contextmanager
def observe_steps(observer: StepObserver) -> Iterator[None]:
    """Call ``observer`` with each step's name reached inside the block, in this context."""
    token = _OBSERVERS.set((*_OBSERVERS.get(), observer))
    try:
        yield
    finally:
        _OBSERVERS.reset(token)


def reached(step: str) -> None:
    """A step is reached: the observers of this context see it (an exception they raise
    propagates: a crash test's way of stopping there)."""
    _notify(_OBSERVERS.get(), step)


def observers_now() -> StepObserver:
    """``reached`` for this context's observers as they are now, wherever it is called: an
    operation that reaches steps on pool threads (a write's data files) takes it when it
    begins, so those steps are seen as its own."""
    observers = _OBSERVERS.get()
    return lambda step: _notify(observers, step)


def _notify(observers: tuple[StepObserver, ...], step: str) -> None:
    if not observers:
        return
    token = _OBSERVERS.set(())  # what an observer runs is not observed
    try:
        for observer in observers:
            observer(step)
    finally:
        _OBSERVERS.reset(token)
