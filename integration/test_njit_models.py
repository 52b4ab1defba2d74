"""The hand-written Numba baselines (benchmarks/njit_models.py) against kiln's graphs.

Log density and every gradient at random points, against the kiln graphs of
benchmarks/kiln_models.py evaluated unrewritten on the Python VM.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

import kiln

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

pytest.importorskip("numba")

import kiln_models  # noqa: E402
import njit_models  # noqa: E402


def _reference(name):
    inputs, outputs = kiln_models.build(name)
    f = kiln.function(inputs, outputs, mode=kiln.Mode(rewrites=None, linker="vm"))
    return inputs, f


@pytest.mark.parametrize("name", njit_models.MODELS)
def test_njit_matches_kiln_graph(name):
    inputs, reference = _reference(name)
    f = njit_models.call(name)
    rng = np.random.default_rng(7)
    for _ in range(3):
        point = [np.asarray(rng.normal(scale=0.7, size=v.type.shape)) for v in inputs]
        expected = reference(*point)
        got = f(*point)
        assert len(got) == len(expected) == len(inputs) + 1
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-10, atol=1e-10)


def test_jax_m3_matches_kiln_graph():
    fn = njit_models.jax_m3()
    if fn is None:
        pytest.skip("JAX is not installed")
    inputs, reference = _reference("M3")
    rng = np.random.default_rng(8)
    point = [np.asarray(rng.normal(scale=0.3, size=v.type.shape)) for v in inputs]
    logp, (d_alpha, d_beta) = fn(*point)
    expected = reference(*point)
    for g, e in zip((logp, d_alpha, d_beta), expected, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-9, atol=1e-9)
