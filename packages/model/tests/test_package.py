"""CompiledModel.package / load_package: a log-density as data, rebuilt elsewhere."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import scipy.stats as st

import kiln as kl
from kiln_graph import KilnValueError
from kiln_model import ModelPackage, VersionMismatchError, load_package


def _model(y: np.ndarray) -> kl.Model:
    with kl.Model() as m:
        data = kl.Data("y_obs", y)
        mu = kl.Normal("mu", 0.0, 5.0)
        sigma = kl.HalfNormal("sigma", 2.0)
        kl.Normal("y", mu, sigma, observed=data)
    return m


def _reference_logp(x: np.ndarray, y: np.ndarray) -> float:
    mu, log_sigma = x  # sigma is log-transformed: log|d sigma / d log sigma| = log sigma
    sigma = np.exp(log_sigma)
    return float(
        st.norm(0, 5).logpdf(mu)
        + st.halfnorm(scale=2).logpdf(sigma)
        + log_sigma
        + st.norm(mu, sigma).logpdf(y).sum()
    )


@pytest.mark.parametrize("backend", ["vm", "numba"])
def test_a_rebuilt_package_computes_the_clients_log_density_to_the_bit(backend):
    y = np.array([0.3, -1.2, 2.5, 0.9])
    compiled = _model(y).logp_dlogp_function(mode=kl.Mode(linker=backend))
    package = pickle.loads(pickle.dumps(compiled.package()))  # what a task carries
    assert isinstance(package, ModelPackage) and package.linker == backend
    rebuilt = load_package(package)
    for seed in range(3):
        x = compiled.initial_point(seed)
        np.testing.assert_array_equal(rebuilt.initial_point(seed), x)
        logp, grad = rebuilt.logp_dlogp(x)
        want, want_grad = compiled.logp_dlogp(x)
        assert logp == want and np.array_equal(grad, want_grad)
        assert logp == pytest.approx(_reference_logp(x, y), rel=1e-12)
    assert load_package(package) is rebuilt  # once per process


def test_the_data_travel_with_the_package():
    y1, y2 = np.array([0.0, 1.0]), np.array([5.0, 7.0, 9.0])
    p1 = _model(y1).logp_dlogp_function().package()
    p2 = _model(y2).logp_dlogp_function().package()
    assert p1.key != p2.key
    x = np.array([0.5, 0.1])
    assert load_package(p1).logp(x) == pytest.approx(_reference_logp(x, y1), rel=1e-12)
    assert load_package(p2).logp(x) == pytest.approx(_reference_logp(x, y2), rel=1e-12)


def test_other_versions_and_damaged_graphs_are_refused():
    package = _model(np.array([1.0])).logp_dlogp_function().package()
    older = dataclasses.replace(package, versions={**package.versions, "kiln-model": "0.0.1"})
    with pytest.raises(VersionMismatchError, match=r"kiln-model 0\.0\.1 on the client but"):
        load_package(older)
    with pytest.raises(VersionMismatchError, match="format 99"):
        load_package(dataclasses.replace(package, format=99))
    with pytest.raises(KilnValueError, match="graph cannot be read in this process"):
        load_package(dataclasses.replace(package, graph=package.graph[:-40]))
    with pytest.raises(KilnValueError, match="not the client's graph"):
        load_package(dataclasses.replace(package, digest="0" * 64))
    with pytest.raises(KilnValueError, match="expected a ModelPackage"):
        load_package({"graph": b""})
