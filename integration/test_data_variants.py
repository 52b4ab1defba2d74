"""Every common form of data takes the compiled NUTS kernel at the float64 speed (issue #19).

The variants of ``benchmarks/data_variants.py`` (integer, boolean and float32 columns,
pandas Series and columns, an int32 index, 0-d Data, a boolean mask, integer counts,
Data shortened by ``set_data``): what the sampler reports about itself says which kernel
ran and how long a leapfrog step took, next to the float64 variant in the same test. The
bound is generous (timing on a shared machine); a slow path was 16-18x before the fix.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln as kl
from kiln_graph import KilnTypeError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from data_variants import VARIANTS, leapfrog_times, sample_variant  # noqa: E402

#: The generous bound on a variant's time per leapfrog step over the float64 variant's.
BOUND = 4.0
COMPILED = {"c", "numba"}


@pytest.fixture(scope="module")
def times() -> dict:
    with warnings.catch_warnings():
        # No NumPy RuntimeWarning from the sampler (an overflow is a divergence).
        warnings.simplefilter("error", RuntimeWarning)
        return leapfrog_times(repeats=2)


@pytest.mark.parametrize("name", [n for n in VARIANTS if n != "float64"])
def test_variant_runs_compiled_at_the_float64_speed(times: dict, name: str) -> None:
    r = times[name]
    assert r["kernel"] in COMPILED, f"{name}: sampled by the {r['kernel']!r} kernel"
    assert r["over_float64"] <= BOUND, (
        f"{name}: {r['leapfrog_median_s'] * 1e6:.1f} us per leapfrog step, "
        f"{r['over_float64']:.1f}x the float64 variant's "
        f"({times['float64']['leapfrog_median_s'] * 1e6:.1f} us)"
    )


def test_a_model_the_kernel_cannot_call_says_so_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the native log-density cannot be built, one SlowPathWarning names why."""
    from kiln_numba import native_c

    def refuse(*functions: object) -> None:
        raise KilnTypeError("native_logp_grad: x has dtype object (a test)")

    monkeypatch.setattr(native_c, "native_c_pointers", refuse)
    with pytest.warns(kl.SlowPathWarning, match="dtype object") as record:
        r = sample_variant("float64", tune=50, draws=50)
    assert sum(issubclass(w.category, kl.SlowPathWarning) for w in record) == 1
    assert r["kernel"] == "python"


def test_set_data_shorter_samples_the_new_rows() -> None:
    """The shortened data is what the compiled log-density reads (no stale length)."""
    m = VARIANTS["set_data shorter"]()
    cm = m.logp_dlogp_function()
    x = cm.initial_point(0)
    logp, _ = cm.logp_dlogp(x)
    m_short = VARIANTS["float64"]()
    assert np.isfinite(logp)
    assert logp != pytest.approx(m_short.logp_dlogp_function().logp_dlogp(x)[0])
