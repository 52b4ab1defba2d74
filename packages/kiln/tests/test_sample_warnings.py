"""kl.sample prints no flood of NumPy RuntimeWarnings on a large model (issue #21, item 3).

A trajectory that overflows (a momentum or an energy that becomes inf) is a divergence
or a rejection, counted in ``sample_stats``; the Python NUTS loop once printed one
``overflow encountered`` warning per entry of the vector (50,002 on a 50,002-parameter
model).
"""

from __future__ import annotations

import warnings

import kiln as kl


def _runtime_warnings(**kwargs) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kl.sample(chains=1, progressbar=False, random_seed=1, backend="vm", **kwargs)
    return [w for w in caught if issubclass(w.category, RuntimeWarning)]


def _funnel(n: int) -> kl.Model:
    """Return a scale and ``n`` entries under it (trajectories overflow), and a discrete one."""
    with kl.Model() as m:
        s = kl.HalfNormal("s", 1.0)
        kl.Normal("x", 0.0, s, shape=n)
        kl.Bernoulli("k", 0.5)  # a compound step: NUTS as a step, then BinaryMetropolis
    return m


def test_the_nuts_step_of_a_compound_prints_no_runtime_warning_per_entry():
    with _funnel(2000) as m:
        step = [kl.NUTS([m["s"], m["x"]], max_treedepth=4)]
        assert _runtime_warnings(draws=5, tune=5, step=step) == []


def test_the_python_nuts_loop_prints_no_runtime_warning_on_many_parameters():
    with kl.Model():
        s = kl.HalfNormal("s", 1.0)
        kl.Normal("x", 0.0, s, shape=2000)
        assert _runtime_warnings(draws=5, tune=5, nuts_sampler_kwargs={"max_treedepth": 4}) == []
