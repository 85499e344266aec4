"""The sustained run's per-window histograms: quantiles close to the sorted values', the
maximum exact, and a clock read a hair early counted without error."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

# bench/ modules import their siblings by name, as the scripts run from there.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench.windows import Histogram


def _nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[round(p / 100 * (len(ordered) - 1))]


@pytest.mark.parametrize("p", [0, 50, 90, 99, 100])
def test_quantiles_are_within_half_a_bucket_of_the_sorted_values(p: float) -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(1.5, 0.8) for _ in range(20_000)]
    hist = Histogram()
    for v in values:
        hist.add(v)
    assert hist.n == len(values)
    assert hist.maximum == max(values)
    assert hist.quantile(p) == pytest.approx(_nearest_rank(values, p), abs=0.025 + 1e-9)


def test_a_single_value_and_values_below_zero() -> None:
    one = Histogram()
    one.add(5.0)
    assert (one.quantile(50), one.quantile(99), one.maximum) == (5.0, 5.0, 5.0)
    early = Histogram()
    for v in (-0.01, -0.002, 0.0, 3.0):
        early.add(v)
    assert early.quantile(0) == pytest.approx(0.0, abs=0.025)
    assert early.quantile(100) == 3.0
