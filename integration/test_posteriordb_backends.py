"""The posteriordb references sampled by kiln's NUTS on the MLX backend.

The checks are ``test_posteriordb_sampling.check_against_reference``'s (posterior means
within 4 Monte Carlo standard errors, sd within 10-15%, R-hat, bulk ESS, divergences).
A subset of the posteriors (see ``BACKEND_CASES``): kiln's NUTS calls MLX through the
host ``logp_dlogp``, slower per step than Numba's native path, so every posterior
would add minutes to the default session. The torch backend's cases are
``test_torch_posteriordb.py`` (torch is installed only in ``nox -s tests_torch``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("kiln_mlx")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_posteriordb_sampling import check_against_reference  # noqa: E402

#: The posteriors sampled on MLX: eight schools (hierarchical, non-centered) in the
#: default run; four regressions, which passed here too, marked slow (2-7 minutes each on
#: the shared 2-core machine).
BACKEND_CASES = [
    "eight_schools-eight_schools_noncentered",
    *(
        pytest.param(name, marks=pytest.mark.slow)
        for name in (
            "kidiq-kidscore_momiq",
            "earnings-earn_height",
            "mesquite-logmesquite",
            "sblrc-blr",
        )
    ),
]


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_posterior_on_mlx_matches_the_reference(name: str) -> None:
    check_against_reference(name, "kiln", "mlx")
