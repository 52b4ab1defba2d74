"""The thunk of a C-compiled graph: NumPy values in, ``kiln_run`` called, NumPy values out.

Inputs are read by the generated ``kiln_call`` straight from the arrays (see
:mod:`kiln_c._numpy_abi`), else described from Python (:mod:`kiln_c._runtime`); nodes
without C code call back into :meth:`CThunk._fallback`, which runs their ``perform``;
an error status becomes the kiln exception the VM raises, naming the node.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_c._codegen import Generated
from kiln_c._funcify import DTYPES, OBJECT
from kiln_c._numpy_abi import layout_holds
from kiln_c._runtime import CALLBACK, KilnArray, KilnContext, as_numpy, describe, take_output
from kiln_c._trampoline import make_direct
from kiln_c.linalg import blas_pointers, uses_blas
from kiln_compile import FunctionGraph
from kiln_graph import KilnIndexError, KilnValueError, ShapeMismatchError

BACKEND = "c"
_ERRORS: dict[int, type[Exception]] = {
    1: KilnIndexError,
    2: ShapeMismatchError,
    3: KilnValueError,
    4: MemoryError,
    6: np.linalg.LinAlgError,
}
_PYTHON_ERROR = 5


def _entries(lib: Any) -> tuple[Any, Any, Any]:
    """Return ``lib``'s ``kiln_run``, ``kiln_buf_release`` and ``kiln_new_array``, typed."""
    run = lib.kiln_run
    run.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    run.restype = ctypes.c_int
    release = lib.kiln_buf_release
    release.argtypes = (ctypes.c_void_p,)
    release.restype = None
    new_array = lib.kiln_new_array
    new_array.argtypes = (ctypes.c_void_p,) * 3 + (ctypes.c_int64, ctypes.c_void_p)
    new_array.restype = ctypes.c_int
    return run, release, new_array


class CThunk:
    """The callable a Function runs: a list of input values in, a list of outputs out.

    Attributes
    ----------
    generated
        The C source and its tables (:class:`~kiln_c._codegen.Generated`).
    stage2
        What :attr:`kiln_compile.Profile.stage2` shows: the cache key and outcome, the
        build seconds, and the Ops that run through Python.
    """

    def __init__(
        self, fgraph: FunctionGraph, generated: Generated, lib: Any, quick: bool = False
    ) -> None:
        self.fgraph = fgraph
        self.generated = generated
        self.library = lib  # the loaded ctypes library
        self._run, self._release, self._new_array = _entries(lib)
        #: Set while this thunk runs a quick first build that an optimised one replaces.
        self.upgrade: Any = None
        self._calls: list[Any] = []  # the quick build's kiln_call, swapped by adopt()
        n_args = len(generated.dtypes)
        self._n_inputs = n_inputs = len(fgraph.inputs)
        self._n_outputs = len(fgraph.outputs)
        self._args = (KilnArray * max(n_args, 1))()
        self._outs = (KilnArray * max(self._n_outputs, 1))()
        self._dtypes = [np.dtype(DTYPES[c]) if c != OBJECT else None for c in generated.dtypes]
        for desc, code in zip(self._args, generated.dtypes, strict=False):
            desc.dtype = code
        self._callback = CALLBACK(self._fallback)
        self._ctx = KilnContext()
        self._ctx.fallback = self._callback
        self._blas = blas_pointers() if uses_blas(fgraph.nodes) else None
        self._ctx.blas = ctypes.addressof(self._blas) if self._blas is not None else None
        self._ctx_ref = ctypes.byref(self._ctx)
        self._pointers = (ctypes.addressof(self._args), ctypes.addressof(self._outs))
        self._objects: list[Any] = []
        self._error: BaseException | None = None
        # Constants are described once; the arrays are kept here.
        self._constants = [
            self._value(i, c.data) for i, c in enumerate(generated.constants, n_inputs)
        ]
        # A Python object (a generator) is passed as its handle: its position in
        # ``self._objects``, which holds the inputs and constants during a call.
        self._has_objects = OBJECT in generated.dtypes or OBJECT in generated.out_dtypes
        for i, value in enumerate(self._constants, n_inputs):
            if self._dtypes[i] is None:
                self._args[i].data = i
            else:
                describe(self._args[i], value)
        self._readers = [
            _reader(code) if code != OBJECT else self._read_object for code in generated.out_dtypes
        ]
        self._direct: Any = None
        self._trampoline: Any = None  # the direct callable of kiln_c._trampoline, if made
        self._quick_build = quick  # a quick build does not wait for the trampoline
        #: ``direct(*inputs)``: the outputs as a list, or NotImplemented for inputs that
        #: ``kiln_call`` does not take as they are (what :class:`kiln_compile.Function`
        #: calls for trusted inputs); None where outputs are not all of static shape.
        self.direct: Any = None
        self._made = [
            (shape, np.dtype(DTYPES[generated.out_dtypes[j]]))
            for j, shape in sorted(generated.static_outputs.items())
        ]
        self._all_made = len(self._made) == self._n_outputs
        call = self._kiln_call(lib)
        if call is not None:
            expect = [id(np.ndarray), *(id(self._dtypes[i]) for i in range(n_inputs))]
            self._expect = (ctypes.c_void_p * len(expect))(*expect)
            self._direct = call
            self._head = (ctypes.c_void_p * 4)(
                ctypes.addressof(self._ctx),
                self._pointers[0],
                self._pointers[1],
                ctypes.addressof(self._expect),
            )
            self._direct_head = (ctypes.c_void_p(ctypes.addressof(self._head)),)
            if self._all_made:
                self.direct = self._make_direct()
        self.stage2: dict[str, Any] = {}

    def _value(self, position: int, value: Any) -> Any:
        dtype = self._dtypes[position]
        if dtype is None:
            return value
        array = np.asarray(value)
        return array if array.dtype == dtype else array.astype(dtype)

    def _describe(self, values: Sequence[Any]) -> list[Any]:
        """Describe the inputs in ``self._args``; return the arrays to keep alive."""
        kept: list[Any] = []
        args = self._args
        for i, value in enumerate(values):
            dtype = self._dtypes[i]
            desc = args[i]
            if dtype is None:
                desc.data = i
                continue
            if value.__class__ is not np.ndarray or value.dtype != dtype or not value.flags.aligned:
                value = np.require(value, dtype=dtype, requirements="A")
            describe(desc, value)
            kept.append(value)
        return kept

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        if self._has_objects:
            self._objects = [*values, *self._constants]
        direct = self._direct
        status = -1
        made: list[np.ndarray] | None = None
        if direct is not None and len(values) == self._n_inputs:
            made = [empty(shape, dtype) for shape, dtype in self._made]
            status = direct(*self._direct_head, *values, *made)
            if status == 0 and self._all_made:
                return made
        if status == -1:
            made = None
            kept = self._describe(values)
            status = self._run(*self._pointers, self._ctx_ref)
            del kept
        if status != 0:
            self._objects = []
            raise self._raised(status)
        release = self._release
        results = (
            [
                read(desc, release)
                for read, desc in zip(self._readers, self._outs[: self._n_outputs], strict=True)
            ]
            if made is None
            else self._merge(made)
        )
        self._objects = []
        return results

    def _kiln_call(self, lib: Any) -> Any:
        """Return ``lib``'s ``kiln_call`` ready to call, or None if it cannot be used."""
        if not (hasattr(lib, "kiln_call") and layout_holds(lib)):
            return None
        call = lib.kiln_call
        n = self._n_inputs + len(self.generated.static_outputs)
        call.argtypes = (ctypes.c_void_p,) + (ctypes.py_object,) * n
        call.restype = ctypes.c_int
        return call

    def quick(self) -> None:
        """Mark this thunk's library as a quick build that :meth:`adopt` will replace.

        Its ``direct`` then reads the library's entry at each call (one more lookup),
        so that the callable a Function keeps follows the swap.
        """
        self._calls = [self._direct]
        if self.direct is not None:
            self.direct = self._make_direct()

    def adopt(self, lib: Any) -> None:
        """Run ``lib`` (the same source, built optimised) from the next call on.

        Calls running meanwhile finish on the library they started with (libraries stay
        loaded). A library whose NumPy entry cannot be used is not adopted.
        """
        call = self._kiln_call(lib)
        if (call is None) != (self._direct is None):
            return
        self._run, self._release, self._new_array = _entries(lib)
        self._direct = call
        if self._calls:
            self._calls[0] = call
        callv = _address(lib, "kiln_callv")
        if self._trampoline is not None and callv is not None:
            self._trampoline.retarget(callv)
        self.library = lib

    def _make_direct(self) -> Any:
        fast = self._trampoline_direct()
        if fast is not None:
            return fast
        (head,), made_spec, calls = self._direct_head, self._made, self._calls
        raised = self._raised
        if calls:

            def swappable(*values: Any) -> Any:
                made = [empty(shape, dtype) for shape, dtype in made_spec]
                status = calls[0](head, *values, *made)
                if status == 0:
                    return made
                if status == -1:
                    return NotImplemented
                raise raised(status)

            return swappable
        call = self._direct

        def direct(*values: Any) -> Any:
            made = [empty(shape, dtype) for shape, dtype in made_spec]
            status = call(head, *values, *made)
            if status == 0:
                return made
            if status == -1:
                return NotImplemented
            raise raised(status)

        return direct

    def _trampoline_direct(self) -> Any:
        """Return the trampoline's callable (:mod:`kiln_c._trampoline`), or None."""
        callv = _address(self.library, "kiln_callv")
        if callv is None:
            return None
        raised = self._raised

        def on_error(status: int) -> None:
            raise raised(status)

        head, made = ctypes.addressof(self._head), self._made
        fast = make_direct(
            callv, head, self._n_inputs, made, on_error, self, wait=not self._quick_build
        )
        self._trampoline = fast
        return fast

    def _merge(self, made: list[np.ndarray]) -> list[Any]:
        """Return the outputs: those copied into ``made`` by ``kiln_call``, and the others."""
        it = iter(made)
        outs = self._outs
        return [
            next(it) if j in self.generated.static_outputs else read(outs[j], self._release)
            for j, read in enumerate(self._readers)
        ]

    def _read_object(self, desc: KilnArray, release: Any) -> Any:
        return self._objects[desc.data or 0]

    def _raised(self, status: int) -> BaseException:
        node = self.generated.nodes[self._ctx.node]
        if status == _PYTHON_ERROR and self._error is not None:
            exc, self._error = self._error, None
            return exc
        cls = _ERRORS.get(status, KilnValueError)
        exc = cls(f"{node.op}: {self._ctx.message.decode(errors='replace')}")
        exc.add_note(f"while computing {node} on backend {BACKEND!r}")
        return exc

    def _fallback(self, index: int, ins: Any, outs: Any) -> int:
        """Run node ``index`` through its ``perform`` (called from C)."""
        try:
            node = self.generated.fallbacks[index]
            values = []
            for i in range(len(node.inputs)):
                desc = ins[i]
                if desc.dtype == OBJECT:
                    values.append(self._objects[desc.data or 0])
                else:
                    values.append(as_numpy(desc, writeable=desc.buf is not None))
            results: list[Any] = [None] * len(node.outputs)
            try:
                node.op.perform(node, values, results)
            except Exception as exc:
                exc.add_note(f"while computing {node} on backend {BACKEND!r}")
                raise
            for j, (v, result) in enumerate(zip(node.outputs, results, strict=True)):
                desc = outs[j]
                code = self.generated.dtype_code(v)
                if code == OBJECT:
                    desc.dtype = OBJECT
                    desc.data = len(self._objects)
                    desc.buf = None
                    self._objects.append(result)
                    continue
                array = np.asarray(result, dtype=DTYPES[code])
                shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
                if self._new_array(self._ctx_ref, ctypes.byref(desc), code, array.ndim, shape):
                    raise MemoryError(f"cannot allocate the result of {node}")
                np.copyto(as_numpy(desc), array)
            return 0
        except BaseException as exc:  # noqa: BLE001  # raised again after the C call returns
            self._error = exc
            return _PYTHON_ERROR


def _address(lib: Any, name: str) -> int | None:
    """Return the address of ``lib``'s function ``name``, or None if it has none."""
    function = getattr(lib, name, None)
    return None if function is None else ctypes.cast(function, ctypes.c_void_p).value


empty = np.empty
_SCALARS: dict[str, Any] = {
    "bool": ctypes.c_bool,
    "int8": ctypes.c_int8,
    "int16": ctypes.c_int16,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}


def _reader(code: int) -> Any:
    """Return ``read(desc, release)``: output ``desc`` as the value the caller gets."""
    if code == OBJECT:
        return None  # replaced by the thunk (it reads its object table)
    dtype = np.dtype(DTYPES[code])
    scalar = _SCALARS[DTYPES[code]]
    array = np.array

    def read(desc: KilnArray, release: Any) -> Any:
        buf = desc.buf
        if desc.ndim == 0 and buf is not None:
            value = array(scalar.from_address(desc.data).value, dtype)
            release(buf)
            return value
        return take_output(desc, release)

    return read
