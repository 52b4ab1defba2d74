"""``import kiln`` stays light: the heavy libraries load when a feature first uses them."""

from __future__ import annotations

import json
import subprocess
import sys

#: Imported on first use only (issue #26: ``import kiln`` within about 0.2 s; these cost
#: 0.05-0.7 s each).
HEAVY = (
    "scipy",
    "scipy.special",
    "scipy.linalg",
    "scipy.stats",
    "arviz",
    "arviz_base",
    "xarray",
    "pandas",
    "numba",
    "jax",
    "torch",
    "mlx",
    "dask",
    "matplotlib",
    # Not heavy libraries, but 10-50 ms each of a short process: read on first use.
    "importlib.metadata",  # kl.__version__, the linker registry, the cache keys
    "tqdm",  # a progress bar that is shown
    "asyncio",
)


def _modules_after(code: str) -> set[str]:
    """Return the heavy modules a new interpreter holds after running ``code``."""
    report = f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    probe = f"{code}\nimport json, sys\n{report}"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_import_kiln_loads_no_heavy_library() -> None:
    assert _modules_after("import kiln") == set()


def test_special_functions_load_scipy_when_a_graph_uses_them_and_give_its_values() -> None:
    """A graph with SciPy's ufuncs imports ``scipy.special`` (its dtypes, its values)."""
    code = (
        "import numpy as np, kiln, kiln.tensor as kt\n"
        "x = kt.vector('x')\n"
        "y = kt.sigmoid(x) + kt.gammaln(x)\n"
        "f = kiln.function([x], y, mode=kiln.Mode(linker='vm'))\n"
        "from scipy import special\n"
        "v = np.array([0.5, 2.0])\n"
        "assert np.allclose(f(v), special.expit(v) + special.gammaln(v), rtol=1e-15)"
    )
    loaded = _modules_after(code)
    assert "scipy.special" in loaded
    assert not loaded & {"numba", "xarray", "pandas", "arviz", "jax"}


def test_sampling_a_model_loads_neither_dask_nor_scipy() -> None:
    """The DataTree and the R-hat/ESS checks of ``kl.sample`` need only xarray and NumPy.

    With Dask installed, xarray's documented constructors import ``dask.array`` (about
    0.3 s, and 0.2 s more at exit); SciPy's ``special`` and ``fft`` cost 0.25 s.
    """
    code = (
        "import numpy as np, kiln as kl\n"
        "with kl.Model(coords={'g': ['a', 'b', 'c']}):\n"
        "    mu = kl.Normal('mu', 0.0, 1.0, dims='g')\n"
        "    kl.Normal('y', mu, 1.0, observed=np.array([0.1, -0.3, 0.2]), dims='g')\n"
        "    idata = kl.sample(draws=300, tune=300, chains=2, random_seed=1,\n"
        "                      progressbar=False, backend='vm')\n"
        "assert idata['posterior']['mu'].shape == (2, 300, 3)\n"
        "assert list(idata['posterior'].indexes['g']) == ['a', 'b', 'c']"
    )
    loaded = _modules_after(code)
    assert "xarray" in loaded
    assert not loaded & {"dask", "scipy"}
