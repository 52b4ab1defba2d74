"""Fixtures shared by the C backend's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kiln_c import _compiler, _linker
from kiln_compile import _cache as compile_cache
from kiln_compile import config


@pytest.fixture
def cache_dir(tmp_path: Path) -> Iterator[Path]:
    """Point the caches at a new folder; forget loaded libraries and unwritable roots after."""
    _linker._loaded.clear()
    with config.change(cache_dir=str(tmp_path)):
        yield tmp_path
    compile_cache._unwritable.clear()
    _linker._loaded.clear()


@pytest.fixture(autouse=True, scope="session")
def _optimised_builds_only() -> Iterator[None]:
    """Build with the system compiler only, unless ``KILN_C_QUICK`` says otherwise.

    ``KILN_C_QUICK=only`` runs them on tcc's quick builds (its results to the bit);
    test_quick_build.py turns the quick build on where it tests it.
    """
    if "KILN_C_QUICK" in os.environ:
        yield
        return
    os.environ["KILN_C_QUICK"] = "0"
    _compiler.find_quick_compiler.cache_clear()
    yield
    del os.environ["KILN_C_QUICK"]
    _compiler.find_quick_compiler.cache_clear()
