"""A long generated body is split into functions of bounded size (kiln_numba._chunks)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile import function
from kiln_numba import _chunks, _numba_internals
from kiln_numba._chunks import split_body
from kiln_numba._codegen import generate
from kiln_numba._funcify import ModuleBuilder

NUMBA = kiln.Mode(linker="numba")


def _function_sizes(source: str) -> dict[str, int]:
    """Return the number of lines of each module-level function of ``source``."""
    sizes: dict[str, int] = {}
    name = None
    for line in source.splitlines():
        if m := re.match(r"def (\w+)\(", line):
            name = m.group(1)
            sizes[name] = 0
        elif name is not None and line.startswith("    "):
            sizes[name] += 1
        elif line and not line.startswith(("@", " ")):
            name = None
    return sizes


def _scalar_graph(n: int) -> tuple[list, list]:
    """Return ``x`` and, per scalar ``x[i]``, terms read far later (a sum, a gradient)."""
    x = kt.vector("x", shape=(n,))
    terms = [kt.exp(x[i]) * (i + 1.0) - kt.square(x[i]) for i in range(n)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return [x], [total, kiln.grad(total, x)]


def _chunks_named(namespace: dict) -> list[str]:
    """Return the names of the chunk functions of a generated module's ``namespace``."""
    return [n for n in namespace if n.startswith("chunk_")]


def _reference(x: np.ndarray) -> tuple[float, np.ndarray]:
    k = np.arange(1.0, x.size + 1)
    return float(np.sum(np.exp(x) * k - x**2)), np.exp(x) * k - 2 * x


@pytest.mark.usefixtures("cache_dir")
def test_a_long_body_becomes_calls_of_bounded_functions(monkeypatch):
    monkeypatch.setattr(_chunks, "CHUNK_LINES", 40)
    monkeypatch.setattr(_chunks, "WHOLE_LINES", 40)
    inputs, outputs = _scalar_graph(60)
    f = function(inputs, outputs, mode=NUMBA, trust_input=True)
    sizes = _function_sizes(generate(f.fgraph).source)
    chunks = [s for name, s in sizes.items() if name.startswith("chunk")]
    assert len(chunks) > 3
    # A chunk ends at the first node boundary after CHUNK_LINES lines. The longest
    # node here is the sum of the 60 terms (a line per term); the others are short.
    assert max(sizes.values()) <= 40 + 60 + 20
    assert sorted(sizes.values())[-2] <= 40 + 20
    x = np.linspace(-1.0, 1.0, 60)
    value, grad = f(x)
    want_value, want_grad = _reference(x)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12)
    # Only kiln_fn calls the chunks: Numba compiles them without the wrappers that
    # Python would call them through.
    namespace = f.thunk.jit_fn.py_func.__globals__
    options = _numba_internals.callee_options()
    assert len(_chunks_named(namespace)) == len(chunks)
    link_only = _numba_internals._link_only_library_class()
    for name in _chunks_named(namespace):
        dispatcher = namespace[name]
        assert dispatcher.overloads, name
        for option in ("no_cpython_wrapper", "no_cfunc_wrapper"):
            assert dispatcher.targetoptions[option] is options[option]
        # Their code is optimized and made machine code once, inside kiln_fn's.
        for result in dispatcher.overloads.values():
            assert isinstance(result.library, link_only)
            assert result.library.get_pointer_to_function(result.fndesc.mangled_name) == 0


@pytest.mark.usefixtures("cache_dir")
def test_split_and_whole_bodies_agree(monkeypatch):
    """Functions of 4-line chunks compute what one function does, bit for bit."""
    inputs, outputs = _scalar_graph(25)
    x = np.linspace(-0.5, 2.0, 25)
    monkeypatch.setattr(_chunks, "CHUNK_LINES", 10_000)
    whole = function(inputs, outputs, mode=NUMBA, trust_input=True)
    assert not any(n.startswith("chunk") for n in _function_sizes(generate(whole.fgraph).source))
    monkeypatch.setattr(_chunks, "CHUNK_LINES", 4)
    monkeypatch.setattr(_chunks, "WHOLE_LINES", 4)
    split = function(inputs, outputs, mode=NUMBA, trust_input=True)
    assert any(n.startswith("chunk") for n in _function_sizes(generate(split.fgraph).source))
    for a, b in zip(whole(x), split(x), strict=True):
        np.testing.assert_array_equal(a, b)


def test_chunks_pass_what_later_chunks_read_and_what_they_rebind():
    module = ModuleBuilder()
    lines = [
        "# a",
        "v_1 = i0[0] * 2.0",
        "v_2 = v_1 + 1.0",
        "# b (rebinds v_1, writes v_3 in a loop)",
        "v_1 = v_2 * 3.0",
        "v_3 = np.empty(2, dtype=np.float64)",
        "for j_4 in range(2):",
        "    t_5 = v_1 + j_4",
        "    v_3[j_4] = t_5",
        "# c",
        "v_6 = v_3[1] + v_1 + c0",
        "return (v_6, v_2, )",
    ]
    body = split_body(module, lines, ["i0", "c0"], size=1, whole=1)
    calls = body[:-1]
    assert body[-1] == lines[-1]
    assert len(calls) == 3 and len(module.helpers) == 3
    # v_1 is rebound before anything reads it again: the first chunk returns v_2 only.
    assert calls[0] == f"(v_2, ) = {calls[0].split(' = ')[1]}" and calls[0].endswith("(i0)")
    assert re.search(r"\(v_2\)$", calls[1]) and calls[1].startswith("(v_1, v_3, )")
    assert calls[2].startswith("(v_6, )") and calls[2].endswith("(v_3, v_1, c0)")
    namespace: dict = {"np": np, "njit": lambda **_: lambda f: f}
    source = "\n\n".join(module.helpers.values())
    body_src = "\n".join("    " + line for line in body)
    exec(f"{source}\n\ndef kiln_fn(i0, c0):\n{body_src}\n", namespace)
    assert namespace["kiln_fn"](np.array([1.0]), 0.5) == (10.0 + 9.0 + 0.5, 3.0)


def test_chunks_bind_views_of_parameters_again_rather_than_pass_them():
    module = ModuleBuilder()
    lines = [
        "# a",
        "v_1 = i0[1:3]",
        "v_2 = v_1 * 2.0",
        "# b (writes through the view)",
        "v_1[0] = 7.0",
        "v_3 = i0[0:3:2]",
        "# c",
        "v_4 = v_1 + v_2",
        "v_5 = v_3[1] + v_4[0]",
        "return (v_5, v_1, )",
    ]
    body = split_body(module, lines, ["i0"], size=1, whole=1)
    assert len(body) == 5 and body[0] == "v_1 = i0[1:3]" and body[-1] == lines[-1]
    # No chunk returns a view, and each one reading a view binds it from i0.
    assert all(not re.match(r"\(.*\bv_[13]\b.*\) =", call) for call in body[1:-1])
    last = list(module.helpers.values())[-1]
    assert "    v_1 = i0[1:3]" in last and "    v_3 = i0[0:3:2]" in last
    assert re.search(r"\(v_2, i0\)$|\(i0, v_2\)$", body[-2])
    namespace: dict = {"np": np, "njit": lambda **_: lambda f: f}
    source = "\n\n".join(module.helpers.values())
    body_src = "\n".join("    " + line for line in body)
    exec(f"{source}\n\ndef kiln_fn(i0):\n{body_src}\n", namespace)
    x = np.array([1.0, 2.0, 3.0])
    value, view = namespace["kiln_fn"](x)
    # v_2 = [4, 6] before the write; v_1 = [7, 3] after; v_3 = [1, 3].
    assert value == 3.0 + 11.0
    np.testing.assert_array_equal(view, [7.0, 3.0])
    np.testing.assert_array_equal(x, [1.0, 7.0, 3.0])


def test_a_short_body_is_left_whole():
    lines = ["# a", "v_1 = i0 + 1.0", "return (v_1, )"]
    assert split_body(ModuleBuilder(), list(lines), ["i0"]) == lines


def test_a_body_of_at_most_whole_lines_is_left_whole():
    """Chunks are compiled twice (alone, then in their caller): only long bodies split."""
    lines = [f"v_{k} = i0 + {k}.0" for k in range(1, 1000)]
    lines = [s for k, line in enumerate(lines) for s in (f"# n{k}", line)]
    lines.append("return (" + "".join(f"v_{k}, " for k in range(1, 1000)) + ")")
    assert len(lines) <= _chunks.WHOLE_LINES
    assert split_body(ModuleBuilder(), list(lines), ["i0"]) == lines
    module = ModuleBuilder()
    split = split_body(module, list(lines), ["i0"], whole=len(lines) - 1)
    assert len(split) == len(module.helpers) + 1 > 5
