"""C code of linear algebra: MatMul, Cholesky, the solves, the inverse, the determinants, eigh.

BLAS and LAPACK are function pointers handed to the library at load time through the
context, so the library links against no BLAS: the OpenBLAS that NumPy's wheel bundles
and has loaded (64-bit integers; :mod:`kiln_c._numpy_blas`), else SciPy's
``scipy.linalg.cython_blas`` and ``cython_lapack`` (32-bit integers). The C code's
integer type for them, ``kiln_blas_int``, follows (:func:`blas_int`), and so does the
graph's cache key. A float MatMul is ``gemm``, or ``gemv``
when the right operand is one column (a matrix times a vector: M3's ``X @ beta`` and
``X.T @ g``, about 20 us less than ``gemm`` at 10,000 x 20). MatMul of other dtypes is
a plain triple loop. The decompositions and solves copy their operands (cast to the output's
dtype, any strides) into column-major scratch matrices, call the LAPACK routine SciPy
and NumPy call (``potrf``, ``potrs``, ``getrf``, ``getrs``, ``trtrs``, ``syevd``; float32 through
the ``s`` routines, as they do) and copy the result back; a matrix LAPACK rejects
raises NumPy's ``LinAlgError`` with SciPy's / NumPy's message, naming the op.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

from kiln_c._funcify import CTYPE, DTYPE_CODE, NoCImplementation, NodeIO, c_funcify, dtype_of
from kiln_c._numpy_blas import numpy_blas_pointers
from kiln_c.scalar import cast_expr
from kiln_graph import Apply, OpFromGraph
from kiln_graph.ops import Cholesky, Det, Eigh, Inv, MatMul, SlogDet, Solve, SolveTriangular, Tri

#: The order of the function pointers in ``ctx->blas``: BLAS's, then LAPACK's.
BLAS_FUNCTIONS = ("dgemm", "sgemm", "dgemv", "sgemv")
LAPACK_FUNCTIONS = (
    "dpotrf", "spotrf", "dpotrs", "spotrs", "dgetrf", "sgetrf", "dgetrs", "sgetrs",
    "dtrtrs", "strtrs", "dsyevd", "ssyevd",
)  # fmt: skip
_SLOT = {name: i for i, name in enumerate(BLAS_FUNCTIONS + LAPACK_FUNCTIONS)}


#: The Ops whose C code calls BLAS or LAPACK through ``ctx->blas``.
BLAS_OPS = (MatMul, Cholesky, Solve, SolveTriangular, Inv, Det, SlogDet, Eigh)


def uses_blas(nodes: Any) -> bool:
    """Whether any of ``nodes`` (a graph's) may call BLAS or LAPACK.

    A graph without linear algebra skips :func:`blas_pointers`, whose first call may
    import SciPy's BLAS modules (about 10 ms): a warm link of such a graph stays a file
    load. A Blockwise of such an Op counts, and so does any graph inside an Op
    (OpFromGraph), conservatively.
    """
    for node in nodes:
        op = getattr(node.op, "core_op", node.op)
        if isinstance(op, (*BLAS_OPS, OpFromGraph)):
            return True
    return False


def _cython_module(name: str) -> Any:
    """Return ``scipy.linalg.<name>`` (a public module), loaded without ``scipy.linalg``.

    ``from scipy.linalg import cython_blas`` first runs ``scipy.linalg``'s
    ``__init__`` (about 0.1 s, most of a warm C link). The extension module is loaded
    from its file under its own name instead, and registered in ``sys.modules`` so a
    later import of SciPy finds it. Where SciPy's files are laid out otherwise, the
    plain import runs (slower, the same module).
    """
    full = f"scipy.linalg.{name}"
    if full in sys.modules:
        return sys.modules[full]
    spec = importlib.util.find_spec("scipy")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for folder in folders:
            path = os.path.join(folder, "linalg", name + suffix)
            if os.path.isfile(path):
                loader = importlib.machinery.ExtensionFileLoader(full, path)
                module_spec = importlib.util.spec_from_loader(full, loader)
                if module_spec is None:
                    break
                module = importlib.util.module_from_spec(module_spec)
                sys.modules[full] = module
                try:
                    loader.exec_module(module)
                except BaseException:
                    del sys.modules[full]
                    raise
                return module
    return importlib.import_module(full)


@functools.cache
def _numpy_pointers() -> list[int] | None:
    return numpy_blas_pointers(BLAS_FUNCTIONS + LAPACK_FUNCTIONS)


def blas_int() -> str:
    """Return the C type of the BLAS and LAPACK integers: ``int64_t`` (NumPy's) or ``int``."""
    return "int64_t" if _numpy_pointers() is not None else "int"


@functools.cache
def blas_pointers() -> ctypes.Array[ctypes.c_void_p] | None:
    """Return the BLAS and LAPACK routines as an array of pointers (None: neither found).

    NumPy's bundled OpenBLAS where there is one, else SciPy's (see the module
    docstring). The order is ``BLAS_FUNCTIONS`` then ``LAPACK_FUNCTIONS``; the routines'
    integers are :func:`blas_int`.
    """
    found = _numpy_pointers()
    if found is not None:
        return (ctypes.c_void_p * len(found))(*found)
    try:
        cython_blas, cython_lapack = (_cython_module(n) for n in ("cython_blas", "cython_lapack"))
    except ImportError:
        return None
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = (ctypes.py_object,)
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)
    pointers = []
    for module, names in ((cython_blas, BLAS_FUNCTIONS), (cython_lapack, LAPACK_FUNCTIONS)):
        capi = module.__pyx_capi__  # type: ignore[attr-defined]
        pointers += [get_pointer(capi[n], get_name(capi[n])) for n in names]
    return (ctypes.c_void_p * len(pointers))(*pointers)


_GEMM = """
typedef {bi} kiln_blas_int;
typedef void (*kiln_{p}gemm_t)(char *, char *, kiln_blas_int *, kiln_blas_int *, kiln_blas_int *,
                               {t} *, {t} *, kiln_blas_int *, {t} *, kiln_blas_int *, {t} *, {t} *,
                               kiln_blas_int *);
if (ctx->blas != NULL && m > 0 && n > 0 && k > 0 && m < 2147483647 && n < 2147483647 &&
    k < 2147483647) {{
    kiln_array ca, cb;
    kiln_clear(&ca); kiln_clear(&cb);
    const kiln_array *A = a, *B = b;
    /* C-contiguous: 'N'; a transposed C-contiguous matrix (F order): 'T'; else a copy. */
    char ta = 'N', tb = 'N';
    kiln_blas_int M = m, N = n, K = k, lda = K, ldb = N;
    if (kiln_is_fortran(a)) {{ ta = 'T'; lda = M; }}
    else if (!kiln_is_contiguous(a)) {{ if (kiln_copy(ctx, &ca, a)) return ctx->code; A = &ca; }}
    {t} one = 1, zero = 0;
    const int64_t bs = b->strides[0] / (int64_t)sizeof({t});
    if (N == 1 && (K == 1 || (b->strides[0] > 0 && bs * (int64_t)sizeof({t}) == b->strides[0] &&
                              bs < 2147483647))) {{
        /* a matrix times a column: y = A x (gemv), x read at its stride */
        typedef void (*kiln_{p}gemv_t)(char *, kiln_blas_int *, kiln_blas_int *, {t} *, {t} *,
                                       kiln_blas_int *, {t} *, kiln_blas_int *, {t} *, {t} *,
                                       kiln_blas_int *);
        kiln_blas_int incx = K == 1 ? 1 : bs, incy = 1, rows = ta == 'T' ? M : K;
        kiln_blas_int cols = ta == 'T' ? K : M;
        char tr = ta == 'T' ? 'N' : 'T'; /* A's column-major view: m x k (F order), k x m (C) */
        ((kiln_{p}gemv_t)ctx->blas[{gemv}])(&tr, &rows, &cols, &one, ({t} *)A->data, &lda,
                                           ({t} *)b->data, &incx, &zero, ({t} *)out->data, &incy);
        kiln_release(&ca);
        return 0;
    }}
    if (kiln_is_fortran(b)) {{ tb = 'T'; ldb = K; }}
    else if (!kiln_is_contiguous(b)) {{
        if (kiln_copy(ctx, &cb, b)) {{ kiln_release(&ca); return ctx->code; }}
        B = &cb;
    }}
    /* row-major C = A B is column-major C^T = B^T A^T */
    ((kiln_{p}gemm_t)ctx->blas[{slot}])(&tb, &ta, &N, &M, &K, &one, ({t} *)B->data, &ldb,
                                        ({t} *)A->data, &lda, &zero, ({t} *)out->data, &N);
    kiln_release(&ca); kiln_release(&cb);
    return 0;
}}
"""


@c_funcify.register(MatMul)
def c_funcify_MatMul(op: MatMul, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return ``a @ b`` of two matrices."""
    (a, b), (out,) = io.ins, io.outs
    dtype = dtype_of(node.outputs[0])
    da, db = dtype_of(node.inputs[0]), dtype_of(node.inputs[1])
    ct = CTYPE[dtype]
    lines = [
        f"const kiln_array *a = {a}, *b = {b}; kiln_array *out = {out};",
        "const int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];",
        'if (b->shape[0] != k) return kiln_fail(ctx, KILN_E_SHAPE, "matmul: a has %lld '
        'columns but b has %lld rows", (long long)k, (long long)b->shape[0]);',
        "const int64_t shape[2] = {m, n};",
        f"if (kiln_alloc(ctx, out, {DTYPE_CODE[dtype]}, 2, shape)) return ctx->code;",
    ]
    if dtype in ("float64", "float32") and da == db == dtype:
        slot = 0 if dtype == "float64" else 1
        p = "d" if slot == 0 else "s"
        lines.append(_GEMM.format(p=p, t=ct, slot=slot, gemv=_SLOT[f"{p}gemv"], bi=blas_int()))
    load_a = cast_expr(
        f"*(const {CTYPE[da]} *)(a->data + i * a->strides[0] + q * a->strides[1])", da, dtype
    )
    load_b = cast_expr(
        f"*(const {CTYPE[db]} *)(b->data + q * b->strides[0] + j * b->strides[1])", db, dtype
    )
    lines += [
        f"{ct} *o = ({ct} *)out->data;",
        "for (int64_t i = 0; i < m * n; i++) o[i] = 0;",
        "for (int64_t i = 0; i < m; i++)",
        "for (int64_t q = 0; q < k; q++) {",
        f"const {ct} aiq = {load_a};",
        f"for (int64_t j = 0; j < n; j++) o[i * n + j] += aiq * {load_b};",
        "}",
        "return 0;",
    ]
    return "\n".join(lines)


def _lapack_dtype(node: Apply) -> str:
    """Return the output dtype of a LAPACK node (float32 or float64)."""
    dtype = dtype_of(node.outputs[0])
    if dtype not in ("float32", "float64"):
        raise NoCImplementation(f"{node.op}: no LAPACK routine for dtype {dtype}")
    return dtype


def _routine(name: str, dtype: str) -> str:
    """Return the C expression of LAPACK routine ``name`` (``potrf``...) for ``dtype``."""
    p = "d" if dtype == "float64" else "s"
    return f"((kiln_{name}_t)ctx->blas[{_SLOT[p + name]}])"


#: The routines' argument types (``I``: ``kiln_blas_int *``).
_SIGNATURES = {
    "potrf": "char *, I, {t} *, I, I",
    "potrs": "char *, I, I, {t} *, I, {t} *, I, I",
    "getrf": "I, I, {t} *, I, I, I",
    "getrs": "char *, I, I, {t} *, I, I, {t} *, I, I",
    "trtrs": "char *, char *, char *, I, I, {t} *, I, {t} *, I, I",
    "syevd": "char *, char *, I, {t} *, I, {t} *, {t} *, I, I, I, I",
}


def _prologue(node: Apply, io: NodeIO, dtype: str, routines: tuple[str, ...]) -> list[str]:
    """Declare the routines, ``a``, ``n`` (``a`` square, at most INT_MAX) and ``N``, ``ld``."""
    t = CTYPE[dtype]
    lines = [f"typedef {blas_int()} kiln_blas_int;"]
    lines += [
        f"typedef void (*kiln_{r}_t)({_SIGNATURES[r].replace('I', 'kiln_blas_int *').format(t=t)});"
        for r in routines
    ]
    lines += [
        f"const kiln_array *a = {io.ins[0]};",
        "if (ctx->blas == NULL) return kiln_fail(ctx, KILN_E_VALUE, "
        "\"no LAPACK is available (NumPy's bundled OpenBLAS, or SciPy's "
        'scipy.linalg.cython_lapack)");',
        "const int64_t n = a->shape[0];",
        "if (a->shape[1] != n) return kiln_fail(ctx, KILN_E_SHAPE, "
        '"expected a square matrix, got shape (%lld, %lld)", (long long)n, '
        "(long long)a->shape[1]);",
        "if (n > 46340) return kiln_fail(ctx, KILN_E_VALUE, "
        '"a matrix of %lld rows is beyond LAPACK\'s 32-bit sizes", (long long)n);',
        "kiln_blas_int N = (kiln_blas_int)n, ld = N > 1 ? N : 1, info = 0;",
    ]
    return lines


def _load(
    dst: str, src: str, src_dtype: str, dtype: str, cols: str, ndim: int, sym: str = ""
) -> str:
    """Return a loop copying ``src`` into the column-major ``dst``, cast to ``dtype``.

    ``src`` has ``n`` rows and ``cols`` columns (a vector when ``ndim`` is 1); the
    leading dimension of ``dst`` is ``n``.

    ``sym``: ``"lower"`` / ``"upper"``: only that triangle of ``src`` is read, mirrored.
    """
    if ndim == 1:
        addr = f"{src}->data + i * {src}->strides[0]"
    elif sym:
        r, c = ("(i > j ? i : j)", "(i > j ? j : i)")
        if sym == "upper":
            r, c = c, r
        addr = f"{src}->data + {r} * {src}->strides[0] + {c} * {src}->strides[1]"
    else:
        addr = f"{src}->data + i * {src}->strides[0] + j * {src}->strides[1]"
    value = cast_expr(f"*(const {CTYPE[src_dtype]} *)({addr})", src_dtype, dtype)
    return (
        f"for (int64_t j = 0; j < {cols}; j++) for (int64_t i = 0; i < n; i++) "
        f"{dst}[i + j * n] = {value};"
    )


def _scratch(t: str, name: str, count: str) -> str:
    return f"{t} *{name} = ({t} *)malloc(sizeof({t}) * (size_t)({count} > 0 ? {count} : 1));"


_NO_MEMORY = 'kiln_fail(ctx, KILN_E_MEMORY, "cannot allocate LAPACK\'s scratch space")'


@c_funcify.register(Cholesky)
def c_funcify_Cholesky(op: Cholesky, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the Cholesky factor by ``potrf`` (``LinAlgError`` when not positive definite)."""
    dtype = _lapack_dtype(node)
    t, out = CTYPE[dtype], io.outs[0]
    keep = "j <= i" if op.lower else "j >= i"
    return "\n".join(
        [
            *_prologue(node, io, dtype, ("potrf",)),
            "const int64_t shape[2] = {n, n};",
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, 2, shape)) return ctx->code;",
            _scratch(t, "w", "n * n"),
            f"if (w == NULL) return {_NO_MEMORY};",
            _load("w", "a", dtype_of(node.inputs[0]), dtype, "n", 2),
            f"char uplo = '{'L' if op.lower else 'U'}';",
            f"if (n > 0) {_routine('potrf', dtype)}(&uplo, &N, w, &ld, &info);",
            "if (info > 0) { free(w); return kiln_fail(ctx, KILN_E_LINALG, "
            '"the matrix is not positive definite: its leading minor of order %d is not '
            'positive", (int)info); }',
            f"{t} *o = ({t} *){out}->data;",
            "for (int64_t i = 0; i < n; i++) for (int64_t j = 0; j < n; j++)",
            f"o[i * n + j] = ({keep}) ? w[i + j * n] : ({t})0;",
            "free(w);",
            "return 0;",
        ]
    )


@c_funcify.register(Eigh)
def c_funcify_Eigh(op: Eigh, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the eigenvalues and eigenvectors of the lower triangle by ``syevd`` (NumPy's).

    Each eigenvector's first entry of largest magnitude is made positive (kiln's
    convention); a non-finite entry gives NaN outputs, as on the VM.
    """
    dtype = _lapack_dtype(node)
    t = CTYPE[dtype]
    vals, vecs = io.outs
    return "\n".join(
        [
            *_prologue(node, io, dtype, ("syevd",)),
            "const int64_t vshape[2] = {n, n};",
            f"if (kiln_alloc(ctx, {vals}, {DTYPE_CODE[dtype]}, 1, vshape)) return ctx->code;",
            f"if (kiln_alloc(ctx, {vecs}, {DTYPE_CODE[dtype]}, 2, vshape)) return ctx->code;",
            f"{t} *ov = ({t} *){vals}->data, *oq = ({t} *){vecs}->data;",
            "const int64_t lwork = 1 + 6 * n + 2 * n * n, liwork = 3 + 5 * n;",
            "if (lwork > 2147483647) return kiln_fail(ctx, KILN_E_VALUE, "
            '"eigh: a matrix of %lld rows is beyond LAPACK\'s 32-bit work sizes", '
            "(long long)n);",
            _scratch(t, "w", "n * n + lwork"),
            _scratch("kiln_blas_int", "iwork", "liwork"),
            f"if (w == NULL || iwork == NULL) {{ free(w); free(iwork); return {_NO_MEMORY}; }}",
            _load("w", "a", dtype_of(node.inputs[0]), dtype, "n", 2, sym="lower"),
            "int finite = 1;",
            "for (int64_t i = 0; i < n * n; i++) if (!isfinite(w[i])) { finite = 0; break; }",
            "if (!finite) {",
            "for (int64_t i = 0; i < n; i++) ov[i] = NAN;",
            "for (int64_t i = 0; i < n * n; i++) oq[i] = NAN;",
            "free(w); free(iwork); return 0;",
            "}",
            "char jobz = 'V', uplo = 'L';",
            "kiln_blas_int lw = (kiln_blas_int)lwork, liw = (kiln_blas_int)liwork;",
            f"if (n > 0) {_routine('syevd', dtype)}(&jobz, &uplo, &N, w, &ld, ov, w + n * n, "
            "&lw, iwork, &liw, &info);",
            "if (info > 0) { free(w); free(iwork); return kiln_fail(ctx, KILN_E_LINALG, "
            '"Eigenvalues did not converge"); }',
            "for (int64_t j = 0; j < n; j++) {",
            f"const {t} *col = w + j * n;",
            "int64_t big = 0;",
            "for (int64_t i = 1; i < n; i++) if (fabs(col[i]) > fabs(col[big])) big = i;",
            f"const {t} s = col[big] < 0 ? ({t})-1 : ({t})1;",
            "for (int64_t i = 0; i < n; i++) oq[i * n + j] = s * col[i];",
            "}",
            "free(w); free(iwork);",
            "return 0;",
        ]
    )


def _solve_body(
    node: Apply,
    io: NodeIO,
    dtype: str,
    b_ndim: int,
    solve: list[str],
    sym: str,
    routines: tuple[str, ...],
) -> str:
    """Return a solve's body: ``a`` loaded in ``w``, ``b`` in ``x``, ``solve`` run, copied out."""
    t, out, b = CTYPE[dtype], io.outs[0], io.ins[1]
    return "\n".join(
        [
            *_prologue(node, io, dtype, routines),
            f"const kiln_array *b = {b};",
            "if (b->shape[0] != n) return kiln_fail(ctx, KILN_E_SHAPE, "
            '"a has shape (%lld, %lld) but b has %lld rows", (long long)n, (long long)n, '
            "(long long)b->shape[0]);",
            f"const int64_t k = {'b->shape[1]' if b_ndim == 2 else '1'};",
            "if (k > 2147483647) return kiln_fail(ctx, KILN_E_VALUE, "
            '"b has too many columns for LAPACK");',
            "kiln_blas_int K = (kiln_blas_int)k;",
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, {b_ndim}, b->shape)) "
            "return ctx->code;",
            _scratch(t, "w", "n * n + n * k"),
            _scratch("kiln_blas_int", "ipiv", "n"),
            f"if (w == NULL || ipiv == NULL) {{ free(w); free(ipiv); return {_NO_MEMORY}; }}",
            f"{t} *x = w + n * n;",
            _load("w", "a", dtype_of(node.inputs[0]), dtype, "n", 2, sym),
            _load("x", "b", dtype_of(node.inputs[1]), dtype, "k", b_ndim),
            "int status = 0;",
            "if (n > 0 && k > 0) {",
            *solve,
            "}",
            f"{t} *o = ({t} *){out}->data;",
            "if (status == 0) for (int64_t i = 0; i < n; i++) for (int64_t j = 0; j < k; j++)",
            "o[i * k + j] = x[i + j * n];",
            "free(w); free(ipiv);",
            "return status;",
        ]
    )


_SINGULAR = 'status = kiln_fail(ctx, KILN_E_LINALG, "Matrix is singular.");'


@c_funcify.register(Solve)
def c_funcify_Solve(op: Solve, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Solve ``a x = b``: LU (``getrf``/``getrs``) or, for ``pos``, Cholesky (``potrf``/``potrs``).

    ``sym`` reads the triangle ``lower`` chooses, mirrored, then solves by LU.
    """
    dtype = _lapack_dtype(node)
    if op.assume_a == "pos":
        uplo = "L" if op.lower else "U"
        solve = [
            f"char uplo = '{uplo}';",
            f"{_routine('potrf', dtype)}(&uplo, &N, w, &ld, &info);",
            f"if (info > 0) {_SINGULAR}",
            f"else {_routine('potrs', dtype)}(&uplo, &N, &K, w, &ld, x, &ld, &info);",
        ]
        return _solve_body(node, io, dtype, op.b_ndim, solve, "", ("potrf", "potrs"))
    sym = ("lower" if op.lower else "upper") if op.assume_a == "sym" else ""
    solve = [
        "char trans = 'N';",
        f"{_routine('getrf', dtype)}(&N, &N, w, &ld, ipiv, &info);",
        f"if (info > 0) {_SINGULAR}",
        f"else {_routine('getrs', dtype)}(&trans, &N, &K, w, &ld, ipiv, x, &ld, &info);",
    ]
    return _solve_body(node, io, dtype, op.b_ndim, solve, sym, ("getrf", "getrs"))


@c_funcify.register(SolveTriangular)
def c_funcify_SolveTriangular(op: SolveTriangular, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Solve ``a x = b`` (``a.T x = b``) for triangular ``a`` by ``trtrs``."""
    dtype = _lapack_dtype(node)
    solve = [
        f"char uplo = '{'L' if op.lower else 'U'}', trans = '{'T' if op.trans else 'N'}', "
        f"diag = '{'U' if op.unit_diagonal else 'N'}';",
        f"{_routine('trtrs', dtype)}(&uplo, &trans, &diag, &N, &K, w, &ld, x, &ld, &info);",
        "if (info > 0) status = kiln_fail(ctx, KILN_E_LINALG, "
        '"singular matrix: resolution failed at diagonal %d", (int)(info - 1));',
    ]
    return _solve_body(node, io, dtype, op.b_ndim, solve, "", ("trtrs",))


@c_funcify.register(Inv)
def c_funcify_Inv(op: Inv, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the inverse by LU (``getrf``, then ``getrs`` on the identity)."""
    dtype = _lapack_dtype(node)
    t, out = CTYPE[dtype], io.outs[0]
    return "\n".join(
        [
            *_prologue(node, io, dtype, ("getrf", "getrs")),
            "const int64_t shape[2] = {n, n};",
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, 2, shape)) return ctx->code;",
            _scratch(t, "w", "2 * n * n"),
            _scratch("kiln_blas_int", "ipiv", "n"),
            f"if (w == NULL || ipiv == NULL) {{ free(w); free(ipiv); return {_NO_MEMORY}; }}",
            f"{t} *x = w + n * n;",
            _load("w", "a", dtype_of(node.inputs[0]), dtype, "n", 2),
            f"for (int64_t i = 0; i < n * n; i++) x[i] = ({t})0;",
            f"for (int64_t i = 0; i < n; i++) x[i + i * n] = ({t})1;",
            "int status = 0;",
            "if (n > 0) {",
            "char trans = 'N';",
            f"{_routine('getrf', dtype)}(&N, &N, w, &ld, ipiv, &info);",
            'if (info > 0) status = kiln_fail(ctx, KILN_E_LINALG, "Singular matrix");',
            f"else {_routine('getrs', dtype)}(&trans, &N, &N, w, &ld, ipiv, x, &ld, &info);",
            "}",
            f"{t} *o = ({t} *){out}->data;",
            "if (status == 0) for (int64_t i = 0; i < n; i++) for (int64_t j = 0; j < n; j++)",
            "o[i * n + j] = x[i + j * n];",
            "free(w); free(ipiv);",
            "return status;",
        ]
    )


def _slogdet_lines(node: Apply, io: NodeIO, dtype: str) -> list[str]:
    """Factor ``a`` by ``getrf``; leave NumPy's ``sign`` and ``logdet`` (in ``dtype``)."""
    t = CTYPE[dtype]
    f = "" if dtype == "float64" else "f"
    return [
        *_prologue(node, io, dtype, ("getrf",)),
        _scratch(t, "w", "n * n"),
        _scratch("kiln_blas_int", "ipiv", "n"),
        f"if (w == NULL || ipiv == NULL) {{ free(w); free(ipiv); return {_NO_MEMORY}; }}",
        _load("w", "a", dtype_of(node.inputs[0]), dtype, "n", 2),
        f"if (n > 0) {_routine('getrf', dtype)}(&N, &N, w, &ld, ipiv, &info);",
        f"{t} sign = ({t})1, logdet = ({t})0;",
        f"if (info > 0) {{ sign = ({t})0; logdet = -INFINITY; }}",
        "else for (int64_t i = 0; i < n; i++) {",
        "if (ipiv[i] != i + 1) sign = -sign;",
        f"{t} u = w[i + i * n];",
        "if (u < 0) { sign = -sign; u = -u; }",
        f"logdet += log{f}(u);",
        "}",
        "free(w); free(ipiv);",
    ]


@c_funcify.register(Det)
def c_funcify_Det(op: Det, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the determinant as NumPy computes it: ``sign * exp(logdet)`` of the LU factors."""
    dtype = _lapack_dtype(node)
    t, out = CTYPE[dtype], io.outs[0]
    f = "" if dtype == "float64" else "f"
    return "\n".join(
        [
            *_slogdet_lines(node, io, dtype),
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, 0, NULL)) return ctx->code;",
            f"*({t} *){out}->data = sign * exp{f}(logdet);",
            "return 0;",
        ]
    )


@c_funcify.register(SlogDet)
def c_funcify_SlogDet(op: SlogDet, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the sign and log absolute determinant of the LU factors (NumPy's)."""
    dtype = _lapack_dtype(node)
    t = CTYPE[dtype]
    sign, logdet = io.outs
    return "\n".join(
        [
            *_slogdet_lines(node, io, dtype),
            f"if (kiln_alloc(ctx, {sign}, {DTYPE_CODE[dtype]}, 0, NULL)) return ctx->code;",
            f"if (kiln_alloc(ctx, {logdet}, {DTYPE_CODE[dtype]}, 0, NULL)) return ctx->code;",
            f"*({t} *){sign}->data = sign;",
            f"*({t} *){logdet}->data = logdet;",
            "return 0;",
        ]
    )


@c_funcify.register(Tri)
def c_funcify_Tri(op: Tri, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return a copy of ``x`` keeping the lower (upper) triangle from diagonal ``k`` on."""
    dtype = dtype_of(node.outputs[0])
    t = CTYPE[dtype]
    (x,), (out,) = io.ins, io.outs
    ndim = node.outputs[0].type.ndim  # type: ignore[attr-defined]
    keep = f"c - r <= {op.k}" if op.lower else f"c - r >= {op.k}"
    return "\n".join(
        [
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, {ndim}, {x}->shape)) "
            "return ctx->code;",
            "int64_t st[2][KILN_MAXDIM];",
            f"for (int64_t d = 0; d < {ndim}; d++) {{ st[0][d] = {out}->strides[d]; "
            f"st[1][d] = {x}->strides[d]; }}",
            f"char *p[2] = {{{out}->data, {x}->data}};",
            "int64_t idx[KILN_MAXDIM] = {0};",
            f"const int64_t m = kiln_size({out});",
            "for (int64_t q = 0; q < m; q++) {",
            f"const int64_t r = idx[{ndim - 2}], c = idx[{ndim - 1}];",
            f"*({t} *)p[0] = ({keep}) ? *(const {t} *)p[1] : ({t})0;",
            f"kiln_advance({ndim}, {out}->shape, idx, 2, p, st);",
            "}",
            "return 0;",
        ]
    )
