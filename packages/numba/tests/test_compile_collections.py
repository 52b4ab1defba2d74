"""Compiling runs with rarer full garbage collections (``kiln_graph.helpers.long_lived_objects``).

Building, rewriting and compiling make objects that all outlive the compile; each
collection seen while ``kiln.function`` rewrites and links a graph, while Numba
compiles it at its first call, and while a model's native entry point is compiled,
must see the raised third threshold.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_graph._collection import FULL_COLLECTION_THRESHOLD


@contextmanager
def _thresholds_seen() -> Iterator[list[int]]:
    """Yield the list of the third threshold at every collection in the block."""
    seen: list[int] = []

    def record(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(gc.get_threshold()[2])

    saved = gc.get_threshold()
    gc.set_threshold(20, 10, 10)  # collect often, so that the block sees collections
    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*saved)


def _mostly_raised(seen: list[int]) -> None:
    """All but the few collections between the block's start and the compile's saw it."""
    assert len(seen) >= 5
    assert seen.count(FULL_COLLECTION_THRESHOLD) >= 0.9 * len(seen), seen


@pytest.mark.usefixtures("cache_dir")
def test_rewriting_linking_and_the_first_call_collect_rarely() -> None:
    x = kt.vector("x")
    inputs, mode = [x], kiln.Mode(linker="numba")
    outs = [kt.exp(x).sum() + kt.square(x).mean(), kt.log1p(kt.exp(x)) * 2.0]
    with _thresholds_seen() as seen:
        f = kiln.function(inputs, outs, mode=mode)
    _mostly_raised(seen)
    value = np.array([0.5, -1.0, 2.0])
    with _thresholds_seen() as seen:
        got = f(value)
    _mostly_raised(seen)
    np.testing.assert_allclose(got[0], np.exp(value).sum() + np.mean(value**2), rtol=1e-14)


@pytest.mark.usefixtures("cache_dir")
def test_a_models_compile_and_native_entry_point_collect_rarely() -> None:
    with kiln.Model() as m:
        mu = kiln.Normal("mu", 0.0, 1.0)
        kiln.Normal("y", mu, 1.0, observed=np.array([0.1, -0.3, 0.8]))
    mode = kiln.Mode(linker="numba")
    with _thresholds_seen() as seen:
        compiled = m.logp_dlogp_function(mode=mode)
    _mostly_raised(seen)
    with _thresholds_seen() as seen:
        compiled.native()
    _mostly_raised(seen)
