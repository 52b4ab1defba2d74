"""CompiledModel(discrete=True): discrete free variables carried in the flat vector."""

from __future__ import annotations

import numpy as np
import pytest

import kiln as kl
from kiln_graph import KilnTypeError


def _model() -> kl.Model:
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0, shape=2)
        z = kl.Bernoulli("z", 0.3)
        c = kl.Categorical("c", p=np.ones(4) / 4, shape=3)
        n = kl.Poisson("n", 3.0)
        kl.Normal("y", mu[0] + 2.0 * z + c.sum() + n, 1.0, observed=[1.0, 2.0])
    return m


def test_the_layout_says_which_blocks_are_discrete_and_their_support():
    cm = _model().logp_dlogp_function(discrete=True)
    blocks = {b.name: b for b in cm.layout}
    assert not blocks["mu"].discrete and blocks["z"].discrete
    assert (blocks["z"].support, blocks["z"].lower, blocks["z"].upper) == ("binary", 0.0, 1.0)
    assert (blocks["c"].support, blocks["c"].upper) == ("categorical", 3.0)  # 4 categories
    assert (blocks["n"].support, blocks["n"].lower, blocks["n"].upper) == (
        "nonnegative_integer",
        0.0,
        np.inf,
    )
    np.testing.assert_array_equal(cm.discrete_mask, [0, 0, 1, 1, 1, 1, 1])
    assert cm.has_discrete


def test_logp_expand_and_jitter_with_discrete_blocks():
    m = _model()
    cm = m.logp_dlogp_function(discrete=True)
    x = cm.initial_point(seed=1)
    assert np.all(x[cm.discrete_mask] == np.round(x[cm.discrete_mask]))  # never jittered
    x[2], x[3:6], x[6] = 1.0, [0.0, 2.0, 3.0], 2.0
    logp, grad = cm.logp_dlogp(x)
    assert logp == pytest.approx(cm.logp(x))
    assert np.all(grad[cm.discrete_mask] == 0.0) and np.all(grad[:2] != 0.0)
    point = {"mu": x[:2], "z": np.array(1), "c": np.array([0, 2, 3]), "n": np.array(2)}
    assert logp == pytest.approx(float(m.compile_logp()(point)))
    out = cm.expand(x)
    assert out["z"].dtype == np.int64 and int(out["z"]) == 1
    np.testing.assert_array_equal(out["c"], [0, 2, 3])
    assert cm.array_to_point(x)["n"].dtype == np.int64


def test_discrete_variables_still_refused_by_default():
    with pytest.raises(KilnTypeError, match="z is discrete"):
        _model().logp_dlogp_function()
