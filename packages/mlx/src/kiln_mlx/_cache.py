"""Stage 2 on disk: MLX's compiled CPU kernels, under kiln's cache root.

``mx.compile`` on the CPU writes each fused kernel as C++ source, compiles it with the
system's C++ compiler into a shared library, and loads it; a later process finds the
library by its file name and loads it without compiling. MLX puts these files in
``$TMPDIR/mlx/<MLX version>/cpu``, reading ``TMPDIR`` each time it writes or looks for a
kernel (checked on MLX 0.32). kiln points that at ``<cache root>/mlx`` by setting
``TMPDIR`` to that folder for the duration of each call of a compiled function
(:func:`kernel_scope`), and restores it after; kernels then live in
``<cache root>/mlx/mlx/<MLX version>/cpu``. With ``config.cache`` off, or a cache root
that cannot be written (one :class:`~kiln_compile.CacheWarning`), MLX keeps its
default place. The folder is private (0700), like every folder of the cache root.

The precompiled preamble. Every kernel's source begins with
``#include "mlx/backend/cpu/compiled_preamble.h"``, about 69,000 lines of C++ once
preprocessed: parsing it is most of the 0.7 s that g++ takes per kernel. g++ looks for
``<header>.gch`` in each folder it searches for a header, the source's own folder
first, and uses it where it was built by the same compiler with the same options. So
:func:`precompile_preamble` builds the preamble once per cache root, MLX version and
g++ (about 2 s, a 50 MB file) into ``<kernel folder>/mlx/backend/cpu/``, next to the
kernels' sources, and each kernel then compiles in about 0.17 s. It runs only where
MLX compiles on the CPU with GCC's g++ (clang does not look for these files); where
it cannot be built, kernels compile from the header, with one
:class:`~kiln_compile.CacheWarning` saying why. The options are MLX's (its
``JitCompiler`` on Linux, checked on MLX 0.32): a precompiled header built with others
would be ignored, silently, by g++.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import mlx.core as mx

from kiln_compile import (
    CacheWarning,
    DiskCache,
    config,
    mark_unwritable,
    new_temporary,
    trusted_file,
)

_NAMESPACE = "mlx"


def kernel_folder() -> str | None:
    """Return ``<kiln cache root>/mlx`` (created private), or None where it cannot be used.

    Examples
    --------
    >>> kernel_folder()  # doctest: +SKIP
    '/home/me/.cache/kiln/mlx'
    """
    if not config.cache:
        return None
    cache = DiskCache(_NAMESPACE)
    target = cache.folder()
    if target is None:
        return None
    try:
        fd, name = new_temporary(Path(target))
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        mark_unwritable(cache.root, target, exc)
        return None
    return str(target)


@contextlib.contextmanager
def kernel_scope(folder: str | None) -> Iterator[None]:
    """Within the context, MLX writes and finds its compiled kernels under ``folder``."""
    if folder is None:
        yield
        return
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = folder
    try:
        yield
    finally:
        if before is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = before


#: MLX's version, as MLX names its kernel folder.
MLX_VERSION: str = mx.__version__  # type: ignore[attr-defined]
#: The header every kernel includes, relative to MLX's include folder.
PREAMBLE = "mlx/backend/cpu/compiled_preamble.h"
#: The options of MLX's g++ command that a precompiled header must share (MLX 0.32).
PREAMBLE_OPTIONS = ("-std=c++17", "-O3", "-Wall", "-fPIC")
#: The MLX versions (major, minor) whose kernel folder and g++ options kiln was checked on.
CHECKED_MLX = ((0, 32),)
# Kernel folders looked at in this process: their current precompiled preamble, or None.
_current: dict[str, Path | None] = {}


def kernel_sources(folder: str) -> Path:
    """Return the folder where MLX writes its kernels' sources under ``folder``."""
    return Path(folder) / "mlx" / MLX_VERSION / "cpu"


@functools.cache
def _gxx() -> str | None:
    """Return the first line of ``g++ --version`` where g++ is GCC's, else None."""
    if shutil.which("g++") is None:
        return None
    try:
        done = subprocess.run(
            ["g++", "--version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    first = done.stdout.splitlines()[0] if done.stdout else ""
    return first if "clang" not in done.stdout.lower() else None


def _include_folder() -> Path:
    return Path(mx.__file__).parent / "include"


def precompile_preamble(folder: str | None) -> Path | None:
    """Build MLX's kernel preamble as a precompiled header in ``folder`` (once).

    Returns the ``.gch`` file, or None where there is none: no folder (the cache is
    off), MLX not compiling on the CPU, no GCC, or a failed build (one
    :class:`~kiln_compile.CacheWarning`). A file built for another MLX or g++ (its
    ``.key`` says which) is built again.
    """
    if folder is None or mx.default_device().type != mx.cpu:
        return None
    if folder not in _current:
        _current[folder] = _current_preamble(folder) if _checked_mlx() else None
    return _current[folder]


@functools.cache
def _checked_mlx() -> bool:
    """Whether MLX's version was checked; if not, say once that kernels compile slower."""
    found = re.match(r"(\d+)\.(\d+)", MLX_VERSION)
    if found and (int(found[1]), int(found[2])) in CHECKED_MLX:
        return True
    warnings.warn(
        f"kiln: MLX {MLX_VERSION} is not a version kiln_mlx was checked on "
        f"({', '.join(f'{a}.{b}' for a, b in CHECKED_MLX)}): its CPU kernels compile "
        "without kiln's precompiled preamble (about 0.7 s each instead of 0.2 s)",
        CacheWarning,
        stacklevel=4,
    )
    return False


def _current_preamble(folder: str) -> Path | None:
    target = kernel_sources(folder) / (PREAMBLE + ".gch")
    compiler = _gxx()
    header = _include_folder() / PREAMBLE
    if compiler is None or not header.is_file():
        return None
    key = "\n".join([f"mlx {MLX_VERSION}", compiler, " ".join(PREAMBLE_OPTIONS), ""])
    stamp = target.with_name(target.name + ".key")
    try:
        if trusted_file(target, folder) and stamp.read_text() == key:
            return target
    except OSError:
        pass
    try:
        _build(header, target, stamp, key)
    except (OSError, subprocess.SubprocessError) as exc:
        warnings.warn(
            f"kiln: MLX's CPU kernels compile without a precompiled preamble (about 0.7 s "
            f"each instead of 0.2 s): building {target} failed: {exc}",
            CacheWarning,
            stacklevel=4,
        )
        return None
    return target


def _build(header: Path, target: Path, stamp: Path, key: str) -> None:
    """Compile ``header`` into ``target`` and write ``stamp``, each by an atomic rename."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, built = new_temporary(target.parent, suffix=".gch")
    os.close(fd)
    try:
        command = ["g++", *PREAMBLE_OPTIONS, "-I", str(_include_folder())]
        command += ["-x", "c++-header", str(header), "-o", built]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise subprocess.SubprocessError(done.stderr.strip()[-2000:])
        os.replace(built, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(built)
    fd, written = new_temporary(target.parent, suffix=".key")
    with os.fdopen(fd, "w") as file:
        file.write(key)
    os.replace(written, stamp)
