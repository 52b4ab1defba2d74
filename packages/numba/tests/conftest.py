"""Fixtures shared by the Numba backend's tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kiln_compile import _cache as compile_cache
from kiln_compile import config
from kiln_numba import _linker


@pytest.fixture
def cache_dir(tmp_path: Path) -> Iterator[Path]:
    """Point the caches at a new folder; forget generated modules and unwritable roots after."""
    with config.change(cache_dir=str(tmp_path)):
        yield tmp_path
    prefixes = ("kiln_numba_gen_", "kiln_numba_native_")
    for name in [n for n in sys.modules if n.startswith(prefixes)]:
        del sys.modules[name]
    compile_cache._unwritable.clear()
    _linker._shared_loaded.clear()


@pytest.fixture
def fresh_process(tmp_path: Path) -> Callable[[str], str]:
    """Return a runner of a script in a new interpreter (caches under ``tmp_path``).

    It dedents the script, asserts that it exits with 0 (its stderr otherwise) and
    returns its stripped stdout.
    """

    def run(script: str) -> str:
        env = {"KILN_CACHE_DIR": str(tmp_path / "kiln"), "NUMBA_CACHE_DIR": str(tmp_path / "nb")}
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, **env},
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout.strip()

    return run
