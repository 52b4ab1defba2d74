"""Linear algebra: MatMul through BLAS, decompositions and solves through compiled kernels.

Each Op's node becomes one call: ``np.dot`` for matrix products of float and complex
arrays (BLAS; a strided input is copied to C order first, a transpose is not), explicit
loops for small float ones with static shapes and for integer and boolean ones, and the kernels of
:mod:`kiln_numba._linalg_kernels` (compiled and cached once, shared by every graph) for
Cholesky, the solves, the inverse, the determinants and eigh. Inputs are cast to the output
dtype first, as the VM's NumPy / SciPy calls do (float32 stays float32), and handed to
the kernels C-contiguous (:func:`_contiguous`).
"""

from __future__ import annotations

from kiln_graph import Apply
from kiln_graph.ops import Cholesky, Det, Eigh, Inv, MatMul, SlogDet, Solve, SolveTriangular, Tri
from kiln_numba._funcify import CodeContext, NoNumbaImplementation, np_dtype, numba_funcify
from kiln_numba._outline import outline

#: Triangular solves of at least this order with at least this many right-hand sides
#: go by blocks (BLAS updates); a system whose static shapes rule that out calls a
#: kernel without the blocked path (:mod:`kiln_numba._linalg_kernels`). The generated
#: code passes them to the kernel (whose cache is keyed by its own file only).
TRIANGULAR_BLOCKED_FROM = 128
TRIANGULAR_BLOCKED_RHS = 8

#: Dtypes ``np.dot`` hands to BLAS in Numba.
BLAS_DTYPES = ("float32", "float64", "complex64", "complex128")


def _flag(value: bool) -> str:
    """Return a kernel's boolean argument (a plain bool to Numba, not a literal).

    Numba compiles a kernel once per literal argument value; passing ``np.bool_`` and
    ``np.int64`` values keeps one compiled (and cached) kernel per dtype and layout.
    """
    return f"np.bool_({bool(value)})"


def _int(value: int) -> str:
    """Return a kernel's integer argument (see :func:`_flag`)."""
    return f"np.int64({int(value)})"


def _as_output_dtype(ctx: CodeContext, i: int) -> str:
    """Return input ``i`` cast to the output's dtype (the name itself when it has it)."""
    name, dtype = ctx.inputs[i], ctx.output_type(0).dtype
    if ctx.input_type(i).dtype == dtype:
        return name
    return f"{name}.astype({np_dtype(dtype)})"


def _contiguous(ctx: CodeContext, i: int) -> str:
    """Return input ``i`` cast to the output's dtype, as a C-contiguous array.

    Numba compiles a kernel once per layout of its arguments (C, Fortran for a
    transpose, any for a slice), each compile 0.3-1.5 s on a cold cache;
    ``contiguous`` (:mod:`kiln_numba._alloc`, NumPy's ``ascontiguousarray``) is the
    array itself when its type is C-contiguous and a copy (O(n^2), under the kernel's
    own cost) otherwise, so every kernel is compiled for C-contiguous arrays only.
    """
    return f"contiguous({_as_output_dtype(ctx, i)})"


def _cast_once(ctx: CodeContext, i: int) -> str:
    """Emit input ``i`` cast to the output's dtype into a name of its own; return the name.

    For loops that index the operand: an ``x.astype(...)`` expression in the loop body
    would copy the whole array at every element read.
    """
    cast = _as_output_dtype(ctx, i)
    if cast == ctx.inputs[i]:
        return cast
    name = ctx.fresh("cast")
    ctx.emit(f"{name} = {cast}")
    return name


def _linalg_dtype(ctx: CodeContext) -> str:
    dtype = ctx.output_type(0).dtype
    if dtype not in ("float32", "float64"):
        raise NoNumbaImplementation(f"{ctx.node.op}: no Numba kernel for dtype {dtype}")
    return dtype


def _as_column(ctx: CodeContext, i: int) -> str:
    """Emit input ``i`` (cast to the output dtype) as an ``(n, 1)`` matrix; return it."""
    col = ctx.fresh("col")
    vec = _as_output_dtype(ctx, i)
    ctx.emit(f"{col} = contiguous({vec}).reshape(({ctx.inputs[i]}.shape[0], 1))")
    return col


#: Products of at most this many multiply-adds (static shapes) are written as loops.
SMALL_MATMUL = 1 << 14


def _small_matmul(ctx: CodeContext) -> bool:
    """Whether the product is a small float one with static shapes (written as loops)."""
    (m, k), (_, n) = ctx.input_type(0).shape, ctx.input_type(1).shape
    if m is None or k is None or n is None:
        return False
    return ctx.output_type(0).dtype in ("float32", "float64") and m * k * n <= SMALL_MATMUL


def _emit_matmul_loops(ctx: CodeContext, a: str, b: str) -> None:
    """Emit ``out = a @ b`` as three loops (the sum over ``k`` innermost)."""
    (out,) = ctx.outputs
    dtype = np_dtype(ctx.output_type(0).dtype)
    i, j, p, acc = ctx.fresh("i"), ctx.fresh("j"), ctx.fresh("p"), ctx.fresh("acc")
    ctx.emit(
        f"""
        {out} = empty(({a}.shape[0], {b}.shape[1]), {dtype})
        for {i} in range({a}.shape[0]):
            for {j} in range({b}.shape[1]):
                {acc} = {dtype}(0)
                for {p} in range({a}.shape[1]):
                    {acc} += {a}[{i}, {p}] * {b}[{p}, {j}]
                {out}[{i}, {j}] = {acc}
        """
    )


@numba_funcify.register(MatMul)
def numba_funcify_MatMul(op: MatMul, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Call ``np.dot`` (BLAS) on the cast matrices; explicit loops for small or other ones.

    A small float product with static shapes (a dot product of two vectors, as in a
    model's gradient) is three loops in the generated function: BLAS gains nothing on
    it, and compiling the BLAS call costs more than a second in a new process.
    """
    (out,) = ctx.outputs
    dtype = ctx.output_type(0).dtype
    a, b = _as_output_dtype(ctx, 0), _as_output_dtype(ctx, 1)
    if _small_matmul(ctx):
        # A function of its own, shared by equal products (see kiln_numba._outline).
        outline(ctx, lambda sub: _emit_matmul_loops(sub, *(_cast_once(sub, i) for i in (0, 1))))
    elif dtype in BLAS_DTYPES:
        ctx.emit(f"{out} = dot_kernel({a}, {b})")
    elif dtype == "float16":
        raise NoNumbaImplementation("MatMul: Numba has no float16 arithmetic")
    else:
        x, y = ctx.inputs
        shape = f"({x}.shape[0], {y}.shape[1])"
        ctx.emit(f"{out} = matmul_loop({a}, {b}, zeros({shape}, {np_dtype(dtype)}))")


@numba_funcify.register(Cholesky)
def numba_funcify_Cholesky(op: Cholesky, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Factor the triangle read with LAPACK (``LinAlgError`` if not positive definite)."""
    _linalg_dtype(ctx)
    ctx.emit(f"{ctx.outputs[0]} = cholesky_kernel({_contiguous(ctx, 0)}, {_flag(op.lower)})")


@numba_funcify.register(Solve)
def numba_funcify_Solve(op: Solve, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Solve ``a x = b`` by LU (general, symmetric) or Cholesky (positive definite)."""
    _linalg_dtype(ctx)
    (out,) = ctx.outputs
    a = _contiguous(ctx, 0)
    lower = _flag(op.lower)
    if op.assume_a == "pos":
        call = f"solve_pos_kernel({a}, {{b}}, {lower})"
    else:
        call = f"solve_kernel({a}, {{b}}, {_flag(op.assume_a == 'sym')}, {lower})"
    if op.b_ndim == 2:
        ctx.emit(f"{out} = {call.format(b=_contiguous(ctx, 1))}")
    else:
        col = _as_column(ctx, 1)
        ctx.emit(f"{out} = {call.format(b=col)}.reshape(({col}.shape[0],))")


@numba_funcify.register(SolveTriangular)
def numba_funcify_SolveTriangular(  # noqa: N802
    op: SolveTriangular, node: Apply, ctx: CodeContext
) -> None:
    """Solve by forward or back substitution over the triangle read (``a`` or ``a^T``)."""
    _linalg_dtype(ctx)
    (out,) = ctx.outputs
    a = _contiguous(ctx, 0)
    flags = f"{_flag(op.lower)}, {_flag(op.unit_diagonal)}, {_int(op.trans)}"
    order = ctx.input_type(0).shape[-1]
    rhs = ctx.input_type(1).shape[-1] if op.b_ndim == 2 else 1
    small = (order is not None and order < TRIANGULAR_BLOCKED_FROM) or (
        rhs is not None and rhs < TRIANGULAR_BLOCKED_RHS
    )
    if small:
        kernel = "solve_triangular_small_kernel"
    else:
        kernel = "solve_triangular_kernel"
        flags += f", {_int(TRIANGULAR_BLOCKED_FROM)}, {_int(TRIANGULAR_BLOCKED_RHS)}"
    if op.b_ndim == 2:
        b = _contiguous(ctx, 1)
        ctx.emit(f"{out} = {kernel}({a}, {b}, {flags})")
    else:
        col = _as_column(ctx, 1)
        x = ctx.fresh("x")
        ctx.emit(
            f"""
            {x} = {kernel}({a}, {col}, {flags})
            {out} = {x}.reshape(({col}.shape[0],))
            """
        )


@numba_funcify.register(Inv)
def numba_funcify_Inv(op: Inv, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Invert with LAPACK (``LinAlgError`` if singular)."""
    _linalg_dtype(ctx)
    ctx.emit(f"{ctx.outputs[0]} = inv_kernel({_contiguous(ctx, 0)})")


@numba_funcify.register(Det)
def numba_funcify_Det(op: Det, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Compute the determinant from the LU factorization, as a 0-d array."""
    dtype = np_dtype(_linalg_dtype(ctx))
    (out,) = ctx.outputs
    ctx.emit(
        f"""
        {out} = empty((), {dtype})
        {out}[()] = det_kernel({_contiguous(ctx, 0)})
        """
    )


@numba_funcify.register(SlogDet)
def numba_funcify_SlogDet(op: SlogDet, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Compute the sign and log absolute determinant (two 0-d arrays)."""
    dtype = np_dtype(_linalg_dtype(ctx))
    sign, logabsdet = ctx.outputs
    s, v = ctx.fresh("sign"), ctx.fresh("logdet")
    ctx.emit(
        f"""
        {s}, {v} = slogdet_kernel({_contiguous(ctx, 0)})
        {sign} = empty((), {dtype})
        {sign}[()] = {s}
        {logabsdet} = empty((), {dtype})
        {logabsdet}[()] = {v}
        """
    )


@numba_funcify.register(Eigh)
def numba_funcify_Eigh(op: Eigh, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Compute the eigenvalues and eigenvectors of the lower triangle with LAPACK."""
    _linalg_dtype(ctx)
    w, v = ctx.outputs
    ctx.emit(f"{w}, {v} = eigh_kernel({_contiguous(ctx, 0)})")


@numba_funcify.register(Tri)
def numba_funcify_Tri(op: Tri, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Keep the lower (upper) triangle over the last two dimensions (a new array)."""
    x = _contiguous(ctx, 0)  # the output's dtype is the input's: no cast
    ctx.emit(f"{ctx.outputs[0]} = tri_kernel({x}, {_flag(op.lower)}, {_int(op.k)})")
