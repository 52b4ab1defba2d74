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

import ast
import dataclasses
import re
import textwrap
from collections.abc import Callable, Sequence
from functools import singledispatch
from typing import Any

import numpy as np

from kiln_graph import Apply, Constant, Op, ScalarOp, TensorType, Variable


class NoNumbaImplementation(NotImplementedError):
    """An Op has no Numba implementation (the linker then falls back to object mode)."""


class FunctionScope:
    """One generated function being written: its statements and its constant parameters.

    ``constant_name(c)`` returns the name of the constant ``c`` inside this function
    (a parameter of it); ``cacheable`` turns False when a node falls back to object mode;
    ``pack`` (the generated module's top function only) packs its small constants
    (:class:`kiln_numba._codegen.ConstantPack`).
    """

    def __init__(self, constant_name: Callable[[Constant], str]) -> None:
        self.lines: list[str] = []
        self.constant_name = constant_name
        self.cacheable = True
        self.pack: Any = None


@dataclasses.dataclass(frozen=True)
class SubFunction:
    """A module-level njit function computing an inner graph.

    Call it as ``name(*inputs, *constants)``; it returns a tuple of its outputs.
    """

    name: str
    constants: tuple[Constant, ...]


#: Functions with at most this many parameters may be inlined: from 31 arguments on,
#: Python passes a call's arguments as one tuple, and Numba's inliner refuses such calls.
MAX_INLINED_PARAMS = 16

#: ``write_body(module, scope, inputs, in_names, outputs)``: write the statements computing
#: ``outputs`` from ``inputs`` (named ``in_names``) into ``scope``, ending with a ``return``
#: of the tuple of outputs (see :func:`kiln_numba._codegen.write_body`).
BodyWriter = Callable[
    ["ModuleBuilder", FunctionScope, Sequence[Variable], Sequence[str], Sequence[Variable]], None
]


class ModuleBuilder:
    """The generated module: helper functions, inner-graph functions, Python globals.

    ``write_body`` is the code generator's writer of function bodies, used for the
    functions of inner graphs (:meth:`function`).
    """

    def __init__(self, write_body: BodyWriter | None = None) -> None:
        self.helpers: dict[str, str] = {}
        self.helper_names: dict[str, str] = {}
        self.functions: dict[str, SubFunction] = {}
        self.python_globals: dict[str, Any] = {}
        #: ``(exception class name, message)`` of each error the generated functions
        #: raise through ``kiln_raise(code)`` (see :func:`kiln_numba._codegen.write_body`).
        self.errors: list[tuple[str, str]] = []
        self.cacheable = True
        #: How many node calls of outlined loop functions were written (kiln_numba._outline).
        self.outlined_calls = 0
        self._write_body = write_body
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

    def function(
        self, key: str, inputs: Sequence[Variable], outputs: Sequence[Variable]
    ) -> SubFunction:
        """Define, once per ``key``, an njit function computing ``outputs`` from ``inputs``.

        The graph between them is written with the same code generator as the main
        function (nested inner graphs become further functions). Its parameters are the
        ``inputs``, then the constants the graph uses (:attr:`SubFunction.constants`).
        """
        found = self.functions.get(key)
        if found is not None:
            return found
        if self._write_body is None:
            raise NoNumbaImplementation("this module cannot generate inner-graph functions")
        constants: dict[Constant, str] = {}

        def constant_name(c: Constant) -> str:
            return constants.setdefault(c, f"c{len(constants)}")

        scope = FunctionScope(constant_name)
        in_names = [f"i{k}" for k in range(len(inputs))]
        self._write_body(self, scope, inputs, in_names, outputs)
        name = self.fresh("fn")
        params = ", ".join([*in_names, *constants.values()])
        # Inlined into its callers (at Numba IR level): LLVM would otherwise compile
        # the function, and the kernels it calls, once on its own and once more in
        # each caller it is linked into. Object-mode blocks are not inlined.
        options = "cache=True, error_model='numpy', inline='always'"
        if len(in_names) + len(constants) > MAX_INLINED_PARAMS:
            options = "cache=True, error_model='numpy'"
        if not scope.cacheable:
            options = "error_model='numpy'"
        body = "\n".join("    " + line for line in scope.lines)
        self.helpers[name] = f"@njit({options})\ndef {name}({params}):\n{body}"
        found = SubFunction(name, tuple(constants))
        self.functions[key] = found
        return found

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

    ``gathers`` maps an input position to the name of an index vector: that input of
    an Elemwise or FusedReduce node is ``inputs[i][index]``, a gather the code
    generator left to the node's loop. ``scalars`` holds the positions of inputs that
    are plain scalar values: broadcast 0-d values whose DimShuffle was not written out.
    Only Elemwise and FusedReduce implementations are given either.
    """

    def __init__(
        self,
        module: ModuleBuilder,
        node: Apply,
        inputs: list[str],
        outputs: list[str],
        scope: FunctionScope | None = None,
        gathers: dict[int, str] | None = None,
        scalars: frozenset[int] = frozenset(),
    ) -> None:
        self.module = module
        self.node = node
        self.inputs = inputs
        self.outputs = outputs
        self.scope = scope if scope is not None else FunctionScope(_no_constants)
        self.gathers = gathers or {}
        self.scalars = scalars

    def emit(self, code: str) -> None:
        """Append statements (dedented; nested blocks keep their relative indentation)."""
        for line in textwrap.dedent(code).strip("\n").splitlines():
            self.scope.lines.append(line)

    def fresh(self, prefix: str = "t") -> str:
        """Return a new unique local name."""
        return self.module.fresh(prefix)

    def helper(self, key: str, make_source: Callable[[str], str]) -> str:
        """Define a module-level helper once per ``key`` (see :meth:`ModuleBuilder.helper`)."""
        return self.module.helper(key, make_source)

    def call_function(
        self,
        key: str,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        args: Sequence[str],
    ) -> str:
        """Return the expression calling the function of an inner graph on ``args``.

        The function computing ``outputs`` from ``inputs`` is generated once per ``key``
        (:meth:`ModuleBuilder.function`); the expression evaluates to the tuple of its
        outputs. ``args`` are the names (or expressions) of its inputs here.
        """
        fn = self.module.function(key, inputs, outputs)
        consts = [self.scope.constant_name(c) for c in fn.constants]
        return f"{fn.name}({', '.join([*args, *consts])})"

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


def _no_constants(c: Constant) -> str:
    raise NoNumbaImplementation(f"no parameter for the constant {c!r} in this context")


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
def numba_funcify(op: Op | ScalarOp, node: Apply | None, ctx: CodeContext | None) -> Any:
    """Write the Numba statements computing ``node`` (an application of ``op``).

    For a scalar op (no node, no context) it returns the op's ``ScalarSource``
    (:mod:`kiln_numba.scalar`): how it is written inside a loop. The default raises
    :class:`NoNumbaImplementation`; the linker then runs the Op's ``perform`` in object
    mode (with one warning naming the Op).
    """
    raise NoNumbaImplementation(f"no Numba implementation for {type(op).__name__}")


def has_numba_implementation(op_class: type) -> bool:
    """Whether ``op_class`` (or a base class other than Op) has an implementation."""
    impl = numba_funcify.dispatch(op_class)
    return impl is not numba_funcify.dispatch(Op)


def variable_type(v: Variable) -> TensorType | None:
    """Return the tensor type of ``v``, or None for other types (random generators...)."""
    return v.type if isinstance(v.type, TensorType) else None


_RAISE = re.compile(r"^(?P<indent>\s*)raise (?P<cls>[A-Za-z_][A-Za-z0-9_]*)\((?P<arg>.*)\)\s*$")


def out_of_line_raise(module: ModuleBuilder, line: str) -> str:
    """Return ``line``, with ``raise Error('message')`` made ``kiln_raise(code)``.

    A ``raise`` in a large njit function costs much compile time (Numba writes clean-up
    code at each); a call to the one compiled ``kiln_raise`` costs little. The error's
    class and message go in ``module.errors[code]``; the linker raises them when the
    call returns with ``KilnRuntimeError(code)``. Other raises are left as they are.
    """
    match = _RAISE.match(line)
    if match is None:
        return line
    try:
        message = ast.literal_eval(match["arg"]) if match["arg"] else ""
    except (ValueError, SyntaxError):
        return line
    if not isinstance(message, str):
        return line
    module.errors.append((match["cls"], message))
    return f"{match['indent']}kiln_raise(np.int64({len(module.errors) - 1}))"
