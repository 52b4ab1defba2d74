"""Tables and the pipeline diagram, generated from kiln's registries at build time.

The phases and rewrites come from :mod:`kiln_rewrite` (``PHASES``, ``PHASE_RULES``,
``db``), the backends from :mod:`kiln_compile`'s linker registry (the ``kiln.linkers``
entry points, and ``KNOWN_BACKENDS`` for those not installed), the NUTS engines from
``kiln._engines.ENGINES``. What each row says about a backend or an engine is kept on
the code it describes: a linker class's ``doc`` (:class:`kiln_compile.LinkerDoc`), an
engine entry's ``note``. A missing one fails the build with a message naming it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import re
import shutil
import subprocess
from importlib.metadata import entry_points
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

from kiln_docs._util import DocsError, KilnDirective, inline, table


@dataclasses.dataclass(frozen=True)
class Backend:
    """One row of the backends table."""

    name: str
    package: str
    installed: bool
    default: bool
    rewrite_tags: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    doc: Any = None  # kiln_compile.LinkerDoc when installed


@dataclasses.dataclass(frozen=True)
class Engine:
    """One row of the NUTS-engines table."""

    name: str
    package: str | None
    installed: bool
    default: bool
    backend: str | None
    note: str


def backends() -> list[Backend]:
    """Return every backend kiln knows or has installed, ``KNOWN_BACKENDS`` order first."""
    from kiln_compile import KNOWN_BACKENDS, LinkerDoc, get_linker
    from kiln_compile._linkers import resolve_linker_name

    registered = {ep.name: ep for ep in entry_points(group="kiln.linkers")}
    default = resolve_linker_name("auto", warn=False)
    names = list(KNOWN_BACKENDS) + sorted(set(registered) - set(KNOWN_BACKENDS))
    rows = []
    for name in names:
        if name not in registered:
            rows.append(Backend(name, KNOWN_BACKENDS[name], installed=False, default=False))
            continue
        ep = registered[name]
        try:
            linker = get_linker(name)
        except Exception as exc:
            raise DocsError(
                f"the linker of backend {name!r} ({ep.value}, entry point of "
                f"{ep.dist.name if ep.dist else '?'}) cannot be loaded: {exc!r}"
            ) from exc
        cls = type(linker)
        where = f"{cls.__module__}.{cls.__qualname__}"
        doc = getattr(linker, "doc", None)
        if not isinstance(doc, LinkerDoc):
            raise DocsError(
                f"the linker {where} (backend {name!r}) has no `doc`: add the class attribute "
                "`doc = kiln_compile.LinkerDoc(compiles=..., system_compiler=..., cache=..., "
                "note=...)`; the docs' backends table is generated from it"
            )
        empty = [f.name for f in dataclasses.fields(doc) if not str(getattr(doc, f.name)).strip()]
        if empty:
            raise DocsError(f"the linker {where}: `doc` has empty fields {empty}")
        rows.append(
            Backend(
                name,
                ep.dist.name if ep.dist else KNOWN_BACKENDS.get(name, "?"),
                installed=True,
                default=name == default,
                rewrite_tags=tuple(getattr(linker, "rewrite_tags", ())),
                excluded=tuple(getattr(linker, "excluded_rewrites", ())),
                doc=doc,
            )
        )
    return rows


def engines() -> list[Engine]:
    """Return the NUTS engines ``kiln.sample(nuts_sampler=...)`` takes."""
    import kiln
    from kiln._engines import ENGINES

    default = inspect.signature(kiln.sample).parameters["nuts_sampler"].default
    rows = []
    for name, entry in ENGINES.items():
        note = getattr(entry, "note", "")
        if not note.strip():
            raise DocsError(
                f"the NUTS engine {name!r} in kiln._engines.ENGINES has no note: give its "
                "EngineEntry a `note=` (one or two sentences); the docs' engines table is "
                "generated from it"
            )
        installed = entry.package is None or importlib.util.find_spec(entry.package) is not None
        rows.append(
            Engine(
                name,
                entry.package,
                installed,
                name == default,
                getattr(entry, "backend", None),
                note,
            )
        )
    return rows


def phases() -> list[tuple[str, tuple[str, ...], list[Any]]]:
    """Return ``(phase, the phases whose rules it also applies, its rewrites)`` in order."""
    from kiln_rewrite import PHASE_RULES, PHASES, db

    return [
        (
            phase,
            tuple(p for p in PHASE_RULES[phase] if p != phase),
            [r for r in db if r.phase == phase],
        )
        for phase in PHASES
    ]


def load_backend_rewrites() -> None:
    """Import every installed linker, so the rewrites its package registers are in ``db``."""
    from kiln_compile import get_linker

    for ep in entry_points(group="kiln.linkers"):
        try:
            get_linker(ep.name)
        except Exception as exc:
            raise DocsError(
                f"the linker of backend {ep.name!r} ({ep.value}) cannot be loaded: {exc!r}"
            ) from exc


# --- the diagram -------------------------------------------------------------------------


def _q(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _in_order(names: list[str]) -> str:
    """Return invisible edges that keep ``names`` left to right in their rank."""
    if len(names) < 2:
        return ""
    return "    " + " -> ".join(_q(n) for n in names) + " [style=invis];"


def pipeline_dot() -> str:
    """Return the Graphviz source of the pipeline, from the registries."""
    load_backend_rewrites()
    phase_rows = phases()
    backend_rows = backends()
    engine_rows = engines()
    lines = [
        "digraph kiln_pipeline {",
        '  graph [rankdir=TB, compound=true, id="kp", fontname="Helvetica", fontsize=12,'
        ' nodesep=0.2, ranksep=0.4, bgcolor="transparent"];',
        '  node [shape=box, style="rounded,filled", fillcolor="#f3f5f7", color="#5b6b7a",'
        ' fontname="Helvetica", fontsize=11, margin="0.12,0.06"];',
        '  edge [color="#5b6b7a", arrowsize=0.7];',
        '  model [label="model\\nkiln_model: Model, distributions, Data"];',
        '  graph_ir [label="graph\\nkiln_graph: log-density, gradient, draws"];',
        '  prepare [label="prepare\\nfix inputs, outputs, updates"];',
        "  subgraph cluster_stage1 {",
        '    label="Stage 1: kiln_rewrite (result cached on disk)"; style="rounded";'
        ' color="#8a9aa9";',
    ]
    names = [p for p, _, _ in phase_rows]
    for phase, extra, rewrites in phase_rows:
        label = f"{phase}\n{len(rewrites)} rewrite{'s' if len(rewrites) != 1 else ''}"
        if extra:
            label += f"\n+ {', '.join(extra)}"
        lines.append(f"    {_q('phase_' + phase)} [label={_q(label)}];")
    lines.append("    { rank=same; " + " ".join(_q("phase_" + p) + ";" for p in names) + " }")
    lines.append("    " + " -> ".join(_q("phase_" + p) for p in names) + ";")
    lines += [
        "  }",
        "  subgraph cluster_stage2 {",
        '    label="Stage 2: a linker, chosen by backend= or the mode";'
        ' style="rounded"; color="#8a9aa9";',
    ]
    for b in backend_rows:
        if b.installed:
            label = f"{b.name}{' (default)' if b.default else ''}\n{b.package}"
            lines.append(f"    {_q('backend_' + b.name)} [label={_q(label)}];")
        else:
            label = f"{b.name}\nnot installed"
            lines.append(
                f"    {_q('backend_' + b.name)} [label={_q(label)},"
                ' style="rounded,dashed", fontcolor="#7a8793", fillcolor="white"];'
            )
    lines.append(
        "    { rank=same; " + " ".join(_q("backend_" + b.name) + ";" for b in backend_rows) + " }"
    )
    lines.append(_in_order(["backend_" + b.name for b in backend_rows]))
    lines += [
        "  }",
        '  callable [label="callable\\nkiln_compile.Function: arrays in, arrays out"];',
        "  subgraph cluster_samplers {",
        '    label="sampler: a NUTS engine, chosen by nuts_sampler="; style="rounded";'
        ' color="#8a9aa9";',
    ]
    for e in engine_rows:
        label = f"{e.name}{' (default)' if e.default else ''}"
        if e.backend:
            label += f"\nneeds backend {e.backend}"
        lines.append(f"    {_q('engine_' + e.name)} [label={_q(label)}];")
    lines.append(
        "    { rank=same; " + " ".join(_q("engine_" + e.name) + ";" for e in engine_rows) + " }"
    )
    lines.append(_in_order(["engine_" + e.name for e in engine_rows]))
    first_b = _q("backend_" + next(b.name for b in backend_rows if b.default or b.installed))
    first_e = _q("engine_" + engine_rows[0].name)
    lines += [
        "  }",
        '  results [label="results\\nArviZ DataTree"];',
        "  model -> graph_ir -> prepare;",
        f"  prepare -> {_q('phase_' + names[0])} [lhead=cluster_stage1];",
        f"  {_q('phase_' + names[-1])} -> {first_b} [ltail=cluster_stage1, lhead=cluster_stage2];",
        f"  {first_b} -> callable [ltail=cluster_stage2];",
        f"  callable -> {first_e} [lhead=cluster_samplers];",
        f"  {first_e} -> results [ltail=cluster_samplers];",
        "}",
    ]
    return "\n".join(lines)


def render_svg(dot_source: str) -> str:
    """Return ``dot_source`` rendered by Graphviz as an SVG element (no XML prolog)."""
    dot = shutil.which("dot")
    if dot is None:
        raise DocsError(
            "Graphviz's `dot` is not on PATH; the pipeline diagram is rendered by it at build "
            "time: install it (Debian: apt-get install graphviz)"
        )
    done = subprocess.run(
        [dot, "-Tsvg"], input=dot_source, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise DocsError(f"dot failed on the pipeline diagram: {done.stderr.strip()}")
    svg = done.stdout
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<!--.*?-->\n?", "", svg, flags=re.S)
    return svg.replace(
        "<svg ", '<svg role="img" aria-label="the kiln pipeline" class="kiln-pipeline" ', 1
    )


class PipelineDirective(KilnDirective):
    """``kiln-pipeline``: the pipeline diagram, generated from the registries."""

    has_content = False

    def build(self) -> list[nodes.Node]:
        """Return the diagram as inline SVG (HTML) or its Graphviz source (other builders)."""
        source = pipeline_dot()
        figure = nodes.figure(classes=["kiln-pipeline-figure"])
        if self.env.app.builder.format == "html":
            figure.append(nodes.raw("", render_svg(source), format="html"))
        else:
            figure.append(nodes.literal_block(source, source))
        caption = (
            "Generated at build time from kiln_rewrite.PHASES, the rewrite database, the "
            "kiln.linkers entry points (dashed: known but not installed) and "
            "kiln._engines.ENGINES."
        )
        figure.append(nodes.caption(caption, caption))
        return [figure]


class PhasesDirective(KilnDirective):
    """``kiln-phases``: one table per phase of its registered rewrites."""

    def build(self) -> list[nodes.Node]:
        """Return a rubric, a sentence and a table per phase."""
        load_backend_rewrites()
        out: list[nodes.Node] = []
        for i, (phase, extra, rewrites) in enumerate(phases(), 1):
            rubric = nodes.rubric("", f"{i}. {phase}", ids=[f"phase-{phase}"])
            out.append(rubric)
            text = f"{len(rewrites)} registered rewrite{'s' if len(rewrites) != 1 else ''}."
            if extra:
                text += f" This phase also applies the rules of: {', '.join(extra)}."
            if phase == "merge":
                text += (
                    " Interning shares identical subexpressions and equal constants as the "
                    "graph is built, so there is nothing left to merge."
                )
            out.append(nodes.paragraph(text, text))
            if not rewrites:
                continue
            rows = []
            for r in rewrites:
                tags = ", ".join(sorted(t for t in r.tags if t != phase))
                rows.append(
                    [
                        nodes.literal(r.name, r.name),
                        "global" if r.is_global else "local",
                        tags,
                        [nodes.literal(r.identity, r.identity)],
                    ]
                )
            out.append(table(["rewrite", "kind", "tags", "identity"], rows, [24, 6, 14, 56]))
        return out


class BackendsDirective(KilnDirective):
    """``kiln-backends``: the backends, from the linker registry and ``KNOWN_BACKENDS``."""

    def build(self) -> list[nodes.Node]:
        """Return the backends table."""
        rows = []
        for b in backends():
            name = [nodes.literal(b.name, b.name)]
            if b.default:
                name.append(nodes.Text(" (default)"))
            if not b.installed:
                rows.append([name, b.package, "not installed", "", "", ""])
                continue
            note = b.doc.note
            if b.rewrite_tags:
                note += f" Own rewrites: tag `{'`, `'.join(b.rewrite_tags)}`."
            if b.excluded:
                note += f" Never runs: `{'`, `'.join(b.excluded)}`."
            rows.append(
                [name, b.package, b.doc.compiles, b.doc.system_compiler, b.doc.cache, inline(note)]
            )
        header = [
            "backend",
            "package",
            "how Stage 2 compiles",
            "system compiler?",
            "cache",
            "notes",
        ]
        return [table(header, rows, [8, 10, 24, 10, 18, 30])]


class EnginesDirective(KilnDirective):
    """``kiln-engines``: the NUTS engines, from ``kiln._engines.ENGINES``."""

    def build(self) -> list[nodes.Node]:
        """Return the engines table."""
        rows = []
        for e in engines():
            name = [nodes.literal(e.name, e.name)]
            if e.default:
                name.append(nodes.Text(" (default)"))
            package = e.package or "none (part of kiln)"
            if not e.installed:
                package += " (not installed here)"
            backend = f"`{e.backend}` only" if e.backend else "any"
            rows.append([name, package, backend, e.note])
        return [table(["nuts_sampler=", "package", "backend", "notes"], rows, [10, 16, 10, 64])]


def setup(app: Sphinx) -> None:
    """Register the directives."""
    app.add_directive("kiln-pipeline", PipelineDirective)
    app.add_directive("kiln-phases", PhasesDirective)
    app.add_directive("kiln-backends", BackendsDirective)
    app.add_directive("kiln-engines", EnginesDirective)
