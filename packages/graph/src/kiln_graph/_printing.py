"""A readable text rendering of graphs."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

from kiln_graph._node import Constant, Variable, as_variable_list


def dprint(
    outputs: Variable | Iterable[Variable], file: TextIO | None = None, print_type: bool = True
) -> str:
    """Print the graph computing ``outputs`` as an indented tree and return the text.

    See :func:`format_graph` for the format.

    Examples
    --------
    >>> dprint(kt.exp(x) + 1)  # doctest: +SKIP
    """
    text = format_graph(outputs, print_type)
    print(text, file=file or sys.stdout)
    return text


def format_graph(outputs: Variable | Iterable[Variable], print_type: bool = True) -> str:
    """Return the graph computing ``outputs`` as an indented tree of text.

    A node used more than once is printed in full the first time and as ``*<id>``
    after that.

    Examples
    --------
    >>> dprint(kt.exp(x) + 1)  # doctest: +SKIP
    add [id A] float64 ()
     ├─ exp [id B] float64 ()
     │  └─ x [id C] float64 ()
     └─ 1.0 [id D] float64 ()
    """
    outs = as_variable_list(outputs)
    ids: dict[Variable, str] = {}
    lines: list[str] = []

    def label(v: Variable) -> str:
        if v not in ids:
            n = len(ids)
            name = ""
            while True:
                name = chr(ord("A") + n % 26) + name
                n = n // 26 - 1
                if n < 0:
                    break
            ids[v] = name
        return ids[v]

    def describe(v: Variable) -> str:
        t = v.type
        typ = f" {t.dtype} {t.shape}" if print_type and hasattr(t, "dtype") else ""  # type: ignore[attr-defined]
        return f"{v!r} [id {label(v)}]{typ}"

    def walk(v: Variable, prefix: str, child_prefix: str, seen: set[Variable]) -> None:
        repeated = v in seen and v.owner is not None
        lines.append(prefix + describe(v) + (" *" if repeated else ""))
        if repeated or v.owner is None or isinstance(v, Constant):
            return
        seen.add(v)
        inputs = v.owner.inputs
        for i, inp in enumerate(inputs):
            last = i == len(inputs) - 1
            walk(
                inp,
                child_prefix + ("└─ " if last else "├─ "),
                child_prefix + ("   " if last else "│  "),
                seen,
            )

    seen: set[Variable] = set()
    for out in outs:
        walk(out, "", " ", seen)
    return "\n".join(lines)
