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

Numba's first compile of a large model is where the heap grows most: its typing and
lowering leave hundreds of thousands of objects per second, most of them alive until
the block ends, and the full collections that still run traverse all of them again
(M4 at 500 groups: 15% of a 100 s cold compile, the share growing with the model).
:func:`freeze_survivors`, which kiln's Numba dispatchers call after each function they
compile, collects the garbage of that compile and freezes what survives it, so each
later collection traverses only what is newer; the outermost block unfreezes
everything it froze when it ends, so those objects are collected as usual afterwards.
It freezes only when no more objects are frozen than the interpreter's own (counted at
kiln's import): unfreezing cannot tell kiln's frozen objects from a user's (a server
that freezes before it forks), so then the block leaves freezing alone.

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
import time
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

_lock = threading.RLock()  # re-entrant: a finalizer run by a collection may enter a block
_depth = 0
_saved: tuple[int, int, int] | None = None
#: How many frozen objects are the interpreter's, which :func:`gc.unfreeze` may unfreeze
#: without harm: as many as at kiln's import. CPython 3.12 keeps its immortal tuples (375)
#: there, and every full collection moves them back.
_INTERPRETERS_FROZEN = gc.get_freeze_count()
#: Whether the current outermost block froze the objects older than it.
_froze = False
#: :func:`freeze_survivors` collects at most once in this many seconds: a collection
#: costs what the objects made since the last freeze cost to traverse, and a small
#: compile (eight schools: 0.6 s in all) makes too few for it to pay.
FREEZE_INTERVAL_S = 0.5
_last_freeze = 0.0


def freeze_survivors() -> None:
    """Inside :func:`long_lived_objects`: collect the garbage, then freeze what survives.

    For code that has just made many objects that will live as long as the block (a
    compiled function): later collections inside the block skip them. The outermost
    block unfreezes them when it ends. Outside a block, when objects that kiln did not
    freeze are frozen, or within :data:`FREEZE_INTERVAL_S` of the block's start or the
    last freeze, it does nothing.
    """
    global _last_freeze
    with _lock:
        if _depth == 0 or not _froze or time.perf_counter() - _last_freeze < FREEZE_INTERVAL_S:
            return
        _last_freeze = time.perf_counter()
    # Outside the lock: a finalizer that the collection runs may wait for another thread.
    gc.collect()
    gc.freeze()
    with _lock:
        _last_freeze = time.perf_counter()
        if not _froze:  # every block ended meanwhile, in other threads
            gc.unfreeze()


@contextlib.contextmanager
def long_lived_objects() -> Iterator[None]:
    """Run the block with full garbage collections 10 times rarer (re-entrant, thread-safe).

    For code whose allocations outlive it: building, rewriting and compiling graphs.
    The outermost block also freezes the objects older than it, and unfreezes them and
    what :func:`freeze_survivors` froze when it ends (unless others had frozen objects).
    Use it as a ``with`` block in the function's body: as a decorator it adds a frame,
    which moves the line that a ``warnings.warn(..., stacklevel=n)`` below it names.
    """
    global _depth, _saved, _froze, _last_freeze
    with _lock:
        _depth += 1
        if _depth == 1:
            if gc.get_freeze_count() <= _INTERPRETERS_FROZEN:
                gc.freeze()  # what is older than the block is not traversed inside it
                _froze, _last_freeze = True, time.perf_counter()
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
            if _depth == 0 and _froze:
                gc.unfreeze()
                _froze = False
