"""C code of OpFromGraph: the inner graph inlined as one static function.

Each inner node's code is a static function of its own (as in :mod:`kiln_c.blockwise`),
called in order on slots of a local table; the inner graph's constants are static C
arrays in the file (at most ``MAX_CONSTANT`` elements each; larger ones leave the node
to ``perform``). As on the VM, an output never shares memory with an input or a
constant: each output is a new contiguous copy.
"""

from __future__ import annotations

import hashlib

import numpy as np

from kiln_c._funcify import (
    CTYPE,
    DTYPE_CODE,
    CCode,
    NoCImplementation,
    NodeIO,
    c_funcify,
    dtype_of,
    literal,
)
from kiln_c.blockwise import inner_function
from kiln_graph import Apply, Constant, OpFromGraph, Variable, toposort

#: The most elements of an inner constant written into the C file.
MAX_CONSTANT = 4096


def _constant(c: Constant) -> tuple[str, str]:
    """Return a static C array of ``c``'s values and its name."""
    dtype = dtype_of(c)
    data = np.asarray(c.data, dtype=dtype)
    if data.size > MAX_CONSTANT:
        raise NoCImplementation(f"an inner constant of {data.size} elements")
    values = ", ".join(literal(x, dtype) for x in data.ravel()) or "0"
    text = f"{{{values}}}"
    name = "kiln_const_" + hashlib.sha256(f"{dtype} {text}".encode()).hexdigest()[:16]
    return name, f"static const {CTYPE[dtype]} {name}[{max(data.size, 1)}] = {text};\n"


@c_funcify.register(OpFromGraph)
def c_funcify_OpFromGraph(op: OpFromGraph, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Run the inner graph's nodes in order; copy each inner output out."""
    helpers: list[str] = []
    slot: dict[Variable, int] = {}
    setup: list[str] = []
    for i, inner_input in enumerate(op.inner_inputs):
        slot[inner_input] = len(slot)
        setup.append(f"w[{slot[inner_input]}] = v[{i}]; w[{slot[inner_input]}].buf = NULL;")
    nodes = toposort(list(op.inner_outputs), stop_at=list(op.inner_inputs))
    for v in (*(i for n in nodes for i in n.inputs), *op.inner_outputs):
        if isinstance(v, Constant) and v not in slot:
            name, array = _constant(v)
            if array not in helpers:
                helpers.append(array)
            slot[v] = len(slot)
            data = np.asarray(v.data)
            s = slot[v]
            setup.append(
                f"w[{s}].data = (char *){name}; w[{s}].buf = NULL; "
                f"w[{s}].dtype = {DTYPE_CODE[dtype_of(v)]}; w[{s}].ndim = {data.ndim};"
            )
            stride = data.itemsize
            for d in reversed(range(data.ndim)):
                setup.append(
                    f"w[{s}].shape[{d}] = {data.shape[d]}; w[{s}].strides[{d}] = {stride};"
                )
                stride *= data.shape[d]
    calls: list[str] = []
    for inner in nodes:
        for produced in inner.outputs:
            slot[produced] = len(slot)
        name, functions = inner_function(inner, io.index)
        helpers.extend(f for f in functions if f not in helpers)
        n_in, n_out = len(inner.inputs), len(inner.outputs)
        calls += [
            "{",
            f"kiln_array t[{n_in + n_out}];",
            *(f"t[{i}] = w[{slot[v]}];" for i, v in enumerate(inner.inputs)),
            *(f"kiln_clear(&t[{n_in + j}]);" for j in range(n_out)),
            f"if ((status = {name}(ctx, t)) != 0) goto done;",
            *(f"w[{slot[v]}] = t[{n_in + j}];" for j, v in enumerate(inner.outputs)),
            "}",
        ]
    n_in = len(op.inner_inputs)
    copies = [
        f"if ((status = kiln_copy(ctx, &v[{n_in + j}], &w[{slot[v]}])) != 0) goto done;"
        for j, v in enumerate(op.inner_outputs)
    ]
    body = "\n".join(
        [
            f"kiln_array w[{len(slot)}];",
            f"for (int k = 0; k < {len(slot)}; k++) kiln_clear(&w[k]);",
            *setup,
            "int status = 0;",
            *calls,
            *copies,
            "done:",
            f"for (int k = {n_in}; k < {len(slot)}; k++) kiln_release(&w[k]);",
            "return status;",
        ]
    )
    name = "kiln_graph_" + hashlib.sha256(body.encode()).hexdigest()[:16]
    helpers.append(f"/* {op} */\nstatic int {name}(kiln_ctx *ctx, kiln_array *v) {{\n{body}\n}}\n")
    args = [*io.ins, *io.outs]
    return CCode.with_helpers(
        "\n".join(
            [
                f"kiln_array t[{len(args)}];",
                *(f"t[{i}] = *{a};" for i, a in enumerate(io.ins)),
                *(f"kiln_clear(&t[{len(io.ins) + j}]);" for j in range(len(io.outs))),
                f"int status = {name}(ctx, t);",
                *(f"*{a} = t[{len(io.ins) + j}];" for j, a in enumerate(io.outs)),
                "return status;",
            ]
        ),
        helpers,
    )
