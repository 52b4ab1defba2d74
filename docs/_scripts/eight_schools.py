"""The eight-schools model used by the guide's scripts (the same as examples/eight_schools.py)."""

import numpy as np

import kiln as kl

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def build() -> kl.Model:
    """Return the non-centred eight-schools model."""
    with kl.Model(coords={"school": list("ABCDEFGH")}) as model:
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        z = kl.Normal("z", 0.0, 1.0, dims="school")
        theta = kl.Deterministic("theta", mu + tau * z, dims="school")
        kl.Normal("y", theta, SIGMA, observed=Y, dims="school")
    return model
