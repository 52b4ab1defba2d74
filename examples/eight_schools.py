"""Eight schools (non-centred) with kiln's defaults: Numba backend, kiln's NUTS.

Prints an ArviZ summary of the posterior, the compile time and the sampling time.
Run: ``python examples/eight_schools.py`` (or ``nox -s demo``).
"""

from __future__ import annotations

import numpy as np
from arviz_stats import summary

import kiln as kl

SCHOOLS = ["A", "B", "C", "D", "E", "F", "G", "H"]
Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def build() -> kl.Model:
    """Return the eight-schools model."""
    with kl.Model(coords={"school": SCHOOLS}) as model:
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        z = kl.Normal("z", 0.0, 1.0, dims="school")
        theta = kl.Deterministic("theta", mu + tau * z, dims="school")
        kl.Normal("y", theta, SIGMA, observed=Y, dims="school")
    return model


def main() -> None:
    with build():
        idata = kl.sample(random_seed=2026, target_accept=0.9)
    print(summary(idata, var_names=["mu", "tau", "theta"]).round(2).to_string())
    print(
        f"compile time {idata.attrs['compile_time']:.2f} s, sampling time "
        f"{idata.attrs['sampling_time']:.2f} s ({idata.attrs['backend']} backend)"
    )


if __name__ == "__main__":
    main()
