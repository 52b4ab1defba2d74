"""The elementwise family against NumPy / SciPy, through one table.

Each row of ``CASES`` names a function of ``kiln_graph.tensor``, its NumPy / SciPy
reference and a domain per input. The tests check, for every row: values on random
inputs (float64, float32), the result dtype for the same input dtypes as NumPy
(integers and bool included), shape inference, broadcasting, and the gradient against
finite differences (on a domain where the function is smooth).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import scipy.special as sp

import kiln_graph.tensor as kt
from kiln_graph import Elemwise, KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_graph._math import Exp
from kiln_graph.testing import check_infer_shape, evaluate, verify_grad


@dataclass(frozen=True)
class Dom:
    """How to draw one input: uniform reals in ``[lo, hi]``, or a special ``kind``.

    Kinds: ``real``; ``signed`` (``+-[lo, hi]``, away from 0); ``grid`` (the integers in
    ``[lo, hi]``, so that ties and equalities happen); ``half`` (multiples of 0.5, to hit
    rounding ties); ``special`` (NaN and +-inf among finite values); ``int`` (integers,
    drawn as int64 whatever the float dtype); ``bool``.
    """

    lo: float = -2.0
    hi: float = 2.0
    kind: str = "real"

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        if self.kind == "bool":
            return rng.random(shape) < 0.5
        if np.dtype(dtype).kind in "biu" or self.kind == "int":
            lo, hi = max(int(np.ceil(self.lo)), -3), min(int(np.floor(self.hi)), 3)
            if self.kind == "signed":
                lo, hi = max(lo, 1), max(hi, 1)
            if lo > hi:
                lo, hi = 0, 1
            values = rng.integers(lo, hi + 1, shape)
            if self.kind == "signed":
                values = values * rng.choice([-1, 1], shape)
            with np.errstate(all="ignore"):
                return values.astype("int64" if self.kind == "int" else dtype)
        if self.kind == "signed":
            values = rng.uniform(self.lo, self.hi, shape) * rng.choice([-1.0, 1.0], shape)
        elif self.kind == "grid":
            values = rng.integers(int(self.lo), int(self.hi) + 1, shape).astype(float)
        elif self.kind == "half":
            values = rng.integers(int(2 * self.lo), int(2 * self.hi) + 1, shape) / 2
        elif self.kind == "special":
            values = rng.choice([np.nan, np.inf, -np.inf, 0.0, 1.5, -2.0], shape)
        else:
            values = rng.uniform(self.lo, self.hi, shape)
        return values.astype(dtype)


R = Dom()
POS = Dom(0.1, 5.0)
BOOL = Dom(kind="bool")
GRID = Dom(-2, 2, "grid")


def _frac(rng: np.random.Generator, n: int) -> np.ndarray:
    """Values ``k + u`` with integer ``k`` and ``u`` in [0.2, 0.8]: away from integers."""
    return rng.integers(-3, 3, n) + rng.uniform(0.2, 0.8, n)


def _apart(rng: np.random.Generator, n: int = 4) -> list[np.ndarray]:
    """Two arrays that differ everywhere by at least 0.2 (no ties for max / min)."""
    a = rng.uniform(-2, 2, n)
    return [a, a + rng.choice([-1.0, 1.0], n) * rng.uniform(0.2, 1.0, n)]


def _divmod_point(rng: np.random.Generator, n: int = 4) -> list[np.ndarray]:
    """``x / y`` away from integers, so ``//`` and ``%`` are smooth around the point."""
    y = rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)
    return [y * _frac(rng, n), y]


def _clip_point(rng: np.random.Generator) -> list[np.ndarray]:
    """``x`` below, inside and above ``[lo, hi]``, never within 0.2 of a bound."""
    lo = rng.uniform(-1.5, -0.5, 6)
    hi = rng.uniform(0.5, 1.5, 6)
    x = np.array([-2.5, -1.9, -0.2, 0.1, 1.9, 2.5])
    return [x, lo, hi]


_COND = np.array([True, False, True, False])


@dataclass(frozen=True)
class Case:
    """One elementwise function: kiln's, its reference, and how to test it."""

    name: str
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    doms: tuple[Dom, ...]
    #: False: not differentiable (bool or integer output).
    grad: bool = True
    #: The function checked by verify_grad (default: ``fn``) and its point (default:
    #: arrays of 4 float64 values drawn from ``doms``).
    grad_fn: Callable[..., Any] | None = None
    grad_point: Callable[[np.random.Generator], list[np.ndarray]] | None = None
    grad_kw: dict[str, float] = field(default_factory=dict)
    #: Integer / bool input dtypes not checked against NumPy (see the row's comment).
    skip_int: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return self.name


def _rint_half_even(x: np.ndarray) -> np.ndarray:
    return np.round(x)


CASES = [
    Case("add", kt.add, np.add, (R, R)),
    Case("sub", kt.sub, np.subtract, (R, R)),
    Case("mul", kt.mul, np.multiply, (R, R)),
    Case("true_divide", kt.true_divide, np.true_divide, (R, Dom(0.5, 2.0, "signed"))),
    Case(
        "floor_divide",
        kt.floor_divide,
        np.floor_divide,
        (Dom(-3, 3), Dom(0.5, 2.0, "signed")),
        grad_point=_divmod_point,
    ),
    Case("mod", kt.mod, np.mod, (Dom(-3, 3), Dom(0.5, 2.0, "signed")), grad_point=_divmod_point),
    Case("pow", kt.pow, np.power, (Dom(0.5, 2.0), Dom(0.0, 2.0))),
    Case("maximum", kt.maximum, np.maximum, (GRID, GRID), grad_point=_apart),
    Case("minimum", kt.minimum, np.minimum, (GRID, GRID), grad_point=_apart),
    Case("neg", kt.neg, np.negative, (R,)),
    Case("abs", kt.abs, np.abs, (Dom(0.2, 2.0, "signed"),)),
    Case("sign", kt.sign, np.sign, (Dom(0.2, 2.0, "signed"),)),
    Case("exp", kt.exp, np.exp, (R,)),
    Case("exp2", kt.exp2, np.exp2, (R,)),
    Case("expm1", kt.expm1, np.expm1, (R,)),
    Case("log", kt.log, np.log, (POS,)),
    Case("log2", kt.log2, np.log2, (POS,)),
    Case("log10", kt.log10, np.log10, (POS,)),
    Case("log1p", kt.log1p, np.log1p, (Dom(-0.5, 3.0),)),
    Case("sqrt", kt.sqrt, np.sqrt, (POS,)),
    Case("square", kt.square, np.square, (R,)),
    Case("reciprocal", kt.reciprocal, np.reciprocal, (Dom(0.5, 2.0, "signed"),)),
    Case("sigmoid", kt.sigmoid, sp.expit, (Dom(-4.0, 4.0),)),
    # np.logaddexp(0, x) promotes bool with the Python int 0 to int64 (float64 result);
    # kiln's softplus of bool follows the ufunc on the input alone (float16).
    Case(
        "softplus", kt.softplus, lambda x: np.logaddexp(0, x), (Dom(-4.0, 4.0),), skip_int=("bool",)
    ),
    Case("log1mexp", kt.log1mexp, lambda x: np.log(-np.expm1(x)), (Dom(-3.0, -0.05),)),
    Case("logaddexp", kt.logaddexp, np.logaddexp, (Dom(-4.0, 4.0), Dom(-4.0, 4.0))),
    Case("logit", kt.logit, sp.logit, (Dom(0.05, 0.95),)),
    Case("tanh", kt.tanh, np.tanh, (R,)),
    Case("sinh", kt.sinh, np.sinh, (R,)),
    Case("cosh", kt.cosh, np.cosh, (R,)),
    Case("arcsinh", kt.arcsinh, np.arcsinh, (Dom(-3.0, 3.0),)),
    Case("sin", kt.sin, np.sin, (Dom(-3.0, 3.0),)),
    Case("cos", kt.cos, np.cos, (Dom(-3.0, 3.0),)),
    Case("tan", kt.tan, np.tan, (Dom(-1.2, 1.2),)),
    Case("arctan", kt.arctan, np.arctan, (Dom(-3.0, 3.0),)),
    Case("erf", kt.erf, sp.erf, (R,)),
    Case("erfc", kt.erfc, sp.erfc, (R,)),
    Case("erfcx", kt.erfcx, sp.erfcx, (Dom(-1.0, 3.0),)),
    Case("erfinv", kt.erfinv, sp.erfinv, (Dom(-0.9, 0.9),)),
    Case("gammaln", kt.gammaln, sp.gammaln, (Dom(0.2, 5.0),)),
    Case("digamma", kt.digamma, sp.digamma, (Dom(0.2, 5.0),)),
    # scipy's polygamma always returns float64; kiln's keeps x's float dtype, like digamma.
    Case(
        "polygamma",
        kt.polygamma,
        lambda n, x: sp.polygamma(n, x).astype(sp.digamma(x).dtype),
        (Dom(0, 2, "int"), Dom(0.5, 4.0)),
        grad_fn=lambda x: kt.polygamma(np.array([0, 1, 2, 1]), x),
        grad_point=lambda rng: [rng.uniform(0.5, 4.0, 4)],
    ),
    Case("betaln", kt.betaln, sp.betaln, (Dom(0.2, 4.0), Dom(0.2, 4.0))),
    Case(
        "where",
        kt.where,
        np.where,
        (BOOL, R, R),
        grad_fn=lambda a, b: kt.where(_COND, a, b),
        grad_point=lambda rng: [rng.normal(size=4), rng.normal(size=4)],
    ),
    Case(
        "switch",
        kt.switch,
        np.where,
        (BOOL, R, R),
        grad_fn=lambda a, b: kt.switch(_COND, a, b),
        grad_point=lambda rng: [rng.normal(size=4), rng.normal(size=4)],
    ),
    Case(
        "clip",
        kt.clip,
        np.clip,
        (Dom(-3.0, 3.0), Dom(-1.5, -0.5), Dom(0.5, 1.5)),
        grad_point=_clip_point,
    ),
    Case("floor", kt.floor, np.floor, (Dom(-3.0, 3.0),), grad_point=lambda r: [_frac(r, 4)]),
    Case("ceil", kt.ceil, np.ceil, (Dom(-3.0, 3.0),), grad_point=lambda r: [_frac(r, 4)]),
    # np.round of bool gives float16 (through rint); kiln's round keeps the input dtype.
    Case(
        "round",
        kt.round,
        _rint_half_even,
        (Dom(-3, 3, "half"),),
        grad_point=lambda r: [_frac(r, 4)],
        skip_int=("bool",),
    ),
    Case("isnan", kt.isnan, np.isnan, (Dom(kind="special"),), grad=False),
    Case("isinf", kt.isinf, np.isinf, (Dom(kind="special"),), grad=False),
    Case("eq", kt.eq, np.equal, (GRID, GRID), grad=False),
    Case("neq", kt.neq, np.not_equal, (GRID, GRID), grad=False),
    Case("lt", kt.lt, np.less, (GRID, GRID), grad=False),
    Case("le", kt.le, np.less_equal, (GRID, GRID), grad=False),
    Case("gt", kt.gt, np.greater, (GRID, GRID), grad=False),
    Case("ge", kt.ge, np.greater_equal, (GRID, GRID), grad=False),
    Case("logical_and", kt.logical_and, np.logical_and, (BOOL, BOOL), grad=False),
    Case("logical_or", kt.logical_or, np.logical_or, (BOOL, BOOL), grad=False),
    Case("logical_not", kt.logical_not, np.logical_not, (BOOL,), grad=False),
    Case(
        "cast",
        lambda x: kt.cast(x, "int16"),
        lambda x: x.astype("int16"),
        (Dom(-100.0, 100.0),),
        grad=False,
    ),
    # cast to float32 is linear: a large eps is exact and hides float32 rounding.
    Case(
        "cast_float",
        lambda x: kt.cast(x, "float32"),
        lambda x: x.astype("float32"),
        (R,),
        grad_kw={"eps": 1e-2, "rtol": 1e-3, "atol": 1e-3},
    ),
]

CASE_IDS = [c.name for c in CASES]
INT_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64"]


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _inputs(case: Case, dtype: str, shape: tuple[int, ...], rng: np.random.Generator):
    values = [d.draw(rng, shape, dtype) for d in case.doms]
    symbols = [
        kt.tensor(f"x{i}", dtype=v.dtype, shape=(None,) * v.ndim) for i, v in enumerate(values)
    ]
    return symbols, values


def _reference(case: Case, values: list[np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(case.ref(*values))


def test_table_lists_every_elementwise_function():
    listed = {c.name for c in CASES}
    expected = set(
        "add sub mul true_divide floor_divide mod neg abs sign exp exp2 expm1 log log2 log10 "
        "log1p sqrt square pow reciprocal sigmoid softplus log1mexp logaddexp logit tanh sinh cosh "
        "arcsinh sin cos tan arctan erf erfc erfcx erfinv gammaln digamma polygamma betaln "
        "maximum minimum where switch clip floor ceil round isnan isinf eq neq lt le gt ge "
        "logical_and logical_or logical_not cast".split()
    )
    assert expected <= listed
    for name in expected - {"cast"}:
        assert callable(getattr(kt, name)), name


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_values_and_dtype(case: Case, dtype: str):
    symbols, values = _inputs(case, dtype, (2, 3), _rng(case.name, dtype))
    out = case.fn(*symbols)
    expected = _reference(case, values)
    assert out.dtype == expected.dtype.name
    assert out.ndim == expected.ndim
    actual = evaluate(out, dict(zip(symbols, values, strict=True)))
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
    else:
        rtol = 1e-12 if expected.dtype == np.float64 else 1e-5
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_integer_and_bool_inputs_follow_numpy(case: Case, dtype: str):
    if dtype in case.skip_int:
        pytest.skip(f"{case.name} of {dtype}: see the comment on its row")
    symbols, values = _inputs(case, dtype, (5,), _rng(case.name, dtype))
    try:
        expected = _reference(case, values)
    except TypeError:
        # NumPy has no loop for these dtypes (e.g. -bool): kiln refuses when building.
        with pytest.raises(KilnTypeError, match="dtype"):
            case.fn(*symbols)
        return
    out = case.fn(*symbols)
    assert out.dtype == expected.dtype.name, f"{case.name} of {dtype}"
    actual = evaluate(out, dict(zip(symbols, values, strict=True)))
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=5e-3 if out.dtype == "float16" else 1e-6)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_infer_shape(case: Case):
    symbols, values = _inputs(case, "float64", (2, 3), _rng(case.name, "shape"))
    check_infer_shape(case.fn(*symbols), dict(zip(symbols, values, strict=True)))


GRAD_CASES = [c for c in CASES if c.grad]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.name for c in GRAD_CASES])
def test_grad(case: Case):
    rng = _rng(case.name, "grad")
    if case.grad_point is not None:
        point = case.grad_point(rng)
    else:
        point = [d.draw(rng, (4,), "float64") for d in case.doms]
    verify_grad(case.grad_fn or case.fn, point, **case.grad_kw)


# Broadcasting: each pattern gives the value shapes of up to three inputs. Dimensions of
# length 1 are declared with static length 1 (kiln broadcasts only those), others None.
BROADCAST_PATTERNS = [
    ((3,), (2, 3), ()),  # vector with matrix, scalar
    ((2, 1), (1, 3), (2, 3)),  # static-1 dims on both sides: an outer operation
    ((), (2, 3), (1, 3)),  # scalar first
    ((2, 3), (), (2, 1)),
]
MULTI_CASES = [c for c in CASES if len(c.doms) > 1]


def _declared(shape: tuple[int, ...]) -> tuple[int | None, ...]:
    return tuple(1 if n == 1 else None for n in shape)


@pytest.mark.parametrize("pattern", BROADCAST_PATTERNS, ids=str)
@pytest.mark.parametrize("case", MULTI_CASES, ids=[c.name for c in MULTI_CASES])
def test_broadcasting(case: Case, pattern: tuple[tuple[int, ...], ...]):
    rng = _rng(case.name, pattern)
    shapes = pattern[: len(case.doms)]
    values = [d.draw(rng, s, "float64") for d, s in zip(case.doms, shapes, strict=True)]
    symbols = [
        kt.tensor(f"x{i}", dtype=v.dtype, shape=_declared(v.shape)) for i, v in enumerate(values)
    ]
    givens = dict(zip(symbols, values, strict=True))
    out = case.fn(*symbols)
    expected = _reference(case, values)
    assert out.type.shape == _declared(expected.shape)
    np.testing.assert_allclose(evaluate(out, givens), expected, rtol=1e-12)
    check_infer_shape(out, givens)


@pytest.mark.parametrize(
    ("shapes", "static"),
    [
        (((3,), (2, 3)), (2, 3)),
        (((1, 3), (2, 1)), (2, 3)),
        (((), (2, 3)), (2, 3)),
        (((1, 1), (4, 1)), (4, 1)),
    ],
)
def test_broadcast_static_shapes_and_gradients(shapes, static):
    """Fully static shapes: the output's static shape, and gradients summed back."""
    rng = _rng("static", shapes)
    values = [rng.normal(size=s) for s in shapes]
    xs = [kt.tensor(f"x{i}", shape=s) for i, s in enumerate(shapes)]
    assert kt.mul(*xs).type.shape == static
    np.testing.assert_allclose(
        evaluate(kt.mul(*xs), dict(zip(xs, values, strict=True))), np.multiply(*values)
    )
    verify_grad(lambda a, b: a * b + kt.exp(a) - b, values)


def test_python_scalar_broadcasts_with_any_shape():
    x = kt.matrix("x")
    value = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(evaluate(x * 2.0 + 1, {x: value}), value * 2.0 + 1)
    np.testing.assert_allclose(evaluate(kt.maximum(0, x - 2), {x: value}), np.maximum(0, value - 2))


# --- NEP 50: Python scalars adopt the dtype of the tensor they meet --------------------

SCALAR_DTYPES = ["bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64"]
SCALAR_FUNCS = {
    "add": (kt.add, np.add),
    "sub": (kt.sub, np.subtract),
    "mul": (kt.mul, np.multiply),
    "true_divide": (kt.true_divide, np.true_divide),
    "pow": (kt.pow, np.power),
    "maximum": (kt.maximum, np.maximum),
    "lt": (kt.lt, np.less),
}


@pytest.mark.parametrize("scalar", [True, 2, 1.5], ids=repr)
@pytest.mark.parametrize("dtype", SCALAR_DTYPES)
@pytest.mark.parametrize("name", list(SCALAR_FUNCS))
def test_python_scalars_are_weakly_typed(name: str, dtype: str, scalar: Any):
    fn, ref = SCALAR_FUNCS[name]
    x = kt.vector("x", dtype=dtype)
    value = np.array([1, 2, 0], dtype=dtype)
    for args, ref_args in [((x, scalar), (value, scalar)), ((scalar, x), (scalar, value))]:
        try:
            with np.errstate(all="ignore"):
                expected = np.asarray(ref(*ref_args))
        except TypeError:
            with pytest.raises(KilnTypeError):
                fn(*args)
            continue
        out = fn(*args)
        assert out.dtype == expected.dtype.name, (args, expected.dtype)
        np.testing.assert_allclose(evaluate(out, {x: value}), expected)


def test_nep50_examples():
    x32 = kt.vector("x", dtype="float32")
    i32 = kt.vector("i", dtype="int32")
    assert (x32 * 2.0).dtype == "float32"
    assert (x32 * 0.1).dtype == "float32"
    assert (i32 + 1.5).dtype == "float64"
    assert (i32 + 1).dtype == "int32"
    assert (i32 / 2).dtype == "float64"
    assert kt.where(i32 > 0, x32, 0.0).dtype == "float32"
    # A NumPy scalar is not weak: it keeps its dtype, as in NumPy.
    assert (x32 * np.float64(2.0)).dtype == "float64"


# --- Python operators --------------------------------------------------------------------


def test_operators_build_the_same_nodes_as_the_functions():
    x, y = kt.vector("x"), kt.vector("y")
    assert x + y is kt.add(x, y)
    assert 2 - x is kt.sub(2, x)
    assert x * y is kt.mul(x, y)
    assert x / 2 is kt.true_divide(x, 2)
    assert x // y is kt.floor_divide(x, y)
    assert x % y is kt.mod(x, y)
    assert x**2 is kt.pow(x, 2)
    assert 2**x is kt.pow(2, x)
    assert -x is kt.neg(x)
    assert abs(x) is kt.abs(x)
    assert +x is x
    assert (x < y) is kt.lt(x, y)
    assert (x >= 1) is kt.ge(x, 1)


def test_operator_values():
    x, y = kt.vector("x"), kt.vector("y")
    xv, yv = np.array([-1.5, 0.5, 2.0, 3.0]), np.array([0.7, -2.0, 2.0, 1.5])
    exprs = {
        "x + y": (x + y, xv + yv),
        "1 + x": (1 + x, 1 + xv),
        "x - y": (x - y, xv - yv),
        "1 - x": (1 - x, 1 - xv),
        "x * y": (x * y, xv * yv),
        "3 * x": (3 * x, 3 * xv),
        "x / y": (x / y, xv / yv),
        "1 / y": (1 / y, 1 / yv),
        "x // y": (x // y, xv // yv),
        "7 // y": (7 // y, 7 // yv),
        "x % y": (x % y, xv % yv),
        "7 % y": (7 % y, 7 % yv),
        "abs(x) ** y": (abs(x) ** y, np.abs(xv) ** yv),
        "2 ** x": (2**x, 2**xv),
        "-x": (-x, -xv),
        "abs(x)": (abs(x), np.abs(xv)),
        "x < y": (x < y, xv < yv),
        "x <= y": (x <= y, xv <= yv),
        "x > y": (x > y, xv > yv),
        "x >= y": (x >= y, xv >= yv),
        "1 < x": (1 < x, 1 < xv),
        "(x > 0) & (y > 0)": ((x > 0) & (y > 0), (xv > 0) & (yv > 0)),
        "(x > 0) | (y > 0)": ((x > 0) | (y > 0), (xv > 0) | (yv > 0)),
        "~(x > 0)": (~(x > 0), ~(xv > 0)),
        "True & (x > 0)": (True & (x > 0), True & (xv > 0)),
        "False | (x > 0)": (False | (x > 0), False | (xv > 0)),
    }
    for text, (expr, expected) in exprs.items():
        actual = evaluate(expr, {x: xv, y: yv})
        assert actual.dtype == expected.dtype, text
        np.testing.assert_allclose(actual, expected, err_msg=text)


def test_logical_operators_need_bool_operands():
    x = kt.vector("x")
    i = kt.vector("i", dtype="int32")
    with pytest.raises(KilnTypeError, match="logical, not bitwise"):
        _ = ~x
    with pytest.raises(KilnTypeError, match="bool operands"):
        _ = i & (x > 0)
    with pytest.raises(KilnTypeError, match="bool operands"):
        _ = (x > 0) | 1


def test_equality_is_identity_not_elementwise():
    x, y = kt.vector("x"), kt.vector("y")
    assert (x == x) is True
    assert (x == y) is False
    assert (x != y) is True
    assert len({x, y, x}) == 2


def test_methods_and_attributes():
    m = kt.matrix("m")
    mv = np.arange(6.0).reshape(2, 3) - 2.5
    checks = {
        "m.T": (m.T, mv.T),
        "m.sum()": (m.sum(), mv.sum()),
        "m.sum(axis=0)": (m.sum(axis=0), mv.sum(axis=0)),
        "m.sum(axis=1, keepdims=True)": (m.sum(axis=1, keepdims=True), mv.sum(1, keepdims=True)),
        "m.prod(axis=1)": (m.prod(axis=1), mv.prod(axis=1)),
        "m.max()": (m.max(), mv.max()),
        "m.min(axis=0)": (m.min(axis=0), mv.min(axis=0)),
        "m.astype('int32')": (m.astype("int32"), mv.astype("int32")),
        "m.reshape(3, 2)": (m.reshape(3, 2), mv.reshape(3, 2)),
        "m.reshape((6,))": (m.reshape((6,)), mv.reshape(6)),
        "m.flatten()": (m.flatten(), mv.flatten()),
        "m.dimshuffle(1, 'x', 0)": (m.dimshuffle(1, "x", 0), mv.T[:, None, :]),
        "m.shape": (m.shape, np.array(mv.shape)),
    }
    if hasattr(kt, "mean"):
        checks["m.mean(axis=1)"] = (m.mean(axis=1), mv.mean(axis=1))
    for text, (expr, expected) in checks.items():
        actual = evaluate(expr, {m: mv})
        assert actual.dtype == expected.dtype, text
        np.testing.assert_allclose(actual, expected, err_msg=text)
    assert m.ndim == 2 and m.dtype == "float64"
    assert m.T.type.shape == (None, None)


def test_len_needs_a_static_length():
    assert len(kt.vector("v", shape=(4,))) == 4
    with pytest.raises(KilnTypeError, match="static length"):
        len(kt.vector("v"))
    with pytest.raises(KilnTypeError, match="0-d"):
        len(kt.scalar("s"))


# --- bad input ---------------------------------------------------------------------------


def test_incompatible_static_shapes_fail_at_build():
    a, b = kt.vector("a", shape=(3,)), kt.vector("b", shape=(4,))
    with pytest.raises(ShapeMismatchError, match=r"\(3,\).*\(4,\)"):
        a + b
    with pytest.raises(ShapeMismatchError):
        kt.where(kt.vector("c", dtype="bool", shape=(3,)), a, b)
    with pytest.raises(ShapeMismatchError):
        kt.matrix("m", shape=(2, 4)) * a


def test_runtime_length_mismatch_is_a_clear_error():
    a, b = kt.vector("a"), kt.vector("b")
    with pytest.raises(ShapeMismatchError, match=r"input 1 \(b\) has length 4.*input 0 \(a\)"):
        evaluate(a + b, {a: np.ones(3), b: np.ones(4)})


def test_unknown_dims_do_not_broadcast_at_run_time():
    # A length-1 value for a dimension declared None would broadcast in NumPy; kiln
    # refuses (the graph's gradient would be wrong) and says how to declare it.
    a, b = kt.vector("a"), kt.vector("b")
    with pytest.raises(ShapeMismatchError, match="static length is 1"):
        evaluate(a * b, {a: np.ones(1), b: np.ones(4)})
    a1 = kt.vector("a1", shape=(1,))
    np.testing.assert_allclose(evaluate(a1 * b, {a1: np.full(1, 2.0), b: np.ones(4)}), 2.0)


def test_errors_in_the_function_are_not_reported_as_broadcasting():
    i = kt.vector("i", dtype="int64")
    with pytest.raises(ValueError, match="negative integer powers"):
        evaluate(i**-1, {i: np.array([2, 3])})


def test_wrong_number_of_inputs():
    x = kt.vector("x")
    with pytest.raises(KilnValueError, match="expected 1 input"):
        kt.exp(x, x)
    with pytest.raises(KilnValueError, match="expected 2 input"):
        kt.sub(x)
    with pytest.raises(KilnValueError, match="expected 2 input"):
        kt.lt(x, x, x)
    with pytest.raises(KilnValueError, match="at least one input"):
        kt.add()
    with pytest.raises(KilnValueError, match="expected 1 input"):
        Elemwise(Exp())()


def test_no_loop_for_the_dtype_fails_at_build():
    b = kt.vector("b", dtype="bool")
    with pytest.raises(KilnTypeError, match="negative.*bool"):
        kt.neg(b)
    with pytest.raises(KilnTypeError, match="subtract.*bool"):
        b - b


def test_values_that_are_not_tensors():
    x = kt.vector("x")
    with pytest.raises(KilnTypeError, match="not supported"):
        kt.exp("a")
    with pytest.raises(KilnTypeError, match="stack"):
        kt.add([x, 1.0], 1.0)


def test_variadic_add_and_mul():
    x, y, z = kt.scalar("x"), kt.scalar("y"), kt.scalar("z")
    givens = {x: 2.0, y: 3.0, z: 5.0}
    assert evaluate(kt.add(x, y, z), givens) == 10.0
    assert evaluate(kt.mul(x, y, z), givens) == 30.0
    verify_grad(lambda a, b, c: kt.mul(a, b, c) + kt.add(a, b, c), [2.0, 3.0, 5.0])
