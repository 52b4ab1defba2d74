"""The growth exponent of benchmarks/cost_growth.py (a pure function; nothing is timed)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from cost_growth import growth  # noqa: E402


def test_growth_exponents_of_power_laws():
    sizes = [10, 100, 1000, 10_000]
    assert growth(sizes, [2.0 * n for n in sizes]) == [1.0, 1.0, 1.0]
    assert growth(sizes, [3e-3 * n**2 for n in sizes]) == [2.0, 2.0, 2.0]
    assert growth(sizes, [5.0] * 4) == [0.0, 0.0, 0.0]


def test_growth_skips_missing_or_non_positive_times():
    assert growth([1, 2, 4], [None, 1.0, 2.0]) == [None, 1.0]
    assert growth([1, 2, 4], [1.0, 0.0, 2.0]) == [None, None]
    assert growth([5], [1.0]) == []


def test_growth_needs_one_time_per_size():
    with pytest.raises(ValueError, match="2 sizes but 3 times"):
        growth([1, 2], [1.0, 2.0, 3.0])
