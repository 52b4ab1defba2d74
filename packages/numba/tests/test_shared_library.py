"""Generated functions loaded from their shared library, without Numba.

A first process compiles through Numba and links each function's machine code into a
shared library (:mod:`kiln_numba._shared_library`); a second process loads the
libraries without importing Numba. Both must give the values of the Python VM, and the
second the first's to the bit, over graphs that use every kind of code the generator
emits: fused loops and reductions, the runtime's special functions, indexing and
in-place updates, BLAS and LAPACK, shape ops, other dtypes, errors raised in generated
code. In this process: libraries that are damaged, stale or absent fall back to Numba,
and so do arguments of other types than the library was compiled for.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile import DiskCache, config
from kiln_numba import _linker, _shared_library

pytestmark = pytest.mark.skipif(
    not (
        sys.platform == "linux"
        and platform.machine() == "x86_64"
        and shutil.which("cc")
        and shutil.which("nm")
    ),
    reason="shared libraries are built on Linux x86-64 with cc and nm",
)

NUMBA = kiln.FAST_RUN.with_linker("numba")

# The graphs, their inputs, and the values to call them with (both processes and the VM).
CASES = textwrap.dedent(
    """
    import numpy as np
    import kiln.tensor as kt

    def cases():
        rng = np.random.default_rng(0)
        out = {}
        x, y = kt.vector("x"), kt.matrix("y")
        w = kt.constant(np.array([1.0, 2.0, 3.0]))
        out["fused"] = ([x, y], [kt.sum(kt.exp(x) * y * w, axis=1) + kt.log1p(kt.sum(x * x))],
                        [np.array([0.1, 0.2, 0.3]), np.arange(6.0).reshape(2, 3)])
        z = kt.vector("z")
        out["special"] = ([z], [kt.gammaln(z) + kt.digamma(z), kt.erfcx(z), kt.softplus(-z)],
                          [rng.uniform(0.1, 5.0, 7)])
        m = kt.vector("m")
        i = kt.vector("i", dtype="int64")
        indexed = [kt.inc_subtensor(m[i], 1.5), kt.set_subtensor(m[1:3], 0.0), m[i] * 2]
        out["indexing"] = ([m, i], indexed, [np.arange(5.0), np.array([0, 3, 3, 4])])
        a, b = kt.matrix("a"), kt.vector("b")
        s = kt.dot(a, a.T) + kt.eye(3) * 3.0
        out["linalg"] = ([a, b], [kt.dot(a, b), kt.cholesky(s), kt.solve(s, b)],
                         [rng.normal(size=(3, 3)), rng.normal(size=3)])
        c = kt.matrix("c")
        out["shape"] = ([c], [kt.concatenate([c, c * 2], axis=0), kt.reshape(c, (6,)),
                              kt.stack([c.T, c.T]), kt.sum(c, axis=0)],
                        [np.arange(6.0).reshape(2, 3)])
        f32 = kt.vector("f32", dtype="float32")
        n = kt.vector("n", dtype="int64")
        out["dtypes"] = ([f32, n], [f32 * kt.cast(n, "float32"), kt.gt(f32, 0.5), n * 3],
                         [np.array([0.25, 0.75, 1.5], dtype="float32"), np.array([1, 2, 3])])
        mu, log_sigma = kt.scalar("mu"), kt.scalar("log_sigma")
        data = kt.constant(rng.normal(1.0, 2.0, 50))
        logp = kt.sum(-0.5 * ((data - mu) / kt.exp(log_sigma)) ** 2 - log_sigma)
        out["logp_grad"] = ([mu, log_sigma], [logp, *kt.grad(logp, [mu, log_sigma])],
                            [np.asarray(0.5), np.asarray(0.3)])
        return out
    """
)

SCRIPT = CASES + textwrap.dedent(
    """
    import json, sys
    import kiln
    from kiln_numba import _shared_library

    results = {}
    mode = kiln.FAST_RUN.with_linker("numba")
    for name, (inputs, outputs, values) in cases().items():
        f = kiln.function(inputs, outputs, mode=mode, profile=True)
        got = f(*values)
        results[name] = {
            "loader": f.profile.stage2.get("loader", "numba"),
            "compiled": f.profile.stage2["compiled"],
            "values": [[np.asarray(g).dtype.str, np.asarray(g).tolist()] for g in got],
        }
    numba_imported = "numba" in sys.modules
    # Generated code raising: an index out of bounds (Numba's exception helpers, which
    # rebuild the error, import Numba).
    m, i = kt.vector("m"), kt.vector("i", dtype="int64")
    g = kiln.function([m, i], m[i], mode=mode, profile=True)
    g(np.arange(3.0), np.array([0]))
    try:
        g(np.arange(3.0), np.array([5]))
        error = None
    except Exception as exc:
        error = [type(exc).__name__, str(exc)]
    _shared_library.build_queued()
    print(json.dumps({"results": results, "error": error, "numba_imported": numba_imported,
                      "error_loader": g.profile.stage2.get("loader", "numba")}))
    """
)


def _run(cache: Path) -> dict:
    env = dict(os.environ, KILN_CACHE_DIR=str(cache), KILN_FLAGS="shared_library=true")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_new_process_loads_every_kind_of_function_without_numba(tmp_path):
    """Cold: compiled by Numba. Warm: loaded from the libraries, Numba never imported."""
    cold = _run(tmp_path)
    assert all(r["loader"] == "numba" and r["compiled"] for r in cold["results"].values())
    assert len(list((tmp_path / "numba-lib").glob("*.kc"))) == len(cold["results"]) + 1
    warm = _run(tmp_path)
    assert not warm["numba_imported"]
    assert all(r["loader"] == "shared library" for r in warm["results"].values())
    assert not any(r["compiled"] for r in warm["results"].values())
    for name, result in warm["results"].items():  # bit for bit, dtypes included
        assert result["values"] == cold["results"][name]["values"], name
    assert warm["error_loader"] == "shared library"
    assert warm["error"] == cold["error"]
    assert cold["error"][0] == "IndexOutOfBoundsError" and "index 5" in cold["error"][1]

    namespace: dict = {}
    exec(CASES, namespace)
    for name, (inputs, outputs, values) in namespace["cases"]().items():
        reference = kiln.function(inputs, outputs, mode=kiln.FAST_RUN.with_linker("vm"))(*values)
        for (dtype, got), want in zip(warm["results"][name]["values"], reference, strict=True):
            assert dtype == np.asarray(want).dtype.str, name
            np.testing.assert_allclose(
                got, want, rtol=1e-6 if "f4" in dtype else 1e-13, err_msg=name
            )


# --- in this process ------------------------------------------------------------------


@pytest.fixture
def shared(cache_dir, monkeypatch):
    """Shared libraries on, over a new cache folder, with the memo off."""
    monkeypatch.setattr(config, "shared_library", True)
    with config.change(memo=False):
        yield cache_dir


def _forget_loaded() -> None:
    """Forget the functions this process loaded (as if it were a new process)."""
    for name in [n for n in sys.modules if n.startswith("kiln_numba_gen_")]:
        del sys.modules[name]
    _linker._shared_loaded.clear()


def _compile(xv: np.ndarray) -> tuple[kiln.Function, np.ndarray]:
    x = kt.vector("x")
    f = kiln.function([x], [kt.exp(x) * 2 + kt.sum(kt.sin(x))], mode=NUMBA, profile=True)
    out = f(xv)[0]
    np.testing.assert_allclose(out, np.exp(xv) * 2 + np.sum(np.sin(xv)), rtol=1e-14)
    return f, out


def _built(xv: np.ndarray) -> tuple[kiln.Function, Path]:
    """Compile (a miss), wait for the library, forget: return it and its library file."""
    f, _ = _compile(xv)
    assert f.profile.stage2["cache"] == "miss"
    _shared_library.build_queued()
    _forget_loaded()
    libraries = list(Path(f.profile.stage2["module"]).parent.glob("kiln_fn-*.so"))
    assert len(libraries) == 1
    return f, libraries[0]


XV = np.array([0.5, -1.0, 2.0])


def test_the_library_is_loaded_in_place_of_numba(shared):
    _built(XV)
    g, out = _compile(XV)
    assert g.profile.stage2["loader"] == "shared library"
    assert (g.profile.stage2["cache"], g.profile.stage2["compiled"]) == ("hit", False)
    assert g.thunk._shared is not None


@pytest.mark.parametrize(
    "value",
    [
        np.array([0.5, -1.0, 2.0, 0.25, 3.0, 1.0])[::2],  # not contiguous
        np.array([0.5, -1.0, 2.0], dtype="float32"),  # another dtype (trusted input)
        np.array([[0.5, -1.0, 2.0]])[0],  # a view, contiguous: the library takes it
    ],
)
def test_arguments_of_other_types_go_to_numba(shared, value):
    _built(XV)
    x = kt.vector("x")
    g = kiln.function([x], kt.exp(x) * 2 + kt.sum(kt.sin(x)), mode=NUMBA, trust_input=True)
    assert g.thunk._shared is not None
    got = g(value)
    v = value.astype("float64")
    np.testing.assert_allclose(got, np.exp(v) * 2 + np.sum(np.sin(v)), rtol=1e-6)
    takes_it = value.dtype == np.float64 and value.flags.c_contiguous
    assert (g.thunk._jit_fn is None) == takes_it  # Numba's dispatcher only when needed


@pytest.mark.parametrize("damage", ["truncate", "bit", "missing"])
def test_a_damaged_library_is_never_loaded(shared, damage):
    _, library = _built(XV)
    if damage == "missing":
        library.unlink()
    else:
        blob = bytearray(library.read_bytes())
        if damage == "truncate":
            blob = blob[: len(blob) // 2]
        else:
            blob[len(blob) // 3] ^= 0x40
        library.write_bytes(bytes(blob))
    g, _ = _compile(XV)
    assert g.profile.stage2.get("loader") is None
    assert g.profile.stage2["cache"] == "hit"  # Numba's own cache


def test_a_library_built_for_another_machine_is_not_loaded(shared, monkeypatch):
    _built(XV)
    environment = _shared_library._environment()
    monkeypatch.setattr(_shared_library, "_environment", lambda: {**environment, "cpu": "other"})
    g, _ = _compile(XV)
    assert g.profile.stage2.get("loader") is None


def test_without_a_c_compiler_nothing_is_built(shared, monkeypatch):
    monkeypatch.setattr(_shared_library.shutil, "which", lambda name: None)
    f, _ = _compile(XV)
    _shared_library.build_queued()
    assert not list(Path(f.profile.stage2["module"]).parent.glob("kiln_fn-*.so"))
    assert not DiskCache("numba-lib").directory.exists()


def test_the_argument_check_takes_exactly_the_compiled_types():
    """The check before each call: class, dimensions, dtype, alignment, layout, count."""
    f8 = np.dtype("float64")
    check = _shared_library.checker(
        [_shared_library._Arg(f8, 0, "C"), _shared_library._Arg(f8, 2, "C")]
    )
    scalar, matrix = np.asarray(1.0), np.ones((2, 3))
    assert check((scalar, matrix)) and check([scalar, matrix])
    unaligned = np.frombuffer(np.zeros(49, dtype="uint8").data, dtype=f8, count=6, offset=1)
    equal_dtype = np.ones((2, 3), dtype=np.dtype("float64", metadata={"unit": "m"}))
    assert equal_dtype.dtype is not f8 and check((scalar, equal_dtype))
    rejected = [
        (1.0, matrix),  # a Python float
        (scalar, matrix.tolist()),
        (scalar, matrix.astype("float32")),
        (scalar, np.ones(6)),  # one dimension
        (scalar, matrix.T),  # not C-contiguous
        (scalar, np.ones((2, 6))[:, ::2]),
        (scalar, unaligned.reshape(2, 3)),
        (scalar,),
        (scalar, matrix, matrix),
    ]
    for values in rejected:
        assert not check(values), values
    fortran = _shared_library.checker([_shared_library._Arg(f8, 2, "F")])
    assert fortran((matrix.T,)) and not fortran((matrix,))
    assert _shared_library.checker([])(()) and not _shared_library.checker([])((scalar,))


def test_a_library_missing_after_a_killed_process_is_built_by_the_next(shared):
    """The first process exits without linking (killed): the next one, a Numba cache hit, links."""
    f, _ = _compile(XV)
    assert f.profile.stage2["cache"] == "miss"
    _shared_library._queue.clear()  # as if the process had been killed before its exit
    _forget_loaded()
    g, _ = _compile(XV)
    assert (g.profile.stage2["cache"], g.profile.stage2.get("loader")) == ("hit", None)
    _shared_library.build_queued()
    _forget_loaded()
    h, _ = _compile(XV)
    assert h.profile.stage2["loader"] == "shared library"


def test_the_entry_checks_arguments_in_c_and_refuses_others(shared):
    """``checked`` calls the function for the compiled types, returns NotImplemented else."""
    _built(XV)
    g, _ = _compile(XV)
    thunk = g.thunk
    assert thunk._shared.checked is not None
    constants = thunk.constants
    got = thunk._shared.checked(XV, *constants)
    np.testing.assert_array_equal(got[0], thunk._shared.fn(XV, *constants)[0])
    metadata = XV.astype(np.dtype("float64", metadata={"unit": "m"}))
    for value in (XV[::2], XV.astype("float32"), XV.reshape(1, 3), metadata, list(XV)):
        assert thunk._shared.checked(value, *constants) is NotImplemented
    assert thunk._shared.checked(*constants) is NotImplemented  # too few arguments
    np.testing.assert_allclose(thunk([metadata])[0], np.exp(XV) * 2 + np.sum(np.sin(XV)))
    assert thunk._jit_fn is None  # the Python check took the equal dtype: no Numba


def _trusted_from_library(inputs, outputs, values):
    """Compile, build the library, forget; return the trusted Function loaded from it."""
    kiln.function(inputs, outputs, mode=NUMBA)(*values)
    _shared_library.build_queued()
    _forget_loaded()
    g = kiln.function(inputs, outputs, mode=NUMBA, trust_input=True)
    assert g.thunk._shared is not None
    return g


def test_trusted_calls_go_straight_to_the_c_entry(shared):
    """After the first call, a trusted Function calls the entry with its constants bound."""
    mu, log_sigma = kt.scalar("mu"), kt.scalar("log_sigma")
    data = np.random.default_rng(1).normal(1.0, 2.0, 40)
    logp = kt.sum(-0.5 * ((kt.constant(data) - mu) / kt.exp(log_sigma)) ** 2 - log_sigma)
    outputs = [logp, *kt.grad(logp, [mu, log_sigma])]
    point = [np.asarray(0.5), np.asarray(0.3)]
    g = _trusted_from_library([mu, log_sigma], outputs, point)
    first = g(*point)
    assert g._fast is not None and g._fast is g.thunk.direct
    z = (data - 0.5) / np.exp(0.3)
    expected = [np.sum(-0.5 * z**2 - 0.3), np.sum(z / np.exp(0.3)), np.sum(z**2 - 1.0)]
    before = [sys.getrefcount(v) for v in (*point, *g.thunk.constants)]
    for _ in range(1000):
        got = g(*point)
    assert [sys.getrefcount(v) for v in (*point, *g.thunk.constants)] == before  # no leak
    assert type(got) is list and len(got) == 3
    for a, b, e in zip(first, got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(b, e, rtol=1e-12)
    # Other types: NotImplemented from the entry, then the thunk (and Numba) take them.
    other = g(np.asarray(0.5, dtype="float32"), np.asarray(0.3))
    np.testing.assert_allclose(other[0], expected[0], rtol=1e-6)


def test_an_error_in_a_direct_call_is_the_kiln_error(shared):
    m, i = kt.vector("m"), kt.vector("i", dtype="int64")
    g = _trusted_from_library([m, i], m[i] * 2.0, [np.arange(3.0), np.array([0])])
    np.testing.assert_array_equal(g(np.arange(3.0), np.array([2, 1])), [4.0, 2.0])
    assert g._fast is not None
    untrusted = kiln.function([m, i], m[i] * 2.0, mode=NUMBA)
    with pytest.raises(IndexError) as expected:
        untrusted(np.arange(3.0), np.array([5]))
    with pytest.raises(type(expected.value), match=str(expected.value)):
        g(np.arange(3.0), np.array([5]))
    np.testing.assert_array_equal(g(np.arange(3.0), np.array([0])), [0.0])  # still direct


SAMPLE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import kiln as kl
    from kiln_numba import _shared_library

    with kl.Model():
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        eta = kl.Normal("eta", 0.0, 1.0, shape=3)
        kl.Deterministic("theta", mu + tau * eta)
        kl.Normal("y", mu + tau * eta, 2.0, observed=np.array([1.0, 2.5, -1.0]))
        idata = kl.sample(draws=60, tune=60, chains=2, random_seed=3, progressbar=False)
    numba_imported = "numba" in sys.modules
    _shared_library.build_queued()
    post = idata["posterior"]
    print(json.dumps({"numba": numba_imported,
                      "draws": {k: post[k].values.tolist() for k in sorted(post.data_vars)}}))
    """
)


def test_a_warm_kl_sample_never_imports_numba(tmp_path):
    """Second process: logp wrapper, expand and kernel all from libraries; same draws.

    The first process calls the model through Numba's ``cfunc`` callback, the second
    through the C function of the native ABI its wrapper's library exports: the same
    machine code of the model, so the same chains.
    """
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path), KILN_FLAGS="shared_library=true")

    def run() -> dict:
        proc = subprocess.run(
            [sys.executable, "-c", SAMPLE_SCRIPT], env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    cold, warm = run(), run()
    assert cold["numba"] and not warm["numba"]
    assert warm["draws"] == cold["draws"]  # the same machine code, the same chains
