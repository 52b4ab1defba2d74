"""The posteriordb references sampled by kiln's NUTS on the torch backend.

The checks are ``test_posteriordb_sampling.check_against_reference``'s, on a subset of
the posteriors (``BACKEND_CASES``): the host path calls torch eagerly at each step,
minutes per posterior. Collected by ``nox -s tests_torch``, where torch is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_posteriordb_sampling import check_against_reference  # noqa: E402

#: Eight schools in the session's run; kidiq (which passed here in 13 minutes on the
#: loaded 2-core machine) marked slow.
BACKEND_CASES = [
    "eight_schools-eight_schools_noncentered",
    pytest.param("kidiq-kidscore_momiq", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_posterior_on_torch_matches_the_reference(name: str) -> None:
    check_against_reference(name, "kiln", "torch")
