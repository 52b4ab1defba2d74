"""How cost grows (``benchmarks/cost_growth.py``): its tables and log-log curves.

``kiln-bench growth`` renders the newest ``growth-<stamp>.json`` with these functions
rather than the generic tables: compile seconds against the number of free variables
(kiln cold / warm, PyMC cold / warm) and seconds per logp+gradient call against rows
(kiln, the hand-written Numba floor, kiln's JAX backend), drawn with matplotlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes

from kiln_docs._util import table

#: (side, temperature, label, style) of the compile curves.
COMPILE_CURVES = (
    ("kiln", "cold", "kiln cold", "o-"),
    ("kiln", "warm", "kiln warm", "o--"),
    ("pymc", "cold", "PyMC cold", "s-"),
    ("pymc", "warm", "PyMC warm", "s--"),
)


def _seconds(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) else "-"


def compile_points(res: dict[str, Any], side: str, temp: str) -> list[tuple[int, float]]:
    """Return ``(free variables, total seconds)`` of one side and temperature."""
    out = []
    for n, row in zip(res["free_variables"], res.get(side, []), strict=False):
        got = row.get(temp, {}).get("total_s")
        if isinstance(got, int | float):
            out.append((n, float(got)))
    return out


def call_points(res: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Return ``{label: [(rows, seconds per call)]}`` for kiln, the floor and JAX."""
    out: dict[str, list[tuple[int, float]]] = {"kiln (Numba)": [], "floor (njit)": [], "JAX": []}
    for row in res.get("sizes", []):
        if "error" in row:
            continue
        out["kiln (Numba)"].append((row["rows"], row["per_call_s"]))
        out["floor (njit)"].append((row["rows"], row["floor"]["per_call_s"]))
        if "jax" in row:
            out["JAX"].append((row["rows"], row["jax"]["per_call_s"]))
    return {k: v for k, v in out.items() if v}


def plot(report: dict[str, Any], target: Path) -> bool:
    """Draw the compile and per-call curves (log-log) into ``target``; False if none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(k, v) for k, v in report.get("compile", {}).items()]
    panels += [(k, v) for k, v in report.get("data", {}).items()]
    if not panels:
        return False
    cols = 2
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(9, 3.4 * rows), dpi=100, squeeze=False)
    for ax, (name, res) in zip(axes.flat, panels, strict=False):
        if name in report.get("compile", {}):
            for side, temp, label, style in COMPILE_CURVES:
                pts = compile_points(res, side, temp)
                if pts:
                    ax.plot(*zip(*pts, strict=True), style, label=label)
            ax.set_xlabel("free variables")
            ax.set_ylabel("build to first call (s)")
            ax.set_title(f"compile: {name}", fontsize=10)
        else:
            for label, pts in call_points(res).items():
                ax.plot(*zip(*pts, strict=True), "o-", label=label)
            ax.set_xlabel("rows")
            ax.set_ylabel("logp + gradient, per call (s)")
            ax.set_title(f"per call: {name}", fontsize=10)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, format="png")
    plt.close(fig)
    return True


def tables(report: dict[str, Any]) -> list[nodes.Node]:
    """Return the compile table, the data-size table and the summary against the targets."""
    out: list[nodes.Node] = [nodes.rubric("compile", "compile")]
    body = []
    for family, res in report.get("compile", {}).items():
        for i, n in enumerate(res["free_variables"]):
            k = res["kiln"][i] if i < len(res["kiln"]) else {}
            p = res.get("pymc", [])
            p = p[i] if i < len(p) else {}
            kc, kw = k.get("cold", {}), k.get("warm", {})
            pc, pw = p.get("cold", {}), p.get("warm", {})
            ratio = res["ratios"][i] if i < len(res["ratios"]) else {}
            body.append(
                [
                    family,
                    str(n),
                    _seconds(kc.get("total_s")),
                    _seconds(kc.get("stage1_s")),
                    _seconds(kc.get("stage2_s")),
                    _seconds(kw.get("total_s")),
                    _seconds(pc.get("total_s")) if "error" not in pc else pc["error"][:40],
                    _seconds(pc.get("stage1_s")),
                    _seconds(pc.get("stage2_s")),
                    _seconds(pw.get("total_s")),
                    _seconds(ratio.get("cold_kiln_over_pymc")),
                ]
            )
    header = [
        "model",
        "free vars",
        "kiln cold s",
        "stage 1",
        "stage 2",
        "kiln warm s",
        "PyMC cold s",
        "stage 1",
        "stage 2",
        "PyMC warm s",
        "cold kiln/PyMC",
    ]
    out.append(table(header, body))
    out.append(nodes.rubric("per call and sampling", "per call and sampling"))
    body = []
    for name, res in report.get("data", {}).items():
        for r in res.get("sizes", []):
            if "error" in r:
                body.append([name, str(r["rows"]), r["error"][:60], *["-"] * 7])
                continue
            body.append(
                [
                    name,
                    str(r["rows"]),
                    f"{r['per_call_s'] * 1e6:.4g}",
                    f"{r['floor']['per_call_s'] * 1e6:.4g}",
                    f"{r['ratio_per_call_over_floor']:.3g}",
                    f"{r['jax']['per_call_s'] * 1e6:.4g}" if "jax" in r else "-",
                    f"{r['sampling_s']:.3g}",
                    f"{r['peak_rss_mb']:.0f}",
                    f"{r['data_mb']:.1f}",
                    f"{r['overhead_mb']:.0f}",
                ]
            )
    header = [
        "model",
        "rows",
        "kiln us",
        "floor us",
        "kiln/floor",
        "JAX us",
        "sampling s",
        "peak RSS MB",
        "data MB",
        "other MB",
    ]
    out.append(table(header, body))
    summary = report.get("summary", {})
    if summary:
        out.append(nodes.rubric("summary", "summary"))
        rows = [
            [k, "-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)]
            for k, v in summary.items()
        ]
        out.append(table(["measure", "value"], rows, [60, 20]))
    return out
