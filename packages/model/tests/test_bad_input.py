"""Bad input to the model layer: a named error at build time, before anything compiles.

One table: each case builds (part of) a model with one bad input and names the
exception type and a pattern the message must match (the variable or argument, and
what was expected).
"""

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kiln_model as km
from kiln_graph import KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_model import ModelError

COORDS = {"obs": ["a", "b", "c"]}


def _in_model(build: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        with km.Model(coords=COORDS):
            return build()

    return run


def _set_data(build: Callable[[], Any], new: dict[str, Any]) -> Callable[[], Any]:
    def run() -> None:
        with km.Model(coords=COORDS) as m:
            build()
        km.set_data(new, model=m)

    return run


def _x_data() -> None:
    km.Data("x", np.arange(3.0), dims="obs")


def _two_free_dim_data() -> None:
    km.Data("u", np.arange(4.0), dims="free")
    km.Data("v", np.arange(4.0), dims="free")


SIGMA_POSITIVE = r"sigma must be > 0, got sigma=-1"
INF = r"expected finite values, but the data holds an infinite value"

CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    # --- constant parameters outside their constraints (named variable and parameter)
    (
        "normal-sigma-int",
        _in_model(lambda: km.Normal("y", 0, -1, observed=[1.0])),
        KilnValueError,
        rf"^y: normal: {SIGMA_POSITIVE}",
    ),
    (
        "normal-sigma-free",
        _in_model(lambda: km.Normal("x", 0, -1)),
        KilnValueError,
        rf"^x: normal: {SIGMA_POSITIVE}",
    ),
    (
        "halfnormal-sigma-0",
        _in_model(lambda: km.HalfNormal("s", 0)),
        KilnValueError,
        r"^s: halfnormal: sigma must be > 0, got sigma=0",
    ),
    (
        "lognormal-sigma",
        _in_model(lambda: km.LogNormal("ln", 0, -1)),
        KilnValueError,
        rf"^ln: lognormal: {SIGMA_POSITIVE}",
    ),
    (
        "exponential-lam-0",
        _in_model(lambda: km.Exponential("e", 0)),
        KilnValueError,
        r"^e: Exponential: lam must be > 0, got lam=0",
    ),
    (
        "exponential-lam-neg",
        _in_model(lambda: km.Exponential("e", -2.0)),
        KilnValueError,
        r"^e: Exponential: lam must be > 0, got lam=-2",
    ),
    (
        "gamma-alpha",
        _in_model(lambda: km.Gamma("g", -1, 1)),
        KilnValueError,
        r"^g: Gamma: alpha must be > 0, got alpha=-1",
    ),
    (
        "gamma-beta",
        _in_model(lambda: km.Gamma("g", 1, 0)),
        KilnValueError,
        r"^g: Gamma: beta must be > 0, got beta=0",
    ),
    (
        "negbin-alpha",
        _in_model(lambda: km.NegativeBinomial("nb", mu=1, alpha=-1)),
        KilnValueError,
        r"^nb: NegativeBinomial: alpha must be > 0, got alpha=-1",
    ),
    (
        "negbin-mu",
        _in_model(lambda: km.NegativeBinomial("nb", mu=-1, alpha=1)),
        KilnValueError,
        r"^nb: NegativeBinomial: mu must be >= 0, got mu=-1",
    ),
    (
        "studentt-nu-int",
        _in_model(lambda: km.StudentT("t", nu=-3)),
        KilnValueError,
        r"^t: studentt: nu must be > 0, got nu=-3",
    ),
    (
        "poisson-mu-int",
        _in_model(lambda: km.Poisson("k", -1, observed=[1])),
        KilnValueError,
        r"^k: poisson: mu must be >= 0, got mu=-1",
    ),
    (
        "bernoulli-p-int",
        _in_model(lambda: km.Bernoulli("b", 2, observed=[1])),
        KilnValueError,
        r"^b: bernoulli: p must be in \[0, 1\], got p=2",
    ),
    (
        "binomial-p",
        _in_model(lambda: km.Binomial("k", 3, 1.5, observed=[1])),
        KilnValueError,
        r"^k: binomial: p must be in \[0, 1\], got p=1.5",
    ),
    (
        "geometric-p-int",
        _in_model(lambda: km.Geometric("g", 0)),
        KilnValueError,
        r"^g: geometric: p must be in \(0, 1\], got p=0",
    ),
    (
        "uniform-bounds-int",
        _in_model(lambda: km.Uniform("u", 2, 1)),
        KilnValueError,
        r"^u: uniform: lower must be <= upper, got lower=2.0, upper=1.0",
    ),
    (
        "categorical-negative-p",
        _in_model(lambda: km.Categorical("c", [-0.1, 1.1], observed=[0])),
        KilnValueError,
        r"^c: Categorical: p must be >= 0, got p=\[-0.1",
    ),
    (
        "categorical-zero-p",
        _in_model(lambda: km.Categorical("c", [0.0, 0.0])),
        KilnValueError,
        r"^c: Categorical: p must have a positive sum",
    ),
    (
        "dirichlet-negative-a",
        _in_model(lambda: km.Dirichlet("d", np.array([-1.0, 1.0]))),
        KilnValueError,
        r"^d: Dirichlet: a must be > 0, got a=\[-1",
    ),
    (
        "dirichlet-zero-a",
        _in_model(lambda: km.Dirichlet("d", np.zeros(3))),
        KilnValueError,
        r"^d: Dirichlet: a must be > 0",
    ),
    (
        "multinomial-negative-p",
        _in_model(lambda: km.Multinomial("m", 3, [-0.5, 1.5])),
        KilnValueError,
        r"^m: Multinomial: p must be >= 0",
    ),
    (
        "mvnormal-not-pd",
        _in_model(lambda: km.MvNormal("m", np.zeros(2), np.array([[1.0, 2.0], [2.0, 1.0]]))),
        KilnValueError,
        r"^m: MvNormal: cov must be symmetric positive definite",
    ),
    (
        "mvnormal-not-symmetric",
        _in_model(lambda: km.MvNormal("m", np.zeros(2), np.array([[1.0, 0.5], [0.0, 1.0]]))),
        KilnValueError,
        r"^m: MvNormal: cov must be symmetric positive definite",
    ),
    (
        "normal-mu-nan",
        _in_model(lambda: km.Normal("x", np.nan, 1)),
        KilnValueError,
        r"^x: Normal: parameter 'mu' holds NaN",
    ),
    # --- observed values that contradict constant parameters
    (
        "binomial-k-above-n",
        _in_model(lambda: km.Binomial("k", n=3, p=0.5, observed=[1, 5])),
        KilnValueError,
        r"^k: observed counts k must be <= n; the observed value 5 at index \(1,\)",
    ),
    (
        "categorical-k-out-of-range",
        _in_model(lambda: km.Categorical("c", [0.5, 0.5], observed=[0, 2])),
        KilnValueError,
        r"^c: observed categories must be < len\(p\); the observed value 2",
    ),
    (
        "multinomial-wrong-total",
        _in_model(lambda: km.Multinomial("m", 3, [0.5, 0.5], observed=[[1, 1]])),
        KilnValueError,
        r"^m: observed counts must sum to n",
    ),
    # --- non-finite data
    (
        "observed-inf",
        _in_model(lambda: km.Normal("y", 0, 1, observed=[1.0, np.inf])),
        KilnValueError,
        rf"^y: observed: {INF} .*index \(1,\)",
    ),
    (
        "observed-minus-inf",
        _in_model(lambda: km.Normal("y", 0, 1, observed=[-np.inf])),
        KilnValueError,
        rf"^y: observed: {INF}",
    ),
    (
        "observed-nan",
        _in_model(lambda: km.MvNormal("y", np.zeros(2), np.eye(2), observed=[[np.nan, 0.0]])),
        ModelError,
        r"^y: the observed data holds 1 missing \(NaN or masked\) value\(s\), but MvNormal is "
        "multivariate",
    ),
    (
        "data-inf",
        _in_model(lambda: km.Data("d", np.array([1.0, np.inf]))),
        KilnValueError,
        rf"^Data 'd': {INF}",
    ),
    (
        "data-nan",
        _in_model(lambda: km.Data("d", np.array([np.nan]))),
        KilnValueError,
        r"^Data 'd': the data holds NaN",
    ),
    (
        "set-data-inf",
        _set_data(_x_data, {"x": [1.0, np.inf, 2.0]}),
        KilnValueError,
        rf"^set_data: the new value of 'x': {INF}",
    ),
    (
        "set-data-nan",
        _set_data(_x_data, {"x": [1.0, np.nan, 2.0]}),
        KilnValueError,
        r"^set_data: the new value of 'x' holds NaN",
    ),
    # --- set_data against the coords and the other Data
    (
        "set-data-length-vs-coords",
        _set_data(_x_data, {"x": np.arange(5.0)}),
        ModelError,
        r"^set_data: 'x' has length 5 along dim 'obs' .* 3 labels in the model's coords",
    ),
    (
        "set-data-disagreeing-lengths",
        _set_data(_two_free_dim_data, {"u": np.arange(5.0), "v": np.arange(6.0)}),
        ModelError,
        r"^set_data: 'v' has length 6 along dim 'free', but 'u' has 5",
    ),
    (
        "set-data-not-a-dict",
        _set_data(_x_data, [("x", np.arange(3.0))]),  # type: ignore[arg-type]
        KilnTypeError,
        r"^set_data: new_data: expected a dict",
    ),
    (
        "set-data-strings",
        _set_data(_x_data, {"x": ["a", "b", "c"]}),
        KilnTypeError,
        r"^set_data: the new value of 'x': expected numeric data",
    ),
    (
        "set-data-unknown-name",
        _set_data(_x_data, {"z": [1.0]}),
        ModelError,
        r"^set_data: the model has no Data named 'z'",
    ),
    (
        "set-data-ndim",
        _set_data(_x_data, {"x": np.zeros((3, 1))}),
        KilnValueError,
        r"^set_data: 'x' has 1 dimension\(s\), the new value 2",
    ),
    # --- initval
    (
        "initval-outside-support",
        _in_model(lambda: km.HalfNormal("s", initval=-1.0)),
        KilnValueError,
        r"^s: initval must be >= 0 \(the support of HalfNormal\)",
    ),
    (
        "initval-nan",
        _in_model(lambda: km.Normal("x", initval=np.nan)),
        KilnValueError,
        r"^x: initval: expected finite values",
    ),
    (
        "initval-shape",
        _in_model(lambda: km.Normal("x", dims="obs", initval=np.zeros(4))),
        ModelError,
        r"^x: initval has shape \(4,\), which does not fit the variable's shape \(3,\)",
    ),
    (
        "initval-string",
        _in_model(lambda: km.Normal("x", initval="a")),
        KilnTypeError,
        r"^x: initval: expected numbers",
    ),
    # --- dims, coords, shapes, names (regressions: these were named already)
    (
        "unknown-dim",
        _in_model(lambda: km.Normal("x", dims="nope")),
        ModelError,
        r"^x: unknown dim 'nope'; the model's dims are \['obs'\]",
    ),
    (
        "dims-and-shape",
        _in_model(lambda: km.Normal("x", dims="obs", shape=3)),
        ModelError,
        r"^x: give dims or shape, not both",
    ),
    (
        "negative-shape",
        _in_model(lambda: km.Normal("x", shape=-1)),
        KilnValueError,
        r"^x: normal: size must be non-negative",
    ),
    (
        "param-vs-dims",
        _in_model(lambda: km.Normal("x", mu=np.zeros(4), dims="obs")),
        ShapeMismatchError,
        r"^x: normal: parameter 'mu' has batch shape \(4,\)",
    ),
    (
        "observed-vs-dims",
        _in_model(lambda: km.Normal("y", observed=np.zeros(4), dims="obs")),
        ModelError,
        r"^y: the observed data has shape \(4,\), the variable \(3,\)",
    ),
    (
        "data-vs-coords",
        _in_model(lambda: km.Data("d", np.zeros(4), dims="obs")),
        ModelError,
        r"^Data 'd': dim 'obs' has length 3 in the coords, but the data has 4",
    ),
    (
        "data-dims-count",
        _in_model(lambda: km.Data("d", np.zeros((3, 2)), dims="obs")),
        ModelError,
        r"^d: 1 dims \('obs',\) for a 2-d value",
    ),
    (
        "deterministic-dims",
        _in_model(lambda: km.Deterministic("d", km.Normal("x", dims="obs") * 2, dims=("obs", "k"))),
        ModelError,
        r"^d: 2 dims \('obs', 'k'\) for a 1-d value",
    ),
    (
        "duplicate-name",
        _in_model(lambda: (km.Normal("x"), km.Normal("x"))),
        ModelError,
        r"already has a variable named 'x'",
    ),
    (
        "coords-not-sequence",
        lambda: km.Model(coords={"obs": 3}),
        ModelError,
        r"^coords\['obs'\]: expected a sequence of labels, got 3",
    ),
    (
        "observed-expression",
        _in_model(lambda: km.Normal("y", observed=km.Normal("x") * 2)),
        KilnTypeError,
        r"^y: observed must be data",
    ),
    (
        "observed-strings",
        _in_model(lambda: km.Normal("y", observed=["a"])),
        KilnTypeError,
        r"^y: observed data must be numeric",
    ),
    (
        "observed-outside-support",
        _in_model(lambda: km.Poisson("k", 1.0, observed=[-1])),
        KilnValueError,
        r"^k: observed values must be non-negative integers for Poisson",
    ),
    (
        "unknown-parameter",
        _in_model(lambda: km.Normal("x", scale=1.0)),
        KilnTypeError,
        r"^x: Normal: unknown parameter 'scale'",
    ),
    (
        "bad-transform",
        _in_model(lambda: km.HalfNormal("s", transform="log")),
        KilnTypeError,
        r"^s: transform must be a kiln Transform or None, got 'log'",
    ),
]


@pytest.mark.parametrize(
    ("build", "error", "pattern"),
    [pytest.param(b, e, p, id=i) for i, b, e, p in CASES],
)
def test_bad_input_is_named(build: Callable[[], Any], error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        build()


def test_set_data_checks_before_setting_any() -> None:
    with km.Model(coords=COORDS) as m:
        x = km.Data("x", np.arange(3.0), dims="obs")
        km.Data("w", np.arange(2.0))
    with pytest.raises(ModelError):
        km.set_data({"w": np.zeros(5), "x": np.zeros(5)}, model=m)
    assert x.get_value().shape == (3,)
    assert m.data["w"].get_value().shape == (2,)


def test_valid_constant_parameters_still_build() -> None:
    with km.Model(coords=COORDS):
        km.Normal("a", 0, 1)
        km.Binomial("k", n=[3, 4], p=0.5, observed=[3, 4])
        km.Categorical("c", logit_p=[0.5, 0.5], observed=[0, 1])
        km.Multinomial("m", 3, [0.5, 0.5], observed=[[1, 2], [3, 0]])
        km.MvNormal("mv", np.zeros(2), chol=np.eye(2))
        km.Exponential("e", 2)
        km.Uniform("u", -np.inf, 1.0)


def test_set_data_free_dim_may_change_length() -> None:
    with km.Model() as m:
        _two_free_dim_data()
    km.set_data({"u": np.arange(5.0), "v": np.arange(5.0)}, model=m)
    assert m.data["u"].get_value().shape == (5,)


def test_check_initial_point_names_the_term() -> None:
    with km.Model() as m:
        x = km.Normal("x", 0, 1)
        km.Potential("never", -np.inf * (x * 0 + 1))
    with pytest.raises(ModelError, match=r"Potential 'never' has log-density -inf"):
        km.check_initial_point(m)
    with km.Model() as ok:
        km.Normal("x", 0, 1)
    km.check_initial_point(ok)  # finite: no error


def test_the_table_is_long_enough() -> None:
    assert len(CASES) >= 50
