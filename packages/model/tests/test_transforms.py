"""Value transforms: round trips, and the log-Jacobian against finite differences.

Each case is a transform with a point ``y`` of the unconstrained space (batched: the
leading axis). ``backward(y)`` is compared with its central-difference Jacobian:
``log_jac_det(y)`` must be ``log |det J|`` of ``backward`` (of one draw: one element of
an elementwise transform, one vector of a vector transform; for the simplex, the first
k - 1 components of ``backward``, whose Jacobian is square). Everything is compiled
once on the Python VM (the transforms are graphs like any other: the backends are
checked against the VM elsewhere).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import kiln
from kiln_graph import tensor as kt
from kiln_model import transforms as tr

H = 1e-6  # central differences: error ~ H^2 * f''' ~ 1e-12, rounding ~ eps / H ~ 1e-10
FD_RTOL, FD_ATOL = 1e-7, 1e-9


@dataclasses.dataclass(frozen=True)
class Case:
    """``transform`` at the unconstrained points ``y`` (rows of the leading axis)."""

    id: str
    transform: tr.Transform
    y: np.ndarray
    #: For a Jacobian of the first k - 1 of k outputs (the simplex): drop the last one.
    drop_last: bool = False


_RNG = np.random.default_rng(20260)
_Y1 = np.array([-3.0, -0.4, 0.0, 0.7, 2.5])
_Y4 = _RNG.normal(size=(3, 4))

CASES = [
    Case("log", tr.log, _Y1),
    Case("logodds", tr.logodds, _Y1),
    Case("interval", tr.interval(-2.0, 5.0), _Y1),
    Case("interval_lower", tr.interval(1.5, None), _Y1),
    Case("interval_upper", tr.interval(None, -1.0), _Y1),
    Case("ordered", tr.ordered, _Y4),
    Case("simplex", tr.simplex, _Y4, drop_last=True),
    Case("simplex_of_two", tr.simplex, _Y4[:, :1], drop_last=True),
    # Positive increasing vectors: log then ordered (backward: exp of a cumulative sum).
    Case("log_ordered", tr.ChainTransform(tr.log, tr.ordered), _Y4),
    # An elementwise chain: (1, inf) through a shift and a log.
    Case("interval_log", tr.ChainTransform(tr.interval(1.0, None), tr.log), _Y1),
    # Angles: points inside [-pi, pi) (where forward inverts backward).
    Case("circular", tr.circular, _Y1),
]


def _compile(case: Case) -> tuple[Any, Any]:
    """Return ``y -> (backward(y), log_jac_det(y), forward(backward(y)))``, ``forward``."""
    y = kt.tensor("y", shape=(None,) * case.y.ndim)
    x = kt.tensor("x", shape=(None,) * case.y.ndim if not case.drop_last else (None, None))
    t = case.transform
    outs = [t.backward(y), t.log_jac_det(y), t.forward(t.backward(y))]
    mode = kiln.Mode(linker="vm")
    return kiln.function([y], outs, mode=mode), kiln.function([x], t.forward(x), mode=mode)


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[Any, Any]]:
    return {case.id: _compile(case) for case in CASES}


def _jacobian(f: Any, y: np.ndarray, drop_last: bool) -> np.ndarray:
    """Central-difference Jacobian of the vector function ``f`` at the vector ``y``."""
    cols = []
    for i in range(y.size):
        e = np.zeros_like(y)
        e[i] = H
        diff = (f(y + e) - f(y - e)) / (2 * H)
        cols.append(diff[:-1] if drop_last else diff)
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_round_trips(compiled: dict[str, tuple[Any, Any]], case: Case) -> None:
    f, forward = compiled[case.id]
    x, _, y_again = f(case.y)
    np.testing.assert_allclose(y_again, case.y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f(forward(x))[0], x, rtol=1e-12, atol=1e-14)
    if case.drop_last:  # simplex: on the simplex, one dimension fewer
        assert x.shape == (*case.y.shape[:-1], case.y.shape[-1] + 1)
        assert tuple(case.transform.forward_shape(x.shape)) == case.y.shape
        np.testing.assert_allclose(x.sum(axis=-1), 1.0, rtol=1e-14)
        assert np.all(x > 0)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_log_jac_det_matches_finite_differences(
    compiled: dict[str, tuple[Any, Any]], case: Case
) -> None:
    f, _ = compiled[case.id]
    _, log_jac, _ = f(case.y)
    if case.transform.core_ndim == 0:
        # One term per element: d backward(y)_i / d y_i (the Jacobian is diagonal).
        assert log_jac.shape == case.y.shape
        jac = _jacobian(lambda v: f(v)[0], case.y, False)
        np.testing.assert_allclose(jac, np.diag(np.diag(jac)), atol=1e-12)
        np.testing.assert_allclose(
            log_jac, np.log(np.abs(np.diag(jac))), rtol=FD_RTOL, atol=FD_ATOL
        )
        return
    assert log_jac.shape == case.y.shape[:-1]  # one term per vector
    for row, expected in zip(case.y, log_jac, strict=True):
        jac = _jacobian(lambda v: f(v[None, :])[0][0], row, case.drop_last)
        sign, logdet = np.linalg.slogdet(jac)
        assert sign != 0
        np.testing.assert_allclose(expected, logdet, rtol=FD_RTOL, atol=FD_ATOL)


def test_log_jac_det_is_finite_far_in_the_tails() -> None:
    """Where backward(y) rounds to a bound, the log-Jacobian is still exact (softplus)."""
    y = kt.vector("y")
    ts = [tr.logodds, tr.interval(-2.0, 5.0)]
    f = kiln.function([y], [t.log_jac_det(y) for t in ts], mode=kiln.Mode(linker="vm"))
    far = np.array([-800.0, -40.0, 40.0, 800.0])
    logodds, interval = f(far)
    np.testing.assert_allclose(logodds, -np.abs(far), rtol=1e-12)  # log s(1 - s) ~ -|y|
    np.testing.assert_allclose(interval, np.log(7.0) - np.abs(far), rtol=1e-12)


def test_interval_with_symbolic_bounds() -> None:
    """Bounds may be tensors (a distribution's parameters): the same graph for any values."""
    lo, hi, y = kt.scalar("lo"), kt.scalar("hi"), kt.vector("y")
    t = tr.interval(lo, hi)
    f = kiln.function([lo, hi, y], [t.backward(y), t.log_jac_det(y)], mode=kiln.Mode(linker="vm"))
    for a, b in [(-1.0, 1.0), (10.0, 10.5)]:
        x, log_jac = f(a, b, _Y1)
        s = 1.0 / (1.0 + np.exp(-_Y1))
        np.testing.assert_allclose(x, a + (b - a) * s, rtol=1e-14)
        np.testing.assert_allclose(log_jac, np.log((b - a) * s * (1.0 - s)), rtol=1e-12)


def test_circular_wraps_every_real_onto_the_angle_it_points_at() -> None:
    y = kt.vector("y")
    f = kiln.function([y], tr.circular.backward(y))
    values = np.array([-10.0, -np.pi, -1.0, 0.0, 3.0, np.pi, 7.5, 100.0])
    got = f(values)
    assert np.all((got >= -np.pi) & (got < np.pi))
    np.testing.assert_allclose(np.cos(got), np.cos(values), atol=1e-12)
    np.testing.assert_allclose(np.sin(got), np.sin(values), atol=1e-12)
