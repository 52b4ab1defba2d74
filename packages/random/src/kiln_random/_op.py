"""``RandomVariable``: a pure Op ``(rng, size, *params) -> (next_rng, draw)``.

A random variable is declared, not computed: its gufunc ``signature`` (``"(),()->()"``
for a scalar distribution, ``"(n),(n,n)->(n)"`` for a multivariate normal), its output
``dtype``, its parameters' names and dtypes, and the ``constraints`` valid parameters
meet. Two functions draw: ``rng_fn`` (NumPy, the reference the Python VM runs) and
``core_fn`` (one core draw, written in the subset of Python that Numba compiles: the
Numba backend loops over the batch calling it). Both consume the generator's stream in
the same order, so a seed gives the same draws on both where their algorithms agree.

``size`` follows NumPy: it is the batch shape of the draw; ``None`` (an empty size
vector in the graph) means the broadcast of the parameters' batch shapes. Batch
dimensions broadcast as everywhere in kiln: only dimensions of static length 1.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from kiln_graph import (
    Apply,
    Constant,
    GradientError,
    KilnTypeError,
    KilnValueError,
    Op,
    RandomGeneratorType,
    ShapeMismatchError,
    TensorType,
    TensorVariable,
    Variable,
)
from kiln_graph.helpers import (
    as_shape_vector,
    parse_signature,
    shape_constant,
    static_broadcast,
    static_entries,
)
from kiln_graph.scalar import FLOAT_DTYPES, INTEGER_DTYPES
from kiln_graph.tensor import as_tensor, cast, dimshuffle, getitem, shape_i

#: The size vector meaning "no size": the broadcast of the parameters' batch shapes.
NO_SIZE = np.zeros(0, dtype="int64")


class RandomVariable(Op, metaclass=abc.ABCMeta):
    """A draw from a distribution: ``(rng, size, *params) -> (next_rng, draw)``.

    Subclasses declare ``name``, ``signature``, ``dtype``, ``params`` (names),
    ``param_dtypes`` (``"float64"`` or ``"int64"`` each; default all float64),
    ``constraints`` (``(expression, description)`` pairs over the scalar parameters,
    true for valid values: the expression is NumPy and Numba source, e.g.
    ``"sigma >= 0"``), ``core_fn`` and, for speed on the VM, ``rng_fn``.

    ``inplace`` (set by the in-place phase) draws from the input generator itself
    instead of a copy; ``next_rng`` is then that generator.
    """

    __props__ = ("inplace",)
    default_output = 1

    name: ClassVar[str]
    signature: ClassVar[str]
    dtype: ClassVar[str]
    params: ClassVar[tuple[str, ...]]
    param_dtypes: ClassVar[tuple[str, ...] | None] = None
    constraints: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = bool(inplace)
        self.destroy_map = {0: [0]} if self.inplace else {}
        ins: tuple[tuple[str, ...], ...]
        outs: tuple[tuple[str, ...], ...]
        if self.signature.startswith("->"):  # no parameters (an improper prior's op)
            ins, outs = (), parse_signature("()" + self.signature)[1]
        else:
            ins, outs = parse_signature(self.signature)
        if len(ins) != len(self.params) or len(outs) != 1:
            raise KilnValueError(
                f"{type(self).__name__}: the signature {self.signature!r} must have one core "
                f"input per parameter {self.params} and one output"
            )
        self.inputs_sig: tuple[tuple[str, ...], ...] = ins
        self.output_sig: tuple[str, ...] = outs[0]

    def __str__(self) -> str:
        return f"{self.name}_rv{{inplace}}" if self.inplace else f"{self.name}_rv"

    __repr__ = __str__

    @staticmethod
    @abc.abstractmethod
    def core_fn(rng: np.random.Generator, *args: Any) -> Any:
        """Draw one core value: return a scalar, or write a core array into ``args[-1]``."""
        raise NotImplementedError

    def clone(self, inplace: bool) -> RandomVariable:
        """Return this random variable with ``inplace`` set."""
        return type(self)(inplace=inplace)

    def inplace_variants(self, node: Apply) -> list[tuple[int, Op]]:
        """Draw from the input generator itself (output 0 takes input 0's buffer)."""
        return [] if self.inplace else [(0, self.clone(inplace=True))]

    @property
    def core_ndim(self) -> int:
        """The number of core dimensions of a draw."""
        return len(self.output_sig)

    def scalar_params(self) -> list[int]:
        """Positions of the parameters with no core dimensions."""
        return [i for i, dims in enumerate(self.inputs_sig) if not dims]

    def batch_ndim(self, node: Apply) -> int:
        """Return the number of batch dimensions of the draw of ``node``."""
        return node.outputs[1].type.ndim - self.core_ndim  # type: ignore[attr-defined]

    # --- building --------------------------------------------------------------------

    def make_node(self, rng: Any, size: Any, *params: Any) -> Apply:
        if not isinstance(rng, Variable) or not isinstance(rng.type, RandomGeneratorType):
            raise KilnTypeError(
                f"{self.name}: rng must be a random generator variable (kiln.random.rng(seed)), "
                f"got {rng!r}"
            )
        if len(params) != len(self.params):
            raise KilnTypeError(
                f"{self.name}: expected {len(self.params)} parameter(s) {self.params}, "
                f"got {len(params)}"
            )
        size_var = _as_size(size, self.name)
        tensors = [self._as_param(i, p) for i, p in enumerate(params)]
        n_size = size_var.type.shape[0]
        batch_shapes = [
            t.type.shape[: t.ndim - len(d)] for t, d in zip(tensors, self.inputs_sig, strict=True)
        ]
        if isinstance(size, tuple | list) and len(size) == 0 and any(batch_shapes):
            raise ShapeMismatchError(
                f"{self.name}: size=() asks for one draw, but the parameters have batch "
                f"shapes {batch_shapes}; use size=None to draw one per parameter"
            )
        batch = n_size if n_size else max((len(s) for s in batch_shapes), default=0)
        for i, shp in enumerate(batch_shapes):
            if len(shp) > batch:
                raise ShapeMismatchError(
                    f"{self.name}: size has {batch} dimension(s), but parameter "
                    f"{self.params[i]!r} has batch shape {shp}; the size must cover the "
                    "parameters' batch dimensions (NumPy's rule)"
                )
        tensors = [
            t
            if len(shp) == batch
            else dimshuffle(t, ("x",) * (batch - len(shp)) + tuple(range(t.ndim)))
            for t, shp in zip(tensors, batch_shapes, strict=True)
        ]
        padded = [t.type.shape[:batch] for t in tensors]
        if n_size:
            batch_shape = tuple(static_entries(size_var))
            for d, n in enumerate(batch_shape):
                if n is not None and n < 0:
                    raise KilnValueError(f"{self.name}: size must be non-negative, got {n}")
                for i, shp in enumerate(padded):
                    if n is not None and shp[d] not in (None, 1, n):
                        raise ShapeMismatchError(
                            f"{self.name}: parameter {self.params[i]!r} has batch shape "
                            f"{shp}, which does not broadcast to size {batch_shape} "
                            f"(dimension {d})"
                        )
        else:
            batch_shape = static_broadcast(padded, self.name) if batch else ()
        core = self._core_static(tensors, batch)
        self._check_constant_params(tensors)
        out = TensorType(self.dtype, tuple(batch_shape) + core)
        return Apply.create(self, [rng, size_var, *tensors], [RandomGeneratorType(), out])

    def _as_param(self, i: int, p: Any) -> TensorVariable:
        dtypes = self.param_dtypes or ("float64",) * len(self.params)
        name, dtype, dims = self.params[i], dtypes[i], self.inputs_sig[i]
        if isinstance(p, Variable) and not isinstance(p, TensorVariable):
            raise KilnTypeError(f"{self.name}: parameter {name!r} must be a tensor, got {p!r}")
        t = as_tensor(p) if isinstance(p, Variable) else as_tensor(np.asarray(p))
        if t.dtype not in FLOAT_DTYPES | INTEGER_DTYPES | {"bool"}:
            raise KilnTypeError(f"{self.name}: parameter {name!r} has dtype {t.dtype}")
        if dtype == "int64" and t.dtype in FLOAT_DTYPES:
            if not (isinstance(t, Constant) and np.all(np.mod(t.data, 1) == 0)):
                raise KilnTypeError(
                    f"{self.name}: parameter {name!r} must be an integer, got dtype {t.dtype}"
                )
        if t.dtype != dtype:
            t = cast(t, dtype)
        if t.ndim < len(dims):
            raise KilnValueError(
                f"{self.name}: parameter {name!r} needs at least {len(dims)} dimension(s) "
                f"{tuple(dims)} (signature {self.signature!r}), got a {t.ndim}-d tensor"
            )
        return t

    def _core_static(self, tensors: Sequence[TensorVariable], batch: int) -> tuple[int | None, ...]:
        known: dict[str, tuple[int, int]] = {}
        for i, (t, dims) in enumerate(zip(tensors, self.inputs_sig, strict=True)):
            for dim, n in zip(dims, t.type.shape[batch:], strict=True):
                if n is None:
                    continue
                if dim in known and known[dim][0] != n:
                    j = known[dim][1]
                    raise ShapeMismatchError(
                        f"{self.name}: core dimension {dim!r} has length {known[dim][0]} in "
                        f"parameter {self.params[j]!r} but {n} in {self.params[i]!r} "
                        f"(signature {self.signature!r})"
                    )
                known.setdefault(dim, (n, i))
        return tuple(known[d][0] if d in known else None for d in self.output_sig)

    def conditions(self, **params: Any) -> list[Any]:
        """Return the constraints on ``params`` (graph variables) as boolean variables.

        The one statement of each parameter's constraint: the draws check
        :attr:`constraints` on values, and a distribution's log-density bounds its
        result with these (``-inf`` where one fails). Every constraint over the given
        parameters is returned; one naming a parameter not given is left out.
        """
        out = []
        for expr, _ in self.constraints:
            names = constraint_names(expr)
            if all(n in params for n in names):
                out.append(eval(expr, {"__builtins__": {}}, {n: params[n] for n in names}))  # noqa: S307
        return out

    def _check_constant_params(self, tensors: Sequence[TensorVariable]) -> None:
        """Raise at build time when constant parameters break a constraint."""
        by_name = dict(zip(self.params, tensors, strict=True))
        for expr, description in self.constraints:
            names = constraint_names(expr)
            if not all(isinstance(by_name[n], Constant) for n in names):
                continue
            values = {n: by_name[n].data for n in names}  # type: ignore[attr-defined]
            if not _holds(expr, values):
                shown = ", ".join(f"{n}={show_value(v)}" for n, v in values.items())
                raise KilnValueError(f"{self.name}: {description}, got {shown}")

    # --- running ---------------------------------------------------------------------

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        rng, size, *params = inputs
        if not self.inplace:
            rng = copy_generator(rng)
        batch = self.runtime_batch_shape(node, size, params)
        values = dict(zip(self.params, params, strict=True))
        for expr, description in self.constraints:
            names = constraint_names(expr)
            if not _holds(expr, {n: values[n] for n in names}):
                raise KilnValueError(f"{self.name}: {description} (invalid parameter values)")
        draw = np.asarray(self.rng_fn(rng, batch, *params), dtype=self.dtype)
        expected = batch + self.runtime_core_shape(params, len(batch))
        if draw.shape != expected:  # a subclass's rng_fn broke the contract
            raise ShapeMismatchError(
                f"{self.name}: the draw has shape {draw.shape}, expected {expected}"
            )
        outputs[0] = rng
        outputs[1] = draw

    def runtime_batch_shape(
        self, node: Apply, size: np.ndarray, params: Sequence[np.ndarray]
    ) -> tuple[int, ...]:
        """Return the batch shape of a draw, checking that the parameters broadcast."""
        batch = self.batch_ndim(node)
        static = [v.type.shape for v in node.inputs[2:]]  # type: ignore[attr-defined]
        if len(size):
            shape = [int(n) for n in size]
            for n in shape:
                if n < 0:
                    raise KilnValueError(f"{self.name}: size must be non-negative, got {shape}")
        else:
            shape = []
            for d in range(batch):
                sources = [i for i, s in enumerate(static) if s[d] != 1]
                shape.append(int(params[sources[0]].shape[d]) if sources else 1)
        for i, p in enumerate(params):
            for d in range(batch):
                if static[i][d] != 1 and p.shape[d] != shape[d]:
                    raise ShapeMismatchError(
                        f"{self.name}: parameter {self.params[i]!r} has batch shape "
                        f"{p.shape[:batch]}, which does not match the draw's batch shape "
                        f"{tuple(shape)}; kiln broadcasts only dimensions whose static "
                        "length is 1"
                    )
        return tuple(shape)

    def runtime_core_shape(self, params: Sequence[np.ndarray], batch: int) -> tuple[int, ...]:
        """Return the core shape of a draw from the parameters' core dimensions."""
        sizes: dict[str, int] = {}
        for p, dims in zip(params, self.inputs_sig, strict=True):
            for dim, n in zip(dims, p.shape[batch:], strict=True):
                if sizes.setdefault(dim, int(n)) != n:
                    raise ShapeMismatchError(
                        f"{self.name}: core dimension {dim!r} has lengths {sizes[dim]} and {n}"
                    )
        return tuple(sizes[d] for d in self.output_sig)

    #: ``rng_fn(rng, size, *params)``: a draw of batch shape ``size`` (NumPy arrays in
    #: and out; the VM's implementation). By default :meth:`loop_core_fn`; subclasses
    #: call NumPy's vectorized methods, drawing in the same order.
    rng_fn: Callable[..., Any]  # assigned below

    def loop_core_fn(
        self, rng: np.random.Generator, size: tuple[int, ...], *params: np.ndarray
    ) -> Any:
        """Return a draw of batch shape ``size``: ``core_fn`` called once per element."""
        batch = len(size)
        core_fn = getattr(self.core_fn, "py_func", self.core_fn)
        core = self.runtime_core_shape(params, batch)
        out = np.empty(size + core, dtype=self.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            for idx in np.ndindex(*size):
                args = [
                    p[tuple(0 if p.shape[d] == 1 else j for d, j in enumerate(idx))] for p in params
                ]
                if core:
                    core_fn(rng, *args, out[idx])
                else:
                    out[idx] = core_fn(rng, *args)
        return out

    rng_fn = loop_core_fn

    def infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None]
    ) -> list[tuple[Variable, ...] | None]:
        batch = self.batch_ndim(node)
        size = node.inputs[1]
        static = node.outputs[1].type.shape  # type: ignore[attr-defined]
        dims: list[Variable] = []
        for d in range(batch):
            if static[d] is not None:
                dims.append(shape_constant(static[d]))
            elif size.type.shape[0]:  # type: ignore[attr-defined]
                dims.append(getitem(size, d))
            else:
                for var, shp in zip(node.inputs[2:], input_shapes[2:], strict=True):
                    if var.type.shape[d] != 1 and shp is not None:  # type: ignore[attr-defined]
                        dims.append(shp[d])
                        break
                else:
                    dims.append(shape_i(node.outputs[1], d))
        by_name: dict[str, Variable] = {}
        for var, dims_sig in zip(node.inputs[2:], self.inputs_sig, strict=True):
            for j, dim in enumerate(dims_sig):
                by_name.setdefault(dim, shape_i(var, batch + j))
        for j, dim in enumerate(self.output_sig):
            n = static[batch + j]
            dims.append(shape_constant(n) if n is not None else by_name[dim])
        return [None, tuple(dims)]

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        raise GradientError(
            f"{self.name}: a random draw has no gradient with respect to its parameters "
            "(write the draw as a transformation of a parameter-free one to differentiate it)"
        )


def copy_generator(rng: np.random.Generator) -> np.random.Generator:
    """Return an independent generator in the same state as ``rng``.

    A new bit generator of the same kind with the state copied: about 4x faster than
    ``copy.deepcopy`` (which pickles), and every draw consumes one copy.
    """
    bit_generator = rng.bit_generator
    try:
        new = type(bit_generator)(0)
        new.state = bit_generator.state
    except (TypeError, ValueError):  # a bit generator of another kind of constructor
        return copy.deepcopy(rng)
    return np.random.Generator(new)


def _as_size(size: Any, name: str) -> TensorVariable:
    if size is None:
        return as_tensor(NO_SIZE)
    if isinstance(size, int | np.integer) and not isinstance(size, bool):
        size = (size,)
    if isinstance(size, list | tuple) and all(isinstance(n, int | np.integer) for n in size):
        if any(int(n) < 0 for n in size):
            raise KilnValueError(f"{name}: size must be non-negative, got {tuple(size)}")
        if len(size) == 0:
            return as_tensor(NO_SIZE)  # size=() draws a scalar, as None does for scalars
    vec = as_shape_vector(size, argname=f"{name}: size")
    if vec.type.shape[0] is None:
        raise KilnValueError(
            f"{name}: size must have a known length (a tuple of ints or scalars), got {size!r}"
        )
    return vec


def constraint_names(expr: str) -> tuple[str, ...]:
    """Return the parameter names a constraint expression (``"sigma > 0"``) reads."""
    return tuple(n for n in compile(expr, "<constraint>", "eval").co_names if n != "np")


def evaluate_constraint(expr: str, values: Mapping[str, Any]) -> Any:
    """Return a constraint expression evaluated on ``values`` (a boolean or boolean array).

    Only the names in ``values`` and ``np`` are in scope (no builtins).
    """
    with np.errstate(invalid="ignore"):
        return eval(expr, {"np": np, "__builtins__": {}}, dict(values))  # noqa: S307


def _holds(expr: str, values: dict[str, Any]) -> bool:
    return bool(np.all(evaluate_constraint(expr, values)))


def show_value(value: Any) -> str:
    """Return ``value`` as an error message shows it (a number, or a short array)."""
    arr = np.asarray(value)
    return str(arr.item()) if arr.size == 1 else np.array2string(arr, threshold=8)
