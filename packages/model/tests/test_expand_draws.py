"""CompiledModel.expand_draws: every draw's values in one call, as expand gives them."""

from __future__ import annotations

import numpy as np
import pytest

import kiln as kl
from kiln_compile import FAST_RUN
from kiln_graph import KilnValueError


@pytest.mark.parametrize("linker", ["vm", "numba"])
def test_expand_draws_equals_expand_of_each_draw(linker):
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        tau = kl.HalfNormal("tau", 1.0)
        z = kl.Normal("z", 0.0, 1.0, shape=3)
        kl.Deterministic("theta", mu + tau * z)
        kl.Deterministic("total", kl.tensor.sum(z))
    compiled = m.logp_dlogp_function(mode=FAST_RUN.with_linker(linker))
    xs = np.random.default_rng(0).normal(size=(7, compiled.ndim))
    batched = compiled.expand_draws(xs)
    assert list(batched) == compiled.out_names
    for k, x in enumerate(xs):
        for name, value in compiled.expand(x).items():
            np.testing.assert_allclose(batched[name][k], value, rtol=1e-14)
    assert batched["theta"].shape == (7, 3) and batched["total"].shape == (7,)
    with pytest.raises(KilnValueError, match="draws"):
        compiled.expand_draws(xs[0])
