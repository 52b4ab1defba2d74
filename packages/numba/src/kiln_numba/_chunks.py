"""A long generated function body as a sequence of calls of smaller functions.

Numba's typing, SSA and liveness passes and LLVM's optimizer grow faster than linearly
in the size of one function: a model of a few thousand scalars written as one
straight-line function of tens of thousands of statements takes minutes to compile,
where the same statements in functions of a few hundred lines take seconds (a C
compiler prefers small functions too). :func:`split_body` cuts a body of more than
:data:`WHOLE_LINES` lines between nodes (at its ``# <op>`` comment lines) into chunks
of about :data:`CHUNK_LINES` lines; each chunk becomes a module function whose
parameters are the values it reads from earlier chunks and whose results are the
values later ones read, and the body calls them in order.

Splitting has a price: each chunk is typed and lowered on its own, and LLVM optimizes
and emits the chunks' code inside the function they are linked into (a chunk's own
library does neither: :func:`kiln_numba._numba_internals.callee_options`). A body is
split only where that costs less than the superlinear growth of one function.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from kiln_numba._funcify import ModuleBuilder

#: A split body's chunks are about this long.
CHUNK_LINES = 200
#: A body of at most this many lines (comments included) stays one function. Measured
#: on M4's pattern, cold (``benchmarks/cost_growth.py``; first call, one function
#: against 200-line chunks): 1,070 lines 5.1 s against 7.0 s, 3,030 lines 17.4 s
#: against 19.4 s, 4,950 lines 34.3 s against 29.8 s.
WHOLE_LINES = 3500

_NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_TARGET = r"[A-Za-z_]\w*(?:\[[^\]]*\])?"
_ASSIGN = re.compile(
    rf"^\s*(?P<lhs>\(?\s*{_TARGET}(?:\s*,\s*{_TARGET})*\s*,?\s*\)?)"
    r"\s*(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)"
)
_FOR = re.compile(r"^\s*for\s+(?P<targets>[^:]+?)\s+in\b")
_VIEW = re.compile(r"^(?P<name>[A-Za-z_]\w*) = (?P<base>[A-Za-z_]\w*)\[(?P<index>[-\d:, ]+)\]$")


def _bound(line: str) -> list[str]:
    """Return the names ``line`` binds: assignment and loop targets, not subscripted ones."""
    if m := _FOR.match(line):
        return _NAME.findall(m["targets"])
    if m := _ASSIGN.match(line):
        targets = m["lhs"].strip("() ").split(",")
        return [t.strip() for t in targets if t.strip() and "[" not in t]
    return []


def _cut(lines: Sequence[str], size: int) -> list[list[str]]:
    """Return ``lines`` cut before node comments into pieces of about ``size`` lines."""
    pieces: list[list[str]] = [[]]
    for line in lines:
        if line.startswith("# ") and len(pieces[-1]) >= size:
            pieces.append([])
        pieces[-1].append(line)
    return pieces


def _reads_and_kills(piece: Sequence[str], local: set[str]) -> tuple[list[str], set[str], set[str]]:
    """Return the local names ``piece`` reads before binding them, binds, and always rebinds.

    A name first bound by a top-level statement of the piece is its own (killed: the
    value before the piece is dead); a name first bound inside a block (a loop, a
    branch) may keep its earlier value, so it counts as read as well.
    """
    reads: dict[str, None] = {}
    binds: set[str] = set()
    kills: set[str] = set()
    for line in piece:
        if line.lstrip().startswith("#"):
            continue
        targets = _bound(line)
        top = not line[:1].isspace()
        for n in _NAME.findall(line):
            if n not in local or n in binds or n in kills:
                continue
            if n in targets:
                binds.add(n)
                if top:
                    kills.add(n)
                else:
                    reads[n] = None
            else:
                reads[n] = None
        binds.update(t for t in targets if t in local)
    return list(reads), binds, kills


def split_body(
    module: ModuleBuilder,
    lines: list[str],
    params: Sequence[str],
    size: int | None = None,
    whole: int | None = None,
    bound: Mapping[str, str] | None = None,
) -> list[str]:
    """Return the body ``lines`` (ending with its one ``return``) as calls of chunk functions.

    ``params`` are the function's parameters. ``bound`` maps names the body reads to
    expressions of parameters that bind them (packed constants:
    :func:`kiln_numba._codegen.generate`): every function that reads such a name binds
    it at its top, so it is never passed from one function to another; the body
    returned binds only those its own lines read. A split body treats its views of
    parameters (:func:`_parameter_views`) the same way. A body of at most ``whole`` lines (default
    :data:`WHOLE_LINES`) or about ``size`` lines (default :data:`CHUNK_LINES`), or one
    with a ``return`` before its last line, is returned whole (after those bindings). Each chunk
    function takes the values it reads that earlier chunks (or ``params``) bound, and
    returns those it binds that later chunks read; the chunk functions are added to
    ``module.helpers``. Like the outlined loops, they are not cached on their own: the
    machine code of the function that calls them holds theirs.
    """
    size = CHUNK_LINES if size is None else size
    whole = WHOLE_LINES if whole is None else whole
    bound = dict(bound or {})
    if (
        len(lines) <= max(whole, size + size // 2)
        or not lines[-1].startswith("return (")
        or any(line.lstrip().startswith("return") for line in lines[:-1])
    ):
        return _bind(lines, bound)
    pieces = _cut(lines[:-1], size)
    if len(pieces) < 2:
        return _bind(lines, bound)
    views = _parameter_views(lines, params)
    bound = {**views, **bound}
    local: set[str] = set(params) | set(bound)
    for line in lines:
        if not line.lstrip().startswith("#"):
            local.update(_bound(line))
    local -= set(module.helpers) | set(module.python_globals)
    analysed = []
    defined = set(params) | set(bound)
    for piece in pieces:
        reads, binds, kills = _reads_and_kills(piece, local)
        # A name first bound inside a block of this piece, and nowhere before, is its own.
        analysed.append(([n for n in reads if n in defined], binds, kills))
        defined |= binds
    # Backwards: the names each piece must return (bound there, read later before a kill).
    needed = {n for n in _NAME.findall(lines[-1]) if n in local}
    outs: list[list[str]] = [[] for _ in pieces]
    for k in range(len(pieces) - 1, -1, -1):
        reads, binds, kills = analysed[k]
        outs[k] = sorted((binds & needed) - views.keys())
        needed = (needed - kills) | set(reads)
    body: list[str] = []
    for piece, (reads, _, _), returned in zip(pieces, analysed, outs, strict=True):
        name = module.fresh("chunk")
        ret = "return (" + "".join(f"{n}, " for n in returned) + ")"
        own = [n for n in reads if n in bound]
        reads = [n for n in reads if n not in bound]
        bindings = [f"{n} = {bound[n]}" for n in own]
        reads += [n for n in _reads_of(bindings, params) if n not in reads]
        text = "\n".join("    " + line for line in [*bindings, *piece, ret])
        args = ", ".join(reads)
        decorator = "@njit(error_model='numpy', callee=True)"
        module.helpers[name] = f"{decorator}\ndef {name}({args}):\n{text}"
        targets = "".join(f"{n}, " for n in returned)
        body.append(f"({targets}) = {name}({args})" if returned else f"{name}({args})")
    body.append(lines[-1])
    return _bind(body, bound)


def _parameter_views(lines: Sequence[str], params: Sequence[str]) -> dict[str, str]:
    """Return the names bound once, at the top level, to a constant slice of a parameter.

    Such a view (``v_5 = i0[92:96]``) is bound again by each chunk that reads it rather
    than passed: a chunk's argument is an array's data, shape and strides, and the
    function calling the chunks holds a reference to it from one call to the next. Its
    index has a slice, so it is a view of the parameter's memory, never a copy: binding
    it later sees the same values, whatever was written through either.
    """
    assigned = Counter(
        n for line in lines if not line.lstrip().startswith("#") for n in _bound(line)
    )
    views: dict[str, str] = {}
    for line in lines:
        m = _VIEW.match(line)
        if (
            m
            and ":" in m["index"]
            and m["base"] in params
            and assigned[m["name"]] == 1
            and not assigned[m["base"]]
        ):
            views[m["name"]] = f"{m['base']}[{m['index']}]"
    return views


def _reads_of(lines: Sequence[str], names: Sequence[str]) -> list[str]:
    """Return which of ``names`` ``lines`` mention, in the order of ``names``."""
    mentioned = {n for line in lines for n in _NAME.findall(line)}
    return [n for n in names if n in mentioned]


def _bind(lines: list[str], bound: Mapping[str, str]) -> list[str]:
    """Return ``lines`` after the bindings of the ``bound`` names they read."""
    code = [line for line in lines if not line.lstrip().startswith("#")]
    read = _reads_of(code, list(bound))
    return [f"{n} = {bound[n]}" for n in read] + lines
