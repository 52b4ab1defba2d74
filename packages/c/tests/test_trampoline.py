"""The CPython trampoline that calls a C-compiled graph without ctypes (kiln_trampoline.c)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import kiln_compile as kc
from kiln_c import _compiler, _linker, _trampoline
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")
VM = kc.Mode(linker="vm")


@pytest.fixture
def trampoline(cache_dir: Path) -> Iterator[None]:
    """Build the trampoline (in this test's cache) before the graphs."""
    assert _trampoline.constructor() is not None, _trampoline._state["problem"]
    kc.clear_function_memo()
    yield
    kc.clear_function_memo()


def _graph() -> tuple[list, list, list[np.ndarray]]:
    x, a = kt.vector("x", shape=(5,)), kt.matrix("a", shape=(5, 5))
    y = kt.exp(-(x**2)) * 1.5 + kt.log1p(x * x)
    rng = np.random.default_rng(3)
    b = rng.normal(size=(5, 5))
    outputs = [kt.sum(y * kt.tanh(x)), kt.dot(a, y) - x, kt.cholesky(a)]
    return [x, a], outputs, [rng.normal(size=5), b @ b.T + 5 * np.eye(5)]


def _fast(f: kc.Function, values: list[np.ndarray]) -> object:
    f(*values)  # the Function asks its thunk for the direct callable at the first call
    return f._fast


def test_calls_go_through_the_trampoline_and_equal_the_ctypes_path(trampoline, monkeypatch) -> None:
    inputs, outputs, values = _graph()
    f = kc.function(inputs, outputs, mode=C, trust_input=True)
    assert type(_fast(f, values)).__name__ == "Direct"
    got = f(*values)
    assert [type(v) for v in got] == [np.ndarray] * 3 and got[0].shape == ()
    monkeypatch.setattr(_trampoline, "make_direct", lambda *args, **kwargs: None)
    monkeypatch.setattr("kiln_c._thunk.make_direct", lambda *args, **kwargs: None)
    kc.clear_function_memo()
    _linker._loaded.clear()
    g = kc.function(inputs, outputs, mode=C, trust_input=True)
    assert type(_fast(g, values)).__name__ == "function"  # the ctypes closure
    for a, b in zip(got, g(*values), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got, kc.function(inputs, outputs, mode=VM)(*values), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13)
    # each call makes new outputs (nothing the caller holds is overwritten)
    again = f(*values)
    assert all(a is not b for a, b in zip(got, again, strict=True))


def test_an_error_inside_the_graph_is_raised_as_the_vm_raises_it(trampoline) -> None:
    inputs, outputs, values = _graph()
    f = kc.function(inputs, outputs, mode=C, trust_input=True)
    assert type(_fast(f, values)).__name__ == "Direct"
    bad = [values[0], -np.eye(5)]
    with pytest.raises(np.linalg.LinAlgError) as raised:
        f(*bad)
    assert "Cholesky" in str(raised.value) or "cholesky" in str(raised.value).lower()
    assert any("backend 'c'" in note for note in raised.value.__notes__)
    np.testing.assert_allclose(f(*values)[0], kc.function(inputs, outputs, mode=VM)(*values)[0])


def test_inputs_the_graph_does_not_take_as_they_are_take_the_general_path(trampoline) -> None:
    inputs, outputs, values = _graph()
    f = kc.function(inputs, outputs, mode=C, trust_input=True)
    assert type(_fast(f, values)).__name__ == "Direct"
    want = f(*values)
    as_lists = [values[0].tolist(), values[1].astype(np.float32)]
    for a, b in zip(f(*as_lists), want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert f._fast(*values[:1]) is NotImplemented  # one input short


def test_the_trampoline_follows_an_optimised_build_that_replaces_the_quick_one(
    trampoline, monkeypatch
) -> None:
    """A quick first build (here gcc itself at tcc's flags) swapped between calls."""
    monkeypatch.setenv("KILN_C_QUICK", "1")
    monkeypatch.setattr(_compiler, "find_quick_compiler", _compiler.find_compiler)
    _linker._loaded.clear()
    inputs, outputs, values = _graph()
    f = kc.function(inputs, outputs, mode=C, trust_input=True)
    thunk = f.thunk
    assert thunk.stage2["cache"] == "quick"
    direct = _fast(f, values)
    assert type(direct).__name__ == "Direct"
    before = f(*values)
    if thunk.upgrade is not None:
        thunk.upgrade.wait()
    assert thunk.stage2.get("optimised") is True
    assert f._fast is direct  # the Function keeps its callable; the callable follows
    for a, b in zip(before, f(*values), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_trampoline_that_cannot_be_built_warns_once_and_calls_go_through_ctypes(
    cache_dir: Path, monkeypatch, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    monkeypatch.setattr(_trampoline, "SOURCE", broken)
    fresh = {"new": None, "problem": None, "thread": None, "warned": False}
    monkeypatch.setattr(_trampoline, "_state", fresh)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _trampoline.constructor() is None
        assert _trampoline.constructor() is None
    said = [w for w in caught if issubclass(w.category, _trampoline.TrampolineWarning)]
    assert len(said) == 1 and "ctypes" in str(said[0].message)
    kc.clear_function_memo()
    inputs, outputs, values = _graph()
    f = kc.function(inputs, outputs, mode=C, trust_input=True)
    assert type(_fast(f, values)).__name__ == "function"
    np.testing.assert_allclose(f(*values)[0], kc.function(inputs, outputs, mode=VM)(*values)[0])
    kc.clear_function_memo()
