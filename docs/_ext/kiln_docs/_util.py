"""Helpers shared by the directives: tables and inline text as docutils nodes."""

from __future__ import annotations

import re
from collections.abc import Sequence

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

Cell = str | nodes.Node | Sequence[nodes.Node]


class DocsError(ExtensionError):
    """A generated part of the docs cannot be built (the message says what to fix)."""


class KilnDirective(SphinxDirective):
    """A directive whose :class:`DocsError` becomes a build error at its line (``-W`` fails)."""

    def run(self) -> list[nodes.Node]:
        """Return :meth:`build`'s nodes, or report its :class:`DocsError` at this line."""
        try:
            return self.build()
        except DocsError as exc:
            raise self.error(str(exc)) from exc

    def build(self) -> list[nodes.Node]:
        """Return the directive's nodes (subclasses implement it)."""
        raise NotImplementedError


def inline(text: str) -> list[nodes.Node]:
    """Return ``text`` as inline nodes: Markdown ```code``` becomes a literal."""
    out: list[nodes.Node] = []
    for i, part in enumerate(re.split(r"`([^`]*)`", text)):
        if part:
            out.append(nodes.literal(part, part) if i % 2 else nodes.Text(part))
    return out


def _cell(value: Cell) -> nodes.entry:
    entry = nodes.entry()
    para = nodes.paragraph()
    if isinstance(value, str):
        para.extend(inline(" ".join(value.split())))
    elif isinstance(value, nodes.Node):
        para.append(value)
    else:
        para.extend(value)
    entry.append(para)
    return entry


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    widths: Sequence[int] | None = None,
    classes: Sequence[str] = (),
) -> nodes.table:
    """Return a docutils table with ``header`` and ``rows`` (cells: text or nodes)."""
    widths = list(widths or [1] * len(header))
    tbl = nodes.table(classes=["kiln-table", *classes])
    group = nodes.tgroup(cols=len(header))
    tbl.append(group)
    for w in widths:
        group.append(nodes.colspec(colwidth=w))
    head = nodes.thead()
    hrow = nodes.row()
    hrow.extend(_cell(h) for h in header)
    head.append(hrow)
    group.append(head)
    body = nodes.tbody()
    for row in rows:
        r = nodes.row()
        r.extend(_cell(c) for c in row)
        body.append(r)
    group.append(body)
    return tbl
