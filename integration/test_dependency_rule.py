"""The dependency rule of DESIGN.md, read from every import in ``packages/*/src``.

Imports point one way (``kiln_graph -> kiln_random -> kiln_rewrite -> kiln_compile ->``
the linkers; ``kiln_model`` on graph, random, rewrite and compile; ``kiln_samplers`` on no
kiln package; the umbrella ``kiln`` on everything and nothing on it), and packages talk
through public modules only: no package imports another's ``_private`` module or name.
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
