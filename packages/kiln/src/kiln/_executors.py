"""The seam between ``kl.sample(executor=...)`` and a distributed engine: one adapter each.

An adapter submits a chain's task (:func:`kiln._distributed.sample_chain_task`) and
says where its progress comes from. Its futures need only ``done()``, ``result()`` and
``cancel()``, which ``concurrent.futures`` and ``dask.distributed`` futures both have.
Adding an engine (Ray, say) is one module with one adapter class, registered in
:func:`executor_adapter`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from kiln_graph import KilnTypeError


class ExecutorAdapter(Protocol):
    """How kiln runs chain tasks on one kind of executor."""

    #: What the task's worker uses to report progress (None: only at the chain's end).
    reporter: str | None
    #: How many times a chain whose task raised is submitted again (the executor's own
    #: retries included): a chain is deterministic, so a rerun draws the same.
    retries: int

    def submit(self, fn: Callable[..., Any], task: Any, key: str) -> Any:
        """Submit ``fn(task)``; return its future."""
        ...

    def can_resubmit(self, exc: BaseException) -> bool:
        """Whether a task that failed with ``exc`` may be submitted again by kiln."""
        ...

    def progress(self, topic: str, handle: Callable[[dict[str, Any]], None]) -> Any:
        """Return a context manager that passes the workers' progress messages to ``handle``."""
        ...


class FuturesAdapter:
    """A ``concurrent.futures.Executor`` (a ``ProcessPoolExecutor`` on one machine).

    Progress moves when a chain finishes. A task that raised is submitted again up to
    ``retries`` times, unless the pool itself broke (a worker process was killed: a
    ``ProcessPoolExecutor`` then refuses every task).
    """

    reporter: str | None = None

    def __init__(self, executor: concurrent.futures.Executor, retries: int = 2) -> None:
        self.executor = executor
        self.retries = retries

    def submit(self, fn: Callable[..., Any], task: Any, key: str) -> Any:
        """Submit ``fn(task)`` to the executor."""
        return self.executor.submit(fn, task)

    def can_resubmit(self, exc: BaseException) -> bool:
        """Whether the executor still takes tasks after ``exc``."""
        return not isinstance(exc, concurrent.futures.BrokenExecutor)

    def progress(self, topic: str, handle: Callable[[dict[str, Any]], None]) -> Any:
        """No messages: the bars move when chains finish."""
        return contextlib.nullcontext()


def is_dask_client(executor: Any) -> bool:
    """Whether ``executor`` is a ``dask.distributed.Client`` (without importing Dask)."""
    cls = type(executor)
    return cls.__name__ == "Client" and cls.__module__.split(".")[0] == "distributed"


def executor_adapter(executor: Any) -> ExecutorAdapter:
    """Return the adapter of ``executor``: a Dask ``Client`` or a ``concurrent.futures.Executor``.

    Raises
    ------
    KilnTypeError
        For anything else, saying what is accepted.
    """
    if is_dask_client(executor):
        from kiln._executor_dask import DaskAdapter

        return DaskAdapter(executor)
    if isinstance(executor, concurrent.futures.Executor):
        return FuturesAdapter(executor)
    raise KilnTypeError(
        f"executor: expected a dask.distributed.Client or a concurrent.futures.Executor "
        f"(e.g. ProcessPoolExecutor), got {type(executor).__name__}"
    )
