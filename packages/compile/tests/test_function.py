"""function(): inputs, outputs, updates, givens, modes, config, profile, linker registry."""

import warnings

import numpy as np
import pytest

import kiln_compile
import kiln_graph.tensor as kt
from kiln_compile import FAST_COMPILE, Config, Mode, function, get_linker
from kiln_compile import _linkers as linkers
from kiln_compile.testing import compare_with_vm
from kiln_graph import KilnTypeError, KilnValueError, MissingInputError, ShapeMismatchError


def test_single_and_list_outputs():
    x = kt.vector("x")
    f = function([x], kt.exp(x), mode=FAST_COMPILE)
    np.testing.assert_allclose(f([0.0, 1.0]), np.exp([0.0, 1.0]))
    g = function([x], [x * 2, kt.sum(x)], mode=FAST_COMPILE)
    a, b = g(np.array([1.0, 2.0]))
    np.testing.assert_allclose(a, [2.0, 4.0])
    assert b == 3.0 and b.dtype == np.float64 and b.shape == ()


def test_output_that_is_an_input_and_repeated_outputs():
    x = kt.vector("x")
    f = function([x], [x, x + 1, x + 1], mode=FAST_COMPILE)
    a, b, c = f([1.0])
    np.testing.assert_allclose(a, [1.0])
    np.testing.assert_allclose(b, c)


def test_input_checks_name_the_input():
    x = kt.vector("x", dtype="float32")
    f = function([x], x * 2, mode=FAST_COMPILE)
    with pytest.raises(KilnTypeError, match="input 0 \\('x'\\).*dtype float32"):
        f(np.array([0.1, 2.0]))  # 0.1 is not exact in float32
    with pytest.raises(KilnTypeError, match="input 0 \\('x'\\).*1 dimension"):
        f(np.ones((2, 2), dtype="float32"))
    m = kt.matrix("m", shape=(None, 3))
    g = function([m], m + 1, mode=FAST_COMPILE)
    with pytest.raises(KilnTypeError, match="static shape \\(None, 3\\)"):
        g(np.ones((2, 2)))
    with pytest.raises(KilnTypeError, match="takes 1 input"):
        g(np.ones((2, 3)), np.ones(2))
    with pytest.raises(KilnTypeError, match="missing value"):
        g()


def test_int_values_are_accepted_when_exact():
    x = kt.vector("x")
    f = function([x], x * 2, mode=FAST_COMPILE)
    np.testing.assert_allclose(f([1, 2]), [2.0, 4.0])


def test_keyword_inputs():
    x, y = kt.scalar("x"), kt.scalar("y")
    f = function([x, y], x - y, mode=FAST_COMPILE)
    assert f(y=1.0, x=3.0) == 2.0
    with pytest.raises(KilnTypeError, match="unknown input name 'z'"):
        f(z=1.0)


def test_trust_input_skips_checks():
    x = kt.vector("x")
    f = function([x], x + 1, mode=FAST_COMPILE, trust_input=True)
    np.testing.assert_allclose(f(np.array([1.0])), [2.0])


def test_bad_inputs_argument():
    x = kt.vector("x")
    with pytest.raises(KilnTypeError, match="computed by"):
        function([x + 1], x, mode=FAST_COMPILE)
    with pytest.raises(KilnTypeError, match="constant"):
        function([kt.constant(1.0)], x, mode=FAST_COMPILE)
    with pytest.raises(KilnTypeError, match="single variable"):
        function(x, x, mode=FAST_COMPILE)
    s = kt.shared(np.zeros(2))
    with pytest.raises(KilnTypeError, match="implicit"):
        function([s], s, mode=FAST_COMPILE)
    y = kt.vector("y")
    with pytest.raises(MissingInputError, match="y"):
        function([x], x + y, mode=FAST_COMPILE)


def test_shared_variables_and_updates():
    x = kt.scalar("x")
    acc = kt.shared(np.array(0.0), name="acc")
    f = function([x], acc * 1, updates={acc: acc + x}, mode=FAST_COMPILE)
    assert f(1.0) == 0.0
    assert f(2.0) == 1.0
    assert acc.get_value() == 3.0
    acc.set_value(10.0)
    assert f(0.0) == 10.0
    with pytest.raises(KilnTypeError, match="not a shared variable"):
        function([x], x, updates={x: x + 1}, mode=FAST_COMPILE)
    with pytest.raises(KilnTypeError, match="cast"):
        function([x], x, updates={acc: kt.cast(x, "int32")}, mode=FAST_COMPILE)


def test_updates_use_old_values():
    a = kt.shared(np.array(1.0), name="a")
    b = kt.shared(np.array(2.0), name="b")
    f = function([], [], updates=[(a, b), (b, a)], mode=FAST_COMPILE)
    f()
    assert (a.get_value(), b.get_value()) == (2.0, 1.0)


def test_givens():
    x, y = kt.scalar("x"), kt.scalar("y")
    f = function([y], x * 2, givens={x: y + 1}, mode=FAST_COMPILE)
    assert f(1.0) == 4.0


def test_modes_and_linker_selection():
    x = kt.scalar("x")
    assert function([x], x, mode="FAST_COMPILE").linker == "vm"
    assert function([x], x, mode=Mode(linker="vm")).linker == "vm"
    with pytest.raises(KilnValueError, match="unknown mode"):
        function([x], x, mode="FAST")
    with pytest.raises(KilnValueError, match="unknown backend 'nope'.*valid backends"):
        function([x], x, mode=Mode(linker="nope"))


def test_missing_backend_names_its_package(monkeypatch):
    monkeypatch.setattr(linkers, "_registered", lambda: {})
    linkers.get_linker.cache_clear()
    try:
        with pytest.raises(kiln_compile.BackendNotInstalledError, match="pip install kiln-jax"):
            get_linker("jax")
    finally:
        linkers.get_linker.cache_clear()


def test_auto_falls_back_to_vm_with_one_warning(monkeypatch):
    registry = {k: v for k, v in linkers._registered().items() if k != "numba"}
    monkeypatch.setattr(linkers, "_registered", lambda: registry)
    monkeypatch.setattr(linkers, "_warned_fallback", [])
    x = kt.scalar("x")
    with kiln_compile.config.change(warn_fallback=True, linker="auto"):
        with pytest.warns(UserWarning, match="kiln-numba"):
            f = function([x], x + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            function([x], x + 2)
    assert f.linker == "vm"


def test_auto_resolves_to_numba_when_installed():
    if "numba" not in kiln_compile.available_linkers():
        pytest.skip("kiln-numba is not installed")
    x = kt.scalar("x")
    with kiln_compile.config.change(linker="auto"):
        assert function([x], x + 1).linker == "numba"
        assert function([x], x + 1, mode="FAST_COMPILE").linker == "vm"


def test_config_from_flags():
    cfg = Config.from_flags("linker=vm, warn_fallback=false")
    assert cfg.linker == "vm" and cfg.warn_fallback is False
    with pytest.raises(KilnValueError, match="unknown kiln setting 'bogus'"):
        Config.from_flags("bogus=1")
    with pytest.raises(KilnValueError, match="name=value"):
        Config.from_flags("linker")
    x = kt.scalar("x")
    with kiln_compile.config.change(linker="vm"):
        assert function([x], x).linker == "vm"


def test_kiln_flags_environment_variable(tmp_path):
    import subprocess
    import sys

    code = "import kiln_compile; print(kiln_compile.config.linker, kiln_compile.config.cache_dir)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"KILN_FLAGS": "linker=vm", "KILN_CACHE_DIR": str(tmp_path), "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["vm", str(tmp_path)]


def test_profile_records_compile_and_op_times():
    x = kt.vector("x")
    f = function([x], kt.exp(x).sum(), mode=FAST_COMPILE, profile=True)
    f(np.ones(3))
    f(np.ones(3))
    prof = f.profile
    assert prof.calls == 2 and prof.call_time > 0
    assert set(prof.compile_times) == {"prepare", "rewrite", "link"}
    assert prof.op_calls["exp"] == 2
    assert "exp" in prof.summary()


def test_function_exposes_its_graph():
    x = kt.vector("x")
    y = kt.log1p(x)
    f = function([x], y, mode=FAST_COMPILE)
    assert f.outputs == (y,)
    assert f.inputs == (x,)
    assert [str(n.op) for n in f.fgraph.nodes] == ["log1p"]


def test_fgraph_digest_ignores_input_identity():
    a, b = kt.vector("a"), kt.vector("b")
    d1 = kiln_compile.prepare([a], [kt.exp(a) + 1]).digest
    d2 = kiln_compile.prepare([b], [kt.exp(b) + 1]).digest
    d3 = kiln_compile.prepare([b], [kt.exp(b) + 2]).digest
    assert d1 == d2 != d3


def test_runtime_error_names_the_op_and_backend():
    x, y = kt.vector("x"), kt.vector("y")
    f = function([x, y], x + y, mode=FAST_COMPILE)
    with pytest.raises(ShapeMismatchError) as info:
        f(np.ones(3), np.ones(2))
    assert any("backend 'vm'" in note and "add" in note for note in info.value.__notes__)


def test_compare_with_vm_helper():
    x = kt.vector("x")
    out = compare_with_vm([x], [kt.exp(x), x > 0], [np.array([-1.0, 2.0])], backend="vm")
    np.testing.assert_allclose(out[0], np.exp([-1.0, 2.0]))
