"""Small constant arrays reach generated code packed, one buffer per dtype (ConstantPack)."""

from __future__ import annotations

import re

import numba
import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile import function
from kiln_numba import _chunks, _codegen
from kiln_numba._alloc import packed
from kiln_numba._codegen import generate

NUMBA = kiln.Mode(linker="numba")
VM = kiln.Mode(linker="vm")


def _grouped_graph(sizes: list[int], seed: int = 0) -> tuple[list, list, list[tuple]]:
    """Return ``x``, a log-density and its gradient over groups with their own data.

    Each group ``g`` reads ``x[g]`` against its own data vector and index vector
    (float64 and int64): the constants a model written with a Python loop has.
    """
    rng = np.random.default_rng(seed)
    x = kt.vector("x", shape=(len(sizes),))
    total = None
    data = []
    for g, n in enumerate(sizes):
        y = rng.normal(size=n)
        idx = rng.integers(0, n, size=n)
        term = kt.sum(kt.square((kt.constant(y) - x[g])[kt.constant(idx)])) * 0.5
        total = term if total is None else total + term
        data.append((y, idx))
    return [x], [total, kiln.grad(total, x)], data


def _reference(x: np.ndarray, data: list[tuple]) -> tuple[float, np.ndarray]:
    value, grad = 0.0, np.zeros_like(x)
    for g, (y, idx) in enumerate(data):
        r = y[idx] - x[g]
        value += 0.5 * np.sum(r**2)
        grad[g] = -np.sum(r)
    return value, grad


@pytest.mark.usefixtures("cache_dir")
def test_many_small_constants_are_packed_and_compute_the_same():
    inputs, outputs, data = _grouped_graph([3, 4, 5, 6, 7, 8, 9, 10, 11])
    f = function(inputs, outputs, mode=NUMBA, trust_input=True)
    gen = generate(f.fgraph)
    signature = re.search(r"def kiln_fn\((.*)\):", gen.source)[1].split(", ")
    # 9 groups' data and indices: one float64 buffer, one int64 buffer, the index.
    assert signature == ["i0", "k0", "k1", "kix"]
    assert len(gen.constants) == 3
    # In order of first use: one buffer per dtype, and the index (int64) last.
    assert sorted(c.dtype.name for c in gen.constants[:2]) == ["float64", "int64"]
    assert gen.constants[2].dtype == np.int64
    assert not any(c.flags.writeable for c in gen.constants)
    assert "packed(k" in gen.source
    x = np.linspace(-1.0, 1.5, 9)
    value, grad = f(x)
    want_value, want_grad = _reference(x, data)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12, atol=1e-12)
    vm = function(inputs, outputs, mode=VM)
    for a, b in zip(f(x), vm(x), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("cache_dir")
def test_few_constants_large_ones_and_returned_ones_stay_parameters(monkeypatch):
    inputs, outputs, _ = _grouped_graph([3, 4])  # 4 constants: fewer than PACK_MIN
    source = generate(function(inputs, outputs, mode=NUMBA).fgraph).source
    assert "kix" not in source and "packed(" not in source
    monkeypatch.setattr(_codegen, "PACK_MIN", 2)
    monkeypatch.setattr(_codegen, "PACK_BYTES", 40)  # the 2x2 matrices (32 bytes) only
    x = kt.vector("x", shape=(8,))
    total = kt.sum(x * kt.constant(np.arange(8.0)))  # 64 bytes: a parameter
    ones = kt.constant(np.ones((2, 2)))  # returned: a parameter
    outs = [
        total,
        ones * 1.0,
        ones,
        kt.sum(kt.dot(kt.constant(np.full((2, 2), 3.0)), x[:2])) + total,
        kt.sum(kt.dot(kt.constant(np.full((2, 2), 4.0)), x[2:4])),
    ]
    f = function([x], outs, mode=NUMBA)
    gen = generate(f.fgraph)
    params = re.search(r"def kiln_fn\((.*)\):", gen.source)[1].split(", ")
    assert params[-2:] == ["k0", "kix"] and gen.source.count("packed(k0, kix") == 2
    assert [p for p in params if re.fullmatch(r"c\d+", p)]
    got = f(np.arange(1.0, 9.0))
    np.testing.assert_allclose(got[0], 168.0)
    np.testing.assert_array_equal(got[1], np.ones((2, 2)))
    np.testing.assert_array_equal(got[2], np.ones((2, 2)))
    for packed_buffer in gen.constants[-2:]:
        assert not np.shares_memory(got[2], packed_buffer)
    np.testing.assert_allclose(got[3], 6.0 * (1.0 + 2.0) + 168.0)
    np.testing.assert_allclose(got[4], 8.0 * (3.0 + 4.0))


@pytest.mark.usefixtures("cache_dir")
def test_other_values_of_packed_constants_share_the_source():
    a = generate(function(*_grouped_graph([3, 4, 5, 6, 7, 8, 9, 3, 4], seed=0)[:2]).fgraph)
    b = generate(function(*_grouped_graph([3, 4, 5, 6, 7, 8, 9, 3, 4], seed=1)[:2]).fgraph)
    assert a.source == b.source
    assert not np.array_equal(a.constants[-3], b.constants[-3])  # k0: the data


@pytest.mark.usefixtures("cache_dir")
def test_chunks_bind_the_packed_constants_they_read(monkeypatch):
    monkeypatch.setattr(_chunks, "CHUNK_LINES", 20)
    monkeypatch.setattr(_chunks, "WHOLE_LINES", 20)
    inputs, outputs, data = _grouped_graph([4] * 12)
    f = function(inputs, outputs, mode=NUMBA, trust_input=True)
    source = generate(f.fgraph).source
    chunk_defs = re.findall(r"^def (chunk_\d+)\((.*)\):", source, re.M)
    assert len(chunk_defs) > 3
    # No constant is passed between functions: the chunks take the buffers instead.
    assert not any(re.search(r"\bc\d+\b", params) for _, params in chunk_defs)
    assert any("kix" in params for _, params in chunk_defs)
    body = source[source.index("def kiln_fn") :]
    assert not re.search(r"\bc\d+\b", body)
    x = np.linspace(-2.0, 2.0, 12)
    want_value, want_grad = _reference(x, data)
    value, grad = f(x)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12, atol=1e-12)


def test_packed_views_have_the_shape_dtype_and_owner_asked_for():
    buffer = np.arange(12.0)
    buffer.flags.writeable = False
    # [start, stop, *shape] each: 3 elements, 2x3, a 0-d one, an empty one.
    index = np.array([0, 3, 3, 3, 9, 2, 3, 9, 10, 10, 10, 0], np.int64)

    @numba.njit
    def views(buffer, index):
        return (
            packed(buffer, index, 0, 1),
            packed(buffer, index, 3, 2),
            packed(buffer, index, 7, 0),
            packed(buffer, index, 9, 1),
        )

    one, two, zero, empty = views(buffer, index)
    np.testing.assert_array_equal(one, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(two, [[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]])
    assert zero.shape == () and zero[()] == 9.0
    assert empty.shape == (0,)
    for v in (one, two, zero):
        assert v.flags.c_contiguous and not v.flags.writeable
    assert not views.nopython_signatures[0].return_type.types[1].mutable

    @numba.njit
    def outlives(n):
        b = np.arange(n) * 2
        return packed(b, np.array([2, 4, 2], np.int64), 0, 1)

    np.testing.assert_array_equal(outlives(6), [4, 6])  # the view keeps its buffer alive
    views(np.arange(12.0), index)  # a view of a writable buffer is typed writable
    assert views.nopython_signatures[-1].return_type.types[1].mutable


def test_without_numbas_internals_the_packed_constants_are_slices(fresh_process):
    script = """
        import numpy as np
        import kiln_numba._numba_internals as internals

        internals.usable = lambda: False
        from kiln_numba import _alloc

        assert _alloc.packed is None
        import kiln
        import kiln.tensor as kt

        x = kt.vector("x", shape=(22,))
        rng = np.random.default_rng(0)
        data = [rng.normal(size=(2, 3)) for _ in range(20)]
        total = sum(kt.sum(kt.dot(kt.constant(d), x[g : g + 3])) for g, d in enumerate(data))
        f = kiln.function([x], [total], mode=kiln.Mode(linker="numba"))
        value = np.linspace(0.0, 1.0, 22)
        want = sum(np.sum(d @ value[g : g + 3]) for g, d in enumerate(data))
        np.testing.assert_allclose(f(value)[0], want, rtol=1e-12)
        from kiln_numba._codegen import generate
        source = generate(f.fgraph).source
        assert "packed(" not in source and ".reshape((kix[" in source
        print("ok")
        """
    assert fresh_process(script) == "ok"
