"""The Dask distributed adapter of ``kl.sample(executor=client)``.

A chain is one task (``client.submit``, not pure, with its own key); Dask reruns the
task of a worker that died on another worker, and kiln asks it to retry a task that
raised (``retries``). The chain's data travel inside the task's argument (never
``scatter``: scattered data are lost with the worker that held them). Workers report
progress as Dask events (``log_event`` on a topic of the run) that the client's
subscription turns into its progress bars.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

#: How often a worker sends a chain's progress (seconds).
REPORT_EVERY_S = 0.25


class DaskAdapter:
    """Runs chain tasks on a ``dask.distributed.Client``."""

    reporter: str | None = "dask"

    def __init__(self, client: Any, retries: int = 2) -> None:
        self.client = client
        self.retries = retries

    def submit(self, fn: Callable[..., Any], task: Any, key: str) -> Any:
        """Submit ``fn(task)`` as the task ``key`` (retried ``retries`` times by Dask)."""
        return self.client.submit(fn, task, key=key, pure=False, retries=self.retries)

    def can_resubmit(self, exc: BaseException) -> bool:
        """Dask has retried already (and rescheduled tasks of dead workers): never again."""
        return False

    @contextlib.contextmanager
    def progress(self, topic: str, handle: Callable[[dict[str, Any]], None]) -> Iterator[None]:
        """Pass the messages workers log on ``topic`` to ``handle`` while the run lasts."""

        def on_event(event: Any) -> None:
            _, message = event
            if isinstance(message, dict):
                handle(message)

        self.client.subscribe_topic(topic, on_event)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                self.client.unsubscribe_topic(topic)


def reporter(topic: str, chain: int) -> Callable[[int, int, bool, bool], None]:
    """Return ``report(n_new, divergences, tuning, final)`` for a chain on a Dask worker.

    Counts accumulate and go out as one event at most every :data:`REPORT_EVERY_S`
    (and at the chain's end), so that the scheduler sees a few messages a second.
    """
    from distributed import get_worker

    worker = get_worker()
    pending = {"n": 0, "divergences": 0, "last": time.monotonic()}

    def report(n: int, divergences: int, tuning: bool, final: bool) -> None:
        pending["n"] += n
        pending["divergences"] += divergences
        now = time.monotonic()
        if pending["n"] and (final or now - pending["last"] >= REPORT_EVERY_S):
            worker.log_event(
                topic,
                {"chain": chain, "n": pending["n"], "divergences": pending["divergences"]},
            )
            pending.update(n=0, divergences=0, last=now)

    return report
