"""The engine matrix's torch row: every NUTS engine on ``backend="torch"``, eight schools.

kiln's NUTS and nutpie run on torch through the host ``logp_dlogp``; numpyro and blackjax
need the JAX backend, and asking for them on torch is the clear error. The checks are
``test_engine_matrix.check_layout``'s. Collected by ``nox -s tests_torch`` (torch is not
in the default session); engines not installed there are skipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_engine_matrix import ENGINES, check_layout  # noqa: E402


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_on_torch_gives_the_same_layout_or_a_clear_error(engine: str) -> None:
    check_layout(engine, "torch")
