"""Indexing (getitem, set_subtensor, inc_subtensor) against NumPy."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_graph import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    Constant,
    DimShuffle,
    IncSubtensor,
    KilnIndexError,
    KilnTypeError,
    KilnValueError,
    Program,
    ShapeMismatchError,
    Subtensor,
    graph_inputs,
    toposort,
)
from kiln_graph._index import slice_length
from kiln_graph.ops import ShapeI
from kiln_graph.testing import check_infer_shape, evaluate, verify_grad


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
    """Return the index with S / V replaced by inputs, its NumPy value, and givens."""
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


def has_mask(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(v, np.ndarray) and v.dtype == bool for v in items)


MASK_2D = np.array([[1, 0, 1, 0, 0], [0, 0, 0, 0, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], bool)

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
    ((3, 4, 5), 0),
    ((3, 4, 5), (-1, slice(1, 3))),
    ((3, 4, 5), (Ellipsis, 1)),
    ((3, 4, 5), (None, 1, Ellipsis, None)),
    ((3, 4, 5), (slice(None), None, 2)),
    ((3, 4, 5), (1, 2, 3)),
    ((3, 4, 5), (S(1), slice(None), S(-2))),
    ((3, 4, 5), Ellipsis),
    ((3, 4, 5), ()),
    ((3, 4, 5), (slice(None), slice(None, None, -2), slice(1, None))),
    ((3, 4), (None, slice(None))),
    ((3, 4), (slice(None), None)),
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
    ((4, 5), [0, 3, 1]),
    ((4, 5), (slice(None), [4, 0])),
    ((4, 5), ([0, 1], [2, 3])),
    ((4, 5), ([[0], [1]], [1, 2, 3])),
    ((4, 5), (V([1, 2]), slice(1, 3))),
    ((4, 5), (1, [0, 2])),
    ((4, 5), (S(1), V([0, 2]))),
    ((4, 5), (V([[0, 1]]), V([2]))),
    ((3, 4, 5), ([0, 2], slice(None), [1, 1])),
    ((3, 4, 5), (slice(None), [0, 1], [1, 2])),
    ((3, 4, 5), (0, slice(None), [1, 2])),
    ((3, 4, 5), (slice(None), 0, [1, 2])),
    ((3, 4, 5), ([0, 1], None, [0, 1])),
    ((3, 4, 5), (Ellipsis, [0, 4])),
    ((3, 4, 5), (None, [1, 2], slice(1, None, 2))),
    ((3, 4, 5), (V([2, 0]), slice(S(1), None), V([[4], [0]]))),
    ((3, 4, 5), np.array([True, False, True])),
    ((3, 4, 5), (slice(None), MASK_2D)),
]

CASES = BASIC + ADVANCED
IDS = [f"{shape}-{index!r}" for shape, index in CASES]


def random_x(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).normal(size=shape))


@pytest.mark.parametrize("static", [True, False], ids=["static", "unknown-shape"])
@pytest.mark.parametrize(("shape", "index"), CASES, ids=IDS)
def test_getitem_matches_numpy(shape: tuple[int, ...], index: Any, static: bool) -> None:
    x = kt.tensor("x", shape=shape if static else (None,) * len(shape))
    sym, num, givens = build(index)
    if has_mask(index) and not static:
        with pytest.raises(KilnIndexError, match="boolean mask"):
            x[sym]
        return
    xv = random_x(shape)
    out = x[sym]
    expected = xv[num]
    givens[x] = xv
    got = evaluate(out, givens)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    check_infer_shape(out, givens)
    assert x[sym] is out and out.digest  # interned, and its props encode
    if static and len(givens) == 1:
        assert out.type.shape == expected.shape


@pytest.mark.parametrize(("shape", "index"), CASES, ids=IDS)
def test_grad_of_getitem_is_scatter_add(shape: tuple[int, ...], index: Any) -> None:
    x = kt.tensor("x", shape=shape)
    sym, num, givens = build(index)
    xv = random_x(shape)
    proj = random_x(xv[num].shape, seed=1)
    gx = kt.grad(kt.sum(x[sym] * kt.constant(proj)), x)
    expected = np.zeros(shape)
    np.add.at(expected, num, proj)
    np.testing.assert_allclose(evaluate(gx, {x: xv, **givens}), expected)


CONSTANT_CASES = [
    (shape, index)
    for shape, index in CASES
    if not build(index)[2] and shape  # no symbolic index; verify_grad needs a 1+-d input
]


@pytest.mark.parametrize(("shape", "index"), CONSTANT_CASES)
def test_verify_grad_getitem(shape: tuple[int, ...], index: Any) -> None:
    verify_grad(lambda x: x[index], [random_x(shape)])


def numpy_update(xv: np.ndarray, index: Any, yv: Any, mode: str) -> np.ndarray:
    out = xv.copy()
    if mode == "set":
        out[index] = yv
    else:
        np.add.at(out, index, yv)
    return out


def update(mode: str, region: Any, y: Any) -> Any:
    return kt.set_subtensor(region, y) if mode == "set" else kt.inc_subtensor(region, y)


@pytest.mark.parametrize("y_kind", ["full", "scalar"])
@pytest.mark.parametrize("mode", ["set", "inc"])
@pytest.mark.parametrize(("shape", "index"), CASES, ids=IDS)
def test_set_inc_match_numpy(shape: tuple[int, ...], index: Any, mode: str, y_kind: str) -> None:
    x = kt.tensor("x", shape=shape)
    sym, num, givens = build(index)
    xv = random_x(shape)
    region = xv[num].shape
    y_shape = region if y_kind == "full" else ()
    y = kt.tensor("y", shape=y_shape)
    yv = random_x(y_shape, seed=2)
    out = update(mode, x[sym], y)
    assert out.type == x.type
    givens.update({x: xv, y: yv})
    before = xv.copy()
    np.testing.assert_array_equal(evaluate(out, givens), numpy_update(xv, num, yv, mode))
    np.testing.assert_array_equal(xv, before)  # perform never modifies its input
    check_infer_shape(out, givens)


def test_inc_with_repeated_indices_accumulates() -> None:
    x = kt.vector("x")
    idx = kt.vector("idx", dtype="int64")
    out = kt.inc_subtensor(x[idx], 1.0)
    assert isinstance(out.owner.op, AdvancedIncSubtensor1)
    got = evaluate(out, {x: np.zeros(4), idx: np.array([0, 2, 2, 2, -1])})
    np.testing.assert_array_equal(got, [1.0, 0.0, 3.0, 1.0])
    m = kt.matrix("m")
    out2 = kt.inc_subtensor(m[[0, 0, 1], [1, 1, 1]], kt.constant([1.0, 2.0, 4.0]))
    assert isinstance(out2.owner.op, AdvancedIncSubtensor)
    np.testing.assert_array_equal(evaluate(out2, {m: np.zeros((2, 2))}), [[0, 3], [0, 4]])


GRAD_UPDATE_CASES = [
    ((5,), slice(1, 4), False),
    ((5,), 2, False),
    ((3, 4), (slice(None), None, 2), False),
    ((3, 4), (Ellipsis, slice(None, None, -2)), False),
    ((6,), [0, 2, 5], False),
    ((6,), [0, 2, 2, 5, 2], True),
    ((4, 5), ([0, 1], [2, 3]), False),
    ((4, 5), ([0, 0, 3], slice(1, 4)), True),
    ((3, 4, 5), ([0, 2], slice(None), [1, 1]), False),
    ((3, 4, 5), ([0, 0], None, [1, 1]), True),
]


@pytest.mark.parametrize("y_kind", ["full", "row", "scalar"])
@pytest.mark.parametrize("mode", ["set", "inc"])
@pytest.mark.parametrize(("shape", "index", "repeated"), GRAD_UPDATE_CASES)
def test_verify_grad_set_inc(
    shape: tuple[int, ...], index: Any, repeated: bool, mode: str, y_kind: str
) -> None:
    if mode == "set" and repeated:
        pytest.skip("set with repeated indices: the last write wins; no gradient checked")
    region = random_x(shape)[index].shape
    y_shape = {"full": region, "row": region[-1:], "scalar": ()}[y_kind]
    verify_grad(
        lambda x, y: update(mode, x[index], y),
        [random_x(shape), random_x(y_shape, seed=3) + 1.0],
    )


@pytest.mark.parametrize("mode", ["set", "inc"])
@pytest.mark.parametrize(("shape", "index"), CASES, ids=IDS)
def test_grad_of_set_inc_symbolic_index(shape: tuple[int, ...], index: Any, mode: str) -> None:
    x = kt.tensor("x", shape=shape)
    sym, num, givens = build(index)
    xv = random_x(shape)
    region = xv[num].shape
    y = kt.tensor("y", shape=region)
    proj = random_x(shape, seed=4)
    gx, gy = kt.grad(kt.sum(update(mode, x[sym], y) * kt.constant(proj)), [x, y])
    givens.update({x: xv, y: random_x(region, seed=5)})
    gxv, gyv = evaluate([gx, gy], givens)
    expected_gx = proj.copy()
    if mode == "set":
        expected_gx[num] = 0.0
    np.testing.assert_allclose(gxv, expected_gx)
    touched = np.zeros(shape)
    np.add.at(touched, num, 1)
    repeated = touched.size and touched.max() > 1
    if not (mode == "set" and repeated):
        np.testing.assert_allclose(gyv, proj[num])


@pytest.mark.parametrize("index", [[0, 0, 2], (slice(None, None, -1), 1), (Ellipsis, [1, 0, 1])])
def test_second_derivative_through_indexing(index: Any) -> None:
    verify_grad(lambda x: kt.grad(kt.sum(x[index] ** 3), x), [random_x((3, 2))])


def test_static_shapes() -> None:
    x = kt.tensor("x", shape=(5, 3))
    u = kt.tensor("u", shape=(None, 3))
    i = kt.scalar("i", dtype="int64")
    v = kt.vector("v", dtype="int64")
    assert x[1:4].type.shape == (3, 3)
    assert x[i].type.shape == (3,)
    assert x[i:].type.shape == (None, 3)
    assert x[::-1].type.shape == (5, 3)
    assert u[::-1].type.shape == (None, 3)
    assert u[::2].type.shape == (None, 3)
    assert x[:, None].type.shape == (5, 1, 3)
    assert x[v].type.shape == (None, 3)
    assert x[[[0, 1]]].type.shape == (1, 2, 3)
    assert x[v, [[0], [2]]].type.shape == (2, None)
    assert x[kt.tensor("w", dtype="int32", shape=(4, 1)), v].type.shape == (4, None)
    assert x[1, [0, 2, 1]].type.shape == (3,)
    assert kt.set_subtensor(u[i], 0.0).type.shape == (None, 3)


def test_slice_length_matches_python() -> None:
    starts = [None, *range(-7, 8)]
    steps = [None, -3, -2, -1, 1, 2, 3]
    for n in range(5):
        for start, stop, step in itertools.product(starts, starts, steps):
            assert slice_length(start, stop, step, n) == len(range(n)[start:stop:step])
    parts = [kt.scalar(name, dtype="int64") for name in ("start", "stop", "step", "n")]
    program = Program(parts, [slice_length(*parts)])
    for n in (0, 1, 4):
        for start, stop, step in itertools.product(range(-6, 7, 2), range(-6, 7, 3), steps[1:]):
            got = program([np.int64(start), np.int64(stop), np.int64(step), np.int64(n)])[0]
            assert got == len(range(n)[start:stop:step]), (start, stop, step, n)


def test_ops_and_interning() -> None:
    x = kt.matrix("x")
    i = kt.scalar("i", dtype="int64")
    idx = kt.vector("idx", dtype="int64")
    assert x[0] is x[0]
    assert x[0, :] is x[0]
    assert x[i] is x[i]
    assert isinstance(x[0].owner.op, Subtensor)
    assert isinstance(x[None].owner.op, DimShuffle)
    assert isinstance(x[idx].owner.op, AdvancedSubtensor1)
    assert isinstance(x[:, idx].owner.op, AdvancedSubtensor)
    assert isinstance(kt.set_subtensor(x[0], 1.0).owner.op, IncSubtensor)
    assert str(x[i, 1:].owner.op) == "Subtensor{i, i:}"
    assert str(kt.set_subtensor(x[:, idx], 0.0).owner.op) == "AdvancedSetSubtensor{:, a}"
    assert Subtensor(("i", (None, "i", None))) == Subtensor([("i"), [None, "i", None]])


def test_hierarchical_gather_and_its_gradient() -> None:
    rng = np.random.default_rng(0)
    mu = kt.vector("mu", shape=(50,))
    group = kt.vector("group", dtype="int64")
    idx_value = rng.integers(0, 50, size=10_000)
    out = mu[group]
    assert isinstance(out.owner.op, AdvancedSubtensor1)
    g = kt.grad(kt.sum(out), mu)
    assert any(isinstance(n.op, AdvancedIncSubtensor1) for n in toposort(g))
    mu_value = rng.normal(size=50)
    got, grad_value = evaluate([out, g], {mu: mu_value, group: idx_value})
    np.testing.assert_array_equal(got, mu_value[idx_value])
    np.testing.assert_array_equal(grad_value, np.bincount(idx_value, minlength=50))


def test_shape_entries_stay_static() -> None:
    x = kt.tensor("x", shape=(3, 4))
    u = kt.tensor("u", shape=(None, 4))
    assert isinstance(x.shape[1], Constant) and int(x.shape[1].data) == 4
    assert isinstance(u.shape[0].owner.op, ShapeI)
    assert isinstance(u.shape[-1], Constant) and int(u.shape[-1].data) == 4


def test_newaxis_only_region_can_be_set() -> None:
    x = kt.vector("x")
    out = kt.inc_subtensor(x[None], kt.constant([[1.0, 2.0]]))
    np.testing.assert_array_equal(evaluate(out, {x: np.ones(2)}), [2.0, 3.0])


def test_y_dtype_rules() -> None:
    x32 = kt.vector("x32", dtype="float32")
    assert kt.set_subtensor(x32[0], 0.1).dtype == "float32"
    assert kt.set_subtensor(x32[0], kt.scalar("k", dtype="int8")).dtype == "float32"
    with pytest.raises(KilnTypeError, match="cast"):
        kt.set_subtensor(x32[0], kt.scalar("f64"))
    xi = kt.vector("xi", dtype="int64")
    with pytest.raises(KilnTypeError, match="int64"):
        kt.inc_subtensor(xi[0], 1.5)
    assert kt.inc_subtensor(xi[0], 2.0).dtype == "int64"


# --- bad input -------------------------------------------------------------------------

XS = kt.tensor("xs", shape=(3, 4))
XU = kt.tensor("xu", shape=(None, None))


@pytest.mark.parametrize(
    ("index", "error", "match"),
    [
        ((0, 0, 0), KilnIndexError, "too many indices"),
        ((Ellipsis, 0, 0, 0), KilnIndexError, "too many indices"),
        (([0], [0], [0]), KilnIndexError, "too many indices"),
        ((Ellipsis, 0, Ellipsis), KilnIndexError, "single ellipsis"),
        (1.5, KilnTypeError, "index 0"),
        (np.float64(1.0), KilnTypeError, "index 0"),
        ((0, [0.5, 1.0]), KilnTypeError, "index 1"),
        (slice(0.5, 2), KilnTypeError, "slice"),
        ("a", KilnTypeError, "index 0"),
        (True, KilnTypeError, "boolean"),
        (kt.scalar("f"), KilnTypeError, "float64"),
        (kt.vector("b", dtype="bool"), KilnTypeError, "mask"),
        (slice(None, None, 0), KilnValueError, "step cannot be zero"),
        (3, KilnIndexError, "index 3 is out of bounds for dimension 0 .* length 3"),
        (-4, KilnIndexError, "index -4 is out of bounds"),
        ((slice(None), 4), KilnIndexError, "dimension 1 .* length 4"),
        ([0, 3], KilnIndexError, "index 3 is out of bounds"),
        ((0, [5]), KilnIndexError, "index 5 is out of bounds"),
        (np.array([True, False]), KilnIndexError, "boolean mask of shape"),
        ([kt.scalar("g"), 0], KilnTypeError, "integer scalars"),
    ],
)
def test_bad_index_raises_when_building(index: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        XS[index]


@pytest.mark.parametrize(
    "make",
    [
        lambda x, i, v: x[5],
        lambda x, i, v: x[-9],
        lambda x, i, v: x[i],
        lambda x, i, v: x[v],
        lambda x, i, v: x[:, v],
        lambda x, i, v: x[[0, 7]],
        lambda x, i, v: kt.inc_subtensor(x[5], 1.0),
        lambda x, i, v: kt.set_subtensor(x[v], 1.0),
        lambda x, i, v: kt.inc_subtensor(x[v, 0], 1.0),
    ],
)
def test_out_of_bounds_at_run_time(make: Any) -> None:
    i = kt.scalar("i", dtype="int64")
    v = kt.vector("v", dtype="int64")
    out = make(XU, i, v)
    givens = {XU: np.zeros((3, 3)), i: np.int64(5), v: np.array([0, 7])}
    givens = {k: val for k, val in givens.items() if k in set(graph_inputs([out]))}
    with pytest.raises(KilnIndexError, match=r"index -?\d+ is out of bounds .* size 3"):
        evaluate(out, givens)


def test_symbolic_zero_step_at_run_time() -> None:
    x = kt.vector("x")
    s = kt.scalar("s", dtype="int64")
    with pytest.raises(KilnValueError, match="step cannot be zero"):
        evaluate(x[::s], {x: np.ones(3), s: np.int64(0)})


@pytest.mark.parametrize(
    "target",
    [lambda x: x, lambda x: x + 1.0, lambda x: np.zeros(3), lambda x: x.T],
)
def test_set_subtensor_needs_an_indexing_result(target: Any) -> None:
    with pytest.raises(KilnTypeError, match="result of indexing"):
        kt.set_subtensor(target(XS), 1.0)


def test_update_shape_mismatch() -> None:
    with pytest.raises(ShapeMismatchError, match="cannot be broadcast"):
        kt.set_subtensor(XS[0:2], kt.tensor("y3", shape=(3,)))
    with pytest.raises(ShapeMismatchError, match="dimensions"):
        kt.inc_subtensor(XS[0], kt.matrix("y2"))
    with pytest.raises(ShapeMismatchError, match="cannot be broadcast"):
        kt.inc_subtensor(XS[[0, 1]], kt.tensor("y", shape=(3, 4)))
    x = kt.vector("x")
    y = kt.vector("y")
    with pytest.raises(ShapeMismatchError, match="dimension 0 of y differs"):
        evaluate(kt.set_subtensor(x[0:2], y), {x: np.zeros(4), y: np.ones(3)})
    with pytest.raises(ShapeMismatchError, match="static length is 1"):
        evaluate(kt.inc_subtensor(x[[0, 1]], y), {x: np.zeros(4), y: np.ones(1)})


def test_ops_check_their_inputs() -> None:
    with pytest.raises(KilnValueError, match="invalid idx_list entry"):
        Subtensor(("a",))
    with pytest.raises(KilnValueError, match="expected 1 index input"):
        Subtensor(("i",))(XS)
    with pytest.raises(KilnTypeError, match="integer scalar"):
        Subtensor(("i",))(XS, kt.vector("w", dtype="int64"))
    with pytest.raises(KilnValueError, match="at least one index array"):
        AdvancedSubtensor(((None, None, None),))
    with pytest.raises(KilnTypeError, match="integer vector"):
        AdvancedSubtensor1()(XS, kt.matrix("m", dtype="int64"))
    with pytest.raises(KilnIndexError, match="broadcast together"):
        AdvancedSubtensor(("a", "a"))(XS, kt.constant([0, 1]), kt.constant([0, 1, 2]))
