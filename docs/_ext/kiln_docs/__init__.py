"""kiln's Sphinx extension: the parts of the docs generated from the code at build time.

- ``kiln-pipeline``: the pipeline diagram (Graphviz, rendered to inline SVG by ``dot``)
  from the rewrite database's phase list, the installed linkers and the NUTS engines.
- ``kiln-phases``: the table of phases and their rewrites (name, kind, tags, identity).
- ``kiln-backends`` / ``kiln-engines``: the backends (linker registry and
  ``KNOWN_BACKENDS``) and the NUTS engines (``kiln._engines.ENGINES``), each row's
  text taken from the ``doc`` / ``note`` kept next to the code it describes.
- ``kiln-run``: run a script from ``docs/_scripts`` and show its output.
- ``kiln-bench``: tables and a plot of the latest ``nox -s bench`` result.
- ``kiln-api``: the public API of one package (autodoc of its re-exported names).
- ``kiln-ops``: the op map (each Op's module, backend implementations, rewrites).
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

from kiln_docs import api, bench, ops, registries, run


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directives and the build-time checks."""
    registries.setup(app)
    run.setup(app)
    bench.setup(app)
    api.setup(app)
    ops.setup(app)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True}
