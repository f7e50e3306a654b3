"""fedcore's errors reach a Spark user as their one line, not under a Python traceback.

Spark runs a Python data source in its Python worker processes and reports an error raised
there as the worker formats it: a traceback, then the error's type and message. A fedcore
error's message says what is wrong and what to do (a missing option, a schema mismatch, a
conflicting commit); the frames above it say nothing more. So where one leaves a method
Spark called in a worker, the worker is told to report it without the traceback (PySpark's
``SPARK_HIDE_TRACEBACK``, which ``spark.sql.execution.pyspark.udf.hideTraceback.enabled``
sets). Every Spark worker exits after reporting an error, so the setting never outlives it
or touches another error; any other error keeps its traceback.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeVar

from fedcore.exceptions import FedError

#: Set by Spark in its Python workers' environment (never in the driver's).
_IN_WORKER: Final = "PYTHON_WORKER_FACTORY_SECRET"
_HIDE_TRACEBACK: Final = "SPARK_HIDE_TRACEBACK"

C = TypeVar("C", bound=type)


def _reported(error: FedError) -> None:
    if _IN_WORKER in os.environ:
        os.environ[_HIDE_TRACEBACK] = "1"


def _wrapped(method: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(method):  # a reader's read: errors come while iterating

        @functools.wraps(method)
        def generator(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(*args, **kwargs)
            except FedError as error:
                _reported(error)
                raise

        return generator

    @functools.wraps(method)
    def plain(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except FedError as error:
            _reported(error)
            raise

    return plain


F = TypeVar("F", bound=Callable[..., Any])


def one_line(function: F) -> F:
    """``function``, which Spark runs in its workers (a ``mapInArrow`` function), reporting a
    fedcore error as its one line."""
    wrapped: F = _wrapped(function)  # type: ignore[assignment]
    return wrapped


def one_line_errors(cls: C) -> C:
    """Wrap the methods Spark calls on ``cls`` (every public function its body defines)."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _wrapped(member))
    return cls
