"""The C file of a rewritten graph: one small function per node, one exported entry.

``generate(fgraph)`` numbers the graph's values (the inputs, then the constants,
then each node's outputs), asks :func:`~kiln_c.c_funcify` for each node's code and
writes:

- ``kiln_runtime.h`` (descriptors, buffers, errors, NumPy's scalar semantics);
- ``static int node_K(kiln_ctx *ctx, kiln_array *v)`` per node: its statements, or,
  for a node with no C implementation, a call of ``ctx->fallback`` (Python runs its
  ``perform``); one function each, because compilers are superlinear in function size;
- ``int kiln_run(kiln_array *in, kiln_array *out, kiln_ctx *ctx)``: the nodes in order,
  each value's buffer released after its last reader; the outputs are new references.

Constants are inputs of ``kiln_run`` (their values stay in Python), so graphs that
differ only in constant values share one file, one build and one cache entry.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from kiln_c._funcify import DTYPE_CODE, OBJECT, OBJECT_OPS, NoCImplementation, NodeIO, c_funcify
from kiln_c._runtime import MAXDIM
from kiln_c.random import random_header
from kiln_c.scalar import calls_vector_math, special_header
from kiln_compile import FunctionGraph
from kiln_graph import Apply, Constant, KilnValueError, TensorType, Variable

#: Bumped when the generated code changes meaning (part of every cache key).
CODEGEN_VERSION = 3
#: The most bytes of a call's arena (on the calling thread's stack: nutpie's threads
#: have 2 MiB); intermediates beyond it are malloc'd.
ARENA_MAX = 64 * 1024
RUNTIME = Path(__file__).with_name("kiln_runtime.h")


@dataclasses.dataclass
class Generated:
    """The C source of a graph and what the thunk needs to call it.

    Attributes
    ----------
    source
        The translation unit.
    constants
        The constants passed after the inputs, in order.
    fallbacks
        The nodes run through ``perform``, by node index.
    nodes
        Every node, by index (for error messages).
    dtypes
        The dtype code of each input and constant (``OBJECT`` for non-tensors).
    out_dtypes
        The dtype code of each output.
    """

    source: str
    constants: list[Constant]
    fallbacks: dict[int, Apply]
    nodes: list[Apply]
    dtypes: list[int]
    out_dtypes: list[int]
    static_outputs: dict[int, tuple[int, ...]]

    @staticmethod
    def dtype_code(v: Variable) -> int:
        """Return the runtime's dtype code of ``v``."""
        return dtype_code(v)


def dtype_code(v: Variable) -> int:
    """Return the runtime's dtype code of ``v`` (``OBJECT`` for what is not a C array)."""
    if isinstance(v.type, TensorType) and v.type.dtype in DTYPE_CODE:
        return DTYPE_CODE[v.type.dtype]
    return OBJECT


def _node_code(node: Apply, io: NodeIO) -> str | None:
    """Return the C body of ``node``, or None when it runs through ``perform``."""
    objects = any(dtype_code(v) == OBJECT for v in (*node.inputs, *node.outputs))
    if objects and not isinstance(node.op, tuple(OBJECT_OPS)):
        return None
    try:
        code = c_funcify(node.op, node, io)
        return code if isinstance(code, str) else str(code)  # CCode keeps its helpers
    except NoCImplementation:
        return None


def _fallback_code(io: NodeIO) -> str:
    n_in, n_out = len(io.ins), len(io.outs)
    lines = [
        f"kiln_array a[{max(n_in, 1)}], r[{max(n_out, 1)}];",
        *(f"a[{i}] = *{name};" for i, name in enumerate(io.ins)),
        *(f"kiln_clear(&r[{j}]);" for j in range(n_out)),
        f"int status = ctx->fallback({io.index}, a, r);",
        *(f"*{name} = r[{j}];" for j, name in enumerate(io.outs)),
        "return status;",
    ]
    return "\n".join(lines)


def callback_index(n_nodes: int, k: int, j: int) -> int:
    """Return the callback index of node ``k``'s ``j``-th callback (past every node's index).

    Such an entry of :attr:`Generated.fallbacks` is not a node of the graph run through
    ``perform`` but a step of a node's C code run in Python (a generator's ``bitgen_t``).
    """
    return (j + 1) * n_nodes + k


def callback_node(nodes: list[Apply], index: int) -> Apply:
    """Return the node run at callback ``index`` (:func:`callback_index`) of ``nodes``."""
    k, j = index % len(nodes), index // len(nodes) - 1
    node = nodes[k]
    io = NodeIO(k, tuple("in" for _ in node.inputs), tuple("out" for _ in node.outputs))
    return c_funcify(node.op, node, io).callbacks[j]  # type: ignore[no-any-return]


def clones(body: str) -> str:
    """Return the attribute that clones a node function calling vectorizable math.

    ``KILN_VECTOR_CLONES`` (``kiln_runtime.h``): one copy per SIMD width, where gcc makes
    them. ``""`` when ``body`` calls no ``kiln_exp_v`` / ``kiln_log1p_v``.
    """
    return "KILN_VECTOR_CLONES\n" if calls_vector_math([body]) else ""


def _static_shape(v: Variable) -> tuple[int, ...] | None:
    """Return the shape of the tensor ``v`` when all of it is known, else None."""
    shape = getattr(v.type, "shape", None)
    if shape is None or dtype_code(v) == OBJECT or any(n is None for n in shape):
        return None
    return tuple(int(n) for n in shape)


def arena_bytes(values: list[Variable]) -> int:
    """Return the arena size for the node outputs ``values``: their blocks, if static."""
    total = 0
    for v in values:
        shape = _static_shape(v)
        if shape is None:
            continue
        size = 1
        for n in shape:
            size *= n
        itemsize = int(np.dtype(v.type.dtype).itemsize)  # type: ignore[attr-defined]
        total += (32 + max(size, 1) * itemsize + 15) // 16 * 16
    return min(total, ARENA_MAX)


def _arena_open(arena: int) -> list[str]:
    """Return the statements giving ``ctx`` an arena of ``arena`` bytes on this frame."""
    if not arena:
        return ["ctx->arena = NULL;"]
    return [
        f"int64_t arena_mem[{arena // 8}] __attribute__((aligned(16)));",
        f"ctx->arena = (char *)arena_mem; ctx->arena_size = {arena}; ctx->arena_used = 0;",
    ]


def _call_entry(fgraph: FunctionGraph, arena: int) -> str:
    """Return ``kiln_call``: ``kiln_run`` on NumPy arrays passed as Python objects.

    And ``kiln_callv``, the same with the arrays in one pointer array (the entry
    :mod:`kiln_c._trampoline`'s callable calls).

    ``expect`` holds NumPy's array type, then each input's dtype object; an input of
    another class, dtype or number of dimensions, or not aligned, returns -1 before
    anything runs (the caller converts it and calls ``kiln_run``). Each output of a
    fully static shape comes as a new C-contiguous array ``y<j>`` made by the caller,
    which receives a copy of the result (one ``memcpy`` for small outputs: cheaper than
    handing a C buffer over to NumPy); others are left in ``out`` for the caller.
    """
    n_in = len(fgraph.inputs)
    params = "".join(f", const kiln_pyarray *x{i}" for i in range(n_in))
    static = [j for j, v in enumerate(fgraph.outputs) if _static_shape(v) is not None]
    params += "".join(f", const kiln_pyarray *y{j}" for j in static)
    lines = [
        f"int kiln_call(const kiln_call_head *head{params}) {{",
        "kiln_ctx *ctx = head->ctx; kiln_array *in = head->in, *out = head->out;",
        "const void *const *expect = head->expect;",
        "const void *e[2]; e[0] = expect[0];",
    ]
    for i, v in enumerate(fgraph.inputs):
        lines.append(
            f"e[1] = expect[{i + 1}]; if (!kiln_take(&in[{i}], x{i}, e, {v.type.ndim})) return -1;"  # type: ignore[attr-defined]
        )
    lines.extend(_arena_open(arena))
    lines.append("int status = kiln_run(in, out, ctx);")
    lines.append("if (status) goto end;")
    for j in range(len(fgraph.outputs)):
        if j in static:
            lines.append(f"if ((status = kiln_copy_into(ctx, &out[{j}], y{j})) != 0) goto fail;")
        else:
            lines.append(f"if ((status = kiln_to_heap(ctx, &out[{j}])) != 0) goto fail;")
    lines += ["goto end;", "fail:"]
    lines += [f"kiln_release(&out[{j}]);" for j in range(len(fgraph.outputs))]
    lines += ["end:", "ctx->arena = NULL;", "return status;", "}"]
    # The same with its arguments in one array: what kiln_trampoline.c calls.
    objects = ", ".join(f"a[{k}]" for k in range(n_in + len(static)))
    lines += [
        "int kiln_callv(const kiln_call_head *head, const kiln_pyarray *const *a) {",
        f"return kiln_call(head{', ' if objects else ''}{objects});",
        "}",
    ]
    return "\n".join(lines)


#: Return codes of the native entries beyond the negated error classes.
NATIVE_WRONG_LENGTH = -6
NATIVE_OUTPUT_TOO_LONG = -7


def native_point(fgraph: FunctionGraph) -> int | None:
    """Return the static length of the point ``x`` when ``fgraph`` takes one, else None.

    The native entries exist for a graph whose one explicit input is a float64 vector
    of static length (the others shared tensors), and whose values are all arrays.
    """
    if fgraph.n_explicit != 1 or any(dtype_code(v) == OBJECT for v in fgraph.inputs):
        return None
    x = fgraph.inputs[0]
    shape = _static_shape(x)
    if shape is None or len(shape) != 1 or x.type.dtype != "float64":  # type: ignore[attr-defined]
        return None
    return shape[0]


def _native_call(args: str, nargs: str, n_out: int, arena: int) -> list[str]:
    return [
        "const kiln_native_data *u = (const kiln_native_data *)user_data;",
        f"kiln_array in[{nargs}];",
        f"memcpy(in, u->{args}, sizeof in);",
        f"if (n != (size_t)in[0].shape[0]) return {NATIVE_WRONG_LENGTH};",
        "in[0].data = (char *)x; in[0].buf = NULL;",
        "kiln_ctx ctx;",
        "memset(&ctx, 0, sizeof ctx);",
        "ctx.blas = u->blas;",
        *(line.replace("ctx->", "ctx.") for line in _arena_open(arena)),
        f"kiln_array out[{max(n_out, 1)}];",
        "int status = kiln_run(in, out, &ctx);",
        "/* a matrix LAPACK rejects at this point is recoverable (a divergence) */",
        "if (status) return status == KILN_E_LINALG ? status : -status;",
    ]


def _native_entries(fgraph: FunctionGraph, n_args: int, arena: int) -> str:
    """Return ``kiln_native_logp`` / ``kiln_native_expand`` (kiln_compile's native ABI)."""
    n_out = len(fgraph.outputs)
    lines = [
        "int kiln_native_expand(size_t n, size_t n_out, const double *x, double *values, "
        "const void *user_data) {",
        *_native_call("expand_args", str(n_args), n_out, arena),
        "size_t at = 0;",
        f"for (int j = 0; j < {n_out}; j++) {{",
        "size_t size = (size_t)kiln_size(&out[j]);",
        "if (at + size <= n_out) kiln_write_doubles(&out[j], values + at);",
        "at += size;",
        "kiln_release(&out[j]);",
        "}",
        f"return at > n_out ? {NATIVE_OUTPUT_TOO_LONG} : 0;",
        "}",
    ]
    outs = fgraph.outputs
    scalar_and_vector = (
        n_out == 2
        and [dtype_code(v) for v in outs] == [DTYPE_CODE["float64"]] * 2
        and [v.type.ndim for v in outs] == [0, 1]  # type: ignore[attr-defined]
    )
    if scalar_and_vector:
        lines += [
            "int kiln_native_logp(size_t n, const double *x, double *grad, double *logp, "
            "const void *user_data) {",
            *_native_call("logp_args", str(n_args), 2, arena),
            "*logp = *(const double *)out[0].data;",
            f"if ((size_t)out[1].shape[0] != n) status = {NATIVE_WRONG_LENGTH};",
            "else kiln_write_doubles(&out[1], grad);",
            "kiln_release(&out[0]); kiln_release(&out[1]);",
            "return status;",
            "}",
        ]
    return "\n".join(lines)


def generate(fgraph: FunctionGraph) -> Generated:
    """Return the C file computing ``fgraph`` (see the module docstring)."""
    nodes = list(fgraph.nodes)
    for v in (*fgraph.inputs, *(o for node in nodes for o in (*node.inputs, *node.outputs))):
        ndim = getattr(v.type, "ndim", 0)
        if ndim > MAXDIM:
            raise KilnValueError(
                f"the C backend handles values of at most {MAXDIM} dimensions; {v!r} has "
                f"{ndim}: compile this graph with another backend (backend='numba')"
            )
    slot: dict[Variable, int] = {}
    for v in fgraph.inputs:
        slot[v] = len(slot)
    constants = _constants(fgraph, nodes)
    for v in constants:
        slot[v] = len(slot)
    n_args = len(slot)
    for node in nodes:
        for v in node.outputs:
            slot[v] = len(slot)
    last_use: dict[int, int] = {}
    for k, node in enumerate(nodes):
        for v in node.inputs:
            last_use[slot[v]] = k
    outputs = {slot[v] for v in fgraph.outputs}
    arena = arena_bytes([o for node in nodes for o in node.outputs])

    functions: list[str] = []
    fallbacks: dict[int, Apply] = {}
    run = [
        "int kiln_run(kiln_array *in, kiln_array *out, kiln_ctx *ctx) {",
        f"kiln_array v[{max(len(slot), 1)}];",
        f"for (int k = 0; k < {len(slot)}; k++) kiln_clear(&v[k]);",
        f"for (int k = 0; k < {n_args}; k++) {{ v[k] = in[k]; v[k].buf = NULL; }}",
        "int status = 0;",
    ]
    for k, node in enumerate(nodes):
        io = NodeIO(
            k,
            tuple(f"(&v[{slot[v]}])" for v in node.inputs),
            tuple(f"(&v[{slot[v]}])" for v in node.outputs),
        )
        body = _node_code(node, io)
        if body is None:
            fallbacks[k] = node
            body = _fallback_code(io)
        functions.extend(h for h in getattr(body, "helpers", ()) if h not in functions)
        for j, callback in enumerate(getattr(body, "callbacks", ())):
            index = callback_index(len(nodes), k, j)
            fallbacks[index] = callback
            body = body.replace(f"KILN_CALLBACK({j})", str(index))
        functions.append(
            f"/* {str(node.op)[:80].replace('*/', '* /')} */\n"
            f"{clones(body)}static int node_{k}(kiln_ctx *ctx, kiln_array *v) {{\n{body}\n}}\n"
        )
        run.append(f"ctx->node = {k}; if ((status = node_{k}(ctx, v)) != 0) goto done;")
        dead = [s for s, last in last_use.items() if last == k and s not in outputs]
        unread = [slot[v] for v in node.outputs if slot[v] not in last_use]
        dead += [s for s in unread if s not in outputs]
        run.extend(f"kiln_release(&v[{s}]);" for s in sorted(set(dead)))
    for j, v in enumerate(fgraph.outputs):
        run.append(f"kiln_view(&out[{j}], &v[{slot[v]}]);")
    run += [
        "done:",
        f"for (int k = 0; k < {len(slot)}; k++) kiln_release(&v[k]);",
        "return status;",
        "}",
    ]
    if all(dtype_code(v) != OBJECT for v in fgraph.inputs):
        run.append(_call_entry(fgraph, arena))
    if native_point(fgraph) is not None and not fallbacks:
        run.append(_native_entries(fgraph, n_args, arena))
    source = "\n".join(
        [
            f"/* Generated by kiln_c (code generator version {CODEGEN_VERSION}). */",
            RUNTIME.read_text(),
            special_header("".join(functions)),
            random_header("".join(functions)),
            *functions,
            "\n".join(run),
            "",
        ]
    )
    return _tables(fgraph, nodes, constants, fallbacks, source)


def _constants(fgraph: FunctionGraph, nodes: list[Apply]) -> list[Constant]:
    """Return the constants of ``fgraph`` in the order ``kiln_run`` takes them."""
    seen: set[Variable] = set(fgraph.inputs)
    constants: list[Constant] = []
    for v in (*(i for node in nodes for i in node.inputs), *fgraph.outputs):
        if v not in seen and isinstance(v, Constant):
            seen.add(v)
            constants.append(v)
    return constants


def _tables(
    fgraph: FunctionGraph,
    nodes: list[Apply],
    constants: list[Constant],
    fallbacks: dict[int, Apply],
    source: str,
) -> Generated:
    return Generated(
        source=source,
        constants=constants,
        fallbacks=fallbacks,
        nodes=nodes,
        dtypes=[dtype_code(v) for v in (*fgraph.inputs, *constants)],
        out_dtypes=[dtype_code(v) for v in fgraph.outputs],
        static_outputs={
            j: shape
            for j, v in enumerate(fgraph.outputs)
            if (shape := _static_shape(v)) is not None
        },
    )


def describe(fgraph: FunctionGraph, fallbacks: list[int]) -> Generated:
    """Return what :func:`generate` returns for ``fgraph`` but the source, without writing it.

    For a graph whose library is already built: ``fallbacks`` are the indices of the
    nodes that :func:`generate` found without C code (kept with the library).
    """
    nodes = list(fgraph.nodes)
    run = {k: nodes[k] if k < len(nodes) else callback_node(nodes, k) for k in fallbacks}
    return _tables(fgraph, nodes, _constants(fgraph, nodes), run, "")
