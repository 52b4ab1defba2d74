"""``kiln-api``: a package's public API, from what its ``__init__`` re-exports.

Every public name of the module (not starting with ``_``, not a module) whose object is
defined in the package itself is documented with autodoc, under its public name; a name
re-exported from another kiln package is listed with a link to where it is documented.
Use in a reST file (the generated autodoc directives are reST)::

    .. kiln-api:: kiln_graph
"""

from __future__ import annotations
import __future__

import importlib
import inspect
import sys
import types
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.nodes import nested_parse_with_titles

from kiln_docs._util import DocsError, KilnDirective

_SIMPLE = (str, int, float, bool, tuple, frozenset)


def _owner_package(obj: Any) -> str | None:
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        return None
    return module


def public_names(module: types.ModuleType) -> list[str]:
    """Return the module's public names, in the order its ``__init__`` binds them."""
    names = []
    for name, obj in vars(module).items():
        if name.startswith("_") or isinstance(obj, types.ModuleType | __future__._Feature):
            continue
        names.append(name)
    return names


def _belongs(obj: Any, package: str) -> bool:
    owner = _owner_package(obj)
    if owner is None:  # data: documented where it is bound
        return True
    return owner == package or owner.startswith(package + ".")


def _data_comment(package: str, attr: str) -> list[str]:
    """Return the ``#:`` comment documenting ``attr`` in one of ``package``'s modules."""
    for name, module in sorted(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        try:
            docs = ModuleAnalyzer.for_module(name).find_attr_docs()
        except PycodeError:
            continue
        if ("", attr) in docs:
            return [line for line in docs[("", attr)] if line.strip()]
    return []


def _data(full: str, obj: Any, package: str) -> list[str]:
    lines = [f".. py:data:: {full}"]
    if isinstance(obj, _SIMPLE) and len(repr(obj)) <= 80:
        lines.append(f"   :value: {obj!r}")
    else:
        lines.append(
            f"   :type: {type(obj).__module__.replace('builtins', '').lstrip('.')}"
            f"{'.' if type(obj).__module__ != 'builtins' else ''}{type(obj).__qualname__}"
        )
    lines.append("")
    lines += [f"   {line}" for line in _data_comment(package, full.rsplit(".", 1)[1])]
    return [*lines, ""]


def _directive(full: str, obj: Any) -> list[str]:
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return [f".. autoexception:: {full}", ""]
        return [f".. autoclass:: {full}", "   :members:", ""]
    if (
        inspect.isfunction(obj)
        or inspect.isbuiltin(obj)
        or callable(obj)
        and hasattr(obj, "__wrapped__")
    ):
        return [f".. autofunction:: {full}", ""]
    return _data(full, obj, full.split(".")[0])


class ApiDirective(KilnDirective):
    """Document the public names of one module (see the module docstring)."""

    required_arguments = 1

    def build(self) -> list[nodes.Node]:
        """Return the autodoc output for the module's own names and a list of re-exports."""
        name = self.arguments[0]
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise DocsError(f"kiln-api: cannot import {name}: {exc}") from exc
        package = name.split(".")[0]
        own: list[str] = []
        reexported: list[tuple[str, str]] = []
        parent = importlib.import_module(package)
        for attr in public_names(module):
            obj = getattr(module, attr)
            if module is not parent and getattr(parent, attr, None) is obj:
                reexported.append((attr, f"{package}.{attr}"))  # documented on the package
            elif _belongs(obj, package) or name == package and _owner_package(obj) is None:
                own.append(attr)
            else:
                owner = _owner_package(obj) or "?"
                top = owner.split(".")[0]
                target = getattr(obj, "__qualname__", attr)
                reexported.append((attr, f"{top}.{target}" if top != "?" else attr))
        lines = [f".. automodule:: {name}", "   :no-members:", ""]
        for attr in own:
            lines += _directive(f"{name}.{attr}", getattr(module, attr))
        if reexported:
            lines += [".. rubric:: Also available here (documented elsewhere)", ""]
            for attr, target in reexported:
                lines.append(f"- ``{name}.{attr}``: :py:obj:`{target}`")
            lines.append("")
        container = nodes.section()
        nested_parse_with_titles(
            self.state, StringList(lines, source=f"<kiln-api {name}>"), container
        )
        return list(container.children)


def setup(app: Sphinx) -> None:
    """Register the directive."""
    app.add_directive("kiln-api", ApiDirective)
