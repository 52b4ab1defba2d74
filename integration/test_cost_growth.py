"""cost_growth.py (benchmarks/): its growth exponent and medians of runs; nothing is timed."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from cost_growth import growth, median_run  # noqa: E402


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


def test_median_run_takes_the_median_of_each_number_and_keeps_the_rest():
    runs = [
        {"total_s": 9.0, "stage1_s": 1.0, "cache": "miss", "nodes": {"a": 1}},
        {"total_s": 3.0, "stage1_s": 2.0, "cache": "miss", "nodes": {"a": 1}},
        {"total_s": 6.0, "stage1_s": 4.0, "cache": "hit", "nodes": {"a": 1}},
    ]
    assert median_run(runs) == {
        "total_s": 6.0,
        "stage1_s": 2.0,
        "cache": "miss",
        "nodes": {"a": 1},
        "total_s_runs": [9.0, 3.0, 6.0],
    }
    assert median_run(runs[:2])["total_s"] == 6.0  # an even count: the mean of the middle two


def test_median_run_of_one_run_or_a_failure():
    one = {"total_s": 2.0}
    assert median_run([one]) == one
    failed = {"error": "timed out"}
    assert median_run([one, failed]) == failed
