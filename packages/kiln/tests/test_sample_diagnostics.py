"""kl.sample's sampler warnings (issue #21, item 3: the results' cost).

The diagnostics read the Trace's arrays and compute exactly only what the screen picks
(``exact_extremes=False``); the warnings must be those of the exact check of the same
draws (``check_diagnostics`` on the returned DataTree), given once, from the caller's
line.
"""

from __future__ import annotations

import warnings

import numpy as np

import kiln as kl
import kiln_samplers


def _sample(model: kl.Model, **kwargs) -> tuple[object, list[warnings.WarningMessage]]:
    with model, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = kl.sample(
            **{"chains": 2, "progressbar": False, "random_seed": 3, "backend": "numba", **kwargs}
        )
    return idata, [w for w in caught if issubclass(w.category, kl.SamplingWarning)]


def _exact_messages(idata) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = kiln_samplers.check_diagnostics(idata, max_treedepth=10)
    return report["messages"]


def test_warnings_are_the_exact_checks_and_name_the_callers_line():
    with kl.Model() as m:  # a funnel on 30 warm-up steps: divergences, low ESS, R-hat
        v = kl.Normal("v", 0.0, 3.0)
        kl.Normal("x", 0.0, kl.math.exp(v / 2), shape=3)
    idata, caught = _sample(m, draws=2_500, tune=30)
    said = [str(w.message) for w in caught]
    assert said and said == _exact_messages(idata)
    assert any("effective sample size" in s for s in said)
    assert {w.filename for w in caught} == {__file__}


def test_a_long_well_mixed_run_warns_nothing_and_the_exact_check_agrees():
    with kl.Model() as m:
        kl.Normal("mu", 0.0, 1.0, shape=4)
    idata, caught = _sample(m, draws=4_000, tune=300)
    assert caught == [] and _exact_messages(idata) == []
    assert idata["posterior"]["mu"].shape == (2, 4_000, 4)
    np.testing.assert_allclose(idata["posterior"]["mu"].mean(), 0.0, atol=0.05)
