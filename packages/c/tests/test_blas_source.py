"""Where the C backend's BLAS and LAPACK come from: NumPy's bundled OpenBLAS, else SciPy's.

NumPy's wheel bundles OpenBLAS with 64-bit integers; SciPy's ``cython_blas`` /
``cython_lapack`` take 32-bit ones. The generated C is written for the one found
(``kiln_blas_int``), and the graph's cache key says which. Both are checked against
NumPy on every routine the backend calls (gemm, gemv, potrf/potrs, getrf/getrs, trtrs,
syevd), in float64 and float32.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import kiln_compile as kc
from kiln_c import FallbackWarning, _library, linalg
from kiln_c._numpy_blas import numpy_blas_pointers
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")


@pytest.fixture
def scipy_blas(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """SciPy's LP64 routines, as where NumPy bundles no OpenBLAS."""
    pytest.importorskip("scipy")
    linalg.blas_pointers.cache_clear()
    monkeypatch.setattr(linalg, "_numpy_pointers", lambda: None)
    yield
    linalg.blas_pointers.cache_clear()


def _check_every_routine(dtype: str) -> None:
    rtol = 1e-10 if dtype == "float64" else 2e-4
    rng = np.random.default_rng(0)
    a, b, v = kt.matrix("a", dtype=dtype), kt.matrix("b", dtype=dtype), kt.vector("v", dtype=dtype)
    m = rng.normal(size=(5, 5))
    spd = (m @ m.T + 5 * np.eye(5)).astype(dtype)
    rhs = rng.normal(size=(5, 3)).astype(dtype)
    vec = rng.normal(size=5).astype(dtype)
    outputs = [
        kt.dot(a, b),  # gemm
        kt.dot(a, v),  # gemv
        kt.cholesky(a),  # potrf
        kt.solve(a, b, assume_a="pos"),  # potrf, potrs
        kt.solve(a, b),  # getrf, getrs
        kt.solve_triangular(a, v, lower=True),  # trtrs
        kt.inv(a),
        *kt.slogdet(a),
        kt.eigh(a)[0],  # syevd
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        f = kc.function([a, b, v], outputs, mode=C)
    got = f(spd, rhs, vec)
    lower = np.linalg.cholesky(spd.astype(np.float64))
    expected = [
        spd @ rhs,
        spd @ vec,
        lower,
        np.linalg.solve(spd, rhs),
        np.linalg.solve(spd, rhs),
        np.linalg.solve(np.tril(spd), vec),
        np.linalg.inv(spd),
        *np.linalg.slogdet(spd),
        np.linalg.eigvalsh(spd),
    ]
    for x, y in zip(got, expected, strict=True):
        assert x.dtype == np.dtype(dtype)
        np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_numpys_openblas_computes_every_routine(dtype: str) -> None:
    if numpy_blas_pointers(["dgemm"]) is None:
        pytest.skip("this NumPy bundles no OpenBLAS")
    assert linalg.blas_int() == "int64_t"
    _check_every_routine(dtype)


@pytest.mark.usefixtures("scipy_blas")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_scipys_routines_compute_every_routine(dtype: str) -> None:
    assert linalg.blas_int() == "int"
    _check_every_routine(dtype)


def test_the_graph_key_names_the_blas_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A library written for one BLAS's integers is never loaded for the other's."""
    x = kt.matrix("x")
    fgraph = kc.function([x], [kt.dot(x, x)], mode=C).thunk.fgraph
    monkeypatch.setattr(linalg, "blas_int", lambda: "int64_t")
    ilp64 = _library.graph_key(fgraph)
    monkeypatch.setattr(linalg, "blas_int", lambda: "int")
    assert _library.graph_key(fgraph) != ilp64


def test_a_warm_link_with_linear_algebra_imports_no_scipy(tmp_path: Path) -> None:
    """With NumPy's OpenBLAS, a process that links a graph with BLAS never imports SciPy."""
    if numpy_blas_pointers(["dgemm"]) is None:
        pytest.skip("this NumPy bundles no OpenBLAS")
    script = (
        "import sys, numpy as np, kiln_compile as kc\n"
        "from kiln_graph import tensor as kt\n"
        "a = kt.matrix('a')\n"
        "f = kc.function([a], [kt.sum(kt.cholesky(kt.dot(a, a.T)))], mode=kc.Mode(linker='c'))\n"
        "print(float(f(np.eye(3) * 2.0)[0]), 'scipy' in sys.modules)\n"
    )
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # cold, then warm
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
        )
        value, scipy_loaded = done.stdout.split()
        assert float(value) == pytest.approx(6.0, rel=1e-14)
        assert scipy_loaded == "False"
