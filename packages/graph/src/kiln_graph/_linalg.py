"""Linear algebra: matrix products, Cholesky, solves, inverse, determinants and eigh.

Each core Op works on matrices (and vectors) and declares its gufunc signature; the
public functions apply it directly to core-shaped inputs and through
:class:`~kiln_graph._blockwise.Blockwise` to stacks of them (leading batch
dimensions). ``perform`` uses NumPy / SciPy; gradients are the standard matrix
calculus rules for real inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from kiln_graph import _alloc, _blockwise, _elemwise, _math, _shape
from kiln_graph._basic import as_tensor
from kiln_graph._errors import KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_graph._node import Apply, Op, TensorVariable, Variable
from kiln_graph._ranges import eye
from kiln_graph._types import DISCRETE_DTYPES, TensorType


def _float_dtype(op: Any, *dtypes: str) -> str:
    """Return the dtype of a decomposition or solve: float32 stays, ints give float64."""
    for dt in dtypes:
        if dt == "float16" or dt.startswith("complex"):
            raise KilnTypeError(
                f"{op}: dtype {dt} is not supported; kiln's linear algebra works on float32 "
                "and float64 (cast the input first)"
            )
    return _elemwise.upgrade_to_float(*dtypes)


def _matrix(op: Any, x: Any, argname: str, square: bool = False) -> TensorVariable:
    x = as_tensor(x)
    if x.ndim != 2:
        raise KilnValueError(
            f"{op}: {argname} must be a matrix (2-d), got a {x.ndim}-d {x!r}; stacks of "
            "matrices go through the kiln.tensor functions or Blockwise"
        )
    m, n = x.type.shape
    if square and m is not None and n is not None and m != n:
        raise ShapeMismatchError(f"{op}: {argname} must be square, got static shape {(m, n)}")
    return x


def _rhs(op: Any, a: TensorVariable, b: Any, b_ndim: int) -> TensorVariable:
    """Check the right-hand side ``b`` of ``a x = b``."""
    b = as_tensor(b)
    if b.ndim != b_ndim:
        raise KilnValueError(
            f"{op}: b must be {b_ndim}-d (b_ndim={b_ndim}), got a {b.ndim}-d {b!r}"
        )
    m = a.type.shape[0] if a.type.shape[0] is not None else a.type.shape[1]
    if m is not None and b.type.shape[0] is not None and b.type.shape[0] != m:
        raise ShapeMismatchError(
            f"{op}: a has static shape {a.type.shape} but b has {b.type.shape}; b's first "
            "dimension must equal a's size"
        )
    return b


def _mT(x: Any) -> TensorVariable:  # noqa: N802
    """Swap the last two dimensions."""
    x = as_tensor(x)
    return _elemwise.dimshuffle(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _grad_as(g: Variable | None, x: Variable) -> Variable | None:
    """``g`` cast to ``x``'s dtype; ``None`` for discrete ``x``."""
    if g is None or x.type.dtype in DISCRETE_DTYPES:  # type: ignore[attr-defined]
        return None
    return _elemwise.cast(g, x.type.dtype)  # type: ignore[attr-defined]


class Tri(Op):
    """The lower (``np.tril``) or upper (``np.triu``) triangle from diagonal ``k`` on."""

    __props__ = ("lower", "k")

    def __init__(self, lower: bool = True, k: int = 0) -> None:
        self.lower = bool(lower)
        self.k = int(k)

    def __str__(self) -> str:
        return f"{'Tril' if self.lower else 'Triu'}{{k={self.k}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor(x)
        if x.ndim < 2:
            raise KilnValueError(f"{self}: expected at least 2 dimensions, got a {x.ndim}-d {x!r}")
        return Apply.create(self, [x], [x.type])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        (x,) = inputs
        outputs[0] = np.tril(x, self.k) if self.lower else np.triu(x, self.k)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [_grad_as(self(output_grads[0]), inputs[0])]


def _tri(x: Any, lower: bool, k: int = 0) -> TensorVariable:
    return Tri(lower, k)(x)


def _fold_triangle(m: Any, lower: bool) -> TensorVariable:
    """Return the gradient w.r.t. a matrix of which only one triangle is read.

    ``m`` is the gradient w.r.t. the symmetric matrix the op uses; an entry off the
    diagonal of the read triangle stands for two entries of it.
    """
    k = -1 if lower else 1
    return _math.add(_tri(m, lower), _tri(_mT(m), lower, k))


class MatMul(Op):
    """The product of two matrices, ``a @ b``."""

    gufunc_signature: ClassVar[str] = "(m,k),(k,n)->(m,n)"
    perform_broadcasts: ClassVar[bool] = True  # np.matmul

    def make_node(self, a: Any, b: Any) -> Apply:
        a, b = _matrix("matmul", a, "a"), _matrix("matmul", b, "b")
        ka, kb = a.type.shape[1], b.type.shape[0]
        if ka is not None and kb is not None and ka != kb:
            raise ShapeMismatchError(
                f"matmul: a has static shape {a.type.shape} and b has {b.type.shape}; a's "
                f"last dimension ({ka}) must equal b's second-to-last ({kb})"
            )
        dtype = _elemwise.upcast(a.dtype, b.dtype)
        shape = (a.type.shape[0], b.type.shape[1])
        return Apply.create(self, [a, b], [TensorType(dtype, shape)])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        a, b = inputs
        out = np.matmul(a, b)
        outputs[0] = np.asarray(out, dtype=node.outputs[0].type.dtype)  # type: ignore[attr-defined]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        sa, sb = input_shapes
        return [(sa[0], sb[1])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        a, b = inputs
        (g,) = output_grads
        return [_grad_as(self(g, _mT(b)), a), _grad_as(self(_mT(a), g), b)]


_MATMUL = MatMul()


class Cholesky(Op):
    """The Cholesky factor of a symmetric positive-definite matrix.

    ``lower=True`` gives ``L`` with ``a = L @ L.T`` and reads the lower triangle of
    ``a``; ``lower=False`` gives ``U`` with ``a = U.T @ U`` and reads the upper one.
    """

    __props__ = ("lower",)
    gufunc_signature: ClassVar[str] = "(m,m)->(m,m)"

    def __init__(self, lower: bool = True) -> None:
        self.lower = bool(lower)

    def make_node(self, x: Any) -> Apply:
        x = _matrix("cholesky", x, "x", square=True)
        n = x.type.shape[0] if x.type.shape[0] is not None else x.type.shape[1]
        dtype = _float_dtype("cholesky", x.dtype)
        return Apply.create(self, [x], [TensorType(dtype, (n, n))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        import scipy.linalg as sla

        out = sla.cholesky(inputs[0], lower=self.lower, check_finite=False)
        outputs[0] = np.asarray(out, dtype=node.outputs[0].type.dtype)  # type: ignore[attr-defined]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        # Murray (2016), "Differentiation of the Cholesky decomposition", as in PyTensor.
        (x,) = inputs
        chol, dz = outputs[0], output_grads[0]
        if not self.lower:
            chol, dz = _mT(chol), _mT(dz)
        # phi(L^T dL): the lower triangle with the diagonal halved.
        p = _MATMUL(_mT(chol), dz)
        phi = _math.mul(_math.add(_tri(p, True), _tri(p, True, -1)), 0.5)
        # s = L^{-T} phi L^{-1}
        solve_upper = SolveTriangular(lower=False, b_ndim=2)
        s = solve_upper(_mT(chol), _mT(solve_upper(_mT(chol), _mT(phi))))
        # The matrix read is symmetric: tril(s + s^T) - diag(s) (triu when upper).
        k = -1 if self.lower else 1
        g = _math.add(_tri(_mT(s), self.lower), _tri(s, self.lower, k))
        return [_grad_as(g, x)]


_ASSUME_A = {
    "gen": "gen",
    "general": "gen",
    "sym": "sym",
    "symmetric": "sym",
    "pos": "pos",
    "positive definite": "pos",
}


def _check_b_ndim(b_ndim: Any) -> int:
    if b_ndim not in (1, 2) or isinstance(b_ndim, bool):
        raise KilnValueError(f"b_ndim: expected 1 (vector) or 2 (matrix), got {b_ndim!r}")
    return int(b_ndim)


class _LinearSolve:
    """Mixin of the solve Ops: ``a @ x = b`` with ``b`` a vector or a matrix (``b_ndim``)."""

    b_ndim: int
    _fn_name: str

    @property
    def gufunc_signature(self) -> str:
        """``(m,m),(m)->(m)`` or ``(m,m),(m,n)->(m,n)``."""
        return "(m,m),(m)->(m)" if self.b_ndim == 1 else "(m,m),(m,n)->(m,n)"

    def make_node(self, a: Any, b: Any) -> Apply:
        a = _matrix(self._fn_name, a, "a", square=True)
        b = _rhs(self._fn_name, a, b, self.b_ndim)
        dtype = _float_dtype(self._fn_name, a.dtype, b.dtype)
        shape = list(b.type.shape)
        if shape[0] is None:
            shape[0] = a.type.shape[0] if a.type.shape[0] is not None else a.type.shape[1]
        return Apply.create(self, [a, b], [TensorType(dtype, tuple(shape))])  # type: ignore[arg-type]


class Solve(_LinearSolve, Op):
    """The solution ``x`` of ``a @ x = b`` for a square ``a``.

    ``assume_a`` is ``"gen"`` (general), ``"sym"`` (symmetric) or ``"pos"`` (symmetric
    positive definite); for the last two only the triangle chosen by ``lower`` is read.
    ``b_ndim`` says whether ``b`` is a vector (1) or a matrix (2).
    """

    __props__ = ("assume_a", "lower", "b_ndim")
    _fn_name = "solve"

    def __init__(self, assume_a: str = "gen", lower: bool = False, b_ndim: int = 2) -> None:
        if assume_a not in _ASSUME_A:
            raise KilnValueError(f"assume_a: expected one of {sorted(_ASSUME_A)}, got {assume_a!r}")
        self.assume_a = _ASSUME_A[assume_a]
        self.lower = bool(lower) and self.assume_a != "gen"
        self.b_ndim = _check_b_ndim(b_ndim)

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        import scipy.linalg as sla

        a, b = inputs
        out = sla.solve(a, b, assume_a=self.assume_a, lower=self.lower, check_finite=False)
        outputs[0] = np.asarray(out, dtype=node.outputs[0].type.dtype)  # type: ignore[attr-defined]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[1]]

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        # x = A^-1 b:  b_bar = A^-T x_bar,  A_bar = -b_bar x^T
        a, b = inputs
        (x,), (g,) = outputs, output_grads
        if self.assume_a == "gen":
            b_bar = self(_mT(a), g)
        else:
            b_bar = self(a, g)
        a_bar = _neg_outer(b_bar, x, self.b_ndim)
        if self.assume_a != "gen":
            a_bar = _fold_triangle(a_bar, self.lower)
        return [_grad_as(a_bar, a), _grad_as(b_bar, b)]


def _neg_outer(u: Variable, v: Variable, b_ndim: int) -> TensorVariable:
    """``-u v^T`` for vectors, ``-u @ v^T`` for matrices."""
    if b_ndim == 1:
        prod = _math.mul(_elemwise.dimshuffle(u, (0, "x")), _elemwise.dimshuffle(v, ("x", 0)))
    else:
        prod = _MATMUL(u, _mT(v))
    return _math.neg(prod)


_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}


class SolveTriangular(_LinearSolve, Op):
    """The solution ``x`` of ``a @ x = b`` (``trans=1``: ``a.T @ x = b``), ``a`` triangular.

    Only the triangle chosen by ``lower`` is read; with ``unit_diagonal`` the diagonal
    is taken to be ones and not read either.
    """

    __props__ = ("lower", "unit_diagonal", "trans", "b_ndim")
    _fn_name = "solve_triangular"

    def __init__(
        self, lower: bool = False, unit_diagonal: bool = False, trans: Any = 0, b_ndim: int = 2
    ) -> None:
        if isinstance(trans, bool) or trans not in _TRANS:
            raise KilnValueError(f"trans: expected 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
        self.lower = bool(lower)
        self.unit_diagonal = bool(unit_diagonal)
        self.trans = _TRANS[trans]  # real matrices: 'C' (conjugate transpose) is 'T'
        self.b_ndim = _check_b_ndim(b_ndim)

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        import scipy.linalg as sla

        a, b = inputs
        out = sla.solve_triangular(
            a,
            b,
            trans=self.trans,
            lower=self.lower,
            unit_diagonal=self.unit_diagonal,
            check_finite=False,
        )
        outputs[0] = np.asarray(out, dtype=node.outputs[0].type.dtype)  # type: ignore[attr-defined]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[1]]

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        # x = op(A)^-1 b:  b_bar = op(A)^-T x_bar,  op(A)_bar = -b_bar x^T
        a, b = inputs
        (x,), (g,) = outputs, output_grads
        transposed = SolveTriangular(self.lower, self.unit_diagonal, 1 - self.trans, self.b_ndim)
        b_bar = transposed(a, g)
        a_bar = _neg_outer(b_bar, x, self.b_ndim)
        if self.trans:
            a_bar = _mT(a_bar)
        k = 0 if not self.unit_diagonal else (-1 if self.lower else 1)
        a_bar = _tri(a_bar, self.lower, k)
        return [_grad_as(a_bar, a), _grad_as(b_bar, b)]


class Inv(Op):
    """The inverse of a square matrix."""

    gufunc_signature: ClassVar[str] = "(m,m)->(m,m)"

    def make_node(self, x: Any) -> Apply:
        x = _matrix("inv", x, "x", square=True)
        n = x.type.shape[0] if x.type.shape[0] is not None else x.type.shape[1]
        return Apply.create(self, [x], [TensorType(_float_dtype("inv", x.dtype), (n, n))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        out = np.linalg.inv(inputs[0])
        outputs[0] = np.asarray(out, dtype=node.outputs[0].type.dtype)  # type: ignore[attr-defined]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        # d inv(A) = -inv(A) dA inv(A):  A_bar = -inv(A)^T g inv(A)^T
        (out,), (g,) = outputs, output_grads
        out_t = _mT(out)
        return [_grad_as(_math.neg(_MATMUL(_MATMUL(out_t, g), out_t)), inputs[0])]


_INV = Inv()


class Det(Op):
    """The determinant of a square matrix."""

    gufunc_signature: ClassVar[str] = "(m,m)->()"

    def make_node(self, x: Any) -> Apply:
        x = _matrix("det", x, "x", square=True)
        return Apply.create(self, [x], [TensorType(_float_dtype("det", x.dtype), ())])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        out = np.linalg.det(inputs[0])
        outputs[0] = np.asarray(out, dtype=node.outputs[0].type.dtype)  # type: ignore[attr-defined]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [()]

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        # d det(A) / dA = det(A) inv(A)^T
        (x,), (out,), (g,) = inputs, outputs, output_grads
        return [_grad_as(_math.mul(g, out, _mT(_INV(x))), x)]


class SlogDet(Op):
    """The sign and the log of the absolute value of the determinant (two outputs)."""

    gufunc_signature: ClassVar[str] = "(m,m)->(),()"

    def make_node(self, x: Any) -> Apply:
        x = _matrix("slogdet", x, "x", square=True)
        dtype = _float_dtype("slogdet", x.dtype)
        return Apply.create(self, [x], [TensorType(dtype, ()), TensorType(dtype, ())])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        sign, logabsdet = np.linalg.slogdet(inputs[0])
        dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
        outputs[0] = np.asarray(sign, dtype=dtype)
        outputs[1] = np.asarray(logabsdet, dtype=dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(), ()]

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        # d log|det(A)| / dA = inv(A)^T; the sign is piecewise constant.
        (x,) = inputs
        g = output_grads[1]
        return [_grad_as(_math.mul(g, _mT(_INV(x))), x)]


def normalize_eigenvector_signs(v: np.ndarray) -> np.ndarray:
    """Flip each column of ``v`` (``..., m, m``) so its largest-magnitude entry is positive.

    LAPACK's eigenvectors have implementation-defined signs; this convention (the first
    entry of largest magnitude, on a tie) makes every backend return the same vectors.
    """
    rows = np.argmax(np.abs(v), axis=-2)[..., None, :]
    flip = np.take_along_axis(v, rows, axis=-2) < 0
    return np.where(flip, -v, v)  # type: ignore[no-any-return]


class Eigh(Op):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix (two outputs).

    Reads the lower triangle, as ``np.linalg.eigh(a, UPLO="L")``. Each eigenvector's
    entry of largest magnitude is positive (:func:`normalize_eigenvector_signs`). A matrix
    with a non-finite entry gives NaN outputs (a rejected point in a log-density, never
    an exception). The eigenvectors' gradient is the standard one for distinct
    eigenvalues; at repeated eigenvalues it is not finite (as in JAX and PyTorch).
    """

    gufunc_signature: ClassVar[str] = "(m,m)->(m),(m,m)"

    def make_node(self, x: Any) -> Apply:
        x = _matrix("eigh", x, "x", square=True)
        n = x.type.shape[0] if x.type.shape[0] is not None else x.type.shape[1]
        dtype = _float_dtype("eigh", x.dtype)
        return Apply.create(self, [x], [TensorType(dtype, (n,)), TensorType(dtype, (n, n))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
        a = np.asarray(inputs[0], dtype=dtype)
        if not np.isfinite(np.tril(a)).all():
            outputs[0] = np.full(a.shape[:1], np.nan, dtype=dtype)
            outputs[1] = np.full(a.shape, np.nan, dtype=dtype)
            return
        w, v = np.linalg.eigh(a, UPLO="L")
        outputs[0] = np.asarray(w, dtype=dtype)
        outputs[1] = np.asarray(normalize_eigenvector_signs(v), dtype=dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        n = input_shapes[0][0]
        return [(n,), (n, n)]

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        # With A = V diag(w) V^T, for a symmetric perturbation: dw = diag(V^T dA V) and
        # dV = V (F o (V^T dA V)), F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it.
        # So dL/dA = V (diag(gw) + F o (V^T gV)) V^T, folded onto the lower triangle read.
        (x,) = inputs
        w, v = outputs
        gw, gv = output_grads
        n = _alloc.shape_i(w, 0)
        same = eye(n, dtype=w.type.dtype)  # type: ignore[attr-defined]
        diff = _math.sub(_elemwise.dimshuffle(w, ("x", 0)), _elemwise.dimshuffle(w, (0, "x")))
        f = _math.true_divide(_math.sub(1.0, same), _math.add(diff, same))
        inner = _math.add(
            _math.mul(same, _elemwise.dimshuffle(gw, ("x", 0))),
            _math.mul(f, _MATMUL(_mT(v), gv)),
        )
        g = _MATMUL(_MATMUL(v, inner), _mT(v))
        return [_grad_as(_fold_triangle(g, True), x)]


# --- public functions -------------------------------------------------------------------


def _apply(op: Op, fname: str, names: Sequence[str], *inputs: Any) -> Any:
    """Apply core ``op`` directly to core-shaped inputs, through Blockwise to stacks."""
    ins, _ = _blockwise.parse_signature(op.gufunc_signature)  # type: ignore[attr-defined]
    tensors = [as_tensor(x) for x in inputs]
    for t, dims, name in zip(tensors, ins, names, strict=True):
        if t.ndim < len(dims):
            core = ", ".join(("...", *dims))
            raise KilnValueError(
                f"{fname}: {name} must have at least {len(dims)} dimension(s) ({core}), "
                f"got a {t.ndim}-d {t!r}"
            )
    if all(t.ndim == len(d) for t, d in zip(tensors, ins, strict=True)):
        return op(*tensors)
    return _blockwise.Blockwise(op)(*tensors)


def matmul(a: Any, b: Any) -> TensorVariable:
    """Matrix product with NumPy's ``matmul`` semantics (stacks broadcast, 1-d promoted).

    Examples
    --------
    >>> matmul(kt.tensor("A", shape=(5, 3, 4)), kt.matrix("B"))  # (5, 3, n)  # doctest: +SKIP
    """
    a, b = as_tensor(a), as_tensor(b)
    for name, t in (("a", a), ("b", b)):
        if t.ndim == 0:
            raise KilnValueError(
                f"matmul: {name} must have at least 1 dimension, got a 0-d {t!r}; use "
                "kt.mul (or *) to multiply by a scalar"
            )
    a2 = _elemwise.dimshuffle(a, ("x", 0)) if a.ndim == 1 else a
    b2 = _elemwise.dimshuffle(b, (0, "x")) if b.ndim == 1 else b
    out = _apply(_MATMUL, "matmul", ("a", "b"), a2, b2)
    n = out.ndim
    drop = {n - 2} if a.ndim == 1 else set()
    if b.ndim == 1:
        drop.add(n - 1)
    if drop:
        out = _elemwise.dimshuffle(out, [d for d in range(n) if d not in drop])
    return out


def dot(a: Any, b: Any) -> TensorVariable:
    """Dot product with NumPy's ``dot`` semantics.

    Scalars multiply, two vectors give their inner product, matrices and vectors
    multiply as matrices. One operand may have more than 2 dimensions (NumPy's sum over
    the last axis of ``a`` and the second-to-last of ``b``); for two stacks use
    :func:`matmul`.

    Examples
    --------
    >>> dot(kt.vector("x"), kt.vector("y"))  # a scalar  # doctest: +SKIP
    """
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim == 0 or b.ndim == 0:
        return _math.mul(a, b)
    if a.ndim > 2 and b.ndim > 2:
        raise KilnValueError(
            f"dot: a ({a.ndim}-d) and b ({b.ndim}-d) both have more than 2 dimensions; "
            "use kt.matmul for stacks of matrices"
        )
    out = matmul(a, b)
    if a.ndim == 2 and b.ndim > 2:
        # matmul gives (batch..., i, m); NumPy's dot gives (i, batch..., m).
        n = out.ndim
        out = _elemwise.dimshuffle(out, (n - 2, *range(n - 2), n - 1))
    return out


def outer(a: Any, b: Any) -> TensorVariable:
    """Outer product of ``a`` and ``b``, flattened to vectors first (as ``np.outer``)."""
    a, b = as_tensor(a), as_tensor(b)
    a = a if a.ndim == 1 else _shape.flatten(a)
    b = b if b.ndim == 1 else _shape.flatten(b)
    return _math.mul(_elemwise.dimshuffle(a, (0, "x")), _elemwise.dimshuffle(b, ("x", 0)))


def kron(a: Any, b: Any) -> TensorVariable:
    """Kronecker product of the matrices ``a`` (m x n) and ``b`` (p x q), as ``np.kron``.

    Entry ``[i p + k, j q + l]`` is ``a[i, j] b[k, l]``: a broadcast product of shape
    ``(m, p, n, q)``, reshaped.
    """
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim != 2 or b.ndim != 2:
        raise KilnValueError(f"kron: expected two matrices, got ndim {a.ndim} and {b.ndim}")
    prod = _math.mul(
        _elemwise.dimshuffle(a, (0, "x", 1, "x")), _elemwise.dimshuffle(b, ("x", 0, "x", 1))
    )
    (m, n), (p, q) = (_dims(a), _dims(b))
    return _shape.reshape(prod, (m * p, n * q))


def _dims(x: TensorVariable) -> list[Any]:
    """Return the lengths of ``x``'s dimensions: ints where static, else symbolic."""
    return [n if n is not None else _alloc.shape_i(x, i) for i, n in enumerate(x.type.shape)]


def cholesky(x: Any, lower: bool = True) -> TensorVariable:
    """Cholesky factor of symmetric positive-definite ``x`` (``..., m, m``).

    Returns the lower factor ``L`` (``x = L @ L.T``), or the upper one with
    ``lower=False``. Only the corresponding triangle of ``x`` is read.

    Examples
    --------
    >>> L = cholesky(kt.matrix("S"))  # doctest: +SKIP
    """
    return _apply(Cholesky(lower), "cholesky", ("x",), x)


def _default_b_ndim(b: TensorVariable, b_ndim: int | None) -> int:
    return (1 if b.ndim == 1 else 2) if b_ndim is None else _check_b_ndim(b_ndim)


def solve(
    a: Any, b: Any, assume_a: str = "gen", lower: bool = False, b_ndim: int | None = None
) -> TensorVariable:
    """Solve ``a @ x = b`` for ``x``, as ``scipy.linalg.solve``.

    ``assume_a`` is ``"gen"``, ``"sym"`` or ``"pos"`` (symmetric positive definite;
    ``lower`` picks the triangle read). ``b`` is a vector when ``b_ndim=1`` (the
    default when ``b`` is 1-d) and a matrix otherwise; further leading dimensions of
    ``a`` and ``b`` are batch dimensions.

    Examples
    --------
    >>> x = solve(kt.matrix("A"), kt.vector("b"))  # doctest: +SKIP
    """
    b = as_tensor(b)
    op = Solve(assume_a, lower, _default_b_ndim(b, b_ndim))
    return _apply(op, "solve", ("a", "b"), a, b)


def solve_triangular(
    a: Any,
    b: Any,
    trans: Any = 0,
    lower: bool = False,
    unit_diagonal: bool = False,
    b_ndim: int | None = None,
) -> TensorVariable:
    """Solve ``a @ x = b`` for triangular ``a``, as ``scipy.linalg.solve_triangular``.

    ``trans=1`` (or ``"T"``) solves ``a.T @ x = b``. Only the triangle chosen by
    ``lower`` is read. ``b_ndim`` is as in :func:`solve`.

    Examples
    --------
    >>> x = solve_triangular(L, b, lower=True)  # doctest: +SKIP
    """
    b = as_tensor(b)
    op = SolveTriangular(lower, unit_diagonal, trans, _default_b_ndim(b, b_ndim))
    return _apply(op, "solve_triangular", ("a", "b"), a, b)


def inv(x: Any) -> TensorVariable:
    """Return the inverse of square matrix ``x`` (``..., m, m``)."""
    return _apply(_INV, "inv", ("x",), x)


def det(x: Any) -> TensorVariable:
    """Return the determinant of square matrix ``x`` (``..., m, m``)."""
    return _apply(Det(), "det", ("x",), x)


def slogdet(x: Any) -> tuple[TensorVariable, TensorVariable]:
    """Sign and log of the absolute determinant of ``x`` (``..., m, m``), as NumPy.

    Examples
    --------
    >>> sign, logabsdet = slogdet(kt.matrix("A"))  # doctest: +SKIP
    """
    sign, logabsdet = _apply(SlogDet(), "slogdet", ("x",), x)
    return sign, logabsdet


def eigh(x: Any) -> tuple[TensorVariable, TensorVariable]:
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric ``x`` (``..., m, m``).

    Reads the lower triangle, as ``np.linalg.eigh``; each eigenvector's entry of
    largest magnitude is positive, so that every backend returns the same vectors.

    Examples
    --------
    >>> w, v = eigh(kt.matrix("K"))  # doctest: +SKIP
    """
    w, v = _apply(Eigh(), "eigh", ("x",), x)
    return w, v
