"""The IR: immutable, interned variables, constants, applications and Ops.

Building the same expression twice yields the same :class:`Apply` node (hash-consing),
so equality of expressions is identity and common subexpressions are shared as they
are built. Each node has a structural :attr:`digest` that is identical across
processes for the same expression.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import weakref
from collections.abc import Iterable, Sequence
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from kiln_graph._digest import encode
from kiln_graph._errors import KilnTypeError
from kiln_graph._types import RandomGeneratorType, TensorType, Type

# The tensor functions behind Python operators (``x + y`` -> ``add(x, y)``); filled once
# by ``kiln_graph/__init__.py`` through :func:`install_tensor_operators`.
_ops = SimpleNamespace()


def install_tensor_operators(namespace: Any) -> None:
    """Bind the functions that implement ``+``, ``*``, ``x[i]``, ... on tensor variables."""
    _ops.__dict__.update({k: getattr(namespace, k) for k in dir(namespace) if k[0] != "_"})


def _hash_bytes(*parts: bytes | memoryview) -> bytes:
    """SHA-256 of ``parts``, each framed by its length (a memoryview: 1-d, of bytes)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.digest()


def _hashable_as_is(arr: np.ndarray, dtype: Any) -> bool:
    """Whether ``arr``'s own buffer is what :meth:`Constant.create` would hash."""
    return (
        (dtype is None or np.dtype(dtype) == arr.dtype)
        and arr.flags.c_contiguous
        and arr.dtype.isnative
        and not arr.dtype.hasobject
    )


def _constant_digest(ttype: TensorType, arr: np.ndarray) -> bytes:
    """Return the digest a constant of type ``ttype`` holding ``arr`` is interned by.

    The array's own buffer (C-contiguous): a data set's bytes are not copied to hash.
    """
    return _hash_bytes(b"const", encode(ttype.key()), _byte_view(arr))


def _byte_view(arr: np.ndarray) -> memoryview:
    """Return the bytes of the C-contiguous ``arr`` as a 1-d view (``tobytes()`` copies)."""
    if arr.dtype.hasobject:  # (references: no bytes to view; hashed as before)
        return memoryview(arr.tobytes())
    return memoryview(arr.reshape(-1).view(np.uint8)) if arr.size else memoryview(b"")


class Variable:
    """A symbolic value of a :class:`Type`: a graph input, a constant or an Op output.

    ``owner`` is the :class:`Apply` node that computes it (``None`` for roots) and
    ``index`` its position among that node's outputs. ``name`` is a label for printing
    and error messages; it is not part of the structure.
    """

    __slots__ = ("type", "owner", "index", "name", "_digest", "__weakref__")
    _counter: ClassVar[itertools.count[int]] = itertools.count()

    def __init__(
        self,
        type: Type,
        owner: Apply | None = None,
        index: int | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(type, Type):
            raise KilnTypeError(f"type: expected a kiln Type, got {type!r}")
        self.type = type
        self.owner = owner
        self.index = index
        self.name = name
        self._digest: bytes | None = None

    @property
    def digest(self) -> str:
        """Structural digest (hex): equal for equal expressions, in any process."""
        return self.digest_bytes.hex()

    @property
    def digest_bytes(self) -> bytes:
        """Structural digest as raw bytes."""
        if self._digest is None:
            if self.owner is not None:
                self._digest = _hash_bytes(
                    b"out", self.owner.digest_bytes, str(self.index).encode()
                )
            else:
                self._digest = self._root_digest()
        return self._digest

    def _root_digest(self) -> bytes:
        return _hash_bytes(
            b"input", encode(self.type.key()), type(self).__name__.encode(), encode(self.name)
        )

    def __repr__(self) -> str:
        if self.name:
            return self.name
        if self.owner is not None:
            op = str(self.owner.op)
            return op if len(self.owner.outputs) == 1 else f"{op}.{self.index}"
        return f"<{type(self).__name__} {self.type}>"

    def __bool__(self) -> bool:
        raise KilnTypeError(
            "A symbolic variable has no truth value; use kt.switch / kt.where or compare "
            "values after compiling"
        )

    def __reduce__(self) -> Any:
        raise KilnTypeError(
            f"cannot pickle or copy the graph variable {self!r}: graph nodes are interned, "
            "and an unpickled copy would bypass interning. Serialize whole graphs with "
            "kiln_compile's graph serializer (the Stage-1 cache uses it)"
        )


def as_variable_list(x: Variable | Iterable[Variable]) -> list[Variable]:
    """Return ``[x]`` for one variable, else the variables of ``x`` as a new list.

    Callers that return one result for one variable and a list for a list test
    ``isinstance(x, Variable)`` themselves.
    """
    if isinstance(x, Variable):
        return [x]
    return list(x)


class TensorVariable(Variable):
    """A :class:`Variable` of :class:`TensorType`, with NumPy-like operators and methods."""

    __slots__ = ()
    type: TensorType
    # ``ndarray <op> variable`` defers to the variable's reflected operator (instead of
    # NumPy broadcasting the variable as an object element into an object array).
    __array_ufunc__ = None

    @property
    def dtype(self) -> str:
        """The dtype name."""
        return self.type.dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return self.type.ndim

    @property
    def shape(self) -> Any:
        """The symbolic shape (an int64 vector variable)."""
        return _ops.shape(self)

    @property
    def T(self) -> TensorVariable:  # noqa: N802
        """The transpose (axes reversed)."""
        return _ops.transpose(self)

    def __add__(self, other: Any) -> Any:
        if getattr(other, "__kiln_defers__", False):  # e.g. a GP covariance: its __radd__
            return NotImplemented
        return _ops.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return _ops.add(other, self)

    def __sub__(self, other: Any) -> Any:
        return _ops.sub(self, other)

    def __rsub__(self, other: Any) -> Any:
        return _ops.sub(other, self)

    def __mul__(self, other: Any) -> Any:
        if getattr(other, "__kiln_defers__", False):  # e.g. eta**2 * cov: the covariance's
            return NotImplemented
        return _ops.mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return _ops.mul(other, self)

    def __truediv__(self, other: Any) -> Any:
        return _ops.true_divide(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _ops.true_divide(other, self)

    def __floordiv__(self, other: Any) -> Any:
        return _ops.floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return _ops.floor_divide(other, self)

    def __mod__(self, other: Any) -> Any:
        return _ops.mod(self, other)

    def __rmod__(self, other: Any) -> Any:
        return _ops.mod(other, self)

    def __pow__(self, other: Any) -> Any:
        return _ops.pow(self, other)

    def __rpow__(self, other: Any) -> Any:
        return _ops.pow(other, self)

    def __matmul__(self, other: Any) -> Any:
        return _ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return _ops.matmul(other, self)

    def __neg__(self) -> Any:
        return _ops.neg(self)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return _ops.abs(self)

    # ``&``, ``|`` and ``~`` are logical (bool operands only), never bitwise.
    def __invert__(self) -> Any:
        return _ops.logical_not(_bool_operand("~", self))

    def __and__(self, other: Any) -> Any:
        return _ops.logical_and(_bool_operand("&", self), _bool_operand("&", other))

    def __rand__(self, other: Any) -> Any:
        return _ops.logical_and(_bool_operand("&", other), _bool_operand("&", self))

    def __or__(self, other: Any) -> Any:
        return _ops.logical_or(_bool_operand("|", self), _bool_operand("|", other))

    def __ror__(self, other: Any) -> Any:
        return _ops.logical_or(_bool_operand("|", other), _bool_operand("|", self))

    def __lt__(self, other: Any) -> Any:
        return _ops.lt(self, other)

    def __le__(self, other: Any) -> Any:
        return _ops.le(self, other)

    def __gt__(self, other: Any) -> Any:
        return _ops.gt(self, other)

    def __ge__(self, other: Any) -> Any:
        return _ops.ge(self, other)

    # ``==`` and ``hash`` stay identity-based (nodes are interned); use kt.eq for values.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __getitem__(self, index: Any) -> Any:
        return _ops.getitem(self, index)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise KilnTypeError("len() of a 0-d tensor")
        n = self.type.shape[0]
        if n is None:
            raise KilnTypeError(
                "len() needs a static length; this variable's first dimension is unknown "
                "(use x.shape[0] for a symbolic length)"
            )
        return n

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def sum(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Sum over ``axis`` (see :func:`kiln_graph.tensor.sum`)."""
        return _ops.sum(self, axis=axis, keepdims=keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Product over ``axis``."""
        return _ops.prod(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Mean over ``axis``."""
        return _ops.mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Maximum over ``axis``."""
        return _ops.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Minimum over ``axis``."""
        return _ops.min(self, axis=axis, keepdims=keepdims)

    def reshape(self, *shape: Any) -> Any:
        """Reshape to ``shape``."""
        if len(shape) == 1 and not isinstance(shape[0], int | np.integer):
            shape = shape[0]
        return _ops.reshape(self, shape)

    def dimshuffle(self, *pattern: Any) -> Any:
        """Permute / insert broadcastable (``"x"``) / drop length-1 dimensions."""
        if len(pattern) == 1 and isinstance(pattern[0], list | tuple):
            pattern = tuple(pattern[0])
        return _ops.dimshuffle(self, pattern)

    def astype(self, dtype: Any) -> Any:
        """Cast to ``dtype``."""
        return _ops.cast(self, dtype)

    def flatten(self) -> Any:
        """Flatten to one dimension."""
        return _ops.flatten(self)


def _bool_operand(op: str, x: Any) -> Any:
    """Return ``x`` if it is a bool tensor or value, else raise: ``op`` is not bitwise."""
    dtype = x.dtype if isinstance(x, TensorVariable) else np.asarray(x).dtype.name
    if dtype != "bool":
        raise KilnTypeError(
            f"{op}: expected bool operands, got dtype {dtype}; kiln's {op} is logical, not "
            "bitwise: compare first (e.g. x > 0) or call kt.logical_and / kt.logical_or / "
            "kt.logical_not"
        )
    return x


class Constant(TensorVariable):
    """A constant tensor. Constants are interned by dtype, shape and bytes."""

    __slots__ = ("data",)
    _table: ClassVar[weakref.WeakValueDictionary[tuple[Any, ...], Constant]] = (
        weakref.WeakValueDictionary()
    )

    def __init__(self, type: TensorType, data: np.ndarray, digest: bytes) -> None:
        super().__init__(type)
        self.data = data
        self._digest = digest

    @classmethod
    def create(cls, data: Any, dtype: Any = None, *, immutable: bool = False) -> Constant:
        """Return the interned constant holding ``data`` (converted to ``dtype``).

        ``immutable``: ``data`` is an array whose bytes cannot change (a view of stored
        bytes, as a cache entry's): an equal constant that exists is found from its
        bytes before they are copied, so a graph read back holds no second copy of its
        data (a copy otherwise: a constant must not change with the caller's array).
        """
        as_is = immutable and isinstance(data, np.ndarray) and _hashable_as_is(data, dtype)
        # Hashed before the copy when ``data`` cannot change (its copy has its digest).
        digest = None
        if as_is:
            ttype = TensorType(data.dtype, data.shape)
            digest = _constant_digest(ttype, data)
            found = cls._table.get((ttype, digest))
            if found is not None:
                return found
        arr = np.array(data, dtype=dtype, copy=True, order="C")
        if not arr.dtype.isnative:  # equal values get equal bytes, hence one constant
            arr = arr.astype(arr.dtype.newbyteorder("="))
        ttype = TensorType(arr.dtype, arr.shape)
        arr.flags.writeable = False
        digest = digest or _constant_digest(ttype, arr)
        key = (ttype, digest)
        found = cls._table.get(key)
        if found is not None:
            return found
        const = cls(ttype, arr, digest)
        cls._table[key] = const
        return const

    def __repr__(self) -> str:
        if self.name:
            return self.name
        if self.data.size <= 6:
            return f"{np.array2string(self.data, separator=', ')}".replace("\n", "")
        return f"Constant{{{self.type.dtype}, shape={self.data.shape}}}"


class SharedVariable(Variable):
    """A variable whose value lives outside the graph and persists across calls.

    Compiled functions read it as an implicit input and may write it through
    ``updates``. Use :meth:`get_value` / :meth:`set_value` to read and change it.
    """

    __slots__ = ("_value",)

    def __init__(self, type: Type, value: Any, name: str | None = None) -> None:
        super().__init__(type, name=name)
        self._value = type.filter(value, name=name or "value")

    def get_value(self, borrow: bool = False) -> Any:
        """Return the current value (a copy unless ``borrow=True``)."""
        if borrow or isinstance(self.type, RandomGeneratorType):
            return self._value
        return np.array(self._value, copy=True)

    def set_value(self, value: Any, borrow: bool = False) -> None:
        """Replace the value; it must fit this variable's type."""
        value = self.type.filter(value, name=self.name or "value")
        if not borrow and isinstance(value, np.ndarray):
            value = np.array(value, copy=True)
        self._value = value


class TensorSharedVariable(SharedVariable, TensorVariable):
    """A shared variable holding an array; supports tensor operators."""

    __slots__ = ()


def variable_for(type: Type, owner: Apply | None, index: int | None) -> Variable:
    """Create the output variable class that matches ``type``."""
    if isinstance(type, TensorType):
        return TensorVariable(type, owner, index)
    return Variable(type, owner, index)


class Apply:
    """One application of an Op to input variables. Interned and immutable."""

    __slots__ = ("op", "inputs", "outputs", "_digest", "__weakref__")
    _table: ClassVar[weakref.WeakValueDictionary[tuple[Any, ...], Apply]] = (
        weakref.WeakValueDictionary()
    )

    def __init__(self, op: Op, inputs: tuple[Variable, ...], output_types: Sequence[Type]):
        self.op = op
        self.inputs = inputs
        self.outputs = tuple(variable_for(t, self, i) for i, t in enumerate(output_types))
        self._digest: bytes | None = None

    @classmethod
    def create(cls, op: Op, inputs: Sequence[Variable], output_types: Sequence[Type]) -> Apply:
        """Return the unique node applying ``op`` to ``inputs``."""
        inputs = tuple(inputs)
        for i, var in enumerate(inputs):
            if not isinstance(var, Variable):
                raise KilnTypeError(f"{op}: input {i} is not a Variable: {var!r}")
        key = (op, inputs)
        node = cls._table.get(key)
        if node is None:
            node = cls(op, inputs, output_types)
            cls._table[key] = node
        return node

    @property
    def digest_bytes(self) -> bytes:
        """Structural digest of this application (raw bytes)."""
        if self._digest is None:
            self._digest = _hash_bytes(
                b"apply", self.op.digest_bytes, *[i.digest_bytes for i in self.inputs]
            )
        return self._digest

    @property
    def out(self) -> Variable:
        """The single output (error if the node has several)."""
        if len(self.outputs) != 1:
            raise KilnTypeError(f"{self.op} has {len(self.outputs)} outputs; use .outputs")
        return self.outputs[0]

    def __repr__(self) -> str:
        return f"{self.op}({', '.join(map(repr, self.inputs))})"

    def __reduce__(self) -> Any:
        raise KilnTypeError(
            f"cannot pickle or copy the graph node {self!r}: graph nodes are interned, and an "
            "unpickled copy would bypass interning. Serialize whole graphs with kiln_compile's "
            "graph serializer (the Stage-1 cache uses it)"
        )


class Props:
    """Immutable objects compared and hashed by the attributes named in ``__props__``."""

    __props__: ClassVar[tuple[str, ...]] = ()

    def _props(self) -> tuple[Any, ...]:
        return tuple(getattr(self, p) for p in self.__props__)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return type(self) is type(other) and self._props() == other._props()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        try:
            return self.__dict__["_cached_hash"]
        except KeyError:
            h = hash((type(self), self._props()))
            self.__dict__["_cached_hash"] = h
            return h

    def __getstate__(self) -> dict[str, Any]:
        # Pickle the props and plain attributes, never the cached hash and digest: the
        # hash of a class or a string differs between processes.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_cached")}

    @property
    def digest_bytes(self) -> bytes:
        """Structural digest of the class and props."""
        try:
            return self.__dict__["_cached_digest"]
        except KeyError:
            d = _hash_bytes(
                f"{type(self).__module__}.{type(self).__qualname__}".encode(),
                encode(self._props()),
            )
            self.__dict__["_cached_digest"] = d
            return d

    def __str__(self) -> str:
        props = self._props()
        if not props:
            return type(self).__name__
        return f"{type(self).__name__}{{{', '.join(map(_short, props))}}}"

    __repr__ = __str__


class Op(Props):
    """An operation on variables.

    Subclasses set ``__props__`` (names of the attributes that define equality) and
    implement :meth:`make_node` (type checks, output types), :meth:`perform` (NumPy
    reference), :meth:`L_op` (gradient) and :meth:`infer_shape`.
    """

    #: Index of the output returned by ``op(...)``; ``None`` returns all outputs.
    default_output: ClassVar[int | None] = None
    #: ``{output index: [input indices]}``: output ``i`` may be a view of (share memory
    #: with) these inputs. "May be a view" counts: declare it wherever ``perform`` can
    #: return one (``np.reshape``, basic slicing, ``np.transpose``...). Read-only.
    view_map: dict[int, list[int]] = {}
    #: ``{output index: [input indices]}``: output ``i`` is written into these inputs'
    #: buffers, destroying their values (the in-place variants chosen by the in-place
    #: phase). Read-only; set per instance where props decide it.
    destroy_map: dict[int, list[int]] = {}
    #: ``perform`` also computes the Op over leading batch dimensions of its inputs,
    #: broadcast as NumPy's gufuncs broadcast them (``np.matmul``): a ``Blockwise`` of it
    #: then calls ``perform`` once on the whole arrays, not once per batch element.
    perform_broadcasts: ClassVar[bool] = False

    def make_node(self, *inputs: Any) -> Apply:
        """Check the inputs and return the (interned) :class:`Apply` node."""
        raise NotImplementedError

    def __call__(self, *inputs: Any) -> Any:
        node = self.make_node(*inputs)
        if len(node.outputs) == 1:
            return node.outputs[0]
        if self.default_output is not None:
            return node.outputs[self.default_output]
        return list(node.outputs)

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        """Compute the outputs with NumPy: assign ``outputs[i]`` for each output."""
        raise NotImplementedError(f"{type(self).__name__} has no perform")

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        """Return the gradient of a scalar cost w.r.t. each input (``None``: zero).

        ``output_grads[i]`` is the gradient of the cost w.r.t. ``outputs[i]``.
        """
        from_grad = self.grad(inputs, output_grads)
        return from_grad

    def grad(
        self, inputs: Sequence[Variable], output_grads: Sequence[Variable]
    ) -> list[Variable | None]:
        """Gradient rule for Ops that do not need their outputs (see :meth:`L_op`)."""
        raise NotImplementedError(f"{self} has no gradient")

    def infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None]
    ) -> list[tuple[Variable, ...] | None]:
        """Return each output's shape as a tuple of int64 scalar variables."""
        raise NotImplementedError(f"{type(self).__name__} has no infer_shape")

    def inplace_variants(self, node: Apply) -> list[tuple[int, Op]]:
        """Return the in-place variants of ``node``: ``(input overwritten, new Op)``, best first.

        The in-place phase (``kiln_rewrite.inplace``) picks the first whose input may be
        overwritten there. The new Op declares it in its ``destroy_map``. None by default.
        """
        return []


@functools.lru_cache(maxsize=1024)
def inplace_copy(op: Op) -> Op:
    """Return ``op`` with its ``inplace`` prop set (the Ops are cached: they are values)."""
    props = {p: getattr(op, p) for p in op.__props__}
    props["inplace"] = True
    return type(op)(**props)


def _short(value: Any) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_short, value)) + ")"
    return str(value)
