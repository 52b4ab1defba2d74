"""The Numba linker's Stage-2 cache: new processes, damaged entries, races, no cache.

Each test uses its own cache folder. "A new process" is a real subprocess where it
matters (both caches skipped, two compiles at once); elsewhere the modules this process
loaded are forgotten (:func:`_forget_loaded`), so the next compile imports the module
file again and Numba looks in its on-disk cache, as a new process would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile import CacheWarning, config
from kiln_numba import _numba_cache_internals as numba_internals


@pytest.fixture(autouse=True)
def _no_memo(monkeypatch):
    """Turn the memo off: these tests compile one graph again and again, for the disk caches.

    In this process, functions load through Numba's cache only (no shared libraries,
    which ``test_shared_library.py`` tests): these tests are about Numba's files.
    """
    monkeypatch.setattr(config, "shared_library", False)
    with config.change(memo=False):
        yield


NUMBA = kiln.FAST_RUN.with_linker("numba")

# Run in a subprocess: compile one graph with a profile, call it, print what happened.
SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import kiln, kiln.tensor as kt

    x = kt.vector("x")
    y = kt.matrix("y")
    w = kt.constant(np.array([1.0, 2.0, 3.0]))
    out = kt.sum(kt.exp(x) * y * w, axis=1) + kt.log1p(kt.sum(x * x))
    f = kiln.function([x, y], out, mode=kiln.FAST_RUN.with_linker("numba"), profile=True)
    value = f(np.array([0.1, 0.2, 0.3]), np.arange(6.0).reshape(2, 3))
    loader = f.profile.stage2.get("loader", "numba")
    numba_imported = "numba" in sys.modules
    stats = f.thunk.jit_fn.stats
    print(json.dumps({
        "loader": loader,
        "numba_imported": numba_imported,
        "stage1": f.profile.cache,
        "stage2": f.profile.stage2["cache"],
        "compiled": f.profile.stage2["compiled"],
        "first_call_s": f.profile.stage2["first_call_s"],
        "hits": sum(stats.cache_hits.values()),
        "misses": sum(stats.cache_misses.values()),
        "value": value.tolist(),
        "summary": f.profile.summary(),
    }))
    """
)


def _run_script(cache_dir: Path, shared_library: bool = False) -> subprocess.Popen[str]:
    env = dict(os.environ, KILN_CACHE_DIR=str(cache_dir))
    env["KILN_FLAGS"] = f"shared_library={'true' if shared_library else 'false'}"
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _expected() -> list[float]:
    x, y, w = np.array([0.1, 0.2, 0.3]), np.arange(6.0).reshape(2, 3), np.array([1.0, 2.0, 3.0])
    return (np.sum(np.exp(x) * y * w, axis=1) + np.log1p(np.sum(x * x))).tolist()


def test_new_process_skips_rewriting_and_llvm(tmp_path):
    """The second process loads the rewritten graph (Stage 1) and the machine code."""
    first = _result(_run_script(tmp_path))
    assert (first["stage1"], first["stage2"], first["compiled"]) == ("miss", "miss", True)
    assert first["misses"] == 1 and first["hits"] == 0
    second = _result(_run_script(tmp_path))
    assert (second["stage1"], second["stage2"], second["compiled"]) == ("hit", "hit", False)
    assert second["hits"] == 1 and second["misses"] == 0
    np.testing.assert_allclose(first["value"], _expected(), rtol=1e-14)
    assert second["value"] == first["value"]
    assert "Stage-2 cache: hit" in second["summary"]


def test_two_processes_compiling_at_once_both_succeed(tmp_path):
    """Two processes compiling the same graph into one empty cache both finish; a third hits."""
    procs = [_run_script(tmp_path) for _ in range(2)]
    results = [_result(p) for p in procs]
    for r in results:
        np.testing.assert_allclose(r["value"], _expected(), rtol=1e-14)
    third = _result(_run_script(tmp_path))
    assert (third["stage2"], third["compiled"]) == ("hit", False)
    assert third["value"] == results[0]["value"]


# --- in this process ------------------------------------------------------------------


def _forget_loaded() -> None:
    """Forget the generated modules this process loaded (as if it were a new process)."""
    for name in [n for n in sys.modules if n.startswith("kiln_numba_gen_")]:
        del sys.modules[name]


def _compile_and_call(xv: np.ndarray | None = None) -> tuple[kiln.Function, np.ndarray]:
    x = kt.vector("x")
    f = kiln.function([x], kt.exp(x) * 2 + kt.sum(kt.sin(x)), mode=NUMBA, profile=True)
    xv = np.array([0.5, -1.0, 2.0]) if xv is None else xv
    out = f(xv)
    np.testing.assert_allclose(out, np.exp(xv) * 2 + np.sum(np.sin(xv)), rtol=1e-14)
    return f, out


def _entry(f: kiln.Function) -> Path:
    return Path(f.profile.stage2["module"]).parent


def test_same_process_reuses_the_loaded_function(cache_dir):
    """A second compile of the same graph in this process shares the compiled dispatcher."""
    f, _ = _compile_and_call()
    g, _ = _compile_and_call()
    assert g.thunk.jit_fn is f.thunk.jit_fn
    assert (f.profile.stage2["cache"], g.profile.stage2["cache"]) == ("miss", "memory")


def test_damaged_module_file_is_rewritten(cache_dir):
    """A truncated module file is detected, rewritten, and its Numba files dropped."""
    f, _ = _compile_and_call()
    module = Path(f.profile.stage2["module"])
    source = module.read_text()
    module.write_text(source[: len(source) // 2])
    _forget_loaded()
    g, _ = _compile_and_call()
    assert module.read_text() == source
    assert g.profile.stage2["cache"] == "miss"  # Numba's files, built from the old text
    _forget_loaded()
    h, _ = _compile_and_call()
    assert h.profile.stage2["cache"] == "hit"


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
@pytest.mark.parametrize("damage", ["truncate", "garbage", "bit"])
def test_damaged_numba_cache_file_is_rebuilt(cache_dir, suffix, damage):
    """A damaged index or data file is a miss (recompiled and rewritten), never a crash."""
    f, expected = _compile_and_call()
    files = sorted((_entry(f) / "__pycache__").glob(f"kiln_gen.kiln_fn-*{suffix}"))
    assert files, list((_entry(f) / "__pycache__").iterdir())
    for path in files:
        blob = path.read_bytes()
        if damage == "truncate":
            path.write_bytes(blob[: len(blob) // 3])
        elif damage == "garbage":
            path.write_bytes(os.urandom(len(blob)))
        else:  # one flipped bit in the middle (unpickles, but the checksum differs)
            i = len(blob) // 2
            path.write_bytes(blob[:i] + bytes([blob[i] ^ 0x10]) + blob[i + 1 :])
    _forget_loaded()
    g, out = _compile_and_call()
    np.testing.assert_array_equal(out, expected)
    assert g.profile.stage2["cache"] == "miss"
    assert "damaged" in g.profile.stage2["note"]
    _forget_loaded()
    h, _ = _compile_and_call()
    assert h.profile.stage2["cache"] == "hit"


def test_cache_disabled_compiles_in_memory(cache_dir):
    """``cache=false``: nothing is written, each process compiles."""
    with config.change(cache=False):
        f, _ = _compile_and_call()
    assert f.profile.stage2["cache"] == "disabled"
    assert f.profile.stage2["module"] == "in memory"
    assert f.profile.cache == "disabled"
    assert not (cache_dir / "numba").exists()


def test_unwritable_cache_root_warns_once_and_works(cache_dir):
    """A cache root that cannot be created: one CacheWarning in all, the function works."""
    blocker = cache_dir / "a-file"
    blocker.write_text("not a folder")
    with config.change(cache_dir=str(blocker / "cache")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f, _ = _compile_and_call()
            g, _ = _compile_and_call(np.array([1.0, 2.0]))
    assert [w.category for w in caught] == [CacheWarning], [str(w.message) for w in caught]
    assert f.profile.stage2["cache"] == "unwritable"
    assert g.profile.stage2["cache"] == "memory"


def test_read_only_populated_cache_loads_and_warns_once_on_write(cache_dir, monkeypatch):
    """A filled cache that cannot be written: hits load; a new specialization warns once."""
    _compile_and_call()
    _forget_loaded()

    def refuse(self: object, sig: object, data: object) -> None:
        raise PermissionError(13, "Permission denied (read-only cache)")

    monkeypatch.setattr(numba_internals.function_cache_class(), "_save_overload", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f, _ = _compile_and_call()  # the cached specialization: loads, writes nothing
        assert f.profile.stage2["cache"] == "hit"
        xs = np.array([0.5, -1.0, 2.0, 1.0])[::2]  # non-contiguous: a new specialization
        out = f(xs)
        np.testing.assert_allclose(out, np.exp(xs) * 2 + np.sum(np.sin(xs)), rtol=1e-14)
        f(np.arange(5.0)[::2])  # that specialization again: compiled, no second warning
    assert [w.category for w in caught] == [CacheWarning], [str(w.message) for w in caught]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only folders")
def test_read_only_folder(cache_dir):
    """A cache folder without write permission: one warning, the function works."""
    _compile_and_call()
    _forget_loaded()
    for path in [cache_dir, *cache_dir.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f, _ = _compile_and_call()
            _compile_and_call(np.arange(4.0)[::2])
        assert f.profile.stage2["cache"] == "hit"
        assert len([w for w in caught if w.category is CacheWarning]) <= 1
    finally:
        for path in [cache_dir, *cache_dir.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
