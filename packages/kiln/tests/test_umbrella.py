"""The umbrella package re-exports the public API and runs the demo."""

import subprocess
import sys
from pathlib import Path

import numpy as np

import kiln
import kiln.tensor as kt
import kiln_graph.tensor


def test_reexports():
    for name in ["function", "grad", "jacobian", "hessian", "dprint", "Mode", "config"]:
        assert hasattr(kiln, name), name
    public = {n for n in dir(kiln_graph.tensor) if not n.startswith("_")}
    assert public <= set(dir(kt))
    assert kiln.__version__ == (Path(__file__).parents[3] / "VERSION").read_text().strip()


def test_docstring_example():
    x = kt.vector("x")
    f = kiln.function([x], kiln.grad(kt.sum(x**2), x), mode="FAST_COMPILE")
    np.testing.assert_allclose(f([1.0, 2.0]), [2.0, 4.0])


def test_demo_runs():
    demo = Path(__file__).parents[3] / "examples" / "demo.py"
    out = subprocess.run([sys.executable, str(demo)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "demo OK" in out.stdout
