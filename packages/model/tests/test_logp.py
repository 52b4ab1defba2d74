"""Every distribution's logp and logcdf against SciPy, on every installed backend.

One table: each case is a distribution, a grid of parameter rows and of values (their
product is evaluated), and its SciPy reference. The values include the edges of the
support: -inf outside it, finite at a boundary where SciPy is finite (Exponential at 0,
Beta(1, 1) at 0, Poisson at 0 with mu = 0). Parameters and values are function inputs
(not constants), so the rewrites cannot fold them away.

All the cases are compiled into ONE function per backend (one LLVM compile for Numba);
each test then checks one case. The tolerance is rtol 1e-10 in float64 unless a case
says why it is looser.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kiln
import kiln_model as km
from kiln_compile import available_linkers
from kiln_graph import tensor as kt
from kiln_model import Distribution

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logp_table import CASES as BASIC_CASES  # noqa: E402
from logp_table import Case  # noqa: E402
from logp_table_derived import DERIVED_CASES, MORE_CASES  # noqa: E402

BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]
CASES = [*BASIC_CASES, *DERIVED_CASES, *MORE_CASES]


def _input(name: str, a: np.ndarray) -> Any:
    return kt.tensor(name, dtype=str(a.dtype), shape=(None,) * a.ndim)


def _has_logcdf(case: Case, rv: Any, value: Any) -> Any:
    """Return the logcdf graph, or None where the class has no closed form."""
    try:
        return km.logcdf(rv, value)
    except NotImplementedError:
        return None


def _build(case: Case) -> tuple[list[Any], list[np.ndarray], dict[str, Any]]:
    """Return the inputs, their values and the outputs (by kind) of one case."""
    cols, values = case.columns()
    params = [_input(f"{case.id}_{n}", c) for n, c in zip(case.names, cols, strict=True)]
    value = _input(f"{case.id}_value", values)
    rv = case.dist.dist(**dict(zip(case.names, params, strict=True)))
    if not case.names:  # a parameterless distribution: one draw per value
        rv = case.dist.dist(shape=(values.shape[0],))
    outs = {"logp": km.logp(rv, value)}
    cdf = _has_logcdf(case, rv, value) if case.logcdf is not None else None
    if cdf is not None:
        outs["logcdf"] = cdf
    return [*params, value], [*cols, values], outs


def _evaluate_all(backend: str) -> dict[tuple[str, str], np.ndarray]:
    inputs, args, keys, outputs = [], [], [], []
    for case in CASES:
        ins, vals, outs = _build(case)
        inputs += ins
        args += vals
        for kind, out in outs.items():
            keys.append((case.id, kind))
            outputs.append(out)
    f = kiln.function(inputs, outputs, mode=kiln.Mode(linker=backend))
    # The branch a switch does not select may compute log(0) or inf - inf: NumPy (the
    # VM) warns of it, though the result is right; the results are what is checked.
    with np.errstate(all="ignore"):
        return dict(zip(keys, f(*args), strict=True))


@pytest.fixture(scope="module", params=BACKENDS)
def results(request: pytest.FixtureRequest) -> tuple[str, dict[tuple[str, str], np.ndarray]]:
    return request.param, _evaluate_all(request.param)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_logp_and_logcdf_match_scipy(
    results: tuple[str, dict[tuple[str, str], np.ndarray]], case: Case
) -> None:
    backend, values = results
    kinds = ["logp"] + (["logcdf"] if case.logcdf is not None else [])
    for kind in kinds:
        got = values[case.id, kind]
        ref = case.reference(kind)
        close = np.isclose(got, ref, rtol=case.rtol, atol=case.atol, equal_nan=True)
        bad = [
            f"  {dict(zip(case.names, row, strict=True))} at {v}: got {g!r}, SciPy {r!r}"
            for (row, v), g, r, ok in zip(case.points(), got, ref, close, strict=True)
            if not ok
        ]
        assert not bad, f"{case.id} {kind} on {backend}:\n" + "\n".join(bad)


#: Exported distributions the table cannot build, each with the reason; every other one
#: has a row. Remove a name when its row is added (a stale entry fails the test below).
NOT_IN_TABLE: dict[str, str] = {
    # Their arguments are distributions (a row is parameter arrays); test_censored.py,
    # test_truncated.py and the mixture / custom-distribution tests check them.
    "Mixture": "takes component distributions as arguments",
    "CustomDist": "takes a user's logp or draw-graph function",
    "Censored": "takes a base distribution (test_censored.py)",
    "Truncated": "takes a base distribution (test_truncated.py)",
    "PolyaGamma": "not implemented: .dist raises NotImplementedError",
    "Interpolated": "takes vectors of points (a row is scalars); test_continuous_more.py",
    **dict.fromkeys(
        (
            "LKJCholeskyCov",
            "LKJCorr",
            "MvStudentT",
            "Wishart",
            "WishartBartlett",
            "MatrixNormal",
            "KroneckerNormal",
            "DirichletMultinomial",
            "OrderedMultinomial",
            "ZeroSumNormal",
            "StickBreakingWeights",
            "CAR",
            "ICAR",
        ),
        "multivariate: core-shaped parameters; test_multivariate_derived.py checks them",
    ),
    **dict.fromkeys(
        (
            "RandomWalk",
            "GaussianRandomWalk",
            "MvGaussianRandomWalk",
            "MvStudentTRandomWalk",
            "AR",
            "GARCH11",
            "EulerMaruyama",
        ),
        "time series: need steps (most an init_dist); test_timeseries.py checks them",
    ),
}


def _exported_distributions() -> set[str]:
    """Return the class names of every Distribution subclass kiln_model exports."""
    classes = [getattr(km, name) for name in dir(km)]
    return {
        c.__name__
        for c in classes
        if isinstance(c, type) and issubclass(c, Distribution) and c is not Distribution
    }


def test_every_distribution_is_in_the_table() -> None:
    """Every exported distribution (SymbolicDistributions included) has a row or a reason."""
    in_table = {case.dist.__name__ for case in CASES}
    missing = _exported_distributions() - in_table - set(NOT_IN_TABLE)
    assert not missing, f"distributions with no row in CASES: {sorted(missing)}"
    stale = in_table & set(NOT_IN_TABLE)
    assert not stale, f"in the table and still in NOT_IN_TABLE (remove them): {sorted(stale)}"


def test_every_implemented_logcdf_is_checked() -> None:
    """A class with a closed-form logcdf has a SciPy reference for it in the table."""
    checked = {case.dist for case in CASES if case.logcdf is not None}
    for case in CASES:
        if case.id.endswith("_invalid"):  # constant invalid parameters do not build a draw
            continue
        cols, _ = case.columns()
        rv = case.dist.dist(**dict(zip(case.names, [c[:1] for c in cols], strict=True)))
        if _has_logcdf(case, rv, kt.vector("v")) is not None:
            assert case.dist in checked, f"{case.id}: logcdf is not compared with SciPy"
