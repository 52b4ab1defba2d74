"""The folder of Numba's cache of the Numba NUTS kernel is named by what the kernel is made of.

Numba's cache keys a function by its own file's time stamp and bytecode only: the
kernel's functions (``_nuts_core.py``) hold the machine code of ``_numba_nuts._call_logp``,
so a change to ``_numba_nuts.py`` alone must lead to another folder (never a stale kernel).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kiln_samplers import _c_nuts
from kiln_samplers import _numba_nuts as nn


class _Store:
    """A kernel store whose folders are under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, key: str) -> None:
        return None

    def put(self, key: str, payload: bytes) -> bool:
        return False

    def folder(self, *parts: str, whole_tree: bool = False) -> Path:
        path = self.root.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path


def test_a_change_to_either_source_is_another_cache_folder(tmp_path, monkeypatch):
    copies = []
    for source in nn._SOURCES:
        copy = tmp_path / "src" / source.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(source, copy)
        copies.append(copy)
    monkeypatch.setattr(nn, "_SOURCES", tuple(copies))
    monkeypatch.setattr(_c_nuts, "_store", _Store(tmp_path / "store"))
    first = nn._cache_folder()
    assert first is not None and first.parent == tmp_path / "store" / "numba"
    assert nn._cache_folder() == first  # the same files: the same folder
    nn._mark_cached(first)
    assert nn._kernel_cached(first)
    folders = {first}
    for copy in copies:  # _nuts_core.py, then _numba_nuts.py (what _call_logp is)
        copy.write_text(copy.read_text() + "\n# changed\n")
        folder = nn._cache_folder()
        assert folder is not None and folder not in folders
        assert not nn._kernel_cached(folder)  # nothing cached for the new code
        folders.add(folder)
