"""Composite: a small scalar program of several scalar ops, applied in one Elemwise.

A :class:`Composite` is what the fusion phase builds from a subgraph of Elemwise
nodes, so that ``exp(x) * y + z`` becomes one ``Elemwise(Composite{exp(i0) * i1 + i2})``
node (one traversal of memory on a compiled backend). Its props describe the program
(numbered slots: the inputs first, then one per step), so equal programs give equal
ops and equal digests. The NumPy implementation evaluates the steps one by one, each
cast to the dtype the original Elemwise node had, so a fused graph computes the same
bits as the unfused one on the Python VM.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from kiln_graph import _math
from kiln_graph._elemwise import Cast, DimShuffle, Elemwise, ScalarOp
from kiln_graph._errors import GradientError, KilnTypeError, KilnValueError
from kiln_graph._node import Constant, TensorVariable, Variable
from kiln_graph._traversal import toposort
from kiln_graph._types import normalize_dtype

#: One step of a program: a scalar op and the slots of its arguments.
Step = tuple[ScalarOp, tuple[int, ...]]


class ScalarConstant(ScalarOp):
    """A constant inlined in a :class:`Composite` program (no inputs).

    Stored as its dtype and bytes, so that equality is exact (NaN included) and the
    value keeps its dtype in the computation.
    """

    nin = 0
    __props__ = ("dtype", "data")

    def __init__(self, dtype: Any, data: bytes) -> None:
        self.dtype = normalize_dtype(dtype)
        self.data = bytes(data)
        if len(self.data) != np.dtype(self.dtype).itemsize:
            raise KilnValueError(
                f"ScalarConstant: {len(self.data)} bytes do not hold one {self.dtype} value"
            )

    @classmethod
    def from_value(cls, value: Any, dtype: Any = None) -> ScalarConstant:
        """Return the constant holding ``value`` (one element) as ``dtype``."""
        arr = np.asarray(value, dtype=dtype)
        if arr.size != 1:
            raise KilnValueError(f"ScalarConstant: expected one value, got shape {arr.shape}")
        arr = arr.reshape(()).astype(arr.dtype.newbyteorder("="))
        return cls(arr.dtype, arr.tobytes())

    @property
    def value(self) -> np.ndarray:
        """The value as a 0-d array of ``dtype``."""
        return np.frombuffer(self.data, dtype=self.dtype).reshape(())

    def output_dtype(self, *dtypes: str) -> str:
        """Return the constant's dtype."""
        return self.dtype

    def impl(self, *inputs: np.ndarray, out: np.ndarray | None = None) -> Any:
        """Return the value as a 0-d array."""
        return self.value.copy()

    def __str__(self) -> str:
        return str(self.value[()])


# How steps print: infix operators with their precedence (higher binds tighter).
_INFIX: dict[type, tuple[str, int]] = {
    _math.OR: ("|", 1),
    _math.AND: ("&", 2),
    _math.EQ: ("==", 3),
    _math.NEQ: ("!=", 3),
    _math.LT: ("<", 3),
    _math.LE: ("<=", 3),
    _math.GT: (">", 3),
    _math.GE: (">=", 3),
    _math.Add: ("+", 4),
    _math.Sub: ("-", 4),
    _math.Mul: ("*", 5),
    _math.TrueDivide: ("/", 5),
    _math.FloorDivide: ("//", 5),
    _math.Mod: ("%", 5),
    _math.Pow: ("**", 7),
}
_PREFIX: dict[type, str] = {_math.Neg: "-", _math.NOT: "~"}
_ATOM = 9
_MAX_STR = 400


class Composite(ScalarOp):
    """A scalar program over ``nin`` inputs with one or more outputs.

    Slots ``0 .. nin-1`` hold the inputs; step ``j`` writes slot ``nin + j`` with
    ``scalar_op(*slots[args])``; ``outputs`` lists the slots returned. Build one with
    :meth:`from_graph` (from Elemwise expressions) or directly from steps.

    Examples
    --------
    >>> x, y, z = kt.vector("x"), kt.vector("y"), kt.vector("z")  # doctest: +SKIP
    >>> op = Composite.from_graph([x, y, z], [kt.exp(x) * y + z])  # doctest: +SKIP
    >>> str(op)  # doctest: +SKIP
    'Composite{exp(i0) * i1 + i2}'
    >>> Elemwise(op)(a, b, c)  # doctest: +SKIP
    """

    __props__ = ("nin", "steps", "outputs")
    supports_out = True

    def __init__(self, nin: int, steps: Iterable[Step], outputs: Sequence[int]) -> None:
        self.nin = int(nin)  # type: ignore[misc]  # per-instance arity
        self.steps: tuple[Step, ...] = tuple(
            (op, tuple(int(a) for a in args)) for op, args in steps
        )
        self.outputs: tuple[int, ...] = tuple(int(o) for o in outputs)
        self._check()

    def _check(self) -> None:
        if self.nin < 0:
            raise KilnValueError(f"Composite: nin must be >= 0, got {self.nin}")
        for j, (op, args) in enumerate(self.steps):
            if not isinstance(op, ScalarOp):
                raise KilnTypeError(f"Composite: step {j} is not a ScalarOp: {op!r}")
            if op.nin >= 0 and len(args) != op.nin:
                raise KilnValueError(
                    f"Composite: step {j} ({op}) takes {op.nin} argument(s), got {len(args)}"
                )
            for a in args:
                if not 0 <= a < self.nin + j:
                    raise KilnValueError(
                        f"Composite: step {j} ({op}) reads slot {a}; only slots "
                        f"0..{self.nin + j - 1} are defined before it"
                    )
            if getattr(op, "nout", 1) != 1:
                raise KilnValueError(f"Composite: step {j} ({op}) has several outputs")
        if not self.outputs:
            raise KilnValueError("Composite: expected at least one output")
        n_slots = self.nin + len(self.steps)
        for o in self.outputs:
            if not 0 <= o < n_slots:
                raise KilnValueError(f"Composite: output slot {o} is not in 0..{n_slots - 1}")

    @property
    def nout(self) -> int:
        """The number of outputs."""
        return len(self.outputs)

    # --- types and evaluation ------------------------------------------------------------

    def slot_dtypes(self, *dtypes: str) -> tuple[str, ...]:
        """Return the dtype of every slot (inputs, then steps) for inputs of ``dtypes``."""
        key = tuple(dtypes)
        # Dropped when pickled, as Props drops every ``_cached*`` entry.
        cache: dict[tuple[str, ...], tuple[str, ...]] = self.__dict__.setdefault(
            "_cached_dtypes", {}
        )
        found = cache.get(key)
        if found is None:
            if len(key) != self.nin:
                raise KilnValueError(f"{self}: expected {self.nin} input(s), got {len(key)}")
            slots = list(key)
            for op, args in self.steps:
                slots.append(op.output_dtype(*(slots[a] for a in args)))
            found = cache[key] = tuple(slots)
        return found

    def output_dtypes(self, *dtypes: str) -> tuple[str, ...]:
        """Return the dtype of each output for inputs of ``dtypes``."""
        slots = self.slot_dtypes(*dtypes)
        return tuple(slots[o] for o in self.outputs)

    def output_dtype(self, *dtypes: str) -> str:
        """Return the dtype of the (single) output for inputs of ``dtypes``."""
        if len(self.outputs) != 1:
            raise KilnValueError(f"{self} has {len(self.outputs)} outputs; use output_dtypes")
        return self.output_dtypes(*dtypes)[0]

    def impl(self, *inputs: np.ndarray, out: np.ndarray | None = None) -> Any:
        """Evaluate the steps on arrays; return the output (a tuple if several).

        Each step is computed on its arguments' broadcast shape and cast to the dtype
        its own Elemwise node would have, as the unfused graph does. With ``out`` (one
        output only), the result is written into ``out``; the last step writes it
        directly when its op supports that, so ``out`` may be one of the inputs.
        """
        slots: list[Any] = [np.asarray(x) for x in inputs]
        dtypes = self.slot_dtypes(*(x.dtype.name for x in slots))
        last = self.nin + len(self.steps) - 1
        direct = out is not None and self.outputs == (last,) and out.dtype.name == dtypes[last]
        for j, (op, args) in enumerate(self.steps):
            slot = self.nin + j
            if direct and slot == last and op.supports_out:
                op.impl(*(slots[a] for a in args), out=out)
                return out
            result = op.impl(*(slots[a] for a in args))
            slots.append(np.asarray(result, dtype=dtypes[slot]))
        shape = np.broadcast_shapes(*(x.shape for x in slots[: self.nin]))
        results = [_full(slots[o], shape) for o in self.outputs]
        if out is not None:
            if len(results) != 1:
                raise KilnValueError(f"{self}: out= needs a single-output Composite")
            np.copyto(out, results[0], casting="unsafe")
            return out
        return results[0] if len(results) == 1 else tuple(results)

    def grad(
        self, inputs: Sequence[TensorVariable], output: TensorVariable, gout: TensorVariable
    ) -> list[Variable | None]:
        """Raise: Composites are built by the fusion phase, which runs after autodiff."""
        raise GradientError(
            f"{self} has no gradient: Composites are built by the fusion rewrite, which "
            "runs after autodiff; take the gradient of the unfused graph instead"
        )

    # --- construction ----------------------------------------------------------------------

    @classmethod
    def from_graph(
        cls, inputs: Sequence[Variable], outputs: Sequence[Variable], inline_constants: bool = True
    ) -> Composite:
        """Return the program computing ``outputs`` from ``inputs`` through Elemwise nodes.

        Every node between them must be a single-output Elemwise; constants of one
        element (also through the DimShuffle that broadcasts them) are inlined, other
        constants must be listed in ``inputs``. Nested Composites are inlined.

        Raises
        ------
        KilnValueError
            If a node is not an Elemwise, or a root variable is not in ``inputs``.
        """
        builder = ProgramBuilder()
        slot: dict[Variable, int] = {}
        for v in inputs:
            if v in slot:
                raise KilnValueError(f"Composite.from_graph: input {v!r} is listed twice")
            slot[v] = builder.input(v)
        for v in outputs:
            if v not in slot and v.owner is None:
                slot[v] = _leaf(builder, v, inline_constants)
        for node in toposort(outputs, stop_at=inputs):
            src = node.inputs[0] if node.inputs else None
            if isinstance(node.op, DimShuffle) and isinstance(src, Constant) and src.data.size == 1:
                # A broadcast scalar constant (as ``x + 1`` builds it).
                slot[node.outputs[0]] = _leaf(builder, src, inline_constants)
                continue
            if not isinstance(node.op, Elemwise) or len(node.outputs) != 1:
                raise KilnValueError(
                    f"Composite.from_graph: {node.op} is not a single-output Elemwise"
                )
            args = []
            for v in node.inputs:
                if v not in slot:
                    if v.owner is not None:
                        raise KilnValueError(f"Composite.from_graph: {v!r} was not computed")
                    slot[v] = _leaf(builder, v, inline_constants)
                args.append(slot[v])
            slot[node.outputs[0]] = builder.apply(node.op.scalar_op, args)
        return builder.build([slot[v] for v in outputs])

    # --- printing -------------------------------------------------------------------------

    def __str__(self) -> str:
        uses = [0] * (self.nin + len(self.steps))
        for _, args in self.steps:
            for a in args:
                uses[a] += 1
        for o in self.outputs:
            uses[o] += 1
        text: list[tuple[str, int]] = [(f"i{k}", _ATOM) for k in range(self.nin)]
        lets: list[str] = []
        for j, (op, args) in enumerate(self.steps):
            expr = _format_step(op, [text[a] for a in args])
            slot = self.nin + j
            is_output = slot in self.outputs
            if uses[slot] > 1 and args and not (is_output and uses[slot] == 1):
                name = f"t{j}"
                lets.append(f"{name} = {expr[0]}")
                expr = (name, _ATOM)
            text.append(expr)
        body = ", ".join(text[o][0] for o in self.outputs)
        out = "; ".join([*lets, body])
        if len(out) > _MAX_STR:
            out = out[: _MAX_STR - 3] + "..."
        return f"Composite{{{out}}}"

    __repr__ = __str__


def _full(value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Return ``value`` broadcast to the whole result's ``shape``.

    An output may not use every input, or be an input itself.
    """
    if value.shape == shape:
        return value
    return np.array(np.broadcast_to(value, shape))


def _format_step(op: ScalarOp, args: list[tuple[str, int]]) -> tuple[str, int]:
    """Return the text of ``op(args)`` and its precedence."""

    def wrap(arg: tuple[str, int], prec: int) -> str:
        return arg[0] if arg[1] > prec else f"({arg[0]})"

    if isinstance(op, ScalarConstant):
        text = str(op)
        return text, (_ATOM if not text.startswith("-") else 6)
    infix = _INFIX.get(type(op))
    if infix is not None and len(args) >= 2:
        sym, prec = infix
        if sym == "**":  # right-associative
            return f"{wrap(args[0], prec)} ** {wrap(args[1], prec - 1)}", prec
        # Left-associative: the first operand may be at the same level.
        parts = [wrap(args[0], prec - 1)] + [wrap(a, prec) for a in args[1:]]
        return f" {sym} ".join(parts), prec
    prefix = _PREFIX.get(type(op))
    if prefix is not None and len(args) == 1:
        return f"{prefix}{wrap(args[0], 6)}", 6
    if isinstance(op, Cast):
        name = op.dtype
    else:
        name = str(op)
    return f"{name}({', '.join(a[0] for a in args)})", _ATOM


def _leaf(builder: ProgramBuilder, v: Variable, inline_constants: bool) -> int:
    if isinstance(v, Constant):
        if inline_constants and v.data.size == 1:
            return builder.constant(v.data)
        raise KilnValueError(
            f"Composite.from_graph: the constant {v!r} has several elements; list it in inputs"
        )
    raise KilnValueError(f"Composite.from_graph: {v!r} is a root variable not listed in inputs")


class ProgramBuilder:
    """Collect the steps of a :class:`Composite`, with inputs discovered along the way.

    Identical steps are shared, constants are inlined and nested single-output
    Composites are expanded into their steps. Slots returned by :meth:`input`,
    :meth:`constant` and :meth:`apply` are provisional; :meth:`build` numbers the
    inputs first.
    """

    def __init__(self) -> None:
        self._inputs: dict[Any, int] = {}
        self._steps: list[tuple[ScalarOp, tuple[int, ...]]] = []
        self._memo: dict[tuple[ScalarOp, tuple[int, ...]], int] = {}
        # A provisional slot is ("in", k) -> k*2, ("step", j) -> j*2 + 1.

    @property
    def n_inputs(self) -> int:
        """The number of inputs so far."""
        return len(self._inputs)

    @property
    def input_keys(self) -> list[Any]:
        """The input keys, in input order."""
        return list(self._inputs)

    def input(self, key: Any) -> int:
        """Return the slot of the input ``key`` (a new input the first time)."""
        k = self._inputs.setdefault(key, len(self._inputs))
        return 2 * k

    def constant(self, value: Any) -> int:
        """Return the slot of an inlined constant holding ``value`` (one element)."""
        data = np.asarray(value)
        return self.apply(ScalarConstant.from_value(data, data.dtype), ())

    def apply(self, op: ScalarOp, args: Sequence[int]) -> int:
        """Return the slot of ``op(*args)``, a new step unless an identical one exists."""
        if isinstance(op, Composite) and op.nout == 1:
            return self._inline(op, args)
        key = (op, tuple(args))
        found = self._memo.get(key)
        if found is None:
            self._steps.append(key)
            found = self._memo[key] = 2 * (len(self._steps) - 1) + 1
        return found

    def _inline(self, op: Composite, args: Sequence[int]) -> int:
        slots = list(args)
        for inner_op, inner_args in op.steps:
            slots.append(self.apply(inner_op, [slots[a] for a in inner_args]))
        return slots[op.outputs[0]]

    def build(self, outputs: Sequence[int]) -> Composite:
        """Return the Composite computing the provisional slots ``outputs``."""
        nin = len(self._inputs)
        live = [False] * len(self._steps)
        for s in outputs:
            if s % 2:
                live[s // 2] = True
        for j in range(len(self._steps) - 1, -1, -1):
            if live[j]:
                for a in self._steps[j][1]:
                    if a % 2:
                        live[a // 2] = True
        renumber: dict[int, int] = {}
        for j, alive in enumerate(live):
            if alive:
                renumber[j] = nin + len(renumber)

        def final(s: int) -> int:
            return s // 2 if s % 2 == 0 else renumber[s // 2]

        steps = [
            (op, tuple(final(a) for a in args))
            for j, (op, args) in enumerate(self._steps)
            if live[j]
        ]
        return Composite(nin, steps, [final(o) for o in outputs])
