"""Random draws in C (NumPy's libnpyrandom): the VM's stream to the bit for a seed."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kiln as kl
import kiln_compile as kc
import kiln_random as kr
from kiln_c import THROUGH_PERFORM, FallbackWarning, _linker
from kiln_c.random import DRAWS, VECTOR_DRAWS, npyrandom_archive
from kiln_graph import KilnValueError, RandomGeneratorType, Variable
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")
VM = kc.Mode(linker="vm")

#: Valid values of each parameter name: (low, high) of a uniform, or ints when both are.
RANGES: dict[str, tuple[float, float]] = {
    "mu": (-3.0, 3.0),
    "sigma": (0.2, 3.0),
    "lower": (-2.0, 0.0),
    "upper": (1.0, 3.0),
    "scale": (0.2, 4.0),
    "shape": (0.2, 6.0),  # both of Marsaglia and Tsang's branches (< 1 and >= 1)
    "alpha": (0.3, 5.0),
    "beta": (0.3, 5.0),
    "nu": (0.5, 12.0),
    "b": (0.2, 3.0),
    "s": (0.2, 3.0),
    "p": (0.02, 0.98),  # geometric's search (p >= 1/3) and inversion; binomial's p > 1/2
    "kappa": (0.05, 60.0),
}
#: Parameters of other ranges per class (binomial's n: inversion and BTPE; Poisson's mu:
#: both of its algorithms; the negative binomial's n: positive).
OVERRIDES: dict[str, dict[str, tuple[float, float]]] = {
    "BinomialRV": {"n": (0, 400)},
    "PoissonRV": {"mu": (0.5, 40.0)},
    "NegativeBinomialRV": {"n": (0.3, 20.0)},
    "HyperGeometricRV": {"N": (40, 60), "k": (0, 40), "n": (0, 40)},  # k, n <= N
}


def _params(op_class: type, shapes: list[tuple[int, ...]], seed: int) -> list[np.ndarray]:
    values = np.random.default_rng(1000 + seed)
    out = []
    dtypes = op_class.param_dtypes or ("float64",) * len(op_class.params)
    for name, shape, dtype in zip(op_class.params, shapes, dtypes, strict=True):
        low, high = OVERRIDES.get(op_class.__name__, {}).get(name) or RANGES[name]
        if dtype == "int64":
            out.append(values.integers(int(low), int(high), size=shape))
        else:
            out.append(values.uniform(low, high, size=shape))
    return out


def _compile(
    build: Callable[[Variable], list[Variable]], mode: kc.Mode, seed: int, **kwargs: Any
) -> tuple[kc.Function, Any]:
    rng = kr.rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # every draw in C
        return kc.function([], build(rng), mode=mode, **kwargs), rng


def _state(rng: Any) -> dict:
    return rng.get_value(borrow=True).bit_generator.state  # type: ignore[no-any-return]


def _same(a: list[Any], b: list[Any]) -> None:
    for x, y in zip(a, b, strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        assert np.asarray(x).shape == np.asarray(y).shape
        np.testing.assert_array_equal(x, y, strict=True)


def _same_calls(build: Callable[[Variable], list[Variable]], seed: int, calls: int = 2) -> None:
    f_c, rng_c = _compile(build, C, seed)
    f_vm, rng_vm = _compile(build, VM, seed)
    for _ in range(calls):
        _same(f_c(), f_vm())
        assert _state(rng_c) == _state(rng_vm)


def test_the_moved_ops_are_exactly_those_not_listed() -> None:
    """Every random variable is drawn in C or listed as running through ``perform``."""
    names = {c.__name__ for c in [*DRAWS, *VECTOR_DRAWS]}
    assert npyrandom_archive() is not None
    assert not names & THROUGH_PERFORM
    listed = {n for n in THROUGH_PERFORM if n.endswith("RV")}
    assert names | listed == {type(op).__name__ for op in kr.OPS.values()}


OPS = sorted(DRAWS, key=lambda c: c.__name__)


@pytest.mark.parametrize("op_class", OPS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed", [0, 5, 2024])
def test_draws_are_the_vms_to_the_bit(op_class: type, seed: int) -> None:
    """Scalar parameters with and without a size, and batched, broadcast parameters."""
    n = len(op_class.params)
    scalar = _params(op_class, [()] * n, seed)
    # parameters broadcasting against each other: (3, 1), (1, 4), (3, 4)...
    shapes = [[(3, 1), (1, 4), (3, 4)][i % 3] for i in range(n)]
    if n == 1:
        shapes = [(3, 4)]
    batched = _params(op_class, shapes, seed)
    row = _params(op_class, [(4,)] * n, seed)

    def build(rng: Variable) -> list[Variable]:
        op = op_class()
        return [
            op(rng, None, *scalar),
            op(rng, (2, 5), *scalar),
            op(rng, None, *batched),
            op(rng, (2, 3, 4), *row),  # a size beyond the parameters' batch shape
        ]

    _same_calls(build, seed)


def test_every_branch_of_the_rejection_samplers_draws_the_vms_stream() -> None:
    """Draw each rejection sampler's branches as the VM does.

    Truncated normal: normal, uniform and exponential proposals, mirrored intervals;
    von Mises: small, moderate and large concentrations, and the normal limit.
    """
    lower = np.array([-1.0, -0.5, 0.5, 3.0, -np.inf, -2.0, -np.inf])
    upper = np.array([2.0, 0.5, 1.0, np.inf, -3.0, -1.5, np.inf])
    kappa = np.array([0.01, 0.7, 5.0, 300.0, 2e6])

    def build(rng: Variable) -> list[Variable]:
        return [
            kr.TruncatedNormalRV()(rng, (50, 7), 0.3, 1.7, lower * 1.7 + 0.3, upper * 1.7 + 0.3),
            kr.VonMisesRV()(rng, (40, 5), np.linspace(-3, 3, 5), kappa),
            kr.HyperGeometricRV()(rng, (30, 3), [10, 500, 7], [3, 250, 7], [10, 100, 0]),
        ]

    _same_calls(build, 11, calls=3)


@pytest.mark.parametrize("seed", [0, 7])
def test_draws_from_probability_vectors_are_the_vms_to_the_bit(seed: int) -> None:
    """Categorical and Multinomial: one vector, broadcast batches, sizes, unnormalized p."""
    values = np.random.default_rng(seed)
    p = values.uniform(0, 2, size=3)
    batched = values.uniform(0, 1, size=(4, 3))
    batched[1, 0] = 0.0  # a category that cannot be drawn
    counts = values.integers(0, 60, size=(4, 1))

    def build(rng: Variable) -> list[Variable]:
        categorical, multinomial = kr.CategoricalRV(), kr.MultinomialRV()
        return [
            categorical(rng, None, p),
            categorical(rng, (5, 2), p),
            categorical(rng, None, batched),
            categorical(rng, (3, 4), batched),
            multinomial(rng, None, 10, p),
            multinomial(rng, None, counts, batched),  # n (4, 1) against p (4, 3)
            multinomial(rng, (2, 4), 2000, batched),  # large n: BTPE binomials
        ]

    _same_calls(build, seed, calls=3)


@pytest.mark.parametrize(
    ("op_class", "params", "message"),
    [
        (kr.CategoricalRV, [np.array([0.5, -0.1, 0.6])], "p must be >= 0"),
        (kr.CategoricalRV, [np.zeros(3)], "p must have a positive sum"),
        (kr.MultinomialRV, [5, np.array([0.5, np.nan])], "p must be >= 0"),
        (kr.MultinomialRV, [5, np.zeros(2)], "p must have a positive sum"),
    ],
)
def test_bad_probability_vectors_raise_as_on_the_vm(op_class, params, message) -> None:
    for mode in (C, VM):
        with pytest.raises(ValueError, match=message):
            kc.function([], [op_class()(kr.rng(1), None, *params)], mode=mode)()


def test_parameters_given_at_call_time_are_checked_as_on_the_vm() -> None:
    """Runtime shapes and values: the same draws, and the VM's errors for bad ones."""
    mu, sigma = kt.matrix("mu"), kt.matrix("sigma", shape=(1, None))
    functions = []
    for mode in (C, VM):
        rng = kr.rng(11)
        functions.append(kc.function([mu, sigma], kr.normal(mu, sigma, rng=rng), mode=mode))
    f_c, f_vm = functions
    good = (np.arange(6.0).reshape(2, 3), np.array([[0.5, 1.0, 2.0]]))
    _same([f_c(*good)], [f_vm(*good)])
    for f in (f_c, f_vm):
        with pytest.raises(KilnValueError, match="sigma must be > 0"):
            f(good[0], np.array([[0.5, -1.0, 2.0]]))
        with pytest.raises(ValueError, match="does not match the draw's batch shape"):
            f(good[0], np.ones((1, 4)))
    _same([f_c(*good)], [f_vm(*good)])  # a failed call drew nothing from the generator


def test_numpys_own_checks_are_made() -> None:
    """Poisson's largest mean and the negative binomial's bound raise ValueError as NumPy."""
    for mode in (C, VM):
        rng = kr.rng(0)
        lam = kt.vector("lam")
        f = kc.function([lam], kr.poisson(lam, rng=rng), mode=mode)
        with pytest.raises(ValueError, match="lam value too large"):
            f(np.array([1.0, 1e19]))
        n, p = kt.scalar("n"), kt.scalar("p")
        g = kc.function([n, p], kr.negative_binomial(n, p, rng=rng), mode=mode)
        with pytest.raises(ValueError, match="n too large or p too small"):
            g(np.array(1e10), np.array(1e-12))
    lower = kt.scalar("lower")
    f = kc.function([lower], kr.uniform(lower, 1.0, rng=kr.rng(0)), mode=C)
    with pytest.raises(KilnValueError, match="Range exceeds valid bounds"):
        f(np.array(-np.inf))


def test_an_explicit_generator_is_copied_and_returned_advanced() -> None:
    """A generator passed in is left as it is; the advanced one comes out, as on the VM."""
    g = Variable(RandomGeneratorType(), name="g")
    node = kr.NormalRV()(g, (3,), 0.0, 1.0).owner
    results = []
    for mode in (C, VM):
        given = np.random.default_rng(7)
        before = given.bit_generator.state
        next_rng, draw = kc.function([g], list(node.outputs), mode=mode)(given)
        assert given.bit_generator.state == before
        assert next_rng is not given
        results.append((draw, next_rng.bit_generator.state, next_rng.normal()))
    np.testing.assert_array_equal(results[0][0], results[1][0], strict=True)
    assert results[0][1:] == results[1][1:]


def test_chained_draws_and_no_default_updates() -> None:
    """Draws chained from one another's generator; a function that leaves its generator."""

    def build(rng: Variable) -> list[Variable]:
        first = kr.gamma(2.0, 1.5, size=(5,), rng=rng)
        node = first.owner
        second = kr.PoissonRV()(node.outputs[0], None, first)
        return [first, second]

    _same_calls(build, seed=3, calls=3)
    f, rng = _compile(build, C, 4, no_default_updates=True)
    before = _state(rng)
    _same(f(), f())
    assert _state(rng) == before


def test_a_warm_process_draws_the_same(cache_dir: Path) -> None:
    """The library found through the graph's key (no source written) draws the VM's stream."""

    def build(rng: Variable) -> list[Variable]:
        return [kr.binomial(30, 0.4, size=(6,), rng=rng), kr.normal(0.0, 2.0, rng=rng)]

    rng = kr.rng(9)
    outputs = build(rng)
    start = rng.get_value()
    f = kc.function([], outputs, mode=C)
    first = f()
    assert f.thunk.stage2["fallbacks"] == []
    _linker._loaded.clear()  # as a new process: the library from the disk cache
    kc.clear_function_memo()
    rng.set_value(start)
    g = kc.function([], outputs, mode=C)
    assert g.thunk.stage2["cache"] == "hit"
    _same(g(), first)
    rng.set_value(start)
    _same(kc.function([], outputs, mode=VM)(), first)


def test_the_library_names_numpys_version() -> None:
    """NumPy's libnpyrandom is linked into the library: its version is part of the key."""
    f, _ = _compile(lambda rng: [kr.normal(0.0, 1.0, rng=rng)], C, 0)
    assert f"libnpyrandom of NumPy {np.__version__}" in f.thunk.generated.source


def test_prior_predictive_is_the_vms() -> None:
    """A small model's prior predictive on backend='c' equals the VM's, draw for draw."""
    with kl.Model() as model:
        mu = kl.Normal("mu", 0.0, 2.0)
        sigma = kl.HalfNormal("sigma", 1.0)
        rate = kl.Gamma("rate", alpha=2.0, beta=1.0)
        kl.Normal("y", mu, sigma, observed=np.array([0.3, -1.0, 2.0]))
        kl.Poisson("k", rate, observed=np.array([1, 0, 4]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        c = kl.sample_prior_predictive(50, random_seed=17, model=model, backend="c")
    vm = kl.sample_prior_predictive(50, random_seed=17, model=model, backend="vm")
    for group in ("prior", "prior_predictive"):
        for name in c[group].data_vars:
            np.testing.assert_array_equal(
                c[group][name].values, vm[group][name].values, strict=True
            )
