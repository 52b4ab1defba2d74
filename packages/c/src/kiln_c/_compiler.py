"""The system C compiler: found once, run on one translation unit into a shared library.

The compiler is ``CC`` when set, else the first of ``cc``, ``gcc``, ``clang`` on
``PATH``. The flags keep a library shareable between machines of one architecture (no
``-march=native`` unless ``KILN_C_FLAGS`` asks for it) and its arithmetic as the C
source says (``-ffp-contract=off``: no fused multiply-adds, the same bits at every
optimisation level; ``-fwrapv``: integers wrap as NumPy's do; ``-fno-trapping-math``:
no floating-point traps, which changes no value but lets gcc turn selects in loops into
SIMD blends; on gcc, ``-fvect-cost-model=cheap``: loops of lengths known only at run
time are vectorized too, with a scalar epilogue, which -O2's very cheap model refuses,
for about 0.03 s more on M1 and M3's cold builds). Loops calling ``kiln_exp_v`` /
``kiln_log1p_v`` are compiled once per SIMD width (``KILN_VECTOR_CLONES`` in
``kiln_runtime.h``), picked when the library loads.
``KILN_C_FLAGS`` adds flags after kiln's.

When ``tcc`` is on ``PATH`` (optional; ``KILN_C_QUICK=0`` turns it off), a graph not yet
built is first built by it (tens of milliseconds, code 1.4-1.8x slower, the same bits:
it fuses no multiply-adds) while the optimised build runs in the background
(:mod:`kiln_c._linker`); only the optimised library is cached.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kiln_c.random import link_archives
from kiln_compile import DiskCache
from kiln_graph import KilnError

#: kiln's cache namespace of the C backend (libraries, their descriptions, compilers).
CACHE_NAMESPACE = "c"

FLAGS = (
    "-O2",
    "-fPIC",
    "-shared",
    "-std=c99",
    "-ffp-contract=off",
    "-fwrapv",
    "-fno-math-errno",
    "-fno-trapping-math",
)
#: Flags for gcc only (clang has no such option; its -O2 vectorizes these loops already).
GCC_FLAGS = ("-fvect-cost-model=cheap",)
_CANDIDATES = ("cc", "gcc", "clang")
_TIMEOUT_S = 600.0


class CompilerNotFoundError(KilnError, RuntimeError):
    """No C compiler was found for the C backend."""


class CompileError(KilnError, RuntimeError):
    """The C compiler failed on a generated file (a bug of kiln_c: please report it)."""


@functools.cache
def find_compiler() -> str:
    """Return the path of the C compiler (``CC``, then ``cc``, ``gcc``, ``clang``).

    Raises
    ------
    CompilerNotFoundError
        If none is found; the message says what to install.
    """
    cc = os.environ.get("CC")
    candidates = [cc.split()[0]] if cc else list(_CANDIDATES)
    for name in candidates:
        found = shutil.which(name)
        if found:
            return found
    hint = {
        "linux": "install gcc (Debian/Ubuntu: `apt install gcc`; Fedora: `dnf install gcc`)",
        "darwin": "install the Xcode command line tools (`xcode-select --install`)",
    }.get(sys.platform, "install a C compiler (gcc or clang) and put it on PATH")
    where = f"CC={cc!r}" if cc else "cc, gcc or clang on PATH"
    raise CompilerNotFoundError(
        f"the C backend needs a C compiler and found none ({where}); {hint}, or set CC, "
        "or use another backend (backend='numba')"
    )


#: The quick compiler's flags (tcc: no optimisation, so no contraction either).
QUICK_FLAGS = ("-shared", "-fPIC", "-std=c99", "-fwrapv")


@functools.cache
def find_quick_compiler() -> str | None:
    """Return the path of ``tcc`` for quick first builds, or None (absent, or turned off)."""
    if os.environ.get("KILN_C_QUICK", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    return shutil.which("tcc")


def flags() -> tuple[str, ...]:
    """Return the compiler flags: kiln's (gcc's own with gcc), then ``KILN_C_FLAGS``'s."""
    own: tuple[str, ...] = FLAGS
    try:
        if "clang" not in compiler_identity(find_compiler()).lower():
            own += GCC_FLAGS
    except CompilerNotFoundError:
        pass
    return own + tuple(shlex.split(os.environ.get("KILN_C_FLAGS", "")))


@functools.cache
def compiler_identity(compiler: str) -> str:
    """Return the compiler's path and version line (part of the cache key).

    The version line is kept in kiln's cache under the compiler executable's real path,
    size and modification time, so that a warm process runs no ``--version``.
    """
    real = os.path.realpath(compiler)
    try:
        st = os.stat(real)
        stamp = f"{real} {st.st_size} {st.st_mtime_ns}"
    except OSError:
        stamp = ""
    cache = DiskCache(CACHE_NAMESPACE)
    key = hashlib.sha256(f"kiln-c compiler {stamp}".encode()).hexdigest()
    if stamp and cache.enabled:
        known = cache.get(key)
        if known is not None:
            return f"{compiler} {known.decode(errors='replace')}"
    try:
        done = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
        version = (done.stdout or done.stderr).splitlines()[0] if done.stdout or done.stderr else ""
    except (OSError, subprocess.SubprocessError):
        return f"{compiler} "
    if stamp and cache.enabled:
        cache.put(key, version.encode())
    return f"{compiler} {version}"


def build(source: str, quick: bool = False, include: tuple[str, ...] = ()) -> bytes:
    """Compile ``source`` (one C99 file) into a shared library; return its bytes.

    With ``quick``, by :func:`find_quick_compiler`'s compiler (which must be there);
    ``include``: folders searched for headers (``-I``).

    Raises
    ------
    CompileError
        If the compiler fails (its messages are in the error).
    """
    compiler = find_quick_compiler() if quick else find_compiler()
    assert compiler is not None, "build(quick=True) without a quick compiler"
    options = QUICK_FLAGS if quick else flags()
    with tempfile.TemporaryDirectory(prefix="kiln-c-") as folder:
        src = Path(folder) / "kiln_graph.c"
        out = Path(folder) / "kiln_graph.so"
        src.write_text(source)
        # Static archives the source calls into (NumPy's libnpyrandom) go before -lm.
        command = [compiler, *options, *(f"-I{path}" for path in include), str(src)]
        command += ["-o", str(out), *link_archives(source), "-lm"]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise CompileError(f"running {compiler} failed: {exc}") from exc
        if done.returncode != 0:
            raise CompileError(
                f"{compiler} failed on a generated file (a bug of the C backend; please "
                f"report it):\n{done.stderr.strip()[-3000:]}"
            )
        return out.read_bytes()
