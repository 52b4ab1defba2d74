"""MLX's kernels under kiln's cache root: the precompiled preamble they all include."""

from __future__ import annotations

import subprocess
import warnings

import numpy as np
import pytest

from kiln_compile import CacheWarning, Mode, config, function
from kiln_graph import tensor as kt
from kiln_mlx import _cache

GCC = _cache._gxx() is not None
needs_gcc = pytest.mark.skipif(not GCC, reason="g++ is not GCC's here")


@pytest.fixture
def root(tmp_path, monkeypatch):
    """Use a new cache root, with no precompiled preamble known to this process."""
    monkeypatch.setattr(_cache, "_current", {})
    with config.change(cache_dir=str(tmp_path)):
        yield tmp_path


def _compile_one(scale: float) -> float:
    x = kt.vector("x")
    f = function([x], (kt.log1p(x * x) * scale + kt.tanh(x)).sum(), mode=Mode(linker="mlx"))
    return float(f(np.arange(4.0)))


def _expected(scale: float) -> float:
    x = np.arange(4.0)
    return float((np.log1p(x * x) * scale + np.tanh(x)).sum())


@needs_gcc
def test_g_plus_plus_uses_the_preamble_built_next_to_the_kernels_sources(root):
    assert _compile_one(2.0) == pytest.approx(_expected(2.0), rel=1e-14)
    sources = _cache.kernel_sources(str(root / "mlx"))
    kernels = sorted(sources.glob("*.cpp"))
    gch = sources / (_cache.PREAMBLE + ".gch")
    assert kernels and gch.is_file()
    assert gch.with_name(gch.name + ".key").read_text().startswith("mlx ")
    # g++ -H marks a precompiled header it uses with "!"; MLX runs g++ on the kernel's
    # source in this folder with these options.
    done = subprocess.run(
        ["g++", *_cache.PREAMBLE_OPTIONS, "-I", str(_cache._include_folder()), "-H"]
        + ["-fsyntax-only", kernels[0].name],
        cwd=sources,
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"! {_cache.PREAMBLE}.gch" in done.stderr.splitlines()[0]


@needs_gcc
def test_the_options_are_those_of_mlxs_own_g_plus_plus_command():
    """A precompiled header built with other options than MLX's would be ignored."""
    library = next((_cache._include_folder().parent / "lib").glob("libmlx*"))
    command = "g++ " + " ".join(_cache.PREAMBLE_OPTIONS) + " -shared "
    assert command.encode() in library.read_bytes()


@needs_gcc
def test_a_preamble_built_for_another_mlx_or_compiler_is_built_again(root):
    folder = str(root / "mlx")
    (root / "mlx").mkdir(mode=0o700)
    first = _cache.precompile_preamble(folder)
    assert first is not None
    stamp = first.with_name(first.name + ".key")
    stamp.write_text("mlx 0.0.1\ng++ (GCC) 1.0\n")
    first.write_bytes(b"not a precompiled header")
    _cache._current.clear()
    again = _cache.precompile_preamble(folder)
    assert again == first and again.stat().st_size > 1_000_000
    assert stamp.read_text().startswith(f"mlx {_cache.MLX_VERSION}\n")
    assert not [p for p in first.parent.iterdir() if p.name.startswith(".tmp-")]


@needs_gcc
def test_a_failed_build_warns_once_and_kernels_compile_from_the_header(root, monkeypatch):
    monkeypatch.setattr(_cache, "PREAMBLE_OPTIONS", ("-std=c++17", "--no-such-option"))
    with pytest.warns(CacheWarning, match="without a precompiled preamble.*failed"):
        assert _compile_one(3.0) == pytest.approx(_expected(3.0), rel=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compile_one(4.0) == pytest.approx(_expected(4.0), rel=1e-14)
    sources = _cache.kernel_sources(str(root / "mlx"))
    assert not (sources / (_cache.PREAMBLE + ".gch")).exists()
    assert not [p for p in (sources / _cache.PREAMBLE).parent.iterdir()]


def test_with_the_cache_off_there_is_no_preamble(root):
    with config.change(cache=False):
        assert _compile_one(5.0) == pytest.approx(_expected(5.0), rel=1e-14)
    assert _cache.precompile_preamble(None) is None
    assert not list(root.rglob("*.gch"))


def test_an_mlx_version_not_checked_compiles_without_the_preamble_and_says_so(root, monkeypatch):
    monkeypatch.setattr(_cache, "CHECKED_MLX", ((0, 1),))
    _cache._checked_mlx.cache_clear()
    try:
        with pytest.warns(CacheWarning, match=r"not a version kiln_mlx was checked on \(0.1\)"):
            assert _cache.precompile_preamble(str(root)) is None
    finally:
        _cache._checked_mlx.cache_clear()
    assert not list(root.rglob("*.gch"))
