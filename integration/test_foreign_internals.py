"""One wall per foreign library: private names stay in the compatibility modules.

Private names of Numba, JAX and nutpie are used only in each package's compatibility
module (``_numba_internals``, ``_jax_internals``, ``_nutpie_internals``), which states
the versions it was checked on.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The modules of each foreign library that are its public API (anything deeper is not).
PUBLIC = {
    "numba": {"numba", "numba.types", "numba.typed", "numba.extending"},
    "jax": {"jax", "jax.numpy", "jax.random", "jax.scipy", "jax.scipy.special", "jax.lax",
            "jax.nn", "jax.lax.linalg", "jax.monitoring", "jax.tree_util", "jax.scipy.linalg",
            "jax.scipy.stats"},
    "nutpie": {"nutpie", "nutpie.compiled_pyfunc"},  # (from_pyfunc: nutpie's documented API)
}  # fmt: skip
#: Attributes only Numba's internals have (a dispatcher's cache, a library's LLVM module).
PRIVATE_ATTRIBUTES = {
    "_cache", "_get_compiled_object", "_final_module", "c_helpers", "_compile_for_args",
    "get_call_template", "_load_index", "fndesc", "_lib",
}  # fmt: skip


def _is_wall(path: Path) -> bool:
    return path.name.endswith("_internals.py")


def _violations(source: str, rel: str) -> list[str]:
    """Return each use of a foreign library's private name in ``source`` (file ``rel``)."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
            modules += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for module in modules:
            top = module.split(".")[0]
            if top in PUBLIC and module not in PUBLIC[top]:
                found.append(f"{rel}:{node.lineno}: imports {module}")
        if isinstance(node, ast.Attribute):
            base = node.value
            private_of_library = (
                isinstance(base, ast.Name)
                and base.id in PUBLIC
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            )
            if private_of_library or node.attr in PRIVATE_ATTRIBUTES:
                found.append(f"{rel}:{node.lineno}: uses .{node.attr}")
    return found


def test_private_names_of_foreign_libraries_stay_behind_their_wall() -> None:
    bad = []
    for path in sorted(ROOT.glob("packages/*/src/*/**/*.py")):
        if not _is_wall(path):
            bad += _violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not bad, "private names of Numba/JAX/nutpie outside a *_internals.py:\n" + "\n".join(bad)


def test_the_walls_state_the_versions_they_were_checked_on() -> None:
    walls = sorted(p for p in ROOT.glob("packages/*/src/*/*.py") if _is_wall(p))
    names = {p.name for p in walls}
    assert names >= {"_numba_internals.py", "_jax_internals.py", "_nutpie_internals.py"}
    for path in walls:
        text = path.read_text(encoding="utf-8")
        assert "CHECKED" in text or "SUPPORTED" in text, path


def test_the_checker_finds_private_uses() -> None:
    source = (
        "from numba.core import caching\nimport numba\nf = numba._helperlib\n"
        "d._cache = 1\nfrom jax.experimental import x\nimport numba.typed\n"
    )
    found = "\n".join(_violations(source, "m.py"))
    assert "m.py:1: imports numba.core" in found and "m.py:3: uses ._helperlib" in found
    assert "m.py:4: uses ._cache" in found and "imports jax.experimental" in found
    assert "numba.typed" not in found


_UNSUPPORTED_NUMBA = textwrap.dedent(
    """
    import importlib.metadata, json, warnings
    real = importlib.metadata.version
    importlib.metadata.version = lambda name: "0.99.0" if name == "numba" else real(name)
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        import numpy as np
        import kiln_compile as kc
        import kiln_graph.tensor as kt
        import kiln_numba
        from kiln_numba import _numba_cache_internals, _numba_internals, _shared_library, native

        x = kt.vector("x")
        f = kc.function([x], kt.sum(kt.exp(x) * 2.0), mode=kc.Mode(linker="numba"))
        value = float(f(np.array([0.0, 1.0])))
        jit = f.thunk.jit_fn
    print(json.dumps({
        "value": value,
        "warnings": [w.category.__name__ for w in caught
                     if issubclass(w.category, kiln_numba.NumbaVersionWarning)],
        "usable": _numba_internals.usable(),
        "shared_library": _shared_library.supported(),
        "checked_cache": _numba_cache_internals.cache_file_stats(jit) is not None,
    }))
    """
)


def test_an_unsupported_numba_warns_once_and_compiles_through_public_api(tmp_path: Path) -> None:
    import json
    import os

    pytest.importorskip("numba")
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path), KILN_FLAGS="shared_library=true")
    done = subprocess.run(
        [sys.executable, "-c", _UNSUPPORTED_NUMBA], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["value"] == pytest.approx(2.0 * (1.0 + 2.718281828459045), rel=1e-14)
    assert out["warnings"] == ["NumbaVersionWarning"]
    assert out["usable"] is False and out["shared_library"] is False
    assert out["checked_cache"] is False  # Numba's own cache


def test_version_ranges() -> None:
    from kiln_numba._numba_internals import version_problem
    from kiln_samplers._nutpie_internals import supported

    assert version_problem("0.68.1") is None and version_problem("0.68.0rc1") is None
    assert "0.69.0" in (version_problem("0.69.0") or "")
    assert "0.67.2" in (version_problem("0.67.2") or "")
    assert supported("0.16.11") and supported("0.16.20") and not supported("0.16.10")
    assert not supported("0.17.0")
