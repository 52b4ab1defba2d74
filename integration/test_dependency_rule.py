"""The dependency rule of DESIGN.md, read from every import in ``packages/*/src``.

Imports point one way (``kiln_graph -> kiln_random -> kiln_rewrite -> kiln_compile ->``
the linkers; ``kiln_model`` on graph, random, rewrite and compile; ``kiln_samplers`` on no
kiln package; the umbrella ``kiln`` on everything and nothing on it), and packages talk
through public modules only: no package imports another's ``_private`` module or name.
Inside a package the modules are layered: no import cycle, counting imports inside
functions too (only ``if TYPE_CHECKING:`` imports, which never run, are left out).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_CORE = {"kiln_graph", "kiln_random", "kiln_rewrite", "kiln_compile"}
#: The kiln packages each package may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "kiln_graph": set(),
    "kiln_random": {"kiln_graph"},
    "kiln_rewrite": {"kiln_graph", "kiln_random"},
    "kiln_compile": {"kiln_graph", "kiln_random", "kiln_rewrite"},
    "kiln_vm": _CORE,
    "kiln_numba": _CORE,
    "kiln_c": _CORE,
    "kiln_jax": _CORE,
    "kiln_torch": _CORE,
    "kiln_mlx": _CORE,
    "kiln_model": _CORE,
    "kiln_samplers": set(),
}


def _imports() -> list[tuple[str, str, int, str, list[str]]]:
    """Return ``(package, file, line, module, names)`` of every absolute kiln import."""
    out = []
    for path in sorted(ROOT.glob("packages/*/src/*/**/*.py")):
        package = path.relative_to(ROOT).parts[3]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found = [(node.module, [a.name for a in node.names])]
            elif isinstance(node, ast.Import):
                found = [(a.name, []) for a in node.names]
            else:
                continue
            for module, names in found:
                if module.split(".")[0].startswith("kiln"):
                    rel = str(path.relative_to(ROOT))
                    out.append((package, rel, node.lineno, module, names))
    return out


def test_the_imports_are_found() -> None:
    packages = {p for p, *_ in _imports()}
    assert {"kiln", "kiln_graph", "kiln_model", "kiln_numba"} <= packages


def test_no_package_imports_a_private_module_or_name_of_another() -> None:
    bad = []
    for package, path, line, module, names in _imports():
        top, *rest = module.split(".")
        if top == package:
            continue
        parts = [*rest, *names]
        private = [p for p in parts if p.startswith("_") and not p.startswith("__")]
        if private:
            bad.append(f"{path}:{line}: from {module} import {', '.join(names)}")
    assert not bad, "private imports across packages (use a public module):\n" + "\n".join(bad)


def test_imports_follow_the_dependency_rule() -> None:
    bad = []
    for package, path, line, module, _ in _imports():
        top = module.split(".")[0]
        if top == package or package == "kiln":
            continue
        if package not in ALLOWED:
            bad.append(f"{path}: package {package} is not in ALLOWED (add it with its layer)")
        elif top not in ALLOWED[package]:
            bad.append(f"{path}:{line}: {package} imports {top}, which it may not")
    assert not bad, "imports against the dependency rule of DESIGN.md:\n" + "\n".join(bad)


def _modules() -> dict[str, Path]:
    """Return every module of ``packages/*/src`` by its dotted name."""
    out = {}
    for path in sorted(ROOT.glob("packages/*/src/*/**/*.py")):
        parts = list(path.relative_to(ROOT).parts[3:])
        parts[-1] = parts[-1].removesuffix(".py")
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.Module, name: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """Return ``(module, names)`` of every import that can run, relative ones resolved."""
    out: list[tuple[str, list[str]]] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")[: None if is_package else -1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            out.append((base, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _package_import_graph() -> dict[str, set[str]]:
    """Map each module to the modules of its own package that it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps: set[str] = set()
        for module, names in _runtime_imports(tree, name, path.name == "__init__.py"):
            submodules = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules]
            deps.update(submodules)
            if (len(submodules) < len(names) or not names) and module in modules:
                deps.add(module)  # a name of the module (or the package) itself
        top = name.split(".")[0]
        graph[name] = {d for d in deps if d.split(".")[0] == top and d != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_the_import_graph_is_read() -> None:
    graph = _package_import_graph()
    assert "kiln_graph._elemwise" in graph["kiln_graph._math"]
    assert "kiln_numba._funcify" in graph["kiln_numba._outline"]


def test_no_import_cycle_inside_a_package() -> None:
    cycles = _cycles(_package_import_graph())
    assert not cycles, "import cycles (layer the modules: definitions below their users):\n" + (
        "\n".join(" <-> ".join(c) for c in cycles)
    )
