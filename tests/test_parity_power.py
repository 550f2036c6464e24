"""The parity test states its power and its interval's real coverage, and both are right: simulated equal, worse and
better quality (normal per-prompt differences) pass the test as often as the stated power says, and the median's
interval covers as often as its stated coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from report.analysis.equivalence import coverage, median_interval, parity_holds, power, prompts_for_power

ALPHA, MARGIN, SD, DRAWS = 0.05, math.log(1.1), 0.3, 20_000


def simulated_power(n: int, true_difference: float, seed: int = 0) -> float:
    d = np.random.default_rng(seed).normal(true_difference, SD, (DRAWS, n))
    return float(np.mean(parity_holds(d, MARGIN, ALPHA)))


@pytest.mark.parametrize("n", [24, 64])
@pytest.mark.parametrize("true_difference", [0.0, MARGIN, -MARGIN, 2 * MARGIN],
                         ids=["equal", "worse by the margin", "better by the margin", "worse by twice the margin"])
def test_the_stated_power_is_the_rate_at_which_the_test_finds_parity(n: int, true_difference: float) -> None:
    stated = power(n, ALPHA, MARGIN, SD, true_difference)
    assert simulated_power(n, true_difference) == pytest.approx(stated, abs=0.02)


def test_equal_quality_at_the_study_margin_is_found_rarely_with_24_prompts() -> None:
    # Equal quality passes in about 11-27% of draws at a per-prompt sd of 0.3-0.6 (the miniature's is 0.6-1.3).
    assert 0.1 < power(24, ALPHA, MARGIN, 0.6) < power(24, ALPHA, MARGIN, 0.3) < 0.3
    # Worse by the margin passes at most alpha of the time: the test's size.
    assert power(24, ALPHA, MARGIN, SD, MARGIN) <= ALPHA


def test_the_prompts_for_80_percent_power_reach_it() -> None:
    n = prompts_for_power(ALPHA, MARGIN, SD)
    assert n is not None and 50 < n < 400
    assert simulated_power(n, 0.0, seed=1) >= 0.78
    assert power(n // 2, ALPHA, MARGIN, SD) < 0.8
    assert prompts_for_power(ALPHA, MARGIN, 1e-3) == 5  # the fewest with which the test can decide at all


@pytest.mark.parametrize("n, stated", [(24, 0.936), (25, 0.957), (64, None)])
def test_every_interval_states_its_real_coverage(n: int, stated: float | None) -> None:
    level = coverage(n, ALPHA)
    if stated is not None:
        assert level == pytest.approx(stated, abs=5e-4)
    assert level >= 1 - 2 * ALPHA
    draws = np.random.default_rng(n).standard_cauchy((DRAWS, n))  # any continuous distribution, median 0
    low, high = median_interval(draws, ALPHA)
    assert float(np.mean((low <= 0) & (0 <= high))) == pytest.approx(level, abs=0.006)
    assert coverage(4, ALPHA) is None  # no interval below 5 prompts
