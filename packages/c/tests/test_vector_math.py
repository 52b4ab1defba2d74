"""The vectorizable float64 ``exp`` and ``log1p`` of ``kiln_runtime.h``, against NumPy's.

Generated loops of 128 elements or more (or of lengths known only at run time) compute
``exp`` and ``log1p`` with ``kiln_exp_v`` and ``kiln_log1p_v``, which gcc vectorizes,
and a fused loop folding their values sums them in two passes (values into a buffer,
then added in order). Checked here: within 1 ulp of NumPy over each function's whole
domain, zeros, infinities, NaN and tiny arguments exactly; tcc's build and the
optimised build (each SIMD copy) to the bit; graphs using them against the Python VM.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln_compile as kc
from kiln_c import _codegen, _compiler
from kiln_graph import tensor as kt

_LOOPS = """
KILN_VECTOR_CLONES
void loop_exp(const double *x, double *out, int64_t n) {
KILN_IVDEP
for (int64_t i = 0; i < n; i++) out[i] = kiln_exp_v(x[i]);
}
KILN_VECTOR_CLONES
void loop_log1p(const double *x, double *out, int64_t n) {
KILN_IVDEP
for (int64_t i = 0; i < n; i++) out[i] = kiln_log1p_v(x[i]);
}
KILN_VECTOR_CLONES
void loop_i64(const int64_t *x, double *out, int64_t n) {
KILN_IVDEP
for (int64_t i = 0; i < n; i++) out[i] = kiln_i64_to_f64(x[i]);
}
"""
_SOURCE = _codegen.RUNTIME.read_text() + _LOOPS

Loops = dict[str, Callable[[np.ndarray], np.ndarray]]


def _load(path: Path) -> Loops:
    lib = ctypes.CDLL(str(path))
    loops: Loops = {}
    for name in ("exp", "log1p", "i64"):
        fn = getattr(lib, f"loop_{name}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        dtype = np.int64 if name == "i64" else np.float64

        def run(x: np.ndarray, fn=fn, dtype=dtype) -> np.ndarray:  # type: ignore[no-untyped-def]
            x = np.ascontiguousarray(x, dtype=dtype)
            out = np.empty(x.shape, dtype=np.float64)
            fn(x.ctypes.data, out.ctypes.data, x.size)
            return out

        loops[name] = run
    loops["_lib"] = lib  # type: ignore[assignment]  # kept alive with the functions
    return loops


@pytest.fixture(scope="module")
def optimised(tmp_path_factory: pytest.TempPathFactory) -> Loops:
    path = tmp_path_factory.mktemp("vm") / "optimised.so"
    path.write_bytes(_compiler.build(_SOURCE))
    return _load(path)


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Loops:
    tcc = shutil.which("tcc")
    if tcc is None:
        pytest.skip("tcc is not installed")
    folder = tmp_path_factory.mktemp("vm_quick")
    (folder / "src.c").write_text(_SOURCE)
    command = [tcc, *_compiler.QUICK_FLAGS, str(folder / "src.c"), "-o", str(folder / "q.so")]
    subprocess.run([*command, "-lm"], check=True, capture_output=True)
    return _load(folder / "q.so")


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in units in the last place (0 where both are equal or both NaN)."""
    a, b = got.view(np.int64), want.view(np.int64)
    a = np.where(a < 0, np.int64(-(2**63)) - a, a)
    b = np.where(b < 0, np.int64(-(2**63)) - b, b)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    return np.where(same, 0, np.abs(a - b))


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 5e-324, -5e-324, 1.0, -1.0]


def _exp_points() -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.concatenate(
        [
            rng.uniform(-750.0, 712.0, 400_000),
            rng.normal(0.0, 1.0, 300_000),
            rng.normal(0.0, 1e-8, 50_000),
            [709.782712893384, 709.7827128933841, 709.79, -745.1332191019411, -745.2],
            [-708.39641853226408, -708.4, -744.44007192138122],  # subnormal results
            SPECIAL,
        ]
    )


def _log1p_points() -> np.ndarray:
    rng = np.random.default_rng(1)
    return np.concatenate(
        [
            rng.uniform(-1.0, 3.0, 300_000),
            np.expm1(rng.uniform(-40.0, 709.0, 300_000)),  # up to 1e308
            rng.normal(0.0, 1e-9, 50_000),
            -rng.uniform(0.0, 1.0, 100_000),
            rng.uniform(-1.0, -1.0 + 1e-10, 50_000),
            [-1.5, -1e300, 1.7e308, 2.0**-53, -(2.0**-53), 0.4142135623730951],
            SPECIAL,
        ]
    )


def test_exp_is_within_one_ulp_everywhere(optimised: Loops) -> None:
    x = _exp_points()
    with np.errstate(over="ignore"):
        want = np.exp(x)
    assert _ulps(optimised["exp"](x), want).max() <= 1
    special = np.array(SPECIAL[:9])  # zeros, infinities, NaN, tiny: exact
    np.testing.assert_array_equal(optimised["exp"](special), np.exp(special))


def test_log1p_is_within_one_ulp_everywhere(optimised: Loops) -> None:
    x = _log1p_points()
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log1p(x)
    got = optimised["log1p"](x)
    assert _ulps(got, want).max() <= 1
    assert np.signbit(got[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()
    special = np.array([-1.0, np.inf, np.nan, -2.0, 1e-300, -5e-324])
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(optimised["log1p"](special), np.log1p(special))


def _int64_points() -> np.ndarray:
    rng = np.random.default_rng(2)
    edges = [
        0,
        1,
        -1,
        2**63 - 1,
        -(2**63),
        2**53 + 1,
        -(2**53 + 1),
        2**62 + 2**9,
        2**62 + 2**10 + 1,
    ]
    return np.concatenate(
        [
            rng.integers(-(2**63), 2**63 - 1, 300_000, dtype=np.int64),
            rng.integers(-(2**54), 2**54, 300_000),
            rng.integers(-(10**6), 10**6, 100_000),
            np.array(edges, dtype=np.int64),
        ]
    )


def test_int64_to_float64_is_the_conversion_to_the_bit(optimised: Loops) -> None:
    """kiln_i64_to_f64 (SIMD without AVX-512) rounds as C's conversion, ties included."""
    x = _int64_points()
    got = optimised["i64"](x)
    np.testing.assert_array_equal(got.view(np.int64), x.astype(np.float64).view(np.int64))


def test_the_quick_build_gives_the_same_bits(optimised: Loops, quick: Loops) -> None:
    """The quick build (tcc, no SIMD) and gcc's (this machine's copy) agree to the bit."""
    for name, x in (("exp", _exp_points()), ("log1p", _log1p_points()), ("i64", _int64_points())):
        got, want = quick[name](x), optimised[name](x)
        np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


C = kiln.FAST_RUN.with_linker("c")


@pytest.mark.parametrize("n", [1, 7, 127, 128, 1000])
def test_long_loops_match_the_vm(cache_dir: Path, n: int) -> None:
    """Loops of exp / log1p and sums of them (two passes), short and long, against the VM."""
    rng = np.random.default_rng(n)
    x, m, k = kt.vector("x"), kt.matrix("m"), kt.vector("k", dtype="int64")
    outputs = [
        kt.exp(x),
        kt.log1p(kt.exp(-kt.abs(x))),
        kt.sum(kt.log1p(kt.abs(x)) * 2.0 - x),
        kt.sum(kt.exp(m), axis=1),  # a sum over the last axis, per row
        kt.sum(kt.exp(-m), axis=0),
        kt.sum(k * x - kt.log1p(kt.exp(x))) + kt.max(kt.exp(x[::-1])),  # a strided input
    ]
    values = [rng.normal(0.0, 3.0, n), rng.normal(0.0, 2.0, (3, n)), rng.integers(0, 2, n)]
    got = kc.function([x, m, k], outputs, mode=C)(*values)
    want = kc.function([x, m, k], outputs, mode=kc.Mode(linker="vm"))(*values)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=0)


def test_a_long_fused_loop_sums_in_two_passes_with_the_vector_functions(cache_dir: Path) -> None:
    """The generated source: vector math in SIMD copies, values summed in a second loop."""
    rng = np.random.default_rng(5)
    x, k = kt.vector("x", shape=(1000,)), kt.vector("k", dtype="int64", shape=(1000,))
    e = kt.exp(-x * x)
    outputs = [kt.sum(k * x - kt.log1p(x * x) + e), e * 2.0 + x]
    f = kc.function([x, k], outputs, mode=C)
    assert [type(n.op).__name__ for n in f.fgraph.nodes] == ["FusedLoop"]
    source = f.thunk.generated.source
    nodes = source[source.index("static int node_0") - 30 :]  # after the runtime
    assert "kiln_log1p_v(" in nodes and "kiln_exp_v(" in nodes
    assert "KILN_VECTOR_CLONES\nstatic int node_0" in nodes
    assert len(re.findall(r"j < 1000; j\+\+", nodes)) == 2  # values, then the sum
    values = [rng.normal(0.0, 3.0, 1000), rng.integers(0, 2, 1000)]
    want = kc.function([x, k], outputs, mode=kc.Mode(linker="vm"))(*values)
    for g, w in zip(f(*values), want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14)


def test_a_long_loop_that_cannot_be_simd_calls_c_math(cache_dir: Path) -> None:
    """A loop calling ``tanh`` does not vectorize: ``exp`` and ``log1p`` stay C's there."""
    x = kt.vector("x", shape=(1000,))
    outputs = [kt.exp(x) * kt.tanh(x) + kt.log1p(x * x), kt.sum(kt.exp(-x * x) * kt.tanh(x))]
    f = kc.function([x], outputs, mode=C)
    nodes = f.thunk.generated.source
    nodes = nodes[nodes.index("static int node_0") - 30 :]
    assert "exp(" in nodes and "log1p(" in nodes
    assert "kiln_exp_v(" not in nodes and "kiln_log1p_v(" not in nodes
    assert "KILN_VECTOR_CLONES" not in nodes
    xv = np.random.default_rng(6).normal(0.0, 2.0, 1000)
    want = kc.function([x], outputs, mode=kc.Mode(linker="vm"))(xv)
    for g, w in zip(f(xv), want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)  # C's tanh and NumPy's
