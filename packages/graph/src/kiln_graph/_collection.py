"""Fewer full garbage collections while graphs are built and compiled.

Building a graph, rewriting it and compiling it (Numba's typing and lowering) make
hundreds of thousands of objects that all live as long as the graph or the compiled
function. CPython's collector traverses every tracked object in a full collection,
which it runs after 10 collections of the middle generation whenever the objects that
survived them add a quarter to the oldest generation: on a heap that only grows, that
is five traversals of the final heap for nothing collected. Measured on M4's pattern
(``benchmarks/cost_growth.py``): 25% of Stage 1's rewriting time at 300 groups and
10% of a cold compile, the share growing with the model.

:func:`long_lived_objects` raises the third threshold (full collections after 100
middle ones, not 10) while any thread is inside it, and restores the thresholds when
the last one leaves. The young generations are collected as before, so short-lived
cycles are still freed at once; garbage that reaches the oldest generation waits
longer (it is freed by the next full collection after the block).

The same heap costs once more when the process exits: while the interpreter tears its
modules down it runs full collections over every object left (a process that compiled
with Numba keeps about 200,000: 0.3 s of its exit, 15% of a cold ``python model.py``
of eight schools). :func:`collect_and_freeze`, run at exit (``kiln_compile``
registers it, ``config.fast_exit``), collects once and freezes what is left.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator


def collect_and_freeze() -> None:
    """Collect the garbage now, then freeze every object left (``gc.freeze``).

    For the end of a process: the garbage of now is freed and its finalizers run, and
    the collections that the interpreter runs while it tears its modules down skip the
    frozen objects. Objects freed by their reference counts are freed as before; a cycle
    that becomes garbage only during that teardown is left to the operating system, its
    ``__del__`` methods not run (Python does not promise that they run at exit).
    """
    gc.collect()
    gc.freeze()


#: The third collection threshold inside :func:`long_lived_objects` (CPython's is 10).
FULL_COLLECTION_THRESHOLD = 100

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None


@contextlib.contextmanager
def long_lived_objects() -> Iterator[None]:
    """Run the block with full garbage collections 10 times rarer (re-entrant, thread-safe).

    For code whose allocations outlive it: building, rewriting and compiling graphs.
    Use it as a ``with`` block in the function's body: as a decorator it adds a frame,
    which moves the line that a ``warnings.warn(..., stacklevel=n)`` below it names.
    """
    global _depth, _saved
    with _lock:
        _depth += 1
        if _depth == 1:
            _saved = gc.get_threshold()
            first, second, third = _saved
            gc.set_threshold(first, second, max(third, FULL_COLLECTION_THRESHOLD))
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                # A threshold the block's code changed itself is kept.
                if gc.get_threshold()[2] == max(_saved[2], FULL_COLLECTION_THRESHOLD):
                    gc.set_threshold(*gc.get_threshold()[:2], _saved[2])
                _saved = None
