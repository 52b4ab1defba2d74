"""A model's log-density and gradient as a native function, for compiled samplers.

:func:`native_logp_grad` turns a kiln Function compiled on Numba, ``x -> [logp, grad]``,
into an ``@njit`` function of one fixed signature, :data:`LOGP_GRAD_SIGNATURE`::

    float64 logp_grad(float64[::1] x, float64[::1] grad_out, int64[::1] user_data)

It writes the gradient into ``grad_out`` and returns the log-density. Everything else
the model reads (its shared variables' values, then its constants) travels through
``user_data``: their addresses and, for the shared values (whose shapes may change
with ``set_data``), their shapes. So every model has the same Numba type,
``numba.types.FunctionType(LOGP_GRAD_NUMBA_SIGNATURE)``, and a sampler compiled once
(with that type in its explicit signature, ``cache=True``) calls any model through a
function pointer, without Python and without the GIL (the wrapper is ``nogil``)::

    @njit(types.float64(types.FunctionType(SIG), types.int64[::1], ...), cache=True)
    def run(logp_grad, user_data, ...):
        lp = logp_grad(x, grad, user_data)

    native = native_logp_grad(f)
    native.refresh()  # after set_data: the shared values are new arrays
    run(native.fn, native.user_data, ...)

The wrapper's source is generated per model and written to the model's Stage-2 cache
entry, beside the generated module (``native_<digest>.py``), and decorated with kiln's
checked cache (:func:`kiln_numba._cache.njit`): a new process loads its machine code
(which holds the model's code too) without running LLVM, and without compiling the
model's own function. A model that cannot be cached (an Op in object mode), or a cache
that is off or cannot be written, gets a wrapper compiled in memory.

Errors raised by the model's code (for instance a shape mismatch between ``x`` and the
data, or ``grad_out`` of the wrong length) propagate as exceptions from the call, from
Python or from the calling njit function. Those the generated code raises through
``kiln_raise`` arrive as :class:`~kiln_numba._errors.KilnRuntimeError` carrying a
code, which :meth:`NativeLogpGrad.error` turns back into the kiln error it stands for
(the Function's own call does that itself); the others arrive as they are.

``user_data`` holds raw addresses: keep the :class:`NativeLogpGrad` (its
``keep_alive``) alive while a sampler uses them, and call :meth:`~NativeLogpGrad.refresh`
after changing a shared variable's value.

:func:`native_expand` does the same for a model's expand function (the constrained
values and deterministics): ``status = fn(x, out, user_data)``
(:data:`EXPAND_SIGNATURE`) writes every output, flattened in C order and cast to
float64, one after the other into ``out``. :mod:`kiln_numba.native_c` wraps both in C
callbacks for samplers outside Python (kiln's NUTS kernel, nutpie); a wrapper's shared
library also exports that C function (:func:`kiln_numba._native_abi.abi_source`), which a
process that maps the library calls without Numba.
"""

from __future__ import annotations

import hashlib
import sys
import time
from typing import Any

import numpy as np

from kiln_graph import KilnTypeError, TensorType
from kiln_graph.helpers import long_lived_objects
from kiln_numba import _linker, _shared_library
from kiln_numba import _native_source as native_source
from kiln_numba import _numba_internals as _internals
from kiln_numba._codegen import Generated
from kiln_numba._errors import KilnRuntimeError
from kiln_numba._native_abi import abi_source

__all__ = [
    "EXPAND_SIGNATURE",
    "LOGP_GRAD_SIGNATURE",
    "LibraryWrapper",
    "NativeExpand",
    "NativeLogpGrad",
    "native_address",
    "native_expand",
    "native_logp_grad",
]

#: The protocol, as a string (for packages that do not import kiln_numba):
#: ``logp = fn(x, grad_out, user_data)``.
LOGP_GRAD_SIGNATURE = "float64(float64[::1], float64[::1], int64[::1])"

#: The expand protocol: ``status = fn(x, out, user_data)`` writes every output of the
#: model's expand function, flattened in C order and cast to float64, one after the
#: other into ``out``; ``status`` is 0, or -1 when ``out`` does not have their total size.
EXPAND_SIGNATURE = "int64(float64[::1], float64[::1], int64[::1])"

#: Names this module lends from :mod:`kiln_numba._native_jit` (which imports Numba):
#: ``LOGP_GRAD_NUMBA_SIGNATURE``, ``EXPAND_NUMBA_SIGNATURE`` (the signatures as Numba
#: ``Signature`` objects) and the njit intrinsics the wrappers use.
_FROM_JIT = frozenset(
    {
        "LOGP_GRAD_NUMBA_SIGNATURE",
        "EXPAND_NUMBA_SIGNATURE",
        "address_as_void_pointer",
        "as_readonly",
        "carray",
    }
)


def __getattr__(name: str) -> Any:
    if name in _FROM_JIT:
        from kiln_numba import _native_jit

        return getattr(_native_jit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _as_passable(value: Any, slot: native_source.Slot) -> np.ndarray:
    """Return ``value`` as a C-contiguous, native-order array of the slot's dtype."""
    if not isinstance(value, np.ndarray):
        raise KilnTypeError(
            f"native_logp_grad: {slot.label} is a {type(value).__name__}, expected a NumPy array"
        )
    if value.ndim != slot.ndim or value.dtype.newbyteorder("=") != slot.dtype:
        raise KilnTypeError(
            f"native_logp_grad: {slot.label} is a {value.ndim}-d {value.dtype} array, "
            f"expected a {slot.ndim}-d {slot.dtype} array (the wrapper was built for it)"
        )
    if value.dtype != slot.dtype or not value.flags.c_contiguous:
        value = np.ascontiguousarray(value, dtype=slot.dtype)  # a copy, kept alive
    return value


def _load_wrapper(
    key: str, source: str, gen: Generated, attr: str = native_source.WRAPPER_NAME
) -> tuple[Any, dict[str, Any]]:
    """Return the wrapper's dispatcher (from this process, the cache entry or memory).

    The module file goes to the Stage-2 entry ``key``, beside the generated module,
    named by a digest of ``source``.
    """
    digest = hashlib.sha256(source.encode()).hexdigest()
    name = f"kiln_numba_native_{digest[:24]}"
    info: dict[str, Any] = {}
    loaded = sys.modules.get(name)
    if loaded is not None:
        info["module"] = getattr(loaded, "__file__", "")
        info["cache"] = "memory"
        return getattr(loaded, attr), info
    path = None
    outcome = "uncacheable"
    if gen.cacheable:
        path, outcome = _linker._module_file(key, source, f"native_{digest[:16]}.py")
    # The wrapper needs no Python globals: object-mode objects live in the model's module.
    plain = Generated(source, [], {}, gen.cacheable)
    if path is not None:
        module = _linker._exec_module(name, source, str(path), plain, cache=True)
        info["module"] = str(path)
    else:
        filename = f"<kiln_numba native {digest[:16]}>"
        module = _linker._exec_module(name, source, filename, plain, cache=False)
        info["module"] = "in memory"
        info["cache"] = outcome
    return getattr(module, attr), info


def _compile(fn: Any, info: dict[str, Any], signature: Any = None) -> None:
    """Compile (or load from the cache) ``fn`` for the one signature; allow no other.

    ``signature`` defaults to ``LOGP_GRAD_NUMBA_SIGNATURE``.
    """
    if signature is None:
        from kiln_numba._native_jit import LOGP_GRAD_NUMBA_SIGNATURE as signature
    hits = sum(fn.stats.cache_hits.values())
    misses = sum(fn.stats.cache_misses.values())
    start = time.perf_counter()
    fn.compile(signature)
    fn.disable_compile()
    info["compile_s"] = time.perf_counter() - start
    if "cache" not in info:
        if sum(fn.stats.cache_hits.values()) > hits:
            info["cache"] = "hit"
        elif sum(fn.stats.cache_misses.values()) > misses:
            info["cache"] = "miss"
        else:
            info["cache"] = "memory"


class _NativeWrapper:
    """A native wrapper of a kiln Function: ``fn``, ``user_data``, ``keep_alive``."""

    def __init__(
        self, function: Any, fn: Any, slots: list[native_source.Slot], stage2: dict[str, Any]
    ):
        self.function = function
        self.fn = fn
        self.stage2 = stage2
        self._slots = slots
        self._n_shared = len(function.fgraph.inputs) - function.fgraph.n_explicit
        self.user_data = np.zeros(sum(s.width for s in slots), dtype=np.int64)
        self.keep_alive: list[np.ndarray] = []
        self.refresh()

    def refresh(self) -> np.ndarray:
        """Point ``user_data`` at the shared variables' current values; return it.

        Call it before sampling, after any ``set_value``/``set_data`` (which replace the
        arrays). ``user_data`` is updated in place (its length never changes).

        Raises
        ------
        KilnTypeError
            If a shared value is no longer an array of the dtype and rank the wrapper
            was built for.
        """
        fgraph = self.function.fgraph
        shared = [v.get_value(borrow=True) for v in fgraph.inputs[fgraph.n_explicit :]]
        values = [*shared, *self.function.thunk.constants]
        entries: list[int] = []
        alive: list[np.ndarray] = []
        for slot, value in zip(self._slots, values, strict=True):
            array = _as_passable(value, slot)
            alive.append(array)
            entries.append(array.ctypes.data)
            if slot.shape is None:
                entries.extend(array.shape)
            elif array.shape != slot.shape:
                raise KilnTypeError(f"native_logp_grad: {slot.label} changed shape")
        self.keep_alive = alive
        self.user_data[:] = entries
        return self.user_data

    def error(self, exc: BaseException) -> BaseException:
        """Return the kiln error a ``KilnRuntimeError(code)`` from :attr:`fn` stands for.

        Other exceptions are returned as they are.
        """
        if isinstance(exc, KilnRuntimeError):
            return self.function.thunk._error(exc)  # type: ignore[no-any-return]
        return exc

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({len(self._slots)} argument(s) in user_data, "
            f"wrapper: {self.stage2.get('cache')})"
        )


class NativeLogpGrad(_NativeWrapper):
    """A model's native ``logp = fn(x, grad_out, user_data)`` (see the module docstring).

    Attributes
    ----------
    fn
        The ``@njit(LOGP_GRAD_SIGNATURE, nogil=True)`` dispatcher; from Python or njit
        code, ``fn(x, grad_out, user_data)`` writes the gradient into ``grad_out`` and
        returns the log-density. Its Numba type is
        ``types.FunctionType(LOGP_GRAD_NUMBA_SIGNATURE)``. In a process that finds the
        wrapper's shared library (built when a first process compiled it), a
        :class:`LibraryWrapper` instead, called the same way from Python, without
        importing Numba; its ``dispatcher`` is the dispatcher (for njit callers).
    user_data
        ``int64`` array: for each argument of the model's function after ``x`` (the
        shared variables' values, then the constants), its address and, for a shared
        value, its shape. :meth:`refresh` updates it in place.
    keep_alive
        The arrays whose addresses ``user_data`` holds.
    stage2
        Where the wrapper came from: ``"module"`` (its file, or ``"in memory"``),
        ``"cache"`` (``"hit"``, ``"miss"``, ``"memory"``, or why it is not cached) and
        ``"compile_s"``.
    """

    @property
    def native_address(self) -> int | None:
        """The address of :attr:`fn`'s entry point in Numba's native calling convention.

        None where Numba's internals are not usable (:mod:`kiln_numba._numba_internals`).
        Compiled callers outside Numba use the native ABI instead
        (:func:`kiln_numba.native_c.native_model`, ``kiln_compile.NativeModel``).
        """
        return native_address(self.fn)


def native_address(fn: Any) -> int | None:
    """Return the native entry point of a ``LOGP_GRAD_SIGNATURE`` function, or None.

    ``fn`` is an njit dispatcher or a :class:`LibraryWrapper` (which knows its address
    without Numba). The entry takes Numba's native calling convention.
    """
    known = getattr(fn, "native_address", None)
    if known:
        return int(known)
    if not _internals.usable():
        return None
    from kiln_numba._native_jit import LOGP_GRAD_NUMBA_SIGNATURE

    address = _internals.jit_address(getattr(fn, "dispatcher", fn), LOGP_GRAD_NUMBA_SIGNATURE)
    return address if address > 0 else None


class NativeExpand(_NativeWrapper):
    """A model's native ``status = fn(x, out, user_data)`` of its expand function.

    ``fn`` (compiled for :data:`EXPAND_SIGNATURE`, ``nogil``) writes every output of
    the Function, flattened in C order and cast to float64, one after the other into
    ``out`` (``n_out`` entries at the point the wrapper was built; deterministics whose
    shape follows the data change it after ``set_data``) and returns 0, or -1 when
    ``out`` does not have their total size. ``user_data``, ``keep_alive``, ``refresh()``
    and ``error()`` are those of :class:`NativeLogpGrad`.
    """


def _check_input(function: Any, expected: str) -> tuple[Any, Any]:
    """Return ``function``'s thunk and graph if it is Numba-linked over one float64 vector."""
    thunk = getattr(function, "thunk", None)
    fgraph = getattr(function, "fgraph", None)
    if not isinstance(thunk, _linker.NumbaThunk) or fgraph is None:
        linker = getattr(function, "linker", None)
        got = f"a Function linked by {linker!r}" if linker else f"a {type(function).__name__}"
        raise KilnTypeError(f"{expected}; got {got}")
    explicit = fgraph.inputs[: fgraph.n_explicit]
    if len(explicit) != 1:
        raise KilnTypeError(f"{expected}; got {len(explicit)} inputs")
    x_type = explicit[0].type
    if not (isinstance(x_type, TensorType) and x_type.ndim == 1 and x_type.dtype == "float64"):
        raise KilnTypeError(f"{expected}; got the input {x_type}")
    return thunk, fgraph


def _check_function(function: Any) -> tuple[Any, Generated]:
    """Return ``function``'s thunk and generated module, or raise a clear error."""
    expected = (
        "native_logp_grad expects a kiln Function compiled with the Numba linker "
        "(mode=kiln.FAST_RUN.with_linker('numba')), with one input, a float64 vector x, "
        "and two outputs [logp, grad]: a float64 scalar and a float64 vector"
    )
    thunk, fgraph = _check_input(function, expected)
    if fgraph.n_outputs != 2 or len(fgraph.outputs) != 2:
        what = f"{fgraph.n_outputs} outputs"
        if len(fgraph.outputs) != fgraph.n_outputs:
            what += " and updates"
        raise KilnTypeError(f"{expected}; got {what}")
    for out, ndim, name in zip(fgraph.outputs, (0, 1), ("logp", "grad"), strict=True):
        t = out.type
        if not (isinstance(t, TensorType) and t.ndim == ndim and t.dtype == "float64"):
            raise KilnTypeError(f"{expected}; got {t} for {name}")
    return thunk, thunk._generated


def _check_expand(function: Any) -> tuple[Any, Generated]:
    """Return ``function``'s thunk and generated module, or raise a clear error."""
    expected = (
        "native_expand expects a kiln Function compiled with the Numba linker, with one "
        "input, a float64 vector x, and one or more real, integer or boolean tensor "
        "outputs (no updates)"
    )
    thunk, fgraph = _check_input(function, expected)
    if fgraph.n_outputs < 1 or len(fgraph.outputs) != fgraph.n_outputs:
        raise KilnTypeError(f"{expected}; got {fgraph.n_outputs} outputs and updates")
    for k, out in enumerate(fgraph.outputs):
        t = out.type
        if not (isinstance(t, TensorType) and np.dtype(t.dtype).kind in "biuf"):
            raise KilnTypeError(f"{expected}; got {t} for output {k}")
    return thunk, thunk._generated


def _slots(function: Any) -> list[native_source.Slot]:
    fgraph = function.fgraph
    slots: list[native_source.Slot] = []
    for v in fgraph.inputs[fgraph.n_explicit :]:
        label = f"the shared variable {v.name or v!r}"
        value = v.get_value(borrow=True)
        t = v.type
        if isinstance(t, TensorType):
            dtype, ndim = np.dtype(t.dtype), t.ndim
        elif isinstance(value, np.ndarray):
            dtype, ndim = value.dtype.newbyteorder("="), value.ndim
        else:
            raise KilnTypeError(
                f"native_logp_grad: {label} holds a {type(value).__name__}; only arrays "
                "can be passed to native code"
            )
        slots.append(native_source.Slot(label, dtype, ndim, None))
    for k, c in enumerate(function.thunk.constants):
        label = f"the constant c{k}"
        if not isinstance(c, np.ndarray):
            raise KilnTypeError(
                f"native_logp_grad: {label} is a {type(c).__name__}; only arrays can be "
                "passed to native code"
            )
        slots.append(native_source.Slot(label, c.dtype.newbyteorder("="), c.ndim, tuple(c.shape)))
    return slots


def native_logp_grad(function: Any, *, abi_now: bool = False) -> NativeLogpGrad:
    """Return the native ``logp = fn(x, grad_out, user_data)`` of a compiled model.

    Parameters
    ----------
    function
        A kiln Function compiled with the Numba linker, ``x -> [logp, grad]``: one
        explicit input, a float64 vector, and two outputs, a float64 scalar and a
        float64 vector (no updates). Its shared variables and constants are passed
        through ``user_data``.
    abi_now
        Where Numba compiles the wrapper (or loads it from its cache), build its shared
        library, with the native ABI's C function, now rather than when the process
        exits, and return the library's wrapper (whose ``abi_address`` a sampler can
        call): for :func:`kiln_numba.native_c.native_c_pointers`, which would otherwise
        compile a Numba ``cfunc`` over the wrapper. Where no library can be built, the
        dispatcher, as without it.

    Returns
    -------
    NativeLogpGrad
        ``.fn`` (compiled for :data:`LOGP_GRAD_SIGNATURE`, or loaded from the cache),
        ``.user_data``, ``.keep_alive`` and ``.refresh()``.

    Raises
    ------
    KilnTypeError
        If ``function`` was not compiled by the Numba linker, has other inputs or
        outputs, or reads a value that is not an array of a plain dtype.
    """
    thunk, gen = _check_function(function)
    slots = _slots(function)
    key = thunk.stage2.get("key") or _linker.stage2_key(function.fgraph, gen)
    source = native_source.wrapper_source(_linker.module_name(key), slots, gen)
    fn, stage2 = _native_fn(
        function, gen, key, source, native_source.WRAPPER_NAME, "logp", abi_now=abi_now
    )
    return NativeLogpGrad(function, fn, slots, stage2)


def _abi(function: Any, kind: str) -> tuple[str, str] | None:
    """Return ``(symbol, C source)`` of the native ABI's function over the wrapper, or None.

    None where ``x`` has no static length (the ABI's functions check ``n`` against it).
    """
    shape = function.fgraph.inputs[0].type.shape
    if not shape or shape[0] is None:
        return None
    return abi_source(kind, int(shape[0]))


def _native_fn(
    function: Any,
    gen: Generated,
    key: str,
    source: str,
    attr: str,
    kind: str,
    abi_now: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """Return a wrapper (its shared library's, or Numba's dispatcher) and where it came from.

    A wrapper Numba compiled or loaded from its cache is queued for its shared library
    (with the native ABI's function over it, :func:`_abi`), which a later process maps
    without Numba; with ``abi_now`` the library is built and mapped now.
    """
    with long_lived_objects():  # writes, imports and compiles the wrapper
        abi = _abi(function, kind)
        libkey = _library_key(key, source, abi)

        def compiled() -> tuple[Any, dict[str, Any]]:
            # The generated module, loaded in this process (loaded again if it was forgotten).
            _linker.load_function(function.fgraph, gen, key)
            fn, stage2 = _load_wrapper(key, source, gen, attr)
            if not fn.overloads:
                signature: Any = None  # LOGP_GRAD_NUMBA_SIGNATURE
                if kind == "expand":
                    from kiln_numba._native_jit import EXPAND_NUMBA_SIGNATURE

                    signature = EXPAND_NUMBA_SIGNATURE
                _compile(fn, stage2, signature)
            else:
                stage2.setdefault("cache", "memory")
            return fn, stage2

        library = _wrapper_library(key, libkey, gen, lambda: compiled()[0])
        if library is not None:
            return library, library.stage2
        fn, stage2 = compiled()
        if gen.cacheable and stage2.get("cache") in ("hit", "miss"):
            entry = _linker._entry(key)
            if abi_now and abi is not None:
                # Built once: a build that failed now would fail again at exit.
                if _shared_library.build_now(libkey, entry, fn, abi):
                    library = _wrapper_library(key, libkey, gen, lambda: fn)
                    if library is not None:
                        library.stage2 = {**stage2, "library": "built now"}
                        return library, library.stage2
            elif not _shared_library.has_library(libkey):
                _shared_library.build_later(libkey, entry, fn, abi)
        return fn, stage2


def _library_key(key: str, source: str, abi: tuple[str, str] | None) -> str:
    """Return the key of a native wrapper's shared library (one per wrapper and ABI source)."""
    text = f"{key}\n{source}" if abi is None else f"{key}\n{source}\n{abi[0]}\n{abi[1]}"
    return hashlib.sha256(text.encode()).hexdigest()


class LibraryWrapper:
    """A native wrapper loaded from its shared library: called like its dispatcher.

    ``wrapper(x, grad_out, user_data)`` (or ``wrapper(x, out, user_data)``) runs the
    library's machine code (its C entry checks the arguments' types; other types go to
    the dispatcher). ``native_address`` is the wrapper's entry point in Numba's calling
    convention (None if the library does not export it); ``abi_address`` the native
    ABI's C function over it (:func:`kiln_numba._native_abi.abi_source`; None if the
    library was built without one), what :func:`kiln_numba.native_c.native_c_pointers`
    hands samplers without importing Numba.
    ``dispatcher`` is the Numba dispatcher, compiled or loaded when first asked for
    (that imports Numba): the C callbacks need it.
    """

    def __init__(self, shared: Any, load_dispatcher: Any, stage2: dict[str, Any]) -> None:
        self.native_address: int | None = shared.native_address
        self.abi_address: int | None = shared.abi_address
        self.stage2 = stage2
        self._shared = shared
        self._load_dispatcher = load_dispatcher
        self._dispatcher: Any = None

    @property
    def dispatcher(self) -> Any:
        """The wrapper's Numba dispatcher (built when first asked for)."""
        with _linker._load_lock:  # chains ask from their threads
            if self._dispatcher is None:
                self._dispatcher = self._load_dispatcher()
        return self._dispatcher

    def __call__(self, *args: Any) -> Any:
        """Call the wrapper: ``logp = wrapper(x, grad_out, user_data)``."""
        checked = self._shared.checked
        if checked is not None:
            result = checked(*args)
            if result is not NotImplemented:
                return result
        return self.dispatcher(*args)


def _wrapper_library(
    key: str, libkey: str, gen: Generated, load_dispatcher: Any
) -> LibraryWrapper | None:
    """Return the wrapper of Stage-2 entry ``key`` from its shared library ``libkey``, or None.

    The library mapped by this process, or the cache's.
    """
    if not gen.cacheable:
        return None
    start = time.perf_counter()
    shared = _linker._shared_loaded.get(libkey)  # the libraries this process mapped
    if shared is None:
        shared = _shared_library.load(libkey, _linker._entry(key), f"kiln_native_{libkey[:24]}")
        if shared is None:
            return None
        _linker._shared_loaded[libkey] = shared
    stage2: dict[str, Any] = {"module": "shared library", "cache": "hit"}
    stage2["loader"] = "shared library"
    stage2["compile_s"] = time.perf_counter() - start
    return LibraryWrapper(shared, load_dispatcher, stage2)


def native_expand(function: Any, *, abi_now: bool = False) -> NativeExpand:
    """Return the native ``status = fn(x, out, user_data)`` of a model's expand function.

    Parameters
    ----------
    function
        A kiln Function compiled with the Numba linker, ``x -> [out_0, out_1, ...]``:
        one explicit input, a float64 vector, and real, integer or boolean tensor
        outputs (e.g. ``CompiledModel.expand_function``). Its shared variables and
        constants are passed through ``user_data``, as for :func:`native_logp_grad`.
    abi_now
        As for :func:`native_logp_grad`: the wrapper's shared library built now.

    Returns
    -------
    NativeExpand
        ``.fn`` (compiled for :data:`EXPAND_SIGNATURE`, or loaded from the cache; it
        writes the outputs flattened, one after the other, as float64), ``.user_data``,
        ``.keep_alive`` and ``.refresh()``.

    Raises
    ------
    KilnTypeError
        If ``function`` was not compiled by the Numba linker, has other inputs, an
        output of another kind (complex, an RNG), updates, or reads a value that is not
        an array of a plain dtype.

    Examples
    --------
    >>> expand = native_expand(compiled.expand_function)  # doctest: +SKIP
    >>> out = np.empty(n_out)  # doctest: +SKIP
    >>> expand.fn(x, out, expand.user_data)  # doctest: +SKIP
    0
    """
    thunk, gen = _check_expand(function)
    slots = _slots(function)
    key = thunk.stage2.get("key") or _linker.stage2_key(function.fgraph, gen)
    source = native_source.expand_source(
        _linker.module_name(key), slots, function.fgraph.n_outputs, gen
    )
    fn, stage2 = _native_fn(
        function, gen, key, source, native_source.EXPAND_NAME, "expand", abi_now=abi_now
    )
    return NativeExpand(function, fn, slots, stage2)
