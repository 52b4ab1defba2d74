"""A generated function's machine code as a shared library, loaded without Numba.

Numba keeps a compiled function's machine code in its cache, but loading it from there
means importing Numba (about 0.25 s) and running its loader (0.05 s more). So after
Numba compiles a generated function (a Stage-2 miss), :func:`build_later` queues it, and
when the process exits its machine code is linked into a shared library by the system C
compiler (about 0.1 s a function); :func:`load` maps it in a later process in about a
millisecond, without importing Numba:

- The machine code is Numba's object file of the function: it holds everything the
  function calls and Numba's CPython wrapper (arguments unboxed, outputs boxed, errors
  raised). It refers to a few functions of Numba's runtime (NRT's allocator, boxing and
  exception helpers) that live in Numba's C extensions and are not exported. The library
  reaches them through trampolines (``jmp *slot``) whose slots :func:`load` fills with
  their addresses, read from those extensions' ``c_helpers``; the extensions are loaded
  from their files, without Numba's package (a later ``import numba`` reuses them).
- ``numba_unpickle``, which the wrapper calls at every call (for ``numpy.ndarray``, to
  box outputs), is the library's own, memoized per constant in C; Numba's goes through
  ``numba.core.serialize`` (importing Numba) and a Python call each time. Numba's code
  takes the symbol ``PyExc_<name>`` as the exception type itself, where CPython's is a
  pointer to it: those symbols are cells of the library, filled at load, and the
  C-API functions that receive exception types translate them
  (:func:`kiln_numba._shared_library_sources.assembly`).
- The wrapper reads its constants (the outputs' dtypes) from Numba ``Environment``
  objects whose addresses go into the library's environment variables, and
  ``_dynfunc.make_function`` turns it into a Python function, as in Numba.
- The wrapper checks no types. The library's entry point (``SharedFunction.checked``)
  checks them in C first, as Numba's dispatcher does: array class, dimensions, dtype
  (the same object), alignment and layout, and returns ``NotImplemented`` for other
  arguments; :func:`checker` is the same check in Python, for dtypes that are equal
  but other objects. The caller gives the rest to Numba's dispatcher, which compiles
  for them.
- A Function with trusted inputs calls the library even more directly after its first
  call: ``SharedFunction.bind(constants)`` is a C function (``METH_FASTCALL``) that
  takes the inputs only, checks them, appends the constants, calls the wrapper and
  returns the outputs as a list (or ``NotImplemented``). No Python frame of the thunk,
  argument tuple or list conversion remains on the call.

The library is a file of the module's cache entry (``kiln_fn-<digest>.so``, named by
its content, so two processes building it at once never mix their files); its
description (the symbols, the constants, the argument types, the library's SHA-256, the
CPU, Python and NumPy it was built for) is an entry of kiln's disk cache (namespace
``numba-lib``, keyed like the module): data, not a pickle (:func:`kiln_compile.dumps_data`),
checksummed, bound to its key and written atomically; a library whose digest differs,
or whose file another user owns or can write, is never mapped. It is built only where
it is tested, Linux on x86-64 with ``cc`` and ``nm``, for functions whose arguments are
arrays and whose results are arrays (generated functions) or one number
(:mod:`kiln_numba.native`'s wrappers, whose library also exports their entry in Numba's
calling convention and, when built with it, the C function of the native log-density ABI
calling that entry, :data:`kiln_numba._numba_internals.NATIVE_ABI_C`: samplers get
``kiln_compile.NativeModel`` pointers from a mapped library without Numba); anything
else, or anything that fails,
leaves the function to Numba, as does ``config.shared_library = False``
(``KILN_FLAGS=shared_library=false``) or a Numba whose internals were not checked
(:mod:`kiln_numba._numba_internals`, through which every use of them goes).
"""

from __future__ import annotations

import atexit
import builtins
import ctypes
import dataclasses
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from kiln_compile import (
    CorruptDataError,
    DiskCache,
    GraphNotSerializableError,
    config,
    dumps_data,
    is_unwritable,
    loads_data,
    mark_unwritable,
    new_temporary_folder,
    trusted_file,
    trusted_folder,
)
from kiln_numba import _numba_internals as internals
from kiln_numba import _shared_library_sources as sources

__all__ = ["SharedFunction", "build_later", "build_queued", "checker", "has_library", "load"]

#: Bumped when what :func:`build_later` writes changes meaning.
FORMAT = 4
_NAMESPACE = "numba-lib"
_COMPILE_TIMEOUT_S = 120.0


def supported() -> bool:
    """Whether shared libraries of generated code are built and loaded here.

    Linux on x86-64 with a Numba of :data:`kiln_numba._numba_internals.CHECKED`, unless
    ``config.shared_library`` is false (``KILN_FLAGS=shared_library=false``).
    """
    return (
        config.shared_library
        and sys.platform == "linux"
        and platform.machine() == "x86_64"
        and internals.version_supported()
    )


@dataclasses.dataclass(frozen=True)
class _Arg:
    dtype: np.dtype
    ndim: int
    layout: str  # Numba's: "C", "F" or "A"


def checker(args: Sequence[_Arg]) -> Callable[[Sequence[Any]], bool]:
    """Return a function telling whether values are arrays of the types of ``args``.

    The check runs before every call, so it is written out for the signature (no loop,
    no lookups): the values must be one per ``args``, each a NumPy array of its dtype
    (identical, or equal) and number of dimensions, aligned, and contiguous as its
    layout says.
    """
    if not args:
        return lambda values: len(values) == 0
    names: dict[str, Any] = {"ndarray": np.ndarray}
    tests = []
    for i, arg in enumerate(args):
        names[f"d{i}"] = arg.dtype
        test = f"v{i}.__class__ is ndarray and v{i}.ndim == {arg.ndim}"
        test += f" and (v{i}.dtype is d{i} or v{i}.dtype == d{i})"
        if arg.ndim:
            test += f" and (f{i} := v{i}.flags).aligned"
            contiguous = {"C": "c_contiguous", "F": "f_contiguous"}.get(arg.layout)
            if contiguous:
                test += f" and f{i}.{contiguous}"
        tests.append(test)
    params = "".join(f"v{i}, " for i in range(len(args)))
    source = (
        "def check(values):\n"
        f"    if len(values) != {len(args)}:\n"
        "        return False\n"
        f"    ({params}) = values\n"
        f"    return bool({' and '.join(tests)})\n"
    )
    exec(compile(source, "<kiln_numba shared-library check>", "exec"), names)
    return names["check"]  # type: ignore[no-any-return]


class SharedFunction:
    """The generated function loaded from its shared library.

    ``fn(*inputs, *constants)`` returns a tuple of arrays, like Numba's dispatcher, for
    arguments that :meth:`accepts` (only those: the wrapper checks no types).
    ``checked(*inputs, *constants)`` (None where the layouts could not be confirmed)
    checks them first, in C, and returns ``NotImplemented`` for others: arrays of
    identical dtypes only (an equal dtype that is another object, such as one with
    metadata, is for :meth:`accepts`).
    """

    def __init__(
        self,
        fn: Any,
        checked: Any,
        args: list[_Arg],
        keepalive: tuple[Any, ...],
        binder: Callable[[Any, Any], Any] | None = None,
        native_address: int | None = None,
        abi_address: int | None = None,
    ) -> None:
        self.fn = fn
        self.checked = checked
        self.args = args
        self._keepalive = keepalive
        self._binder = binder
        #: The function itself, in Numba's calling convention (for compiled callers).
        self.native_address = native_address
        #: The native ABI's C function over it (``kiln_abi_logp`` or ``kiln_abi_expand``),
        #: None where the library was built without one.
        self.abi_address = abi_address

    def accepts(self, values: Sequence[Any], start: int = 0) -> bool:
        """Whether ``values`` (the arguments from position ``start``) have the compiled types."""
        return checker(self.args[start : start + len(values)])(values)

    def bind(self, constants: tuple[Any, ...]) -> Any:
        """Return ``direct(*inputs)``: ``checked`` with ``constants`` appended, in C.

        It returns the outputs as a list, or ``NotImplemented`` for inputs of other
        types, with none of a Python function's frame, argument tuples or conversion.
        None where the entry is not available (``checked`` is None).
        """
        if self._binder is None or self.checked is None:
            return None
        if len(constants) > len(self.args) or not self.accepts(
            constants, start=len(self.args) - len(constants)
        ):
            return None
        # (ctypes owns the new reference kiln_bind returns.)
        return self._binder(self.checked.__self__, constants)  # Numba's closure


# --- building (after Numba compiled the function) ----------------------------------------


@dataclasses.dataclass
class _Compiled:
    """What a build needs of Numba's compile result, taken while Numba is at hand."""

    obj: bytes
    wrapper: str
    native: str  # the function itself, in Numba's calling convention
    env: str  # the function's own Environment
    envs: list[tuple[str, str, list[Any]]]  # (symbol, module, constants) of each Environment
    args: list[_Arg]
    helpers: dict[str, tuple[str, str]]  # symbol -> (extension, c_helpers key)
    abi: tuple[str, str] | None = None  # (exported symbol, C source) of the native ABI


def _compiled(dispatcher: Any, abi: tuple[str, str] | None = None) -> _Compiled | None:
    """Return what :func:`_build` needs of the dispatcher's one compiled overload, or None."""
    from numba import types

    if len(dispatcher.overloads) != 1:
        return None
    cres = next(iter(dispatcher.overloads.values()))
    result = cres.signature.return_type
    arrays = isinstance(result, types.BaseTuple) and all(
        isinstance(t, types.Array)
        for t in result  # type: ignore[attr-defined]
    )
    if not (arrays or isinstance(result, types.Float | types.Integer)):
        return None
    args = []
    for t in cres.signature.args:
        if not isinstance(t, types.Array) or not t.aligned:
            return None
        args.append(_Arg(internals.as_dtype(t.dtype), t.ndim, t.layout))
    library = cres.library
    try:
        # Compiled in this process, or loaded from Numba's cache (kiln_numba._cache keeps
        # the object code there), where the module is the one kept for linking.
        obj = internals.object_code(library)
        variables = internals.global_variable_names(library)
        wrapper, native, env_name = internals.entry_names(cres)
    except Exception:  # noqa: BLE001  # Numba's internals changed: no library
        return None
    # The Environments of the function and of everything linked into it (as Numba's
    # cache stores them: those it can cache); their constants are the dtypes of arrays
    # they box, nothing that needs Numba to be rebuilt.
    envs = []
    for name in variables:
        found = internals.environment_of(name)
        if found is None:
            continue
        module_name, consts = found
        if not all(isinstance(c, np.dtype) for c in consts):
            return None
        envs.append((name, module_name, consts))
    if env_name not in {name for name, _, _ in envs}:
        return None
    helpers = internals.runtime_helpers()
    if abi is not None and not all(s in helpers for s in internals.NATIVE_ABI_RUNTIME):
        abi = None  # a runtime without what the ABI's functions call: the library has none
    return _Compiled(obj, wrapper, native, env_name, envs, args, helpers, abi)


def _link(compiled: _Compiled, folder: Path) -> tuple[bytes, list[tuple[str, str]], list[str]]:
    """Link the object code into a shared library.

    Return it, what its slots must hold (``(extension, c_helpers key)`` or ``("python",
    C-API function)``) and the exceptions its cells must hold (builtin names).
    """
    obj = folder / "kiln_fn.o"
    obj.write_bytes(compiled.obj)
    listing = subprocess.run(
        ["nm", "--undefined-only", "--format=posix", str(obj)],
        capture_output=True,
        text=True,
        check=True,
        timeout=_COMPILE_TIMEOUT_S,
    ).stdout
    undefined = [line.split()[0] for line in listing.splitlines() if line.strip()]
    sources_c = [folder / "runtime.c"]
    if compiled.abi is not None:
        abi = folder / "abi.c"
        abi.write_text(f'#define KILN_NATIVE_ENTRY "{compiled.native}"\n{compiled.abi[1]}')
        sources_c.append(abi)
        undefined += [s for s in internals.NATIVE_ABI_RUNTIME if s not in undefined]
    helpers = [s for s in undefined if s in compiled.helpers and s not in sources.DEFINED]
    wrapped = [s for s in undefined if s in sources.TAKE_EXCEPTIONS]
    cells = [s for s in undefined if s.startswith("PyExc_")]
    if not all(isinstance(getattr(builtins, s[len("PyExc_") :], None), type) for s in cells):
        raise subprocess.SubprocessError(f"an exception that is not a builtin: {cells}")
    stubs = folder / "trampolines.s"
    stubs.write_text(sources.assembly(helpers, wrapped, cells))
    sources_c[0].write_text(sources.UNPICKLE_C + sources.ENTRY_C)
    out = folder / "kiln_fn.so"
    # Numba's JIT code model has absolute relocations in its text: allowed (-z notext).
    command = ["cc", "-shared", "-O2", "-fPIC", "-Wl,-z,notext", "-o", str(out)]
    subprocess.run(
        [*command, str(obj), str(stubs), *map(str, sources_c), "-lm"],
        capture_output=True,
        check=True,
        timeout=_COMPILE_TIMEOUT_S,
    )
    slots = [compiled.helpers[s] for s in helpers] + [("python", s) for s in wrapped]
    return out.read_bytes(), slots, [s[len("PyExc_") :] for s in cells]


def _cpu_fingerprint() -> str:
    """Return a digest of what Numba compiles for: this CPU, and Numba's CPU settings."""
    h = hashlib.sha256(platform.machine().encode())
    try:
        with open("/proc/cpuinfo", "rb") as f:
            first = f.read().split(b"\n\n", 1)[0]
    except OSError:
        first = b""
    for line in first.splitlines():
        if line.split(b":")[0].strip() in (b"vendor_id", b"cpu family", b"model", b"flags"):
            h.update(line)
    for name in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "NUMBA_OPT"):
        h.update(f"{name}={os.environ.get(name, '')}".encode())
    return h.hexdigest()


def _environment() -> dict[str, Any]:
    """Return what a library's machine code depends on besides its source (checked at load)."""
    return {
        "format": FORMAT,
        "python": sys.implementation.cache_tag,
        "numpy": np.__version__,
        "cpu": _cpu_fingerprint(),
    }


def _build(key: str, entry: Path, compiled: _Compiled) -> None:
    """Link and store the library of ``key`` in ``entry``; any failure leaves no library."""
    root = entry.parent.parent
    if is_unwritable(root) or not entry.is_dir():  # (the cache was cleared meanwhile)
        return
    tmp: str | None = None
    try:
        tmp = new_temporary_folder(entry)
        library, slots, cells = _link(compiled, Path(tmp))
        digest = hashlib.sha256(library).hexdigest()
        name = f"kiln_fn-{digest[:16]}.so"
        os.chmod(Path(tmp) / "kiln_fn.so", 0o700)  # the compiler's mode follows the umask
        os.replace(Path(tmp) / "kiln_fn.so", entry / name)
    except OSError as exc:
        mark_unwritable(root, entry, exc)
        return
    except (subprocess.SubprocessError, UnicodeDecodeError):
        return  # no C compiler that links this: the function stays Numba's
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    description = {
        **_environment(),
        "file": name,
        "sha256": digest,
        "wrapper": compiled.wrapper,
        "native": compiled.native,
        "abi": compiled.abi[0] if compiled.abi is not None else None,
        "env": compiled.env,
        "envs": compiled.envs,
        "args": [(a.dtype.str, a.ndim, a.layout) for a in compiled.args],
        "slots": slots,
        "cells": cells,
    }
    try:
        DiskCache(_NAMESPACE).put(key, dumps_data(description))
    except GraphNotSerializableError:  # a constant that is not data: the function stays Numba's
        (entry / name).unlink(missing_ok=True)


_queue: list[tuple[str, Path, _Compiled]] = []
_queue_lock = threading.Lock()
_builds_at_exit = False


def has_library(key: str) -> bool:
    """Whether the shared library of ``key`` is described in the cache (built or not stale)."""
    return DiskCache(_NAMESPACE).path(key).is_file()


def build_later(key: str, entry: Path, dispatcher: Any, abi: tuple[str, str] | None = None) -> None:
    """Queue the shared library of ``dispatcher`` (just compiled by Numba) for building.

    ``abi`` is ``(symbol, C source)`` of a native ABI function calling the dispatcher's
    entry (:data:`kiln_numba._numba_internals.NATIVE_ABI_C`), linked into the library
    and exported as ``symbol`` (:attr:`SharedFunction.abi_address`); ``key`` must name
    it too (a library is found by its key only).

    The queue is built when the process exits (or at :func:`build_queued`): a C compiler
    run per function, which would otherwise compete for the CPU with what the process
    does next (sampling, compiling more). Nothing is queued where :func:`supported` is
    false, without ``cc`` and ``nm``, or for a function :func:`load` could not call
    (arguments that are not arrays, results that are neither arrays nor one number).
    """
    global _builds_at_exit
    if not (supported() and shutil.which("cc") and shutil.which("nm")):
        return
    compiled = _compiled(dispatcher, abi)
    if compiled is None:
        return
    with _queue_lock:
        _queue.append((key, entry, compiled))
        if not _builds_at_exit:
            # Registered now, after Numba's exit handlers (weakref finalizers among
            # them), so that it runs before them.
            atexit.register(build_queued)
            _builds_at_exit = True


def build_now(key: str, entry: Path, dispatcher: Any, abi: tuple[str, str] | None = None) -> bool:
    """Build the shared library of ``dispatcher`` now, as :func:`build_later` would at exit.

    For a caller that needs the library in this process (the native ABI's C function:
    the alternative is a Numba ``cfunc`` compiled over the wrapper). Return whether the
    library is then described in the cache (False where :func:`build_later` would queue
    nothing, or the build failed; the caller falls back).
    """
    if not (supported() and shutil.which("cc") and shutil.which("nm")):
        return False
    compiled = _compiled(dispatcher, abi)
    if compiled is None or (abi is not None and compiled.abi is None):
        return False
    _build(key, entry, compiled)
    return has_library(key)


def build_queued() -> None:
    """Build the queued shared libraries now (a process does it at exit)."""
    while True:
        with _queue_lock:
            if not _queue:
                return
            key, entry, compiled = _queue.pop(0)
        _build(key, entry, compiled)


# --- loading (in any later process) ------------------------------------------------------


_lock = threading.Lock()


def load(key: str, entry: Path, module_name: str) -> SharedFunction | None:
    """Return the function of ``key`` from its shared library, or None (not built, stale).

    ``module_name`` names the generated module (the function's ``__module__``).
    """
    if not supported():
        return None
    payload = DiskCache(_NAMESPACE).get(key)
    if payload is None:
        return None
    try:
        description = loads_data(payload)
        if any(description.get(k) != v for k, v in _environment().items()):
            return None
        path = entry / description["file"]
        root = entry.parent.parent
        if path.parent != entry or not trusted_folder(root, entry):
            return None
        if not trusted_file(path, root):
            return None
        if hashlib.sha256(path.read_bytes()).hexdigest() != description["sha256"]:
            return None
        with _lock:
            return _map(path, description, module_name)
    except (OSError, ImportError, KeyError, ValueError, TypeError, AttributeError):
        return None
    except CorruptDataError:
        DiskCache(_NAMESPACE).discard(key)
        return None


def _map(path: Path, description: dict[str, Any], module_name: str) -> SharedFunction:
    extensions = {name: internals.load_extension(name) for name in internals.RUNTIME_EXTENSIONS}
    dynfunc = extensions["numba._dynfunc"]
    library = ctypes.CDLL(str(path))
    slots = description["slots"]
    table = (ctypes.c_void_p * max(len(slots), 1)).in_dll(library, "kiln_slots")
    for i, (extension, name) in enumerate(slots):
        if extension == "python":
            table[i] = ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value
        else:
            table[i] = internals.helper_address(extensions[extension], name)
    cells = description["cells"]
    exceptions = (ctypes.c_void_p * max(len(cells), 1)).in_dll(library, "kiln_cells")
    for i, name in enumerate(cells):
        exceptions[i] = id(getattr(builtins, name))
    envs = {}
    for symbol, module, consts in description["envs"]:
        env = envs[symbol] = internals.new_environment(dynfunc, module, consts)
        ctypes.c_void_p.in_dll(library, symbol).value = id(env)
    address = ctypes.cast(getattr(library, description["wrapper"]), ctypes.c_void_p).value
    if not address:
        raise ValueError(f"no function {description['wrapper']} in {path}")
    module = ModuleType(module_name)
    env = envs[description["env"]]
    doc = "kiln_fn (shared library)"
    fn = internals.make_function(dynfunc, module, "kiln_fn", doc, address, env, (library,))
    args = [_Arg(np.dtype(d), n, layout) for d, n, layout in description["args"]]
    checked = binder = None
    if len(args) <= sources.MAX_ARGS and _layouts_agree(library):
        _fill_entry(library, address, args)
        entry_address = ctypes.cast(library.kiln_checked_call, ctypes.c_void_p).value
        checked = internals.make_function(
            dynfunc, module, "kiln_fn", doc, int(entry_address or 0), env, (library,)
        )
        binder = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.py_object)(
            ("kiln_bind", library)
        )
    try:
        native = ctypes.cast(getattr(library, description["native"]), ctypes.c_void_p).value
    except AttributeError:  # not exported: compiled callers go through Numba
        native = None
    abi = description.get("abi")
    abi_address = ctypes.cast(getattr(library, abi), ctypes.c_void_p).value if abi else None
    return SharedFunction(
        fn, checked, args, (library, envs, module), binder, native, abi_address or None
    )


def _layouts_agree(library: ctypes.CDLL) -> bool:
    """Whether the entry's view of an array (nd, flags, dtype, type) is NumPy's here."""
    probe = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.py_object, ctypes.c_long)(
        ("kiln_probe", library)
    )
    arrays = (np.zeros((2, 4))[:, ::2], np.zeros(3, dtype=np.int32), np.zeros(()))
    return all(
        (probe(a, 0), probe(a, 1), probe(a, 2), probe(a, 3))
        == (a.ndim, a.flags.num, id(a.dtype), id(np.ndarray))
        for a in arrays
    )


def _fill_entry(library: ctypes.CDLL, wrapper: int, args: Sequence[_Arg]) -> None:
    """Give the entry Numba's wrapper and the types it checks the arguments against."""
    ctypes.c_void_p.in_dll(library, "kiln_wrapper").value = wrapper
    ctypes.c_void_p.in_dll(library, "kiln_array_type").value = id(np.ndarray)
    ctypes.c_void_p.in_dll(library, "kiln_not_implemented").value = id(NotImplemented)
    descr = (ctypes.c_void_p * sources.MAX_ARGS).in_dll(library, "kiln_descr")
    nd = (ctypes.c_int * sources.MAX_ARGS).in_dll(library, "kiln_nd")
    flags = (ctypes.c_int * sources.MAX_ARGS).in_dll(library, "kiln_flags")
    for i, arg in enumerate(args):
        descr[i] = id(arg.dtype)  # NumPy's builtin dtypes are singletons
        nd[i] = arg.ndim
        flags[i] = sources.ARRAY_FLAGS[arg.layout]
    ctypes.c_long.in_dll(library, "kiln_nargs").value = len(args)
