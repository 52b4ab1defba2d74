"""The posteriordb references sampled on the C backend by kiln's NUTS and nutpie.

Both engines run natively on ``backend="c"`` (the model's C library exports the native
log-density ABI), so every posterior of ``test_posteriordb_sampling.CASES`` runs here,
with the same bounds and the same cases marked slow.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

kiln_c = pytest.importorskip("kiln_c")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_posteriordb_sampling import CASES, check_against_reference  # noqa: E402


def _compiler() -> str | None:
    try:
        return kiln_c.find_compiler()
    except kiln_c.CompilerNotFoundError:
        return None


pytestmark = pytest.mark.skipif(_compiler() is None, reason="no C compiler")

ENGINES = [
    "kiln",
    pytest.param(
        "nutpie",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("nutpie") is None, reason="nutpie is not installed"
        ),
    ),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if slow else n for n, (_, _, slow) in CASES.items()],
)
def test_posterior_on_c_matches_the_reference(name: str, engine: str) -> None:
    check_against_reference(name, engine, "c")
