"""The op map: where each Op's whole story lives, generated from the registries.

For every Op class a graph can hold (``kiln_compile.testing.graph_op_classes``) and
every scalar op (``graph_scalar_op_classes``): the module defining it (``make_node``,
``perform``, ``L_op``/``grad``, ``infer_shape``, ``inplace_variants`` are methods of the
class), the function each installed backend's dispatcher (``numba_funcify``,
``jax_funcify``) resolves it to, the rewrites that track it (``tracks=`` of
``kiln_rewrite``'s database), and the test files that name it. The Python VM runs
``perform`` itself. A row whose backend cell is empty is an Op that backend does not
implement.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

from kiln_docs._util import KilnDirective, table
from kiln_docs.registries import load_backend_rewrites

#: The installed backends' dispatchers: (column, module, dispatcher name).
_DISPATCHERS = (("Numba", "kiln_numba", "numba_funcify"), ("JAX", "kiln_jax", "jax_funcify"))


def _dispatchers() -> list[tuple[str, Any]]:
    found = []
    for column, module, name in _DISPATCHERS:
        try:
            found.append((column, getattr(importlib.import_module(module), name)))
        except ImportError:
            continue
    return found


def _implementation(dispatcher: Any, cls: type) -> str:
    """Return ``module.function`` of the dispatcher's implementation of ``cls`` ('' if none)."""
    fn: Callable[..., Any] = dispatcher.dispatch(cls)
    if fn is dispatcher.dispatch(object):
        return ""
    module = fn.__module__
    name = fn.__name__
    return f"{module}.{name}" if not name.startswith("<") else module


def _rewrites_tracking() -> dict[type, list[str]]:
    from kiln_rewrite import db

    load_backend_rewrites()
    by_class: dict[type, list[str]] = {}
    for rewrite in db:
        for cls in rewrite.tracks:
            by_class.setdefault(cls, []).append(rewrite.name)
    return by_class


_ROOT = Path(__file__).resolve().parents[3]


def _test_files() -> dict[str, str]:
    """Return ``path -> text`` of every test file of the repository."""
    paths = sorted(_ROOT.glob("packages/*/tests/test_*.py")) + sorted(
        _ROOT.glob("integration/test_*.py")
    )
    return {str(p.relative_to(_ROOT)): p.read_text(encoding="utf-8") for p in paths}


def _naming(name: str, files: dict[str, str]) -> list[str]:
    """Return the test files naming ``name`` (or, lowercase, its function) as a word."""
    word = re.compile(rf"\b({re.escape(name)}|{re.escape(name.lower())})\b")
    return [
        path.replace("packages/", "").replace("/tests/", "/")
        for path, text in files.items()
        if word.search(text)
    ]


def op_rows() -> tuple[list[str], list[list[Any]]]:
    """Return the header and one row per Op and scalar op class."""
    from kiln_compile.testing import graph_op_classes, graph_scalar_op_classes

    dispatchers = _dispatchers()
    tracked = _rewrites_tracking()
    files = _test_files()
    classes = sorted(graph_op_classes(), key=lambda c: c.__name__)
    classes += sorted(graph_scalar_op_classes(), key=lambda c: c.__name__)
    rows = []
    for cls in classes:
        rewrites = sorted(set(tracked.get(cls, [])))
        row: list[Any] = [
            nodes.literal(cls.__name__, cls.__name__),
            nodes.literal(cls.__module__, cls.__module__),
        ]
        for _, dispatcher in dispatchers:
            where = _implementation(dispatcher, cls)
            row.append(nodes.literal(where, where) if where else "")
        row.append(", ".join(rewrites))
        row.append(", ".join(_naming(cls.__name__, files)))
        rows.append(row)
    header = ["op", "defined in", *(c for c, _ in dispatchers), "rewrites tracking it", "tests"]
    return header, rows


class OpsDirective(KilnDirective):
    """``kiln-ops``: the op map."""

    def build(self) -> list[nodes.Node]:
        """Return the op-map table."""
        header, rows = op_rows()
        widths = [12, 16] + [18] * (len(header) - 4) + [16, 20]
        return [table(header, rows, widths)]


def setup(app: Sphinx) -> None:
    """Register the directive."""
    app.add_directive("kiln-ops", OpsDirective)
