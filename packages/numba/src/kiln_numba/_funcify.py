"""``numba_funcify``: the one dispatcher from an Op to the Numba source that computes it.

The Numba linker turns a whole graph into ONE generated, ``@njit``-compiled Python
function (so LLVM compiles one function, and elementwise chains are explicit loops).
Each Op contributes the statements that compute its node's outputs from its inputs:
``numba_funcify(op, node, ctx)`` writes them through the :class:`CodeContext`.
Implementations live in modules that mirror kiln_graph's op families (``elemwise``,
``reduce``, ``shape``, ``subtensor``, ``linalg``, ``blockwise``) and register with
``@numba_funcify.register(OpClass)``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from functools import singledispatch
from typing import Any

import numpy as np

from kiln_graph import Apply, Constant, Op, TensorType, Variable


class NoNumbaImplementation(NotImplementedError):
    """An Op has no Numba implementation (the linker then falls back to object mode)."""


class ModuleBuilder:
    """The generated module: helper functions, the main function's body, its arguments."""

    def __init__(self) -> None:
        self.helpers: dict[str, str] = {}
        self.helper_names: dict[str, str] = {}
        self.body: list[str] = []
        self.python_globals: dict[str, Any] = {}
        self._counter = 0

    def fresh(self, prefix: str) -> str:
        """Return a new unique name starting with ``prefix``."""
        self._counter += 1
        return f"{prefix}_{self._counter}"

    def helper(self, key: str, make_source: Callable[[str], str]) -> str:
        """Define a module-level function once per ``key``; return its name.

        ``make_source(name)`` returns the function's source (decorated with ``@njit`` as
        needed: the names ``np``, ``math``, ``numba``, ``njit`` and the runtime helpers of
        :mod:`kiln_numba._runtime` are in scope).
        """
        if key not in self.helper_names:
            name = self.fresh("helper")
            self.helper_names[key] = name
            self.helpers[name] = textwrap.dedent(make_source(name)).strip()
        return self.helper_names[key]

    def python_global(self, value: Any, prefix: str = "g") -> str:
        """Make a Python object a global of the generated module (for object mode)."""
        name = self.fresh(prefix)
        self.python_globals[name] = value
        return name


class CodeContext:
    """What an Op's implementation sees while writing the code of one node.

    ``inputs`` and ``outputs`` are the names of the node's input and output arrays in
    the generated function (0-d arrays for scalars). Write statements with
    :meth:`emit`; assign every name in ``outputs``.
    """

    def __init__(
        self,
        module: ModuleBuilder,
        node: Apply,
        inputs: list[str],
        outputs: list[str],
    ) -> None:
        self.module = module
        self.node = node
        self.inputs = inputs
        self.outputs = outputs

    def emit(self, code: str) -> None:
        """Append statements (dedented; nested blocks keep their relative indentation)."""
        for line in textwrap.dedent(code).strip("\n").splitlines():
            self.module.body.append(line)

    def fresh(self, prefix: str = "t") -> str:
        """Return a new unique local name."""
        return self.module.fresh(prefix)

    def helper(self, key: str, make_source: Callable[[str], str]) -> str:
        """Define a module-level helper once per ``key`` (see :meth:`ModuleBuilder.helper`)."""
        return self.module.helper(key, make_source)

    def input_type(self, i: int) -> TensorType:
        """Return the TensorType of input ``i``."""
        t = self.node.inputs[i].type
        assert isinstance(t, TensorType)
        return t

    def output_type(self, i: int = 0) -> TensorType:
        """Return the TensorType of output ``i``."""
        t = self.node.outputs[i].type
        assert isinstance(t, TensorType)
        return t

    def scalar_literal(self, i: int) -> str | None:
        """Return input ``i`` as a source literal if it is a one-element constant."""
        v = self.node.inputs[i]
        if isinstance(v, Constant) and v.data.size == 1:
            return literal(v.data.reshape(-1)[0], v.data.dtype.name)
        return None

    def static_int(self, i: int) -> int | None:
        """Return input ``i``'s value if it is an integer scalar constant."""
        v = self.node.inputs[i]
        if isinstance(v, Constant) and v.data.size == 1 and v.data.dtype.kind in "iub":
            return int(v.data.reshape(-1)[0])
        return None


def literal(value: Any, dtype: str) -> str:
    """Return Numba source for the scalar ``value`` of ``dtype`` (keeping the dtype)."""
    if dtype == "bool":
        return "True" if bool(value) else "False"
    v = np.asarray(value, dtype=dtype)[()]
    if np.dtype(dtype).kind == "f":
        if np.isnan(v):
            text = "np.nan"
        elif np.isinf(v):
            text = "np.inf" if v > 0 else "-np.inf"
        else:
            text = repr(float(v))
        return text if dtype == "float64" else f"np.{dtype}({text})"
    return f"np.{dtype}({int(v)})" if dtype != "int64" else f"np.int64({int(v)})"


def np_dtype(dtype: str) -> str:
    """Return the source naming ``dtype`` in the generated code (``np.float64``)."""
    return "np.bool_" if dtype == "bool" else f"np.{dtype}"


@singledispatch
def numba_funcify(op: Op, node: Apply, ctx: CodeContext) -> None:
    """Write the Numba statements computing ``node`` (an application of ``op``).

    The default raises :class:`NoNumbaImplementation`; the linker then runs the Op's
    ``perform`` in object mode (with one warning naming the Op).
    """
    raise NoNumbaImplementation(f"no Numba implementation for {type(op).__name__}")


def has_numba_implementation(op_class: type) -> bool:
    """Whether ``op_class`` (or a base class other than Op) has an implementation."""
    impl = numba_funcify.dispatch(op_class)
    return impl is not numba_funcify.dispatch(Op)


def variable_type(v: Variable) -> TensorType | None:
    """Return the tensor type of ``v``, or None for other types (random generators...)."""
    return v.type if isinstance(v.type, TensorType) else None
