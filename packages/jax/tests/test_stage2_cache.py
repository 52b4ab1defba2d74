"""Stage 2 on disk: JAX's persistent compilation cache under kiln's cache root.

Each check runs in a fresh process (JAX decides once per process where its cache is).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

SCRIPT = r"""
import json, warnings
import jax, numpy as np
from kiln_compile import CacheWarning, Mode, function
from kiln_graph import tensor as kt

events = []
jax.monitoring.register_event_listener(lambda event, **kwargs: events.append(event))
x = kt.vector("x")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    f = function([x], kt.exp(x).sum() * 3.25, mode=Mode(linker="jax"), profile=True)
    value = float(f(np.ones(3)))
print(json.dumps({
    "value": value,
    "hit": "/jax/compilation_cache/cache_hits" in events,
    "dir": jax.config.jax_compilation_cache_dir,
    "stage2_dir": f.profile.stage2["cache_dir"],
    "warnings": [str(w.message) for w in caught if issubclass(w.category, CacheWarning)],
}))
"""


EXPECTED = 3.25 * 3 * float(np.exp(1.0))


def _run(root: Path, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    environ.update(KILN_CACHE_DIR=str(root), **env)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=environ, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_executables_are_stored_under_the_root_and_loaded_by_a_new_process(tmp_path):
    first = _run(tmp_path)
    assert first["dir"] == first["stage2_dir"] == str(tmp_path / "jax")
    assert not first["hit"] and abs(first["value"] - EXPECTED) < 1e-12
    assert any((tmp_path / "jax").iterdir())
    second = _run(tmp_path)
    assert second["hit"] and second["value"] == first["value"]


def test_a_directory_the_user_configured_is_kept(tmp_path):
    mine = tmp_path / "mine"
    out = _run(tmp_path / "kiln", JAX_COMPILATION_CACHE_DIR=str(mine))
    assert out["dir"] == str(mine)
    assert not (tmp_path / "kiln" / "jax").exists()


def test_an_unwritable_root_warns_once_and_still_computes(tmp_path):
    (tmp_path / "jax").write_text("a file where the cache folder would be")
    out = _run(tmp_path)
    assert abs(out["value"] - EXPECTED) < 1e-12
    assert out["dir"] is None and out["stage2_dir"] is None
    assert len(out["warnings"]) == 1 and "cannot write the cache folder" in out["warnings"][0]


def test_no_cache_when_caching_is_off(tmp_path):
    out = _run(tmp_path, KILN_FLAGS="cache=false")
    assert out["dir"] is None and not (tmp_path / "jax").exists()
