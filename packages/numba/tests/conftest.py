"""Fixtures shared by the Numba backend's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
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
