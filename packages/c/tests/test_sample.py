"""``kl.sample(backend="c")``: eight schools, against the same model sampled on Numba."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
from arviz_stats import ess

import kiln as kl

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def _eight_schools() -> kl.Model:
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        theta_tilde = kl.Normal("theta_tilde", 0.0, 1.0, shape=8)
        kl.Deterministic("theta", mu + tau * theta_tilde)
        kl.Normal("y", mu + tau * theta_tilde, SIGMA, observed=Y)
    return m


def _sample(backend: str) -> object:
    with _eight_schools(), warnings.catch_warnings():
        warnings.simplefilter("ignore", kl.SamplingWarning)
        idata = kl.sample(
            draws=1000, tune=1000, chains=2, random_seed=1, progressbar=False, backend=backend
        )
    return idata


def test_eight_schools_on_c_matches_numba() -> None:
    """Posterior means of mu, tau and theta agree with Numba's within Monte Carlo error."""
    on_c = _sample("c")
    on_numba = _sample("numba")
    for name in ("mu", "tau", "theta"):
        a = np.asarray(on_c.posterior[name].values, float)
        b = np.asarray(on_numba.posterior[name].values, float)
        a = a.reshape(a.shape[0], a.shape[1], -1)
        b = b.reshape(b.shape[0], b.shape[1], -1)
        for k in range(a.shape[2]):
            ea = float(ess(a[..., k], chain_axis=0, draw_axis=1))
            eb = float(ess(b[..., k], chain_axis=0, draw_axis=1))
            assert min(ea, eb) > 50, (name, k, ea, eb)
            err = np.hypot(a[..., k].std() / np.sqrt(ea), b[..., k].std() / np.sqrt(eb))
            assert abs(a[..., k].mean() - b[..., k].mean()) < 4 * err, (name, k)


_SAMPLE_IN_A_NEW_PROCESS = """
import sys, warnings
sys.path.insert(0, {tests!r})
import kiln as kl
from test_sample import _eight_schools
with _eight_schools(), warnings.catch_warnings():
    warnings.simplefilter("ignore", kl.SamplingWarning)
    idata = kl.sample(draws=200, tune=200, chains=2, random_seed=3, progressbar=False, backend="c")
print("numba" in sys.modules, float(idata.posterior["mu"].mean()))
"""


def test_sampling_on_c_with_a_warm_cache_never_imports_numba(tmp_path: Path) -> None:
    """The second process finds every library in the cache and never imports Numba."""
    script = _SAMPLE_IN_A_NEW_PROCESS.format(tests=str(Path(__file__).parent))
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[1][0] == "False", runs
    assert runs[0][1] == runs[1][1]  # the same draws from the same seed


_LIBRARIES_AFTER_THE_KERNEL = """
import sys, warnings
sys.path.insert(0, {tests!r})
import numpy as np
import kiln as kl
import kiln.tensor as kt
from test_sample import _eight_schools
with _eight_schools(), warnings.catch_warnings():
    warnings.simplefilter("ignore", kl.SamplingWarning)
    kl.sample(draws=20, tune=20, chains=1, random_seed=3, progressbar=False, backend="c")
x = kt.vector("x")
for k in range(3):
    f = kl.function([x], [kt.exp(x) * (k + 2.0) + kt.sum(x)], mode=kl.Mode(linker="c"))
    print(float(f(np.ones(3))[0][0]))
"""


def test_c_libraries_load_after_the_nuts_kernel(tmp_path: Path) -> None:
    """Libraries mapped after the C NUTS kernel are themselves, not the kernel.

    The loader knows a library by its path; the kernel's in-memory file was closed once
    mapped, and the next kiln_c library got its descriptor number, so ``dlopen`` of
    ``/proc/self/fd/N`` returned the kernel ("undefined symbol: kiln_run").
    """
    script = _LIBRARIES_AFTER_THE_KERNEL.format(tests=str(Path(__file__).parent))
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    values = [float(v) for v in proc.stdout.split()]
    np.testing.assert_allclose(values, [np.e * (k + 2.0) + 3.0 for k in range(3)], rtol=1e-15)
