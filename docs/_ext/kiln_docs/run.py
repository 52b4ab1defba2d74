"""``kiln-run``: run a script of ``docs/_scripts`` at build time and show its output.

The printouts in the guide (a compile profile, the cache folders, a value before and
after a rewrite) are produced by the code they describe, on every build, so they
cannot go stale. Each script runs in a new process with ``KILN_CACHE_DIR`` set to a new
empty folder (so every printout is of a cold start; all are removed at the end of the
build); a script that fails fails the build with its output.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging

from kiln_docs._util import DocsError, KilnDirective

SCRIPTS = Path(__file__).resolve().parents[2] / "_scripts"
TIMEOUT_S = 300
_logger = logging.getLogger(__name__)


def _cache_root(app: Sphinx) -> Path:
    root = getattr(app, "_kiln_cache_root", None)
    if root is None:
        root = Path(tempfile.mkdtemp(prefix="kiln-docs-cache-"))
        app._kiln_cache_root = root  # type: ignore[attr-defined]
    return root


def run_script(app: Sphinx, script: str, args: list[str]) -> str:
    """Return the output (stdout, then stderr) of ``python _scripts/<script> <args>``."""
    memo: dict[tuple[str, ...], str] = app.__dict__.setdefault("_kiln_run_memo", {})
    key = (script, *args)
    if key in memo:
        return memo[key]
    path = SCRIPTS / script
    if not path.is_file():
        raise DocsError(f"kiln-run: no script {path}")
    root = Path(tempfile.mkdtemp(prefix=f"{Path(script).stem}-", dir=_cache_root(app)))
    env = dict(os.environ, KILN_CACHE_DIR=str(root), PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
    env.pop("KILN_FLAGS", None)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(path), *args],
            cwd=SCRIPTS,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise DocsError(f"kiln-run: {script} ran past {TIMEOUT_S} s") from exc
    if done.returncode != 0:
        raise DocsError(
            f"kiln-run: {script} {' '.join(args)} exited {done.returncode}:\n"
            f"{done.stdout}\n{done.stderr}"
        )
    _logger.info(f"kiln-run: {script} {' '.join(args)} ({time.perf_counter() - start:.1f} s)")
    out = done.stdout + (("\n" + done.stderr) if done.stderr.strip() else "")
    out = out.replace(str(root), "$KILN_CACHE_DIR").rstrip() + "\n"
    memo[key] = out
    return out


class RunDirective(KilnDirective):
    """Show a script's output as a literal block (``:source:`` shows the script first)."""

    required_arguments = 1
    option_spec = {
        "args": directives.unchanged,
        "source": directives.flag,
        "language": directives.unchanged,
    }

    def build(self) -> list[nodes.Node]:
        """Run the script (once per build) and return its source and output blocks."""
        script = self.arguments[0]
        args = shlex.split(self.options.get("args", ""))
        self.env.note_dependency(str(SCRIPTS / script))
        out: list[nodes.Node] = []
        if "source" in self.options:
            code = (SCRIPTS / script).read_text(encoding="utf-8")
            block = nodes.literal_block(code, code, language="python")
            out.append(nodes.paragraph("", "", nodes.literal(script, f"docs/_scripts/{script}")))
            out.append(block)
        text = run_script(self.env.app, script, args)
        shown = f"$ python docs/_scripts/{script} {' '.join(args)}".rstrip()
        result = nodes.literal_block(
            text, text, language=self.options.get("language", "text"), classes=["kiln-output"]
        )
        caption = nodes.paragraph("", "", nodes.Text("Output of "), nodes.literal(shown, shown))
        caption["classes"].append("kiln-output-caption")
        out += [caption, result]
        return out


def _cleanup(app: Sphinx, exception: Any) -> None:
    root = getattr(app, "_kiln_cache_root", None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


def setup(app: Sphinx) -> None:
    """Register the directive and remove the temporary cache at the end of the build."""
    app.add_directive("kiln-run", RunDirective)
    app.connect("build-finished", _cleanup)
