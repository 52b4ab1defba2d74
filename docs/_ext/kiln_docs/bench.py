"""``kiln-bench``: the latest benchmark results as tables and a plot, at build time.

Reads the newest ``benchmarks/results/<prefix>-<UTC stamp>.json`` (written by
``nox -s bench``; ``peer``, ``peer-sampling`` and ``growth`` files too when asked). The JSON's
nested sections become tables (one row per first-level key, one column per numeric
leaf), the microbenchmarks' medians a bar chart made with matplotlib. With no result
file the page says so: numbers are never invented.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx

from kiln_docs import growth
from kiln_docs._util import DocsError, KilnDirective, table

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
_META = ("kiln_version", "python", "machine", "repeats")
MAX_COLUMNS = 7
#: The nox session that writes a prefix's files, where it is not the prefix itself.
SESSIONS = {"growth": "peer_sampling"}


def latest(prefix: str) -> Path | None:
    """Return the newest ``<prefix>-<stamp>.json`` in benchmarks/results, or None."""
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d{{8}}T\d{{6}}Z)\.json$")
    found = sorted(p for p in RESULTS.glob(f"{prefix}-*.json") if pattern.match(p.name))
    return found[-1] if found else None


def _leaves(value: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], float]]:
    """Return the numeric leaves of a nested dict as ``(path, number)`` (lists skipped)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [(path, float(value))]
    if isinstance(value, dict):
        if "median_s" in value and isinstance(value["median_s"], int | float):
            return [((*path, "median_s"), float(value["median_s"]))]
        out = []
        for k, v in value.items():
            out += _leaves(v, (*path, str(k)))
        return out
    return []


def _rows(
    section: dict[str, Any], depth: int, prefix: str = ""
) -> dict[str, list[tuple[tuple[str, ...], float]]]:
    """Return ``{row label: leaves}``, rows ``depth`` levels down (``M1.kiln.cold``)."""
    rows: dict[str, list[tuple[tuple[str, ...], float]]] = {}
    direct = []
    for key, value in section.items():
        label = f"{prefix}{key}"
        if (
            depth > 1
            and isinstance(value, dict)
            and any(isinstance(v, dict) for v in value.values())
        ):
            rows.update(_rows(value, depth - 1, label + "."))
        elif isinstance(value, dict):
            rows[label] = _leaves(value)
        else:
            direct += [((key, *p), v) for p, v in _leaves(value)]
    if direct:
        rows[prefix.rstrip(".") or "(top)"] = direct
    return {k: v for k, v in rows.items() if v}


Leaves = list[tuple[tuple[str, ...], float]]


def _groups(rows: dict[str, Leaves]) -> list[tuple[list[tuple[str, ...]], dict[str, Leaves]]]:
    """Split rows into tables: a row joins the first table whose columns include its own."""
    groups: list[tuple[list[tuple[str, ...]], dict[str, Leaves]]] = []
    order = sorted(rows, key=lambda k: -len(rows[k]))
    for key in order:
        paths = [p for p, _ in rows[key]]
        for columns, members in groups:
            if set(paths) <= set(columns):
                members[key] = rows[key]
                break
        else:
            groups.append((paths, {key: rows[key]}))
    for _, members in groups:  # keep the rows in the file's order
        ordered = {k: members[k] for k in rows if k in members}
        members.clear()
        members.update(ordered)
    return groups


def fmt(path: tuple[str, ...], value: float) -> str:
    """Format a number: seconds (a path part ending in ``_s``) with a unit, else 4 digits."""
    if math.isnan(value):
        return "nan"
    if any(p.endswith("_s") and not p.endswith("_per_s") for p in path):
        for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
            if abs(value) >= scale or unit == "ns":
                return f"{value / scale:.3g} {unit}"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def section_tables(name: str, section: Any) -> list[nodes.Node]:
    """Return the tables of one section: wide (rows x leaves) when narrow enough, else long."""
    if not isinstance(section, dict):
        return []
    out: list[nodes.Node] = [nodes.rubric(name, name)]
    if all(not isinstance(v, dict) for v in section.values()) or any(
        "median_s" in v for v in section.values() if isinstance(v, dict)
    ):
        leaves = _leaves(section)
        body = [[".".join(p), fmt(p, v)] for p, v in leaves]
        out.append(table(["benchmark", "value"], body, [60, 20]))
        return out
    rows1 = _rows(section, 1)
    n_columns = len({p for leaves in rows1.values() for p, _ in leaves})
    if n_columns > MAX_COLUMNS and len(rows1) <= MAX_COLUMNS:
        # Few rows, many measures: one row per measure, one column per key (M1, M2...).
        measures: list[tuple[str, ...]] = []
        for leaves in rows1.values():
            measures += [p for p, _ in leaves if p not in measures]
        got = {k: dict(leaves) for k, leaves in rows1.items()}
        body = [
            [".".join(m), *[fmt(m, got[k][m]) if m in got[k] else "-" for k in rows1]]
            for m in measures
        ]
        out.append(table(["measure", *rows1], body, [40, *[12] * len(rows1)]))
        return out
    for depth in (1, 2, 3):
        groups = _groups(_rows(section, depth))
        if all(len(columns) <= MAX_COLUMNS for columns, _ in groups):
            for columns, rows in groups:
                body = []
                for key, leaves in rows.items():
                    got = dict(leaves)
                    cells = [fmt(c, got[c]) if c in got else "-" for c in columns]
                    body.append([key, *cells])
                out.append(table(["", *[".".join(c) for c in columns]], body))
            return out
    rows = _rows(section, 1)
    body = [[k, ".".join(p), fmt(p, v)] for k, leaves in rows.items() for p, v in leaves]
    out.append(table(["", "measure", "value"], body, [12, 60, 20]))
    return out


def bars(report: dict[str, Any]) -> list[tuple[str, list[tuple[str, float]]]]:
    """Return the panels of the plot: the microbenchmarks' and Stage 1's median times."""
    panels = []
    results = report.get("results")
    if isinstance(results, dict):
        items = [
            (k, float(v["median_s"]))
            for k, v in results.items()
            if isinstance(v, dict) and isinstance(v.get("median_s"), int | float)
        ]
        if items:
            panels.append(("microbenchmarks (median)", items))
    stage1 = report.get("stage1")
    if isinstance(stage1, dict):
        items = [
            (k, float(v["rewrite_median_s"]))
            for k, v in stage1.items()
            if isinstance(v, dict) and isinstance(v.get("rewrite_median_s"), int | float)
        ]
        if items:
            panels.append(("Stage 1 rewrite of each model (median)", items))
    return panels


def plot(report: dict[str, Any], target: Path) -> bool:
    """Draw :func:`bars` as horizontal bar charts (log scale) into ``target``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = bars(report)
    if not panels:
        return False
    heights = [0.4 * len(items) + 1.0 for _, items in panels]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(7, sum(heights)), dpi=100, height_ratios=heights, squeeze=False
    )
    for ax, (title, items) in zip(axes[:, 0], panels, strict=True):
        ax.barh([k for k, _ in items], [v * 1e6 for _, v in items], color="#5b7fa3")
        ax.set_xscale("log")
        ax.set_xlabel("time (us, log scale)")
        ax.set_title(title, fontsize=10)
        ax.invert_yaxis()
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, format="png")
    plt.close(fig)
    return True


class BenchDirective(KilnDirective):
    """Tables (and for ``bench``, a plot) of the newest result file of a prefix."""

    required_arguments = 1  # the prefix: bench, peer, peer-sampling
    option_spec = {"plot": directives.flag}

    def build(self) -> list[nodes.Node]:
        """Return the tables, or a paragraph saying there is no result file."""
        prefix = self.arguments[0]
        path = latest(prefix)
        self.env.note_dependency(str(RESULTS))
        if path is None:
            text = (
                f"No {prefix}-*.json result file is in benchmarks/results/ in this build "
                "(the folder is not committed). Run the benchmarks, then rebuild the docs: "
            )
            session = SESSIONS.get(prefix, prefix.replace("-", "_"))
            cmd = f".nox-bootstrap/bin/nox -s {session} docs"
            return [nodes.paragraph("", "", nodes.Text(text), nodes.literal(cmd, cmd))]
        self.env.note_dependency(str(path))
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DocsError(f"kiln-bench: cannot read {path}: {exc}") from exc
        out: list[nodes.Node] = []
        meta = ", ".join(f"{k} {report[k]}" for k in _META if k in report)
        text = f"From {path.name}" + (f" ({meta})." if meta else ".")
        out.append(nodes.paragraph(text, text))
        draw = growth.plot if prefix == "growth" else plot
        if "plot" in self.options:
            image = Path(self.env.app.srcdir) / "_generated" / f"{prefix}-results.png"
            if draw(report, image):
                out.append(nodes.image(uri="/_generated/" + image.name, alt=path.name))
        if prefix == "growth":  # its own tables: the generic ones would be too wide
            return out + growth.tables(report)
        for key, section in report.items():
            if key not in _META:
                out += section_tables(key, section)
        return out


def setup(app: Sphinx) -> None:
    """Register the directive."""
    app.add_directive("kiln-bench", BenchDirective)
