"""The Numba linker: generated source -> module file in the cache -> cached njit function.

Stage 2 of a compile writes the generated module to
``<cache root>/numba/<key>/kiln_gen.py``, keyed by the rewritten graph's digest, the
code generator's version, Numba's version and kiln's code fingerprint. Numba compiles it
with ``cache=True``, so its machine code is stored beside the module; a new process that
compiles a structurally identical graph imports the same file and loads the machine code
instead of running LLVM. Constants are passed to the function as arguments (from the
rewritten graph, itself cached by Stage 1), never baked into the code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numba

from kiln_compile import FunctionGraph, Profile, config
from kiln_compile._cache import CacheWarning
from kiln_numba import _codegen
from kiln_numba._codegen import FUNCTION_NAME, Generated, generate

_MODULE_FILE = "kiln_gen.py"
_warned_unwritable: list[bool] = []


def stage2_key(fgraph: FunctionGraph, source: str) -> str:
    """Return the Stage-2 cache key: graph digest, generated source, versions."""
    h = hashlib.sha256(b"kiln-numba\n")
    for part in (fgraph.digest, source, str(_codegen.CODEGEN_VERSION), numba.__version__):
        h.update(part.encode())
        h.update(b"\n")
    return h.hexdigest()


def _module_dir(key: str) -> Path | None:
    """Return the folder of the cache entry ``key``, writing the module if needed.

    None when the cache is disabled or cannot be written (one warning).
    """
    if not config.cache:
        return None
    root = Path(config.cache_dir) / "numba"
    entry = root / key[:32]
    return entry


def _write_module(entry: Path, source: str) -> bool:
    """Create ``entry/kiln_gen.py`` atomically unless it exists with this source."""
    target = entry / _MODULE_FILE
    try:
        if target.is_file() and target.read_text() == source:
            return True
        entry.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry, prefix=".tmp-", suffix=".py")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        if target.exists():
            # A different (corrupt or stale) module: replace it and drop Numba's index,
            # which was keyed on the old file.
            shutil.rmtree(entry / "__pycache__", ignore_errors=True)
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # create-if-absent: the first writer wins
            except FileExistsError:
                pass
            os.unlink(tmp)
        return target.read_text() == source
    except OSError as exc:
        if not _warned_unwritable:
            _warned_unwritable.append(True)
            warnings.warn(
                f"kiln: the Numba cache folder {entry.parent} cannot be written ({exc}); "
                "compiled code will not be cached",
                CacheWarning,
                stacklevel=4,
            )
        return False


def _import(path: Path, name: str, gen: Generated) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(gen.python_globals)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_function(fgraph: FunctionGraph, gen: Generated) -> Any:
    """Return the njit dispatcher of ``gen``, from the cache folder when possible."""
    key = stage2_key(fgraph, gen.source)
    name = f"kiln_numba_gen_{key[:24]}"
    if name in sys.modules:
        return getattr(sys.modules[name], FUNCTION_NAME)
    entry = _module_dir(key)
    if entry is None or not _write_module(entry, gen.source):
        entry = Path(tempfile.mkdtemp(prefix="kiln-numba-"))
        (entry / _MODULE_FILE).write_text(gen.source.replace("cache=True", "cache=False"))
    module = _import(entry / _MODULE_FILE, name, gen)
    return getattr(module, FUNCTION_NAME)


class NumbaThunk:
    """The callable a Function runs: inputs in, outputs out, constants appended.

    ``jit_fn`` is the raw ``@njit`` dispatcher (call it as ``jit_fn(*inputs,
    *constants)`` from Python or from other Numba code; it returns a tuple).
    """

    def __init__(self, jit_fn: Any, constants: Sequence[Any], generated: Generated) -> None:
        self.jit_fn = jit_fn
        self.constants = tuple(constants)
        self.source = generated.source

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        return list(self.jit_fn(*values, *self.constants))


class NumbaLinker:
    """Link a function graph into one Numba-compiled function (cached on disk)."""

    name = "numba"

    def link(
        self, fgraph: FunctionGraph, profile: Profile | None = None
    ) -> Callable[[Sequence[Any]], list[Any]]:
        """Generate, load (or compile) and return the callable computing ``fgraph``."""
        gen = generate(fgraph)
        jit_fn = load_function(fgraph, gen)
        return NumbaThunk(jit_fn, gen.constants, gen)
