"""How many chains run at once, and how many BLAS threads each one's log-density may use.

Chains run in threads of one process (kiln's NUTS, nutpie) or in a thread pool (the
compound steps, JAX's sequential chains); a compiled log-density that calls BLAS
(``X @ beta``) calls OpenBLAS, which starts a thread per core for a large enough
product and keeps them spinning for a while after it. Several chains, each calling a
BLAS that uses every core, oversubscribe them: on M3 at 100,000 rows (2 cores, two
processes busy), one gradient took 2.1 times the hand-written single-threaded loop
with OpenBLAS's 2 threads and 1.1 times with one. While kiln's NUTS, nutpie's or the
compound steps' chains run, BLAS gets the cores divided among the chains that run at
once (``threadpoolctl``), at least one, and never more than it had (JAX's chains call
XLA, not this BLAS).
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from typing import Any


def cpu_count() -> int:
    """Return the CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def chain_workers(chains: int, cores: int | None) -> int:
    """Return how many chains run at once: ``cores``, else min(4, CPUs); at most ``chains``."""
    return min(chains, cores or min(4, cpu_count()))


def blas_threads_for(workers: int) -> AbstractContextManager[Any]:
    """Return a context in which BLAS uses at most CPUs // ``workers`` threads (at least 1).

    Never more than BLAS has already (a Dask worker's nanny sets one thread: chains
    there keep it). Process-wide (BLAS's thread count is a global of the library) and
    restored on exit.
    """
    from threadpoolctl import ThreadpoolController

    blas = ThreadpoolController().select(user_api="blas")
    current = [lib.num_threads for lib in blas.lib_controllers]
    target = min([max(1, cpu_count() // max(1, workers)), *current])
    if all(n == target for n in current):  # nothing to change (or no BLAS it knows)
        return nullcontext()
    return blas.limit(limits=target)
