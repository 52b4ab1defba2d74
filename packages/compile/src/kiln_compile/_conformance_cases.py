"""The conformance table: one case per Op (and per form of it) of kiln_graph, as data.

Each row builds a small graph with random inputs; :func:`conformance_cases` expands the
rows for each float dtype (``float64`` and ``float32``) into
:class:`~kiln_compile._conformance.ConformanceCase` objects, grouped by family and
dtype so that a backend compiles one function per group. Families: ``elemwise`` (every
scalar op of ``kiln_graph._math``, casts, an explicit Composite), ``dimshuffle``,
``reduce``, ``shape``, ``join``, ``ranges``, ``subtensor`` (basic, advanced, inc and
set), ``linalg``, ``blockwise``, ``opfromgraph``, ``nnet`` (softmax), ``fusion``
(graphs compiled with all rewrites, so that the backend runs fused Composites,
FusedReduce and in-place ops) and ``random`` (every random variable of kiln_random,
batched, from a seeded generator: a backend must draw the VM's stream; compiled with
all rewrites too, so that draws run in place and with their core-shape forms).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kiln_compile._conformance import CaseGraph, ConformanceCase
from kiln_graph import Blockwise, Composite, Elemwise, OpFromGraph, Variable
from kiln_graph import scalar as m
from kiln_graph import tensor as kt
from kiln_graph.ops import Cholesky, MakeVector, MatMul, Reshape, SlogDet, Split, Tri
from kiln_random import OPS as RANDOM_OPS
from kiln_random import rng as random_generator

FAMILIES = (
    "elemwise",
    "dimshuffle",
    "reduce",
    "shape",
    "join",
    "ranges",
    "subtensor",
    "linalg",
    "blockwise",
    "opfromgraph",
    "nnet",
    "fusion",
    "random",
)
FLOAT_DTYPES = ("float64", "float32")

Rng = np.random.Generator
#: A row's builder: ``build(rng, dtype) -> CaseGraph``.
Builder = Callable[[Rng, str], CaseGraph]


def _uniform(rng: Rng, shape: Sequence[int], dtype: str, low: float, high: float) -> np.ndarray:
    return np.asarray(rng.uniform(low, high, size=shape)).astype(dtype)


def _case(inputs: Sequence[Variable], outputs: Any, values: list[Any]) -> CaseGraph:
    outs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
    return CaseGraph(list(inputs), outs, values)


# --- elementwise ------------------------------------------------------------------------

#: A domain: (low, high) for uniform values, or a kind: "grid" (small integers, so that
#: comparisons meet equal values), "bit" (0 or 1), "order" (0..3, polygamma's n),
#: "special" (some NaN and inf), "bool" (a boolean input).
Domain = tuple[float, float] | str

#: Shapes (static, then run-time) of the inputs of an elementwise case, by arity: a
#: matrix, a row broadcast along the first dimension, a column, and a 0-d scalar.
_STATIC: dict[int, list[tuple[int | None, ...]]] = {
    1: [(None, None)],
    2: [(None, None), (1, None)],
    3: [(None, None), (None, 1), ()],
}
_SHAPES: dict[int, list[tuple[int, ...]]] = {
    1: [(3, 4)],
    2: [(3, 4), (1, 4)],
    3: [(3, 4), (3, 1), ()],
}

_ANY = (-2.0, 2.0)
_POS = (0.2, 4.0)
_DIVISOR = (0.5, 2.0)

#: One row per scalar op: its domains (one per input; Add and Mul take three).
ELEMWISE: dict[type, tuple[Domain, ...]] = {
    m.Add: (_ANY, _ANY, _ANY),
    m.Sub: (_ANY, _ANY),
    m.Mul: (_ANY, _ANY, _ANY),
    m.TrueDivide: (_ANY, _DIVISOR),
    m.FloorDivide: ((-5.0, 5.0), _DIVISOR),
    m.Mod: ((-5.0, 5.0), _DIVISOR),
    m.Pow: ((0.5, 2.0), _ANY),
    m.Maximum: (_ANY, _ANY),
    m.Minimum: (_ANY, _ANY),
    m.EQ: ("grid", "grid"),
    m.NEQ: ("grid", "grid"),
    m.LT: ("grid", "grid"),
    m.LE: ("grid", "grid"),
    m.GT: ("grid", "grid"),
    m.GE: ("grid", "grid"),
    m.AND: ("bit", "bit"),
    m.OR: ("bit", "bit"),
    m.NOT: ("bit",),
    m.IsNan: ("special",),
    m.IsInf: ("special",),
    m.Neg: (_ANY,),
    m.Abs: (_ANY,),
    m.Sign: (_ANY,),
    m.Exp: ((-3.0, 3.0),),
    m.Exp2: ((-3.0, 3.0),),
    m.Expm1: ((-3.0, 3.0),),
    m.Log: (_POS,),
    m.Log2: (_POS,),
    m.Log10: (_POS,),
    m.Log1p: ((-0.9, 4.0),),
    m.Sqrt: (_POS,),
    m.Square: (_ANY,),
    m.Reciprocal: (_DIVISOR,),
    m.Sigmoid: ((-10.0, 10.0),),
    m.Softplus: ((-10.0, 10.0),),
    m.Logaddexp: ((-5.0, 5.0), (-5.0, 5.0)),
    m.Log1mexp: ((-5.0, -0.01),),
    m.Logit: ((0.01, 0.99),),
    m.Tanh: ((-3.0, 3.0),),
    m.Sinh: ((-3.0, 3.0),),
    m.Cosh: ((-3.0, 3.0),),
    m.Arcsinh: ((-3.0, 3.0),),
    m.Sin: ((-3.0, 3.0),),
    m.Cos: ((-3.0, 3.0),),
    m.Tan: ((-1.2, 1.2),),
    m.Arctan: ((-3.0, 3.0),),
    m.Erf: ((-3.0, 3.0),),
    m.Erfc: ((-3.0, 3.0),),
    m.Erfcx: ((-3.0, 10.0),),
    m.Erfinv: ((-0.99, 0.99),),
    m.Gammaln: ((0.1, 10.0),),
    m.Digamma: ((0.1, 10.0),),
    m.Polygamma: ("order", (0.5, 10.0)),
    m.Betaln: ((0.1, 5.0), (0.1, 5.0)),
    m.Gammainc: ((0.2, 20.0), (0.05, 20.0)),
    m.Gammaincc: ((0.2, 20.0), (0.05, 20.0)),
    m.GammaincDa: ((0.2, 20.0), (0.05, 20.0)),
    m.GammainccDa: ((0.2, 20.0), (0.05, 20.0)),
    m.Betainc: ((0.2, 10.0), (0.2, 10.0), (0.02, 0.98)),
    m.BetaincDa: ((0.2, 10.0), (0.2, 10.0), (0.02, 0.98)),
    m.BetaincDb: ((0.2, 10.0), (0.2, 10.0), (0.02, 0.98)),
    m.I0e: ((-12.0, 12.0),),
    m.I1e: ((-12.0, 12.0),),
    m.I0: ((-5.0, 5.0),),
    m.I1: ((-5.0, 5.0),),
    m.Floor: ((-5.0, 5.0),),
    m.Ceil: ((-5.0, 5.0),),
    m.Round: ((-5.0, 5.0),),
    m.Switch: ("bool", _ANY, _ANY),
    m.Clip: ((-3.0, 3.0), (-1.0, 0.0), (0.0, 1.0)),
}


def _values(rng: Rng, domain: Domain, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if domain == "grid":
        return rng.integers(-2, 3, size=shape).astype(dtype)
    if domain == "bit":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if domain == "order":
        return rng.integers(0, 4, size=shape).astype(dtype)
    if domain == "bool":
        return rng.random(size=shape) < 0.5
    if domain == "special":
        v = _uniform(rng, shape, dtype, -2.0, 2.0).reshape(-1)
        v[::3] = np.nan
        v[1::4] = np.inf
        v[2::5] = -np.inf
        return v.reshape(shape)
    assert not isinstance(domain, str), domain
    low, high = domain
    return _uniform(rng, shape, dtype, low, high)


def _elemwise_row(op_class: type, domains: tuple[Domain, ...]) -> Builder:
    def build(rng: Rng, dtype: str) -> CaseGraph:
        n = len(domains)
        inputs, values = [], []
        for i, (domain, static, shape) in enumerate(
            zip(domains, _STATIC[n], _SHAPES[n], strict=True)
        ):
            dt = "bool" if domain == "bool" else dtype
            inputs.append(kt.tensor(f"x{i}", dtype=dt, shape=static))
            values.append(_values(rng, domain, shape, dt))
        return _case(inputs, Elemwise(op_class())(*inputs), values)

    return build


def _cast_row(target: str) -> Builder:
    def build(rng: Rng, dtype: str) -> CaseGraph:
        x = kt.matrix("x", dtype=dtype)
        other = {"float": "float32" if dtype == "float64" else "float64"}.get(target, target)
        return _case([x], kt.cast(x, other), [_uniform(rng, (3, 4), dtype, -5.0, 5.0)])

    return build


def _composite(rng: Rng, dtype: str) -> CaseGraph:
    a, b, c = (kt.scalar(n, dtype=dtype) for n in "abc")
    op = Composite.from_graph([a, b, c], [kt.exp(a) * b + kt.sin(c) / 2])
    x, y = kt.matrix("x", dtype=dtype), kt.tensor("y", dtype=dtype, shape=(1, None))
    z = kt.scalar("z", dtype=dtype)
    vals = [_uniform(rng, s, dtype, -1.0, 1.0) for s in ((3, 4), (1, 4), ())]
    return _case([x, y, z], Elemwise(op)(x, y, z), vals)


def _elemwise_rows() -> dict[str, Builder]:
    rows = {cls.__name__.lower(): _elemwise_row(cls, doms) for cls, doms in ELEMWISE.items()}
    rows.update(
        {
            "cast_int32": _cast_row("int32"),
            "cast_bool": _cast_row("bool"),
            "cast_float": _cast_row("float"),
            "composite": _composite,
        }
    )
    return rows


# --- other families ---------------------------------------------------------------------


def _unary(
    shape: tuple[int, ...],
    fn: Callable[[Any], Any],
    low: float = -2.0,
    high: float = 2.0,
    static: tuple[int | None, ...] | None = None,
) -> Builder:
    """Return a row applying ``fn`` to one input of ``shape`` (static shape unknown)."""

    def build(rng: Rng, dtype: str) -> CaseGraph:
        x = kt.tensor("x", dtype=dtype, shape=static or (None,) * len(shape))
        return _case([x], fn(x), [_uniform(rng, shape, dtype, low, high)])

    return build


def _with_index(
    shape: tuple[int, ...], index: np.ndarray, fn: Callable[[Any, Any], Any]
) -> Builder:
    """Return a row applying ``fn(x, idx)``, ``idx`` an int64 input holding ``index``."""

    def build(rng: Rng, dtype: str) -> CaseGraph:
        x = kt.tensor("x", dtype=dtype, shape=(None,) * len(shape))
        idx = kt.tensor("idx", dtype="int64", shape=(None,) * np.ndim(index))
        return _case([x, idx], fn(x, idx), [_uniform(rng, shape, dtype, -2, 2), index])

    return build


def _with_value(
    shape: tuple[int, ...], y_shape: tuple[int, ...], fn: Callable[[Any, Any], Any]
) -> Builder:
    """Return a row applying ``fn(x, y)`` to two float inputs."""

    def build(rng: Rng, dtype: str) -> CaseGraph:
        x = kt.tensor("x", dtype=dtype, shape=(None,) * len(shape))
        y = kt.tensor("y", dtype=dtype, shape=(None,) * len(y_shape))
        vals = [_uniform(rng, shape, dtype, -2, 2), _uniform(rng, y_shape, dtype, -2, 2)]
        return _case([x, y], fn(x, y), vals)

    return build


DIMSHUFFLE: dict[str, Builder] = {
    "transpose": _unary((2, 3, 4), lambda x: x.dimshuffle(2, 0, 1)),
    "expand": _unary((3, 4), lambda x: x.dimshuffle("x", 1, "x", 0)),
    "drop": _unary(
        (1, 3, 1), lambda x: [x.dimshuffle(1), x.dimshuffle(2, 1, 0)], static=(1, None, 1)
    ),
    "scalar_to_matrix": _unary((), lambda x: x.dimshuffle("x", "x") * kt.ones((2, 3), x.dtype)),
}


def _reduce_rows() -> dict[str, Builder]:
    rows: dict[str, Builder] = {}
    for kind in ("sum", "prod", "max", "min"):
        fn: Callable[..., Any] = getattr(kt, kind)
        rows[f"{kind}_all"] = _unary((3, 4), fn, 0.5, 1.5)
        rows[f"{kind}_axis0"] = _unary((3, 4), functools.partial(fn, axis=0), 0.5, 1.5)
        rows[f"{kind}_axes02_keepdims"] = _unary(
            (2, 3, 4), functools.partial(fn, axis=(0, 2), keepdims=True), 0.5, 1.5
        )
    rows["all_any"] = _unary((3, 4), lambda x: [kt.all(x > 0, axis=1), kt.any(x > 1, axis=0)])
    rows["argmax"] = _unary((3, 4), lambda x: [kt.argmax(x), kt.argmax(x, axis=1)])
    rows["cumsum"] = _unary((3, 4), lambda x: [kt.cumsum(x, axis=1), kt.cumsum(x)])
    rows["mean_var_std"] = _unary(
        (3, 4), lambda x: [kt.mean(x, axis=0), kt.var(x, axis=1), kt.std(x, ddof=1)]
    )
    rows["logsumexp"] = _unary((3, 4), lambda x: [kt.logsumexp(x, axis=1), kt.logsumexp(x)])
    return rows


SHAPE: dict[str, Builder] = {
    "shape": _unary((3, 4), lambda x: [kt.cast(kt.shape(x), x.dtype) * 1.0, kt.shape_i(x, 1)]),
    "reshape": _unary((3, 4), lambda x: [kt.reshape(x, (2, -1)), kt.reshape(x, (4, 3, 1))]),
    "reshape_symbolic": _unary(
        (3, 4),
        lambda x: [
            kt.reshape(x, kt.stack([kt.shape_i(x, 1), kt.shape_i(x, 0)])),
            kt.reshape(x, (kt.shape_i(x, 0) * 2, -1)),
        ],
    ),
    "make_vector": _unary((3,), lambda x: MakeVector(x.dtype)(x[0], x[1] * 2, x[2], x[0] - 1)),
    "flatten": _unary((2, 3, 4), kt.flatten),
    "alloc": _unary((3,), lambda x: [kt.alloc(x, 2, kt.shape_i(x, 0)), kt.alloc(x[0], 2, 3)]),
    "full_zeros_ones": _unary(
        (3,),
        lambda x: [
            kt.full((2, 3), 1.5, dtype=x.dtype),
            kt.zeros_like(x) + x,
            kt.ones((kt.shape_i(x, 0),), dtype=x.dtype) * x,
        ],
    ),
    "broadcast_to": _unary((1, 3), lambda x: kt.broadcast_to(x, (4, 3)), static=(1, None)),
    "squeeze_expand": _unary(
        (1, 3, 1), lambda x: [kt.squeeze(x), kt.expand_dims(x, (0, 3))], static=(1, None, 1)
    ),
    "transpose": _unary((2, 3, 4), lambda x: [kt.transpose(x), kt.transpose(x, (1, 0, 2))]),
}


def _split(rng: Rng, dtype: str) -> CaseGraph:
    x = kt.matrix("x", dtype=dtype)
    n = kt.scalar("n", dtype="int64")
    rest = kt.shape_i(x, 1) - n
    pieces = Split(1, 2).make_node(x, n, rest).outputs
    return _case(
        [x, n],
        [kt.as_tensor(p) * 2 for p in pieces],
        [_uniform(rng, (3, 5), dtype, -2, 2), np.int64(2)],
    )


JOIN: dict[str, Builder] = {
    "concatenate": _with_value((2, 3), (4, 3), lambda x, y: [kt.concatenate([x, y, x])]),
    "concatenate_axis1": _with_value((3, 2), (3, 1), lambda x, y: kt.concatenate([x, y], axis=1)),
    "stack": _with_value((3,), (3,), lambda x, y: [kt.stack([x, y]), kt.stack([x, y], axis=1)]),
    "split": _split,
}


def _ranges(rng: Rng, dtype: str) -> CaseGraph:
    n = kt.scalar("n", dtype="int64")
    x = kt.vector("x", dtype=dtype)
    outs = [
        kt.arange(n),
        kt.arange(1, n, 2, dtype=dtype),
        kt.arange(kt.cast(n, dtype) * 0.5, dtype=dtype) + x[0],
        kt.eye(n, dtype=dtype),
        kt.eye(n, n + 1, k=1, dtype=dtype),
        kt.eye(3, k=-1, dtype="int32"),
    ]
    return _case([n, x], outs, [np.int64(5), _uniform(rng, (2,), dtype, -1, 1)])


RANGES: dict[str, Builder] = {"arange_eye": _ranges}


def _subtensor_rows() -> dict[str, Builder]:
    idx = np.array([2, 0, 2, 1])
    return {
        "basic": _unary((4, 5), lambda x: [x[1:, ::2], x[-1], x[None, 1:3, 2], x[::-1, 1:-1]]),
        "scalar_index": _with_index(
            (4, 5), np.asarray(2, dtype=np.int64), lambda x, i: [x[i], x[:, i], x[i:, i - 1]]
        ),
        "advanced1": _with_index((4, 3), idx, lambda x, i: [x[i], x[i, 1:]]),
        "advanced": _with_index(
            (4, 3, 2), idx, lambda x, i: [x[i, i % 3], x[:, i % 3], x[i, :, 1]]
        ),
        "set_inc_basic": _with_value(
            (4, 5),
            (2, 5),
            lambda x, y: [kt.set_subtensor(x[1:3], y), kt.inc_subtensor(x[::2], y * 2)],
        ),
        "set_inc_scalar": _unary(
            (4, 5), lambda x: [kt.set_subtensor(x[1, 2], 7.0), kt.inc_subtensor(x[:, 0], x[:, 1])]
        ),
        "set_inc_advanced1": _with_index(
            (4, 3),
            idx,
            lambda x, i: [
                kt.inc_subtensor(x[i], x[i] * 0.5 + 1),
                kt.set_subtensor(x[i], -2 * x[i]),
            ],
        ),
        "set_inc_advanced": _with_index(
            (4, 3),
            idx,
            lambda x, i: [
                kt.inc_subtensor(x[i, i % 3], 2.0),
                kt.set_subtensor(x[i, i % 3], x[0, 0]),
            ],
        ),
    }


def _spd(rng: Rng, n: int, dtype: str, batch: tuple[int, ...] = ()) -> np.ndarray:
    a = rng.normal(size=(*batch, n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def _linalg(name: str) -> Builder:
    def build(rng: Rng, dtype: str) -> CaseGraph:
        a = kt.matrix("a", dtype=dtype)
        b = kt.matrix("b", dtype=dtype)
        v = kt.vector("v", dtype=dtype)
        spd, mat, vec = (
            _spd(rng, 4, dtype),
            _uniform(rng, (4, 3), dtype, -1, 1),
            _uniform(rng, (4,), dtype, -1, 1),
        )
        if name == "products":
            outs = [kt.dot(a, b), kt.dot(v, a), kt.matmul(a, b), kt.outer(v, v), kt.dot(v, v)]
            return _case([a, b, v], outs, [spd, mat, vec])
        if name == "cholesky_tri":
            return _case(
                [a],
                [kt.cholesky(a), kt.cholesky(a, lower=False), Tri(True, -1)(a), Tri(False, 1)(a)],
                [spd],
            )
        if name == "solve":
            outs = [
                kt.solve(a, b),
                kt.solve(a, v, assume_a="sym"),
                kt.solve(a, b, assume_a="pos", lower=True),
            ]
            return _case([a, b, v], outs, [spd, mat, vec])
        if name == "solve_triangular":
            lo = kt.cholesky(a)
            outs = [
                kt.solve_triangular(lo, b, lower=True),
                kt.solve_triangular(lo, v, lower=True, trans=1),
                kt.solve_triangular(lo.T, b, lower=False, unit_diagonal=True),
            ]
            return _case([a, b, v], outs, [spd, mat, vec])
        if name == "eigh":
            return _case([a], list(kt.eigh(a)), [spd])
        # inv_det
        sign, logabs = kt.slogdet(a)
        return _case([a], [kt.inv(a), kt.det(a), sign, logabs], [spd])

    return build


LINALG: dict[str, Builder] = {
    k: _linalg(k)
    for k in ("products", "cholesky_tri", "solve", "solve_triangular", "inv_det", "eigh")
}


def _blockwise_rows() -> dict[str, Builder]:
    def batched(rng: Rng, dtype: str) -> CaseGraph:
        a = kt.tensor("a", dtype=dtype, shape=(None, None, None))
        b = kt.tensor("b", dtype=dtype, shape=(None, None, None))
        outs = [
            Blockwise(MatMul())(a, b),
            Blockwise(Cholesky())(a),
            Blockwise(SlogDet())(a)[1],
            kt.solve(a, b),
            kt.eigh(a)[1],
        ]
        return _case(
            [a, b], outs, [_spd(rng, 3, dtype, (2,)), _uniform(rng, (2, 3, 2), dtype, -1, 1)]
        )

    def vectorized(rng: Rng, dtype: str) -> CaseGraph:
        x = kt.matrix("x", dtype=dtype)
        w = kt.vector("w", dtype=dtype)
        f = kt.vectorize(lambda r, s: kt.sum(kt.exp(r) * s), "(n),(n)->()")
        g = kt.vectorize(lambda r: kt.cumsum(r * r), "(n)->(n)")
        # a reshape's target shape: a constant broadcast along the batch, not mapped
        h = Blockwise(Reshape(2), "(n),(k)->(a,b)")(x, kt.constant(np.array([[2, -1]])))
        return _case(
            [x, w],
            [f(x, w), g(x), h],
            [_uniform(rng, (3, 4), dtype, -1, 1), _uniform(rng, (4,), dtype, -1, 1)],
        )

    return {"batched_linalg": batched, "vectorize": vectorized}


def _opfromgraph(rng: Rng, dtype: str) -> CaseGraph:
    p, q = kt.vector("p", dtype=dtype), kt.vector("q", dtype=dtype)
    op = OpFromGraph([p, q], [kt.exp(p) * q, kt.sum(p - q)])
    x, y = kt.vector("x", dtype=dtype), kt.vector("y", dtype=dtype)
    first, second = op(x, y)
    nested = OpFromGraph([p, q], [op(p, q)[0] + 1])
    vals = [_uniform(rng, (4,), dtype, -1, 1), _uniform(rng, (4,), dtype, -1, 1)]
    return _case([x, y], [first, second, nested(y, x)], vals)


NNET: dict[str, Builder] = {
    "softmax": _unary(
        (3, 4), lambda x: [kt.softmax(x), kt.softmax(x, axis=0), kt.softmax(x, axis=None)], -5, 5
    ),
    "log_softmax": _unary(
        (3, 4), lambda x: [kt.log_softmax(x), kt.log_softmax(x, axis=(0, 1))], -5, 5
    ),
}

FUSION: dict[str, Builder] = {
    "chain": _with_value(
        (3, 4), (3, 4), lambda x, y: kt.exp(x) * y + kt.sin(x) / 2 - kt.sqrt(y * y + 1)
    ),
    "fused_reduce": _with_value(
        (3, 4),
        (3, 4),
        lambda x, y: [kt.sum(kt.exp(x) * y, axis=1), kt.max(x + y), kt.prod(x * 0.5 + 1)],
    ),
    "stabilized": _unary(
        (3, 4),
        lambda x: [
            kt.log(1 + kt.exp(x)),
            kt.log(kt.sigmoid(x)),
            kt.log1p(-kt.exp(-kt.abs(x) - 0.1)),
        ],
        -30,
        30,
    ),
    "inplace": _with_value(
        (3, 4),
        (4,),
        lambda x, y: [
            kt.exp(kt.dot(x, y)) + 1,
            (kt.sum(x, axis=0) * y + 1) * 2,
            kt.tanh(x.T * 2) - 1,
        ],
    ),
}


# --- random variables --------------------------------------------------------------------

#: Valid parameters of each random variable (a batch of 3 of them is drawn, size (2, 3)).
RANDOM_PARAMS: dict[str, list[Any]] = {
    "normal": [0.5, 2.0],
    "halfnormal": [2.0],
    "lognormal": [0.1, 0.5],
    "uniform": [-1.0, 2.0],
    "exponential": [1.5],
    "gamma": [2.0, 1.5],
    "beta": [2.0, 3.0],
    "invgamma": [3.0, 2.0],
    "studentt": [5.0, 0.0, 1.0],
    "halfstudentt": [5.0, 1.0],
    "cauchy": [0.0, 1.0],
    "halfcauchy": [1.0],
    "laplace": [0.0, 1.0],
    "logistic": [0.0, 1.0],
    "weibull": [1.5, 1.0],
    "truncated_normal": [0.0, 1.0, -1.0, 2.0],
    "vonmises": [0.5, 2.0],
    "bernoulli": [0.3],
    "binomial": [10, 0.3],
    "poisson": [3.0],
    "negative_binomial": [3.0, 0.4],
    "geometric": [0.3],
    "categorical": [[0.2, 0.5, 0.3]],
    "hypergeometric": [20, 7, 12],
    "dirichlet": [[1.0, 2.0, 3.0]],
    "multinomial": [10, [0.2, 0.5, 0.3]],
    "multivariate_normal": [[0.0, 1.0], [[2.0, 0.5], [0.5, 1.0]]],
}


def _random_row(name: str) -> Builder:
    op = RANDOM_OPS[name]
    dtypes = op.param_dtypes or ("float64",) * len(op.params)

    def build(rng: Rng, dtype: str) -> CaseGraph:
        inputs, values = [], []
        for value, param_dtype in zip(RANDOM_PARAMS[name], dtypes, strict=True):
            arr = np.asarray(value, dtype=dtype if param_dtype == "float64" else param_dtype)
            inputs.append(kt.tensor(dtype=arr.dtype, shape=(None,) * (arr.ndim + 1)))
            values.append(np.ascontiguousarray(np.broadcast_to(arr, (3, *arr.shape))))
        seed = int(rng.integers(2**31))
        draw = op.make_node(random_generator(seed), (2, 3), *inputs).outputs[1]
        return _case(inputs, draw, values)

    return build


def _family_rows(family: str) -> dict[str, Builder]:
    tables: dict[str, Callable[[], dict[str, Builder]]] = {
        "elemwise": _elemwise_rows,
        "dimshuffle": lambda: DIMSHUFFLE,
        "reduce": _reduce_rows,
        "shape": lambda: SHAPE,
        "join": lambda: JOIN,
        "ranges": lambda: RANGES,
        "subtensor": _subtensor_rows,
        "linalg": lambda: LINALG,
        "blockwise": _blockwise_rows,
        "opfromgraph": lambda: {"nested": _opfromgraph},
        "nnet": lambda: NNET,
        "fusion": lambda: FUSION,
        "random": lambda: {name: _random_row(name) for name in RANDOM_OPS},
    }
    return tables[family]()


def _bind(build: Builder, dtype: str) -> Callable[[Rng], CaseGraph]:
    return lambda rng: build(rng, dtype)


#: Rows left out by ``conformance_cases(core=True)``: further forms of an op that another
#: row already covers (other axes of a reduction, more outputs of the same op).
EXTENDED = {
    ("reduce", f"{kind}_{form}")
    for kind, form in [
        ("sum", "all"),
        ("sum", "axis0"),
        ("prod", "axis0"),
        ("prod", "axes02_keepdims"),
        ("max", "all"),
        ("max", "axes02_keepdims"),
        ("min", "all"),
        ("min", "axes02_keepdims"),
    ]
}


def conformance_cases(
    families: Sequence[str] | None = None,
    dtypes: Sequence[str] = FLOAT_DTYPES,
    core: bool = False,
) -> list[ConformanceCase]:
    """Return the conformance cases of ``families`` (default: all) for each of ``dtypes``.

    A case is named ``"<family>/<row>[<dtype>]"`` and grouped by ``"<family>[<dtype>]"``
    (one compiled function per group). ``core=True`` leaves out the rows of
    :data:`EXTENDED` (every Op stays covered), for backends that compile slowly.

    Examples
    --------
    >>> cases = conformance_cases(["elemwise"], dtypes=["float64"])  # doctest: +SKIP
    >>> run_conformance("numba", cases).check()  # doctest: +SKIP
    """
    chosen = list(FAMILIES if families is None else families)
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        raise ValueError(f"conformance_cases: unknown families {unknown}; valid: {FAMILIES}")
    cases = []
    for family in chosen:
        rows = _family_rows(family)
        for dtype in dtypes:
            for row, build in rows.items():
                if core and (family, row) in EXTENDED:
                    continue
                cases.append(
                    ConformanceCase(
                        name=f"{family}/{row}[{dtype}]",
                        build=_bind(build, dtype),
                        group=f"{family}[{dtype}]",
                        rewrite=family in ("fusion", "random"),
                        grad=_has_gradient(family, row),
                    )
                )
    return cases


#: Rows whose outputs have no gradient (integer results, ops without one).
_NO_GRADIENT = {
    ("ranges", "arange_eye"),
    ("reduce", "argmax"),
    ("reduce", "all_any"),
    ("elemwise", "composite"),  # Composites come after autodiff: no gradient
    # The parameter derivatives of gammainc / betainc have no gradient in a parameter.
    ("elemwise", "gammaincda"),
    ("elemwise", "gammainccda"),
    ("elemwise", "betaincda"),
    ("elemwise", "betaincdb"),
}


def _has_gradient(family: str, row: str) -> bool:
    if (family, row) in _NO_GRADIENT or family == "random":
        return False
    return not (family == "elemwise" and row in _BOOL_OUTPUT)


_BOOL_OUTPUT = {
    c.__name__.lower()
    for c in (m.EQ, m.NEQ, m.LT, m.LE, m.GT, m.GE, m.AND, m.OR, m.NOT, m.IsNan, m.IsInf)
} | {"cast_int32", "cast_bool"}
