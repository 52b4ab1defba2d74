"""tcc's quick first build, replaced by the optimised build between calls (the same bits)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import kiln_compile as kc
from kiln_c import _compiler, _linker
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")
pytestmark = pytest.mark.skipif(shutil.which("tcc") is None, reason="tcc is not installed")


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KILN_C_QUICK", "1")
    _compiler.find_quick_compiler.cache_clear()
    _linker._loaded.clear()
    kc.clear_function_memo()
    yield
    _compiler.find_quick_compiler.cache_clear()


def _graph() -> tuple[list, list]:
    x, a = kt.vector("x"), kt.matrix("a")
    y = kt.exp(-(x**2)) * 1.5 + kt.log1p(x * x) / (1.0 + x * x)
    return [x, a], [kt.sum(y * kt.tanh(x)), kt.dot(a, y) * 3.0 - x, kt.erfcx(kt.abs(x))]


def _values() -> list[np.ndarray]:
    rng = np.random.default_rng(2)
    return [rng.normal(size=7), rng.normal(size=(7, 7))]


def test_the_optimised_build_replaces_the_quick_one_between_calls(cache_dir: Path, quick) -> None:
    """Calls before and after the swap give the same bits; only the optimised one is cached."""
    inputs, outputs = _graph()
    f = kc.function(inputs, outputs, mode=C, trust_input=True)
    thunk = f.thunk
    assert thunk.stage2["cache"] == "quick"
    quick_lib = thunk.library
    values = _values()
    before = [f(*values) for _ in range(3)]  # the Function keeps the thunk's direct entry
    upgrade = thunk.upgrade
    if upgrade is not None:
        upgrade.wait()
        assert upgrade.error is None
    assert thunk.upgrade is None and thunk.stage2.get("optimised") is True
    assert thunk.library is not quick_lib
    after = f(*values)
    for b in before:
        for got, want in zip(b, after, strict=True):
            np.testing.assert_array_equal(got, want)
    vm = kc.function(inputs, outputs, mode=kc.Mode(linker="vm"))(*values)
    for got, want in zip(after, vm, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    # the graph's library, and the trampoline's (one per Python and compiler) beside it
    libraries = {p.stem for p in (cache_dir / "c").glob("*.so")}
    assert thunk.stage2["key"] in libraries and len(libraries) <= 2
    _linker._loaded.clear()
    kc.clear_function_memo()
    g = kc.function(*_graph(), mode=C)
    assert g.thunk.stage2["cache"] == "hit" and g.thunk.upgrade is None


def test_quick_only_caches_nothing(cache_dir: Path, quick, monkeypatch) -> None:
    """``KILN_C_QUICK=only`` runs tcc's build alone: no optimised build, nothing cached."""
    monkeypatch.setenv("KILN_C_QUICK", "only")
    f = kc.function(*_graph(), mode=C)
    assert f.thunk.stage2["cache"] == "quick"
    values = _values()
    vm = kc.function(*_graph(), mode=kc.Mode(linker="vm"))(*values)
    for got, want in zip(f(*values), vm, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    assert not list((cache_dir / "c").glob("*.so"))
    _linker._upgrades.clear()


def test_without_tcc_the_build_is_todays(cache_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("KILN_C_QUICK", "1")
    _compiler.find_quick_compiler.cache_clear()
    which = shutil.which
    monkeypatch.setattr(
        _compiler.shutil, "which", lambda name: None if name == "tcc" else which(name)
    )
    _linker._loaded.clear()
    kc.clear_function_memo()
    try:
        f = kc.function(*_graph(), mode=C)
        assert f.thunk.stage2["cache"] == "miss" and f.thunk.upgrade is None
    finally:
        _compiler.find_quick_compiler.cache_clear()


def _logistic(n: int = 1000, d: int = 6) -> tuple[list, list, list[np.ndarray]]:
    """M3's math on ``n`` rows: a log density and its gradient, long loops of exp and log1p."""
    rng = np.random.default_rng(4)
    data = rng.normal(size=(n, d))
    y = rng.integers(0, 2, n)
    alpha, beta = kt.scalar("alpha"), kt.vector("beta", shape=(d,))
    eta = alpha + kt.dot(kt.constant(data), beta)
    logp = kt.sum(kt.constant(y) * eta - kt.log(1 + kt.exp(eta))) - kt.sum(beta**2) / 2.0
    return [alpha, beta], [logp, *kt.grad(logp, [alpha, beta])], [np.array(0.3), rng.normal(size=d)]


def test_quick_and_optimised_builds_of_long_loops_agree_to_the_bit(cache_dir: Path, quick) -> None:
    """The vectorized exp / log1p loops (gcc, each SIMD copy) and tcc's scalar ones agree."""
    inputs, outputs, values = _logistic()
    f = kc.function(inputs, outputs, mode=kc.FAST_RUN.with_linker("c"), trust_input=True)
    thunk = f.thunk
    assert thunk.stage2["cache"] == "quick"
    nodes = thunk.generated.source.split("static int node_0", 1)[1]
    assert "kiln_log1p_v(" in nodes and "kiln_exp_v(" in nodes
    before = f(*values)
    upgrade = thunk.upgrade
    if upgrade is not None:
        upgrade.wait()
        assert upgrade.error is None
    assert thunk.stage2.get("optimised") is True
    after = f(*values)
    for got, want in zip(before, after, strict=True):
        np.testing.assert_array_equal(
            np.asarray(got).view(np.int64), np.asarray(want).view(np.int64)
        )
    vm = kc.function(inputs, outputs, mode=kc.Mode(linker="vm"))(*values)
    for got, want in zip(after, vm, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def _bits(value: object) -> bytes:
    array = np.asarray(value)
    return array.dtype.str.encode() + str(array.shape).encode() + array.tobytes()


def test_the_whole_conformance_table_gives_the_same_bits_on_tcc_and_gcc(
    cache_dir: Path, monkeypatch
) -> None:
    """Every case of the shared table and its gradient, one function per group: tcc and gcc."""
    import warnings

    from kiln_c import FallbackWarning
    from kiln_compile.testing import FAMILIES, conformance_cases, conformance_groups

    groups = conformance_groups(conformance_cases(list(FAMILIES)))
    outputs: dict[str, dict[str, list[bytes]]] = {"only": {}, "0": {}}
    for setting, store in outputs.items():
        monkeypatch.setenv("KILN_C_QUICK", setting)
        _compiler.find_quick_compiler.cache_clear()
        _linker._loaded.clear()
        kc.clear_function_memo()
        for name, cases in groups.items():
            built = [(c, c.build(c.rng())) for c in cases]
            inputs = [v for _, g in built for v in g.inputs]
            outs = [o for _, g in built for o in g.outputs]
            for c, g in built:  # and the gradients of a projection of the float outputs
                floats = [o for o in g.outputs if o.dtype.startswith("float")]
                wrt = [v for v in g.inputs if v.dtype.startswith("float")]
                if c.grad and floats and wrt:
                    cost = sum(kt.sum(kt.cast(o, "float64") * 0.75) for o in floats)
                    outs += kt.grad(cost, wrt, disconnected_inputs="ignore")
            values = [x for _, g in built for x in g.values]
            mode = kc.FAST_RUN.with_linker("c") if cases[0].rewrite else kc.Mode(None, "c")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FallbackWarning)
                warnings.simplefilter("ignore", RuntimeWarning)  # the cases' inf and NaN
                f = kc.function(inputs, outs, mode=mode)
                if setting == "only":
                    assert f.thunk.stage2["cache"] == "quick", name
                store[name] = [_bits(v) for v in f(*values)]
    differ = [
        f"{name}[{i}]"
        for name, quick in outputs["only"].items()
        for i, (a, b) in enumerate(zip(quick, outputs["0"][name], strict=True))
        if a != b
    ]
    assert not differ, f"tcc and gcc differ on {len(differ)} outputs: {differ[:20]}"
