"""Indexing on Numba against the VM (and NumPy): views, gathers, scatters, errors.

Numba compiles slowly, so each test builds ONE function with many outputs (one per
index form) and compares it with the VM in one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from numba import njit

import kiln
import kiln.tensor as kt
from kiln_compile.testing import compare_with_vm
from kiln_graph import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    IncSubtensor,
    KilnIndexError,
    KilnValueError,
    ShapeMismatchError,
    Subtensor,
    toposort,
)
from kiln_numba._subtensor_kernels import slice_span, writable

#: The ops on their own: no rewrite changes them.
RAW = kiln.Mode(rewrites=None, linker="numba")
FAST = kiln.FAST_RUN.with_linker("numba")
VM = kiln.Mode(rewrites=None, linker="vm")


class S:
    """A symbolic int64 scalar index whose value is ``value``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"S({self.value})"


class V:
    """A symbolic integer-array index (no static shape) whose value is ``value``."""

    def __init__(self, value: Any, dtype: str = "int64") -> None:
        self.value = np.asarray(value, dtype=dtype)

    def __repr__(self) -> str:
        return f"V({self.value.tolist()})"


def build(index: Any) -> tuple[Any, Any, dict[Any, Any]]:
    """Return the index with S / V replaced by inputs, its NumPy value, and their values."""
    givens: dict[Any, Any] = {}

    def sym(v: Any) -> Any:
        if isinstance(v, S):
            var = kt.scalar(f"s{len(givens)}", dtype="int64")
            givens[var] = np.int64(v.value)
            return var
        if isinstance(v, V):
            var = kt.tensor(f"v{len(givens)}", dtype=v.value.dtype, shape=(None,) * v.value.ndim)
            givens[var] = v.value
            return var
        if isinstance(v, slice):
            return slice(sym(v.start), sym(v.stop), sym(v.step))
        return v

    def num(v: Any) -> Any:
        if isinstance(v, S | V):
            return v.value
        if isinstance(v, slice):
            return slice(num(v.start), num(v.stop), num(v.step))
        return v

    if isinstance(index, tuple):
        return tuple(sym(v) for v in index), tuple(num(v) for v in index), givens
    return sym(index), num(index), givens


MASK_2D = np.array([[1, 0, 1, 0, 0], [0, 0, 0, 0, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], bool)

# The index forms of kiln_graph's tests (packages/graph/tests/test_subtensor.py).
BASIC = [
    ((5,), 2),
    ((5,), -1),
    ((5,), slice(1, 4)),
    ((5,), slice(None, None, -1)),
    ((5,), slice(4, 0, -2)),
    ((5,), slice(-3, None)),
    ((5,), slice(None, -1, 2)),
    ((5,), slice(10, 20)),
    ((5,), slice(-10, 2)),
    ((5,), S(2)),
    ((5,), S(-1)),
    ((5,), slice(S(1), S(4))),
    ((5,), slice(S(4), None, S(-1))),
    ((5,), slice(None, None, S(2))),
    ((5,), slice(S(-2), None)),
    ((5,), slice(S(-7), S(9), S(3))),
    ((5,), slice(S(9), S(-9), S(-2))),
    ((5,), slice(None, None, S(-3))),
    ((3, 4, 5), 0),
    ((3, 4, 5), (-1, slice(1, 3))),
    ((3, 4, 5), (Ellipsis, 1)),
    ((3, 4, 5), (None, 1, Ellipsis, None)),
    ((3, 4, 5), (slice(None), None, 2)),
    ((3, 4, 5), (1, 2, 3)),
    ((3, 4, 5), (S(1), slice(None), S(-2))),
    ((3, 4, 5), (S(-3), S(3), S(-5))),
    ((3, 4, 5), Ellipsis),
    ((3, 4, 5), ()),
    ((3, 4, 5), (slice(None), slice(None, None, -2), slice(1, None))),
    ((3, 4), (None, slice(None))),
    ((3, 4), (slice(None), None)),
    ((3, 4), (slice(None, None, -1), 2)),
    ((), ()),
    ((), None),
    ((), Ellipsis),
]

ADVANCED = [
    ((6,), [0, 2, 2, 5]),
    ((6,), np.array([-1, 0])),
    ((6,), V([1, 3, 3])),
    ((6,), [[0, 1], [2, 3]]),
    ((6,), []),
    ((6,), np.array([1, 2], dtype=np.int32)),
    ((6,), V([4, -6], dtype="int32")),
    ((6,), V([5, 0, 5], dtype="uint8")),
    ((4, 5), [0, 3, 1]),
    ((4, 5), V([-1, -4, 2, 2])),
    ((4, 5), (slice(None), [4, 0])),
    ((4, 5), ([0, 1], [2, 3])),
    ((4, 5), ([[0], [1]], [1, 2, 3])),
    ((4, 5), (V([1, 2]), slice(1, 3))),
    ((4, 5), (1, [0, 2])),
    ((4, 5), (S(1), V([0, 2]))),
    ((4, 5), (V([[0, 1]]), V([2]))),
    ((4, 5), (V([[3], [1]]), V([2, 0, 4]))),
    ((3, 4, 5), [2, 0]),
    ((3, 4, 5), ([0, 2], slice(None), [1, 1])),
    ((3, 4, 5), (slice(None), [0, 1], [1, 2])),
    ((3, 4, 5), (0, slice(None), [1, 2])),
    ((3, 4, 5), (slice(None), 0, [1, 2])),
    ((3, 4, 5), ([0, 1], None, [0, 1])),
    ((3, 4, 5), (Ellipsis, [0, 4])),
    ((3, 4, 5), (None, [1, 2], slice(1, None, 2))),
    ((3, 4, 5), (V([2, 0]), slice(S(1), None), V([[4], [0]]))),
    ((3, 4, 5), (slice(S(-1), None, S(-2)), V([3, 0]), slice(None, None, -1))),
    ((3, 4, 5), np.array([True, False, True])),
    ((3, 4, 5), (slice(None), MASK_2D)),
]

CASES = BASIC + ADVANCED


def has_mask(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(v, np.ndarray) and v.dtype == bool for v in items)


def random_x(shape: tuple[int, ...], seed: int = 0, dtype: str = "float64") -> np.ndarray:
    values = np.random.default_rng(seed).normal(size=shape) * 10
    return np.asarray(values).astype(dtype)


def compare(
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    values: Sequence[Any],
    mode: kiln.Mode = RAW,
) -> list[Any]:
    """Compare ``mode`` with the VM; check that no input array was written into."""
    before = [np.array(v, copy=True) for v in values]
    got = compare_with_vm(inputs, outputs, values, backend=mode)
    for v, b in zip(values, before, strict=True):
        np.testing.assert_array_equal(v, b)
    return got


class Batch:
    """Many index forms in one graph: each case has its own ``x`` input."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []
        self.values: list[Any] = []
        self.outputs: list[Any] = []
        self.expected: list[Any] = []

    def case(self, shape: tuple[int, ...], static: bool, seed: int) -> tuple[Any, np.ndarray]:
        x = kt.tensor(f"x{len(self.inputs)}", shape=shape if static else (None,) * len(shape))
        xv = random_x(shape, seed)
        self.inputs.append(x)
        self.values.append(xv)
        return x, xv

    def index(self, index: Any) -> tuple[Any, Any]:
        sym, num, givens = build(index)
        self.inputs.extend(givens)
        self.values.extend(givens.values())
        return sym, num

    def run(self, mode: kiln.Mode = RAW) -> list[Any]:
        got = compare(self.inputs, self.outputs, self.values, mode)
        for k, (g, e) in enumerate(zip(got, self.expected, strict=True)):
            assert g.shape == e.shape, k
            np.testing.assert_array_equal(g, e, err_msg=f"output {k}")
        return got


def test_getitem_every_form() -> None:
    batch = Batch()
    kinds = set()
    for k, (shape, index) in enumerate(CASES):
        # The generated code reads every length at run time; static shapes for half the
        # cases (and the masks, which need them) cover the graphs built from them.
        x, xv = batch.case(shape, k % 2 == 0 or has_mask(index), k)
        sym, num = batch.index(index)
        out = x[sym]
        if out.owner is not None:
            kinds.add(type(out.owner.op))
        batch.outputs.append(out)
        batch.expected.append(np.asarray(xv[num]))
    assert {Subtensor, AdvancedSubtensor1, AdvancedSubtensor} <= kinds
    batch.run()


def test_dtypes() -> None:
    batch = Batch()
    forms = [(1, slice(None, None, -2)), V([3, 0, 3]), (V([1, 2]), V([0, 4]))]
    for k, dtype in enumerate(["float32", "int8", "bool", "complex128"]):
        x = kt.tensor(f"x{k}", dtype=dtype, shape=(None, None))
        xv = random_x((4, 5), k, dtype)
        batch.inputs.append(x)
        batch.values.append(xv)
        for index in forms[k % 3], forms[(k + 1) % 3]:
            sym, num = batch.index(index)
            batch.outputs.append(x[sym])
            batch.expected.append(np.asarray(xv[num]))
            mode = "set" if dtype == "bool" else "inc"
            y = kt.tensor(f"y{k}", dtype=dtype, shape=(1,) * np.ndim(xv[num]))
            yv = random_x(y.type.shape, k + 10, dtype)
            batch.inputs.append(y)
            batch.values.append(yv)
            batch.outputs.append(update(mode, x[sym], y))
            batch.expected.append(numpy_update(xv, num, yv, mode))
    for out, e in zip(batch.outputs, batch.expected, strict=True):
        assert out.dtype == e.dtype
    batch.run()


def update(mode: str, region: Any, y: Any) -> Any:
    return kt.set_subtensor(region, y) if mode == "set" else kt.inc_subtensor(region, y)


def numpy_update(xv: np.ndarray, index: Any, yv: Any, mode: str) -> np.ndarray:
    out = xv.copy()
    if mode == "set":
        out[index] = yv
    else:
        np.add.at(out, index, np.broadcast_to(yv, xv[index].shape))
    return out


def test_set_inc_forms() -> None:
    batch = Batch()
    kinds = set()
    # Every other form (the update ops share the loop writer of the gathers, tested on
    # every form), rotating set / inc and the ways y broadcasts: full, a scalar, a
    # static length 1, a missing leading dimension. This bounds the compile time.
    for k, (shape, index) in list(enumerate(CASES))[::2]:
        x, xv = batch.case(shape, k % 3 != 0 or has_mask(index), k)
        sym, num = batch.index(index)
        region = xv[num].shape
        mode = "set" if k % 4 else "inc"
        y_shapes = [region, ()]
        if region and region[0] != 1:
            y_shapes.append((1, *region[1:]))
        if len(region) > 1:
            y_shapes.append(region[1:])
        y_shape = y_shapes[(k // 4) % len(y_shapes)]
        if mode == "inc" and len(shape) == 1 and 0 < len(y_shape) < len(region):
            # NumPy 2.5's np.add.at (the VM's reference) adds garbage for a vector x, a
            # 2-d index and a y missing a leading dimension.
            y_shape = region
        y = kt.tensor(f"y{k}", shape=y_shape)
        yv = random_x(y_shape, seed=100 + k)
        batch.inputs.append(y)
        batch.values.append(yv)
        out = update(mode, x[sym], y)
        kinds.add((type(out.owner.op), mode))
        batch.outputs.append(out)
        batch.expected.append(numpy_update(xv, num, yv, mode))
    ops = (IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor)
    assert {(op, mode) for op in ops for mode in ("set", "inc")} <= kinds
    batch.run()


def test_repeated_indices_accumulate_or_last_write_wins() -> None:
    x = kt.vector("x")
    m = kt.matrix("m")
    idx = kt.vector("idx", dtype="int64")
    y = kt.vector("y")
    outs = [
        kt.inc_subtensor(x[idx], 1.0),
        kt.inc_subtensor(x[idx], y),
        kt.set_subtensor(x[idx], y),
        kt.inc_subtensor(m[[0, 0, 1], [1, 1, 1]], kt.constant([1.0, 2.0, 4.0])),
        kt.inc_subtensor(m[idx], kt.constant([1.0, 10.0, 100.0])),
        kt.inc_subtensor(m[:, idx], kt.constant(1.0)),
    ]
    idx_v = np.array([0, 2, 2, 2, -1])
    y_v = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    got = compare([x, m, idx, y], outs, [np.zeros(4), np.zeros((4, 3)), idx_v, y_v])
    np.testing.assert_array_equal(got[0], [1.0, 0.0, 3.0, 1.0])
    np.testing.assert_array_equal(got[1], [1.0, 0.0, 9.0, 5.0])
    np.testing.assert_array_equal(got[2], [1.0, 0.0, 4.0, 5.0])
    np.testing.assert_array_equal(got[3][:2], [[0, 3, 0], [0, 4, 0]])
    np.testing.assert_array_equal(got[4][:, 1], [10.0, 0.0, 30.0, 10.0])
    np.testing.assert_array_equal(got[5][0], [1.0, 0.0, 4.0])


def test_subtensor_is_a_view() -> None:
    x = kt.matrix("x")
    i = kt.scalar("i", dtype="int64")
    outs = [x[1], x[i, ::-1], x[:, None, 1:3], x[1, 1]]
    f = kiln.function([x, i], outs, mode=RAW)
    xv = random_x((3, 4))
    got = f.thunk.jit_fn(xv, np.asarray(np.int64(-1)), *f.thunk.constants)
    assert [np.shares_memory(g, xv) for g in got] == [True, True, True, False]
    np.testing.assert_array_equal(got[1], xv[-1, ::-1])
    assert got[3].shape == () and got[3] == xv[1, 1]


def test_gradients_of_gathers_on_fast_run() -> None:
    rng = np.random.default_rng(0)
    mu = kt.vector("mu", shape=(50,))
    group = kt.vector("group", dtype="int64")
    w = kt.vector("w")
    mu2 = kt.matrix("mu2")
    w2 = kt.matrix("w2")
    x = kt.tensor("x", shape=(3, 4, 5))
    v = kt.vector("v", dtype="int64")
    w3 = kt.matrix("w3")
    w4 = kt.tensor("w4", shape=(2, 4, 4))
    grads = [
        kiln.grad(kt.sum(mu[group] * w), mu),
        kiln.grad(kt.sum(mu2[group] * w2), mu2),
        kiln.grad(kt.sum(x[v, :, [1, 2]] * w3), x),
        kiln.grad(kt.sum(x[1:, ::-1, 1:] * w4), x),
    ]
    n = 10_000
    g_v = rng.integers(-50, 50, size=n)
    values = [
        rng.normal(size=50),
        g_v,
        rng.normal(size=n),
        rng.normal(size=(50, 3)),
        rng.normal(size=(n, 3)),
        rng.normal(size=(3, 4, 5)),
        np.array([2, -3]),
        rng.normal(size=(2, 4)),
        rng.normal(size=(2, 4, 4)),
    ]
    inputs = [mu, group, w, mu2, w2, x, v, w3, w4]
    f = kiln.function(inputs, grads, mode=FAST)
    ops = {type(node.op) for node in toposort(f.fgraph.outputs)}
    assert {AdvancedIncSubtensor1, AdvancedIncSubtensor, IncSubtensor} <= ops
    got = compare(inputs, grads, values, FAST)
    np.testing.assert_allclose(got[0], np.bincount(g_v % 50, weights=values[2], minlength=50))
    expected = np.zeros((50, 3))
    np.add.at(expected, g_v, values[4])
    np.testing.assert_allclose(got[1], expected)


def test_inplace_variants_leave_inputs_unchanged() -> None:
    x = kt.matrix("x")
    t = kt.tensor("t", shape=(3, 4, 5))
    v = kt.vector("v", dtype="int64")
    i = kt.scalar("i", dtype="int64")
    y = kt.vector("y")
    outs = [
        kt.inc_subtensor((x * 2.0)[v], 1.0),
        kt.set_subtensor((x + 1.0)[v], kt.constant(-1.0)),
        kt.inc_subtensor((x * 3.0)[i, ::-1], y),
        kt.set_subtensor((t * 2.0)[v, :, [1, 1]], 0.5),
        kt.inc_subtensor((t + 2.0)[v, 1:3, [0, 4]], 1.0),
        kt.inc_subtensor(x[1:][v], 1.0),  # a view of an input: never written into
    ]
    inputs = [x, t, v, i, y]
    values = [random_x((3, 4)), random_x((3, 4, 5)), np.array([0, -1]), np.int64(1), np.ones(4)]
    f = kiln.function(inputs, outs, mode=FAST)
    inplace = [n.op for n in toposort(f.fgraph.outputs) if getattr(n.op, "inplace", False)]
    assert {type(op) for op in inplace} == {
        IncSubtensor,
        AdvancedIncSubtensor1,
        AdvancedIncSubtensor,
    }
    assert len(inplace) == 5
    compare(inputs, outs, values, FAST)


def test_writable_copies_a_read_only_buffer() -> None:
    @njit
    def bump(a: np.ndarray) -> np.ndarray:
        b = writable(a)
        b[0] += 1.0
        return b

    ro = np.zeros(3)
    ro.flags.writeable = False
    np.testing.assert_array_equal(bump(ro), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(ro, 0.0)
    rw = np.zeros(3)
    assert bump(rw) is not None and rw[0] == 1.0


def test_slice_span_matches_python() -> None:
    starts = [None, *range(-7, 8)]
    for n in range(5):
        for start in starts:
            for stop in starts:
                for step in (-3, -2, -1, 1, 2, 3):
                    r = range(n)[start:stop:step]
                    first, length = slice_span(
                        start or 0, stop or 0, step, n, start is not None, stop is not None
                    )
                    assert length == len(r), (start, stop, step, n)
                    if length:
                        assert first == r[0], (start, stop, step, n)


# --- errors -----------------------------------------------------------------------------

X = kt.matrix("X")
I1, I2, S0 = (kt.scalar(name, dtype="int64") for name in ("i1", "i2", "s0"))
V1, V2, V3, V4, V5, V6 = (kt.vector(f"w{k}", dtype="int64") for k in range(1, 7))
Y = kt.vector("Y")
ERROR_OUTPUTS = [
    X[I1],
    X[::S0],
    X[V1],
    X[:, V2],
    kt.inc_subtensor(X[I2], 1.0),
    kt.set_subtensor(X[V3], 1.0),
    kt.inc_subtensor(X[V4, 0], 1.0),
    X[V5, V6],
    kt.set_subtensor(X[0:2, 0], Y),
]
ERROR_INPUTS = [X, I1, I2, S0, V1, V2, V3, V4, V5, V6, Y]
GOOD = {var: np.int64(0) for var in (I1, I2)} | {S0: np.int64(1), Y: np.ones(2)}
GOOD |= {var: np.array([0, 1]) for var in (V1, V2, V3, V4, V5, V6)}

ERRORS = [
    (
        {I1: np.int64(5)},
        KilnIndexError,
        r"^Subtensor\{i\}: index 5 is out of bounds for axis 0 with size 3$",
    ),
    ({I1: np.int64(-4)}, KilnIndexError, "index -4 is out of bounds for axis 0 with size 3"),
    ({I1: np.int64(10**12)}, KilnIndexError, "index 1000000000000 is out of bounds"),
    ({S0: np.int64(0)}, KilnValueError, r"Subtensor\{::i\}: slice step cannot be zero"),
    (
        {V1: np.array([0, 7])},
        KilnIndexError,
        "^AdvancedSubtensor1: index 7 is out of bounds for axis 0",
    ),
    ({V1: np.array([-4])}, KilnIndexError, "index -4 is out of bounds for axis 0 with size 3"),
    ({V2: np.array([1, -9])}, KilnIndexError, "index -9 is out of bounds for axis 1 with size 3"),
    ({I2: np.int64(3)}, KilnIndexError, r"^IncSubtensor\{i\}: index 3 is out of bounds"),
    ({V3: np.array([9, 0])}, KilnIndexError, "^AdvancedSetSubtensor1: index 9 is out of bounds"),
    ({V4: np.array([0, -5])}, KilnIndexError, "index -5 is out of bounds for axis 0 with size 3"),
    ({V6: np.array([0, 1, 2])}, KilnIndexError, "broadcast together"),
    ({Y: np.ones(3)}, ShapeMismatchError, "static length is 1"),
]


@pytest.fixture(scope="module")
def error_functions() -> tuple[Any, Any]:
    return (
        kiln.function(ERROR_INPUTS, ERROR_OUTPUTS, mode=RAW),
        kiln.function(ERROR_INPUTS, ERROR_OUTPUTS, mode=VM),
    )


@pytest.mark.parametrize(("bad", "error", "match"), ERRORS)
def test_bad_index_raises_like_the_vm(
    error_functions: tuple[Any, Any], bad: dict[Any, Any], error: type, match: str
) -> None:
    numba_fn, vm_fn = error_functions
    values = [np.zeros((3, 3)) if v is X else bad.get(v, GOOD.get(v)) for v in ERROR_INPUTS]
    with pytest.raises(error, match=match) as on_numba:
        numba_fn(*values)
    with pytest.raises(error) as on_vm:
        vm_fn(*values)
    if "broadcast" not in match and "static" not in match:  # NumPy words these differently
        assert str(on_numba.value) == str(on_vm.value).split("\n")[0]


def test_error_functions_run_with_good_values(error_functions: tuple[Any, Any]) -> None:
    values = [random_x((3, 3)) if v is X else GOOD[v] for v in ERROR_INPUTS]
    compare(ERROR_INPUTS, ERROR_OUTPUTS, values)


def _gather_function(as_output: bool = False) -> kiln.Function:
    theta = kt.vector("theta")
    idx = kt.vector("idx", dtype="int64")
    y = kt.vector("y")
    g = theta[idx]
    out = kt.sum((y - g) ** 2 * kt.exp(g))
    outs = [out, g] if as_output else [out]
    return kiln.function([theta, idx, y], outs, mode=kiln.Mode(linker="numba"))


def test_a_gather_read_by_elementwise_loops_is_not_written_out():
    f = _gather_function()
    assert "take_1d" not in f.thunk.source
    theta = np.array([0.5, -1.0, 2.0])
    idx = np.array([2, 0, -1, 1, 1], dtype=np.int64)  # negative indices wrap
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    (out,) = f(theta, idx, y)
    g = theta[idx]
    np.testing.assert_allclose(out, np.sum((y - g) ** 2 * np.exp(g)), rtol=1e-14)
    with pytest.raises(IndexError, match="out of bounds"):
        f(theta, np.array([0, 3, 1, 1, 1], dtype=np.int64), y)
    with pytest.raises(IndexError, match="out of bounds"):
        f(theta, np.array([0, -4, 1, 1, 1], dtype=np.int64), y)


def test_a_gather_that_is_an_output_is_written_out():
    f = _gather_function(as_output=True)
    assert "take_1d" in f.thunk.source
    theta = np.array([0.5, -1.0, 2.0])
    idx = np.array([2, 0, 1], dtype=np.int64)
    _, g = f(theta, idx, np.zeros(3))
    np.testing.assert_array_equal(g, theta[idx])


def test_constant_indices_into_static_lengths_need_no_run_time_checks():
    x = kt.vector("x", shape=(5,))
    y = kt.scalar("y")
    out = x[2] + x[-1] + kt.sum(x[1:4:2]) + kt.sum(kt.inc_subtensor(x[-2::-1], y))
    f = kiln.function([x, y], out, mode=kiln.Mode(linker="numba"))
    assert "check_index" not in f.thunk.source and "slice_span" not in f.thunk.source
    xv = np.array([0.5, -1.0, 2.0, 4.0, 8.0])
    ref = xv.copy()
    ref[-2::-1] += 3.0
    np.testing.assert_allclose(f(xv, 3.0), xv[2] + xv[-1] + xv[1:4:2].sum() + ref.sum())
