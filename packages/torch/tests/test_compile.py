"""``config.torch_compile``: the VM's values, and inductor's cache reused by a new process.

One small logp + gradient graph, compiled in two new processes on one empty cache root:
the first fills ``<root>/torch/inductor``, the second must write no new compiled
artifact there (inductor's FX-graph cache hit: it loads the first one's kernels). Each
process checks its values against the VM's itself, so the test compiles only twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

CHILD = textwrap.dedent(
    """
    import json
    import numpy as np
    import kiln
    import kiln.tensor as kt
    from kiln_compile import config

    x = kt.vector("x")
    mu = kt.scalar("mu")
    log_sigma = kt.scalar("log_sigma")
    z = (x - mu) / kt.exp(log_sigma)
    logp = kt.sum(-0.5 * z**2 - log_sigma) + kt.switch(mu > 0, -mu, mu)
    outputs = [logp, *kiln.grad(logp, [mu, log_sigma])]
    point = [np.linspace(-1.0, 2.0, 5), np.array(0.3), np.array(-0.2)]
    vm = kiln.function([x, mu, log_sigma], outputs, mode=kiln.Mode(linker="vm"))(*point)
    with config.change(torch_compile=True):
        f = kiln.function([x, mu, log_sigma], outputs, mode=kiln.Mode(linker="torch"))
        compiled = f(*point)
        again = f(point[0] * 2.0, point[1], point[2])
    print(json.dumps({
        "compiled": [float(v) for v in compiled],
        "vm": [float(v) for v in vm],
        "again": float(again[0]),
        "bindings": f.thunk.stage2["bindings"],
    }))
    """
)


def _run(cache_root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR", "TRITON"))}
    env["KILN_CACHE_DIR"] = str(cache_root)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _artifacts(folder: Path) -> set[str]:
    """Return the compiled code and cache entries inductor keeps (lock files left out)."""
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and not p.name.endswith(".lock") and "locks" not in p.parts
    }


def test_compiled_function_matches_the_vm_and_a_new_process_reuses_inductors_cache(
    tmp_path: Path,
):
    first = _run(tmp_path)
    inductor = tmp_path / "torch" / "inductor"
    np.testing.assert_allclose(first["compiled"], first["vm"], rtol=1e-12)
    assert first["bindings"] == [{"device": "cpu", "compile": True, "cache_dir": str(inductor)}]
    x = np.linspace(-1.0, 2.0, 5) * 2.0
    expected = np.sum(-0.5 * ((x - 0.3) / np.exp(-0.2)) ** 2 + 0.2) - 0.3
    np.testing.assert_allclose(first["again"], expected, rtol=1e-12)
    after_first = _artifacts(inductor)
    assert any(name.endswith(".py") for name in after_first), sorted(after_first)

    second = _run(tmp_path)
    np.testing.assert_allclose(second["compiled"], second["vm"], rtol=1e-12)
    new = _artifacts(inductor) - after_first
    assert not new, f"the second process compiled again: {sorted(new)}"
