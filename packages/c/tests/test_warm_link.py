"""A warm link finds the built library by the rewritten graph's key, writing no C source."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln_compile as kc
from kiln_c import FallbackWarning, _codegen, _library, _linker
from kiln_graph import Apply, Op
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")


def _fgraph(power: float = 2.0, square: bool = False) -> kc.FunctionGraph:
    x = kt.vector("x")
    y = kt.exp(x) * power
    return kc.FunctionGraph([x], [kt.sum(y * y if square else y)], 1)


def _new_process() -> None:
    _linker._loaded.clear()
    kc.clear_function_memo()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    """Each test starts as a new process would: no memo of an earlier test's Functions."""
    _new_process()


def test_the_graph_key_changes_with_whatever_changes_the_source(monkeypatch) -> None:
    """A changed graph, constant, code-generator version, code or flag is a new key."""
    base = _library.graph_key(_fgraph())
    assert _library.graph_key(_fgraph()) == base  # the same graph built again
    assert _library.graph_key(_fgraph(square=True)) != base
    assert _library.graph_key(_fgraph(power=3.0)) != base
    monkeypatch.setattr(_library, "CODEGEN_VERSION", _codegen.CODEGEN_VERSION + 1)
    assert _library.graph_key(_fgraph()) != base
    monkeypatch.undo()
    monkeypatch.setattr(_library, "code_fingerprint", lambda: "edited")
    assert _library.graph_key(_fgraph()) != base
    monkeypatch.undo()
    monkeypatch.setenv("KILN_C_FLAGS", "-DKILN_TEST_FLAG")
    assert _library.graph_key(_fgraph()) != base


def test_the_code_fingerprint_follows_an_edited_source(tmp_path: Path) -> None:
    """An edit (size or modification time) of a source file changes what is hashed."""
    (tmp_path / "sub").mkdir()
    source = tmp_path / "sub" / "mod.py"
    source.write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not code")
    before = _library._source_files(str(tmp_path))
    assert [p for p, _, _ in before] == [str(source)]
    os.utime(source, ns=(1, 1))
    assert _library._source_files(str(tmp_path)) != before


def test_a_warm_link_writes_no_source(cache_dir: Path, monkeypatch) -> None:
    """The second process finds the library through the graph key; its values are right."""
    x = kt.vector("x")
    outs = [kt.sum(kt.exp(x) * 2.0), kt.log1p(x**2)]
    cold = kc.function([x], outs, mode=C)
    assert cold.thunk.stage2["cache"] == "miss"
    _new_process()

    def no_source(fgraph):
        raise AssertionError("wrote the C source of a graph already built")

    monkeypatch.setattr(_linker, "generate", no_source)
    warm = kc.function([x], outs, mode=C)
    assert warm.thunk.stage2["cache"] == "hit"
    assert warm.thunk.stage2["key"] == cold.thunk.stage2["key"]
    v = np.linspace(-1.0, 2.0, 7)
    total, logs = warm(v)
    np.testing.assert_allclose(total, np.sum(np.exp(v) * 2.0), rtol=1e-14)
    np.testing.assert_allclose(logs, np.log1p(v**2), rtol=1e-14)


def test_graphs_differing_in_constants_still_share_the_library(cache_dir: Path) -> None:
    """Two graph keys, one library (constants are arguments of the C code)."""
    x = kt.vector("x")
    a = kc.function([x], [kt.sum(kt.exp(x) * 2.0)], mode=C)
    _new_process()
    b = kc.function([x], [kt.sum(kt.exp(x) * 3.0)], mode=C)
    assert b.thunk.stage2["cache"] == "hit"
    assert a.thunk.stage2["key"] == b.thunk.stage2["key"]
    assert len(list((cache_dir / "c").glob("*.so"))) == 1
    np.testing.assert_allclose(b(np.ones(3))[0], 9 * np.e, rtol=1e-14)


def test_a_graph_entry_whose_library_is_gone_is_rebuilt(cache_dir: Path) -> None:
    x = kt.vector("x")
    f = kc.function([x], [kt.sum(kt.exp(x) * 2.0)], mode=C)
    (cache_dir / "c" / f"{f.thunk.stage2['key']}.so").unlink()
    _new_process()
    g = kc.function([x], [kt.sum(kt.exp(x) * 2.0)], mode=C)
    assert g.thunk.stage2["cache"] == "miss"
    np.testing.assert_allclose(g(np.zeros(2))[0], 4.0, rtol=1e-14)


class _Twice(Op):
    """An Op with no C code: its node runs through ``perform``."""

    def make_node(self, x: object) -> Apply:
        x = kt.as_tensor(x)
        return Apply.create(self, [x], [x.type])

    def perform(self, node: Apply, inputs: list, outputs: list) -> None:
        outputs[0] = inputs[0] * 2


def test_a_warm_link_keeps_the_nodes_that_run_through_python(cache_dir: Path) -> None:
    """The fallback nodes are stored with the graph entry: warned about and run again."""
    x = kt.vector("x")
    with pytest.warns(FallbackWarning, match="_Twice"):
        kc.function([x], [kt.sum(_Twice()(x) + 1.0)], mode=C)
    _new_process()
    with pytest.warns(FallbackWarning, match="_Twice"):
        f = kc.function([x], [kt.sum(_Twice()(x) + 1.0)], mode=C)
    assert f.thunk.stage2["cache"] == "hit"
    assert [type(n.op) for n in f.thunk.generated.fallbacks.values()] == [_Twice]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        np.testing.assert_allclose(f(np.arange(3.0))[0], 9.0, rtol=1e-14)
