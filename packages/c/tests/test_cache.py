"""The C backend's libraries in kiln's cache: written once, verified, rebuilt when damaged."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln_compile as kc
from kiln_c import _linker
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")


def _graph(power: float = 2.0) -> tuple[list, list]:
    x = kt.vector("x")
    return [x], [kt.sum(kt.exp(x) * power), kt.log1p(x**2)]


def _link(cache_dir: Path, power: float = 2.0) -> kc.Function:
    _linker._loaded.clear()  # as a new process would
    kc.clear_function_memo()
    inputs, outputs = _graph(power)
    return kc.function(inputs, outputs, mode=C)


def _check(f: kc.Function, power: float = 2.0) -> None:
    x = np.linspace(-1.0, 2.0, 7)
    total, logs = f(x)
    np.testing.assert_allclose(total, np.sum(np.exp(x) * power), rtol=1e-14)
    np.testing.assert_allclose(logs, np.log1p(x**2), rtol=1e-14)


def _library(cache_dir: Path) -> Path:
    (path,) = (cache_dir / "c").glob("*.so")
    return path


def test_a_library_is_written_once_then_found(cache_dir: Path) -> None:
    """The first link builds and stores ``c/<key>.so`` and its description; later ones load it."""
    f = _link(cache_dir)
    _check(f)
    assert f.thunk.stage2["cache"] == "miss"
    key = f.thunk.stage2["key"]
    assert (cache_dir / "c" / f"{key}.so").is_file()
    assert (cache_dir / "c" / f"{key}.kc").is_file()
    assert stat.S_IMODE(os.stat(cache_dir / "c" / f"{key}.so").st_mode) == 0o600
    g = _link(cache_dir)
    _check(g)
    assert g.thunk.stage2["cache"] == "hit"


def test_graphs_that_differ_in_constants_share_a_library(cache_dir: Path) -> None:
    """Constants are arguments of the C code: one library serves both values."""
    _check(_link(cache_dir, 2.0), 2.0)
    f = _link(cache_dir, 3.0)
    _check(f, 3.0)
    assert f.thunk.stage2["cache"] == "hit"
    assert len(list((cache_dir / "c").glob("*.so"))) == 1


@pytest.mark.parametrize("damage", ["truncated", "bit_flipped", "swapped"])
def test_a_damaged_library_is_rebuilt(cache_dir: Path, damage: str) -> None:
    """A truncated, bit-flipped or another graph's ``.so`` is never loaded: it is rebuilt."""
    _check(_link(cache_dir))
    path = _library(cache_dir)
    good = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "bit_flipped":
        flipped = bytearray(good)
        flipped[len(flipped) // 2] ^= 0x10
        path.write_bytes(bytes(flipped))
    else:
        x = kt.vector("x")
        other = kc.function([x], [kt.sum(kt.sin(x)) * 3.0, kt.cos(x)], mode=C)
        other_path = cache_dir / "c" / f"{other.thunk.stage2['key']}.so"
        path.write_bytes(other_path.read_bytes())
    f = _link(cache_dir)
    _check(f)
    assert f.thunk.stage2["cache"] == "rebuilt"
    assert path.read_bytes() == good


def test_a_cache_that_cannot_be_written_warns_and_works(cache_dir: Path) -> None:
    """A cache folder that cannot be written: one CacheWarning, a library built in memory.

    Read-only by its mode where the tests run as a user the mode binds, else (root) by a
    file standing where the folder would be.
    """
    folder = cache_dir / "c"
    folder.mkdir(mode=0o700)
    folder.chmod(0o500)
    if os.access(folder, os.W_OK):  # root: permissions do not bind
        folder.rmdir()
        folder.write_bytes(b"")
    try:
        with pytest.warns(kc.CacheWarning, match="cannot write"):
            f = _link(cache_dir)
        _check(f)
        assert f.thunk.stage2["cache"] == "built"
        assert folder.is_file() or not list(folder.iterdir())
    finally:
        if folder.is_dir():
            folder.chmod(0o700)


def test_cache_false_writes_nothing(cache_dir: Path) -> None:
    """With ``config.cache`` off the library is built for the process only."""
    with kc.config.change(cache=False):
        f = _link(cache_dir)
    _check(f)
    assert f.thunk.stage2["cache"] == "built"
    assert not (cache_dir / "c").exists()


def test_a_new_process_loads_the_library_without_building(cache_dir: Path) -> None:
    """A second process finds the library (no compiler run) and computes the same values."""
    _check(_link(cache_dir))
    script = (
        "import numpy as np, kiln_compile as kc\n"
        "from kiln_graph import tensor as kt\n"
        "from kiln_c import _compiler\n"
        "_compiler.build = None  # a build would fail\n"
        "x = kt.vector('x')\n"
        "outputs = [kt.sum(kt.exp(x) * 2.0), kt.log1p(x**2)]\n"
        "f = kc.function([x], outputs, mode=kc.Mode(linker='c'))\n"
        "print(f.thunk.stage2['cache'], float(f(np.ones(3))[0]))\n"
    )
    env = {**os.environ, "KILN_CACHE_DIR": str(cache_dir)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    outcome, value = done.stdout.split()
    assert outcome == "hit"
    assert float(value) == pytest.approx(3 * 2 * np.e, rel=1e-14)


def test_a_cache_file_of_another_user_is_not_loaded(cache_dir: Path) -> None:
    """A ``.so`` that others can write is refused (one CacheWarning) and built again."""
    _check(_link(cache_dir))
    path = _library(cache_dir)
    path.chmod(0o666)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = _link(cache_dir)
    _check(f)
    assert f.thunk.stage2["cache"] in ("miss", "rebuilt")
    assert any(issubclass(w.category, kc.CacheWarning) for w in caught)


_COMPILE = """
import sys, numpy as np, kiln_compile as kc
from kiln_graph import tensor as kt
x = kt.vector('x')
power = float(sys.argv[1])
f = kc.function([x], [kt.sum(kt.exp(x) * power) + power, kt.log1p(x**2)], mode=kc.Mode(linker='c'))
print(float(f(np.ones(3))[0]))
"""


def test_four_processes_building_at_once(cache_dir: Path) -> None:
    """Four processes build the same graph (two) and other graphs (two) at once: all right."""
    env = {**os.environ, "KILN_CACHE_DIR": str(cache_dir)}
    powers = [2.0, 2.0, 3.0, 4.0]
    sources = [_COMPILE, _COMPILE, _COMPILE.replace("kt.exp", "kt.sin"), _COMPILE]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", src, str(p)], stdout=subprocess.PIPE, text=True, env=env
        )
        for src, p in zip(sources, powers, strict=True)
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    for out, src, p in zip(outs, sources, powers, strict=True):
        fn = np.sin if "kt.sin" in src else np.exp
        assert float(out) == pytest.approx(3 * fn(1.0) * p + p, rel=1e-14)
    assert not list((cache_dir / "c").glob(".tmp-*"))


def test_a_build_left_by_a_killed_process_is_swept(cache_dir: Path) -> None:
    """A temporary file of a process that died mid-write is removed; the entry is built."""
    _check(_link(cache_dir))
    folder = cache_dir / "c"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    _library(cache_dir).unlink()
    stale = folder / f".tmp-{socket.gethostname()}-{int(dead.stdout)}-abc.so"
    stale.write_bytes(b"half a library")
    kc.sweep_temporaries(folder, force=True)
    assert not stale.exists()
    f = _link(cache_dir)
    _check(f)
    assert f.thunk.stage2["cache"] in ("miss", "rebuilt")
