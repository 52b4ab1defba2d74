"""Blockwise: gufunc-style batching of a core Op, and ``vectorize``.

A core Op computes on arrays of fixed numbers of dimensions, declared by a NumPy
gufunc signature such as ``"(m,n),(n)->(m)"``. :class:`Blockwise` applies it over
any number of extra leading (batch) dimensions, which broadcast as in
:mod:`kiln_graph._elemwise`: only dimensions of static length 1 broadcast.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kiln_graph import _alloc, _elemwise, _opfromgraph, _reduce
from kiln_graph._basic import as_tensor, constant, shape_constant, tensor
from kiln_graph._errors import KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_graph._node import Apply, Constant, Op, TensorVariable, Variable
from kiln_graph._traversal import ancestors
from kiln_graph._types import DISCRETE_DTYPES, TensorType

Signature = tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]

_DIM = r"\w+"
_ARG = rf"\((?:{_DIM}(?:,{_DIM})*)?\)"
_ARGS = rf"{_ARG}(?:,{_ARG})*"
_SIGNATURE_RE = re.compile(rf"^{_ARGS}->{_ARGS}$")


def parse_signature(signature: str) -> Signature:
    """Split a gufunc signature into core dimension names per input and per output.

    Examples
    --------
    >>> parse_signature("(m,n),(n)->(m)")
    ((('m', 'n'), ('n',)), (('m',),))
    """
    if not isinstance(signature, str):
        raise KilnTypeError(f"signature: expected a str, got {type(signature).__name__}")
    sig = re.sub(r"\s+", "", signature)
    if not _SIGNATURE_RE.match(sig):
        raise KilnValueError(
            f"signature: {signature!r} is not a gufunc signature; expected e.g. "
            "'(m,n),(n)->(m)' or '(),()->()'"
        )
    ins, outs = sig.split("->")
    return _parse_args(ins), _parse_args(outs)


def _parse_args(text: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(d for d in arg.split(",") if d) for arg in re.findall(r"\(([^)]*)\)", text))


def format_signature(ins: Sequence[Sequence[str]], outs: Sequence[Sequence[str]]) -> str:
    """Return the gufunc signature string of core dimension names ``ins -> outs``."""

    def args(group: Sequence[Sequence[str]]) -> str:
        return ",".join(f"({','.join(dims)})" for dims in group)

    return f"{args(ins)}->{args(outs)}"


# The core node (core op on core-typed dummy inputs) of each Blockwise node, for perform.
_core_nodes: weakref.WeakKeyDictionary[Apply, Apply] = weakref.WeakKeyDictionary()


class Blockwise(Op):
    """Apply ``core_op`` over the leading batch dimensions of its inputs.

    Parameters
    ----------
    core_op
        The Op computing one block (on inputs with the core dimensions only).
    signature
        Its gufunc signature, e.g. ``"(m,m),(m)->(m)"``; by default the core op's
        ``gufunc_signature``.

    Examples
    --------
    >>> batched = Blockwise(Cholesky(lower=True))  # doctest: +SKIP
    >>> L = batched(kt.tensor("A", shape=(10, 3, 3)))  # shape (10, 3, 3)  # doctest: +SKIP
    """

    __props__ = ("core_op", "signature")

    def __init__(self, core_op: Op, signature: str | None = None) -> None:
        if not isinstance(core_op, Op):
            raise KilnTypeError(f"core_op: expected an Op, got {core_op!r}")
        if isinstance(core_op, Blockwise):
            raise KilnTypeError("core_op: a Blockwise of a Blockwise; batch the core op once")
        if signature is None:
            signature = getattr(core_op, "gufunc_signature", None)
            if signature is None:
                raise KilnValueError(
                    f"signature: {core_op} declares no gufunc_signature; pass one, "
                    "e.g. '(m,n),(n)->(m)'"
                )
        self.core_op = core_op
        ins, outs = parse_signature(signature)
        self.signature = format_signature(ins, outs)
        self.inputs_sig = ins
        self.outputs_sig = outs

    def __str__(self) -> str:
        return f"Blockwise{{{self.core_op}, {self.signature}}}"

    __repr__ = __str__

    def batch_ndim(self, node: Apply) -> int:
        """Return the number of batch dimensions of ``node`` (an application of this Op)."""
        return node.outputs[0].type.ndim - len(self.outputs_sig[0])  # type: ignore[attr-defined]

    def unmapped_constants(self, node: Apply) -> dict[int, np.ndarray]:
        """Return ``node``'s constant inputs that only broadcast along the batch, core-shaped.

        By input position. A backend that maps the core function over the batch
        (``jax.vmap``, ``torch.vmap``) hands these to it as they are, so that a core op
        reading an input at trace time (a reshape's target shape) still can. Empty when
        every input is such a constant (then all are mapped).
        """
        batch = self.batch_ndim(node)
        found = {
            i: np.asarray(v.data).reshape(np.shape(v.data)[batch:])
            for i, v in enumerate(node.inputs)
            if isinstance(v, Constant) and all(n == 1 for n in v.type.shape[:batch])  # type: ignore[attr-defined]
        }
        return {} if len(found) == len(node.inputs) else found

    def _check_core_dims(self, tensors: Sequence[TensorVariable], batch: int) -> dict[str, int]:
        """Check that each core dimension name has one static length; return the known ones."""
        known: dict[str, tuple[int, int]] = {}
        for i, (t, dims) in enumerate(zip(tensors, self.inputs_sig, strict=True)):
            for name, n in zip(dims, t.type.shape[batch:], strict=True):
                if n is None:
                    continue
                if name in known and known[name][0] != n:
                    j = known[name][1]
                    raise ShapeMismatchError(
                        f"{self}: core dimension {name!r} has static length {known[name][0]} "
                        f"in input {j} (shape {tensors[j].type.shape}) but {n} in input {i} "
                        f"(shape {t.type.shape})"
                    )
                known.setdefault(name, (n, i))
        return {k: v[0] for k, v in known.items()}

    def make_node(self, *inputs: Any) -> Apply:
        if len(inputs) != len(self.inputs_sig):
            raise KilnValueError(
                f"{self}: expected {len(self.inputs_sig)} input(s), got {len(inputs)}"
            )
        tensors = given = [as_tensor(x) for x in inputs]
        for i, (t, dims) in enumerate(zip(tensors, self.inputs_sig, strict=True)):
            if t.ndim < len(dims):
                raise KilnValueError(
                    f"{self}: input {i} needs at least {len(dims)} dimension(s) "
                    f"{tuple(dims)}, got a {t.ndim}-d {t!r}"
                )
        batch = max(t.ndim - len(d) for t, d in zip(tensors, self.inputs_sig, strict=True))
        tensors = [
            t
            if t.ndim - len(d) == batch
            else _elemwise.dimshuffle(t, ("x",) * (batch - t.ndim + len(d)) + tuple(range(t.ndim)))
            for t, d in zip(tensors, self.inputs_sig, strict=True)
        ]
        # The core op checks its own inputs first (its errors are the most specific).
        core_node = self.core_op.make_node(*_core_dummies(tensors, batch))
        known = self._check_core_dims(tensors, batch)
        refined = [
            tensor(
                dtype=t.dtype,
                shape=tuple(
                    known.get(name, n) for name, n in zip(dims, t.type.shape[batch:], strict=True)
                ),
            )
            for t, dims in zip(tensors, self.inputs_sig, strict=True)
        ]
        # An input without batch dimensions goes to the core op as itself, so that a
        # constant (a reshape's shape) gives the core outputs their static shapes.
        refined = [
            core if core is not None and core.type.shape == r.type.shape else r
            for core, r in zip(
                (_unbatched(g, len(d)) for g, d in zip(given, self.inputs_sig, strict=True)),
                refined,
                strict=True,
            )
        ]
        core_node = self.core_op.make_node(*refined)
        if len(core_node.outputs) != len(self.outputs_sig):
            raise KilnValueError(
                f"{self}: the signature declares {len(self.outputs_sig)} output(s), "
                f"{self.core_op} has {len(core_node.outputs)}"
            )
        batch_shape = _elemwise.static_broadcast([t.type.shape[:batch] for t in tensors], self)
        out_types = []
        for k, (o, dims) in enumerate(zip(core_node.outputs, self.outputs_sig, strict=True)):
            if not isinstance(o.type, TensorType) or o.type.ndim != len(dims):
                raise KilnValueError(
                    f"{self}: output {k} of {self.core_op} is {o.type}, but the signature "
                    f"declares {len(dims)} core dimension(s) {tuple(dims)}"
                )
            core = tuple(
                n if n is not None else known.get(name)
                for name, n in zip(dims, o.type.shape, strict=True)
            )
            out_types.append(TensorType(o.type.dtype, batch_shape + core))
        return Apply.create(self, tensors, out_types)

    def _core_node(self, node: Apply) -> Apply:
        core = _core_nodes.get(node)
        if core is None:
            core = self.core_op.make_node(*_core_dummies(node.inputs, self.batch_ndim(node)))
            _core_nodes[node] = core
        return core

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        batch = self.batch_ndim(node)
        core_node = self._core_node(node)
        batch_shape = self._runtime_batch_shape(node, inputs, batch)
        sizes = self._runtime_core_sizes(inputs, batch)
        if self.core_op.perform_broadcasts:
            broadcast: list[Any] = [None] * len(node.outputs)
            self.core_op.perform(core_node, inputs, broadcast)
            for k, value in enumerate(broadcast):
                value = np.asarray(value)
                full = tuple(batch_shape) + value.shape[batch:]
                outputs[k] = (
                    value if value.shape == full else np.array(np.broadcast_to(value, full))
                )
            return
        results: list[np.ndarray | None] = [None] * len(node.outputs)
        if 0 in batch_shape:
            for k, (o, dims) in enumerate(zip(node.outputs, self.outputs_sig, strict=True)):
                core = o.type.shape[batch:]  # type: ignore[attr-defined]
                shape: list[int] = []
                for name, n in zip(dims, core, strict=True):
                    n = n if n is not None else sizes.get(name)
                    if n is None:
                        raise KilnValueError(
                            f"{self}: cannot tell the core shape of output {k} for an empty batch"
                        )
                    shape.append(n)
                results[k] = np.empty(batch_shape + tuple(shape), dtype=o.type.dtype)  # type: ignore[attr-defined]
        for idx in np.ndindex(*batch_shape):
            core_in = [
                x[tuple(0 if x.shape[d] == 1 else i for d, i in enumerate(idx)) + (Ellipsis,)]
                for x in inputs
            ]
            core_out: list[Any] = [None] * len(node.outputs)
            self.core_op.perform(core_node, core_in, core_out)
            for k, value in enumerate(core_out):
                value = np.asarray(value)
                if results[k] is None:
                    results[k] = np.empty(
                        batch_shape + value.shape,
                        dtype=node.outputs[k].type.dtype,  # type: ignore[attr-defined]
                    )
                out = results[k]
                assert out is not None
                if value.shape != out.shape[batch:]:
                    raise ShapeMismatchError(
                        f"{self}: output {k} of the core op has shape {value.shape} at batch "
                        f"index {idx} but {out.shape[batch:]} at the first index"
                    )
                out[idx] = value
        outputs[:] = results

    def _runtime_batch_shape(
        self, node: Apply, inputs: Sequence[np.ndarray], batch: int
    ) -> tuple[int, ...]:
        shape = []
        for d in range(batch):
            length, source = 1, None
            for i, (var, x) in enumerate(zip(node.inputs, inputs, strict=True)):
                if var.type.shape[d] == 1:  # type: ignore[attr-defined]
                    continue
                if source is None:
                    length, source = x.shape[d], i
                elif x.shape[d] != length:
                    raise ShapeMismatchError(
                        f"{self}: batch dimension {d} has length {length} in input {source} "
                        f"but {x.shape[d]} in input {i}; kiln broadcasts only dimensions "
                        "whose static length is 1 (declare shape=(1, ...) or use expand_dims)"
                    )
            shape.append(int(length))
        return tuple(shape)

    def _runtime_core_sizes(self, inputs: Sequence[np.ndarray], batch: int) -> dict[str, int]:
        sizes: dict[str, tuple[int, int]] = {}
        for i, (x, dims) in enumerate(zip(inputs, self.inputs_sig, strict=True)):
            for name, n in zip(dims, x.shape[batch:], strict=True):
                if name in sizes and sizes[name][0] != n:
                    raise ShapeMismatchError(
                        f"{self}: core dimension {name!r} has length {sizes[name][0]} in "
                        f"input {sizes[name][1]} but {n} in input {i}"
                    )
                sizes.setdefault(name, (n, i))
        return {k: v[0] for k, v in sizes.items()}

    def infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None]
    ) -> list[tuple[Variable, ...] | None]:
        batch = self.batch_ndim(node)
        out_static = node.outputs[0].type.shape  # type: ignore[attr-defined]
        batch_shape: list[Variable] = []
        for d in range(batch):
            dim: Variable = shape_constant(1)
            if out_static[d] is not None:
                dim = shape_constant(out_static[d])
            else:
                for var, shp in zip(node.inputs, input_shapes, strict=True):
                    if var.type.shape[d] != 1 and shp is not None:  # type: ignore[attr-defined]
                        dim = shp[d]
                        break
            batch_shape.append(dim)
        by_name: dict[str, Variable] = {}
        for shp, dims in zip(input_shapes, self.inputs_sig, strict=True):
            if shp is not None:
                for name, s in zip(dims, shp[batch:], strict=True):
                    by_name.setdefault(name, s)
        core_shapes: list[tuple[Variable, ...] | None] | None = None
        result: list[tuple[Variable, ...] | None] = []
        for k, (o, dims) in enumerate(zip(node.outputs, self.outputs_sig, strict=True)):
            core: list[Variable] = []
            for j, name in enumerate(dims):
                n = o.type.shape[batch + j]  # type: ignore[attr-defined]
                if n is not None:
                    core.append(shape_constant(n))
                elif name in by_name:
                    core.append(by_name[name])
                else:
                    if core_shapes is None:
                        core_shapes = self._core_infer_shape(node, input_shapes, batch)
                    found = core_shapes[k]
                    core.append(found[j] if found is not None else _alloc.shape_i(o, batch + j))
            result.append(tuple(batch_shape) + tuple(core))
        return result

    def _core_infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None], batch: int
    ) -> list[tuple[Variable, ...] | None]:
        """Return the core op's output shapes from the inputs' core shapes, where it can."""
        core_node = self._core_node(node)
        none: list[tuple[Variable, ...] | None] = [None] * len(node.outputs)
        if any(s is None for s in input_shapes):
            return none
        core_in = [tuple(s[batch:]) for s in input_shapes]  # type: ignore[index]
        try:
            shapes = self.core_op.infer_shape(core_node, core_in)
        except NotImplementedError:
            return none
        dummies = set(core_node.inputs) | set(core_node.outputs)
        out: list[tuple[Variable, ...] | None] = []
        for shp in shapes:
            # A shape that still refers to the core node's dummy variables is unusable.
            if shp is None or dummies.intersection(ancestors(list(shp))):
                out.append(None)
            else:
                out.append(tuple(shp))
        return out

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        batch = self.batch_ndim(outputs[0].owner)  # type: ignore[arg-type]
        core_in = _core_dummies(inputs, batch)
        core_out = self.core_op.make_node(*core_in).outputs
        grads = [as_tensor(g) for g in output_grads]
        core_g = _core_dummies(grads, batch)
        core_grads = [
            g if g is None else _reduce.unbroadcast_to(g, x)
            for x, g in zip(core_in, self.core_op.L_op(core_in, core_out, core_g), strict=True)
        ]
        keep = [
            i
            for i, (x, g) in enumerate(zip(inputs, core_grads, strict=True))
            if g is not None and x.type.dtype not in DISCRETE_DTYPES  # type: ignore[attr-defined]
        ]
        if not keep:
            return [None] * len(inputs)
        kept = [as_tensor(core_grads[i]) for i in keep]
        ofg = _opfromgraph.OpFromGraph([*core_in, *core_g], kept)
        sig = format_signature(
            self.inputs_sig + self.outputs_sig, [self.inputs_sig[i] for i in keep]
        )
        batched = Blockwise(ofg, sig)(*inputs, *grads)
        batched = [batched] if isinstance(batched, Variable) else batched
        result: list[Variable | None] = [None] * len(inputs)
        for i, g in zip(keep, batched, strict=True):
            result[i] = g  # grad sums it over the batch dimensions x was broadcast along
        return result


def _unbatched(t: TensorVariable, core_ndim: int) -> TensorVariable | None:
    """Return ``t`` without batch dimensions that only broadcast it (None: it has others).

    ``t`` itself; or the constant, or the DimShuffle's input, that rewrites broadcast
    along new leading dimensions of length 1 before rebuilding a node on it.
    """
    if t.ndim == core_ndim:
        return t
    k = t.ndim - core_ndim
    if isinstance(t, Constant) and all(n == 1 for n in t.type.shape[:k]):
        return constant(t.data.reshape(t.data.shape[k:]), dtype=t.type.dtype)
    owner = t.owner
    if owner is not None and isinstance(owner.op, _elemwise.DimShuffle):
        x = as_tensor(owner.inputs[0])
        order = tuple(owner.op.new_order)
        if x.ndim == core_ndim and order == ("x",) * k + tuple(range(core_ndim)):
            return x
    return None


def _core_dummies(tensors: Sequence[Variable], batch: int) -> list[TensorVariable]:
    """Fresh inputs with the dtype and core static shape of each of ``tensors``."""
    return [
        tensor(dtype=t.type.dtype, shape=t.type.shape[batch:])  # type: ignore[attr-defined]
        for t in tensors
    ]


def vectorize(fn: Callable[..., Any], signature: str) -> Callable[..., Any]:
    """Return ``fn`` batched over leading dimensions, like ``np.vectorize(signature=)``.

    On each call, ``fn`` is traced once on inputs with only the core dimensions; the
    resulting graph becomes one :class:`OpFromGraph` applied with :class:`Blockwise`
    (or directly when no input has batch dimensions).

    Examples
    --------
    >>> f = vectorize(lambda A, x: kt.dot(A, x), "(m,n),(n)->(m)")  # doctest: +SKIP
    >>> y = f(kt.tensor("A", shape=(5, 3, 2)), kt.vector("x"))  # shape (5, 3)  # doctest: +SKIP
    """
    if not callable(fn):
        raise KilnTypeError(f"fn: expected a callable, got {fn!r}")
    ins, outs = parse_signature(signature)

    def vectorized(*args: Any) -> Any:
        if len(args) != len(ins):
            raise KilnValueError(
                f"vectorize: the signature {signature!r} takes {len(ins)} input(s), got {len(args)}"
            )
        tensors = [as_tensor(a) for a in args]
        for i, (t, dims) in enumerate(zip(tensors, ins, strict=True)):
            if t.ndim < len(dims):
                raise KilnValueError(
                    f"vectorize: argument {i} needs at least {len(dims)} dimension(s) "
                    f"{tuple(dims)}, got a {t.ndim}-d {t!r}"
                )
        dummies = [
            tensor(dtype=t.dtype, shape=t.type.shape[t.ndim - len(d) :])
            for t, d in zip(tensors, ins, strict=True)
        ]
        result = fn(*dummies)
        single = not isinstance(result, list | tuple)
        core_outs = [as_tensor(r) for r in ([result] if single else result)]
        if len(core_outs) != len(outs):
            raise KilnValueError(
                f"vectorize: the signature {signature!r} declares {len(outs)} output(s), "
                f"fn returned {len(core_outs)}"
            )
        for k, (o, dims) in enumerate(zip(core_outs, outs, strict=True)):
            if o.ndim != len(dims):
                raise KilnValueError(
                    f"vectorize: the signature {signature!r} declares {len(dims)} core "
                    f"dimension(s) for output {k}, fn returned a {o.ndim}-d {o!r}"
                )
        ofg = _opfromgraph.OpFromGraph(dummies, core_outs)
        if all(t.ndim == len(d) for t, d in zip(tensors, ins, strict=True)):
            out = ofg(*tensors)
        else:
            out = Blockwise(ofg, signature)(*tensors)
        if single:
            return out
        return tuple(out) if isinstance(out, list) else (out,)

    vectorized.__name__ = getattr(fn, "__name__", "vectorized")
    vectorized.__doc__ = fn.__doc__
    return vectorized
