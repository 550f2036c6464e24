"""The answer's intervals (report/intervals.py): exact where they can be, and covering at their stated level on
simulated timings whose truth is known (session drift, per-model session effects, repetition noise)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from report.intervals import (
    ABOVE,
    AT_OR_BELOW,
    INTERPOLATED,
    RANKS,
    SESSIONS,
    crossing,
    crossover,
    crossover_text,
    shift_interval,
    speedup,
)

DRAWS = 2000
# Three Monte-Carlo standard errors of a coverage near 95% over DRAWS simulated sweeps.
TOLERANCE = 3 * math.sqrt(0.95 * 0.05 / DRAWS)


def _sessions(rng: np.random.Generator, log_median: float, drift: np.ndarray, spread: float, noise: float,
              reps: int) -> list[np.ndarray]:
    """One model's latencies in each session: a drift every model in the session shares, an effect of its own,
    and log-normal repetition noise around them, plus a slow first repetition now and then."""
    out = []
    for shared in drift:
        own = rng.normal(0.0, spread)
        values = np.exp(log_median + shared + own + rng.normal(0.0, noise, reps))
        if rng.random() < 0.2:
            values[0] *= 1.4  # a cold first repetition, as a warm-up too short leaves
        out.append(values)
    return out


def test_one_session_gives_the_ratio_of_medians_and_the_rank_interval_of_its_repetitions():
    llama, llada = [7.61, 5.18, 5.08], [1.83, 1.834, 1.84]
    s = speedup([llama], [llada])
    assert s.estimate == pytest.approx(np.median(llama) / np.median(llada))
    assert s.method == RANKS and s.sessions == 1 and s.repetitions == (3, 3)
    # 3 + 3 repetitions support a 90% interval at most: the whole range of the pairwise ratios, 1 - 2/C(6, 3).
    assert s.level == pytest.approx(0.9)
    ratios = [a / b for a in llama for b in llada]
    assert (s.low, s.high) == pytest.approx((min(ratios), max(ratios)))
    assert "one session" in s.label and "90%" in s.label


def test_one_repetition_a_side_has_no_interval():
    s = speedup([[2.0]], [[1.0]])
    assert s.estimate == 2.0 and s.low is None and s.level is None
    assert s.label.startswith("no interval")


def test_the_rank_interval_is_exact_against_enumeration():
    """Its confidence is 1 - 2 P(U <= k - 1) with U's exact null distribution: checked by enumerating every split
    of m + n ranks."""
    for m, n in [(3, 3), (4, 5), (5, 5), (6, 4)]:
        counts = np.zeros(m * n + 1)
        for xs in itertools.combinations(range(m + n), m):
            ys = [r for r in range(m + n) if r not in xs]
            counts[sum(x > y for x in xs for y in ys)] += 1
        cdf = np.cumsum(counts) / counts.sum()
        x, y = np.arange(m, dtype=float) * 1.1, np.arange(n, dtype=float) * 0.7
        low, high, confidence = shift_interval(x, y)
        k = 1 + int(np.sum(1 - 2 * cdf[1:] >= 0.95))  # the largest k whose confidence is still >= 95%
        expected = 1 - 2 * cdf[k - 1] if 1 - 2 * cdf[0] >= 0.95 else 1 - 2 * cdf[0]
        assert confidence == pytest.approx(expected)
        differences = np.sort((x[:, None] - y[None, :]).ravel())
        assert low in differences and high in differences and low <= high


def test_sessions_give_a_t_interval_over_their_log_ratios():
    a = [[2.0, 2.1, 1.9], [2.4, 2.5, 2.3], [1.8, 1.9, 1.7]]
    b = [[1.0, 1.0, 1.1], [1.1, 1.2, 1.1], [0.9, 1.0, 0.95]]
    s = speedup(a, b)
    logs = np.log([np.median(x) / np.median(y) for x, y in zip(a, b)])
    half = scipy_stats.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert s.method == SESSIONS and s.level == 0.95 and s.sessions == 3
    assert s.estimate == pytest.approx(math.exp(logs.mean()))
    assert (s.low, s.high) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))
    assert s.label == "95% t interval over sessions, 3 sessions x 3 + 3 repetitions"


def test_a_session_where_one_side_did_not_run_is_left_out():
    s = speedup([[2.0, 2.0], [3.0, 3.1], []], [[1.0, 1.0], [], [1.0, 1.1]])
    assert s.sessions == 1 and s.method == RANKS and s.estimate == pytest.approx(2.0)
    with pytest.raises(ValueError):
        speedup([[1.0], []], [[], [1.0]])


@pytest.mark.slow
@pytest.mark.parametrize("sessions, reps", [(3, 5), (5, 3)])
def test_the_session_interval_covers_at_its_stated_level(sessions: int, reps: int):
    """Simulated sweeps with session drift shared by both models (it cancels), per-model session effects (they do
    not) and noisy repetitions: the 95% interval covers the true speedup 95% of the time, within Monte-Carlo
    error."""
    rng = np.random.default_rng(1)
    truth = 2.5
    hits = 0
    for _ in range(DRAWS):
        drift = rng.normal(0.0, 0.2, sessions)
        a = _sessions(rng, math.log(truth), drift, 0.06, 0.03, reps)
        b = _sessions(rng, 0.0, drift, 0.06, 0.03, reps)
        s = speedup(a, b)
        hits += s.low <= truth <= s.high
    assert abs(hits / DRAWS - 0.95) <= TOLERANCE


@pytest.mark.slow
def test_the_one_session_interval_covers_at_the_level_it_states():
    """Within one session (no session effect) the rank interval's coverage is exact for any continuous noise: 5 + 5
    repetitions support 96.8%."""
    rng = np.random.default_rng(2)
    truth, hits, level = 0.6, 0, None
    for _ in range(DRAWS):
        a = truth * rng.lognormal(0.0, 0.1, 5) * (1 + rng.exponential(0.05, 5))
        b = rng.lognormal(0.0, 0.1, 5) * (1 + rng.exponential(0.05, 5))
        s = speedup([a], [b])
        level = s.level
        hits += s.low <= truth <= s.high
    assert level == pytest.approx(1 - 8 / 252)
    assert abs(hits / DRAWS - level) <= 3 * math.sqrt(level * (1 - level) / DRAWS)


@pytest.mark.slow
def test_a_percentile_bootstrap_over_three_sessions_covers_far_less_than_it_claims():
    """Why the session interval is Student's t: on the same simulated sweeps, a 95% percentile bootstrap over
    three sessions covers under 85%."""
    rng = np.random.default_rng(3)
    truth, hits = 2.5, 0
    draws = 400
    for _ in range(draws):
        drift = rng.normal(0.0, 0.2, 3)
        a = _sessions(rng, math.log(truth), drift, 0.06, 0.03, 5)
        b = _sessions(rng, 0.0, drift, 0.06, 0.03, 5)
        logs = np.log([np.median(x) / np.median(y) for x, y in zip(a, b)])
        means = rng.choice(logs, size=(1000, 3)).mean(axis=1)
        low, high = np.exp(np.quantile(means, [0.025, 0.975]))
        hits += low <= truth <= high
    assert hits / draws < 0.85


def test_b_star_from_speedups_reads_the_crossing_in_log_b():
    assert crossing([1, 4, 16], [2.0, 1.0 ** 0.5 * 2 ** -1, 0.2]) == pytest.approx((2.0, INTERPOLATED))
    assert crossing([1, 4, 16], [0.9, 0.5, 0.2]) == (1.0, AT_OR_BELOW)
    assert crossing([1, 4, 16], [3.0, 2.0, 1.5]) == (16.0, ABOVE)
    # Ahead at 4, behind again at 16: the AR model does not stay ahead until 16.
    assert crossing([1, 4, 16], [2.0, 0.8, 1.2]) == (16.0, ABOVE)
    # Exactly level at a measured batch: the crossing is that batch.
    assert crossing([1, 4, 16], [2.0, 1.0, 0.5]) == pytest.approx((4.0, INTERPOLATED))


def test_b_star_interval_inverts_the_pointwise_intervals():
    points = [speedup([[3.0, 3.1, 2.9], [3.2, 3.0, 3.1]], [[1.0, 1.0, 1.0], [1.05, 1.0, 1.0]]),
              speedup([[3.0, 3.1, 2.9], [3.2, 3.0, 3.1]], [[2.9, 3.0, 3.0], [3.3, 3.1, 3.2]]),
              speedup([[3.0, 3.1, 2.9], [3.2, 3.0, 3.1]], [[9.0, 9.1, 8.9], [9.5, 9.2, 9.3]])]
    c = crossover([1, 4, 16], points)
    assert c.bound == INTERPOLATED and c.low_bound in (INTERPOLATED, AT_OR_BELOW)
    assert c.low <= c.estimate <= c.high
    assert c.level == 0.95
    text = crossover_text(c, "LLaMA", "LLaDA")
    assert "interpolated between measured batches" in text and "95% interval" in text


def test_b_star_beyond_the_measured_batches_is_open_ended():
    points = [speedup([[4.0, 4.1], [4.2, 4.0]], [[1.0, 1.0], [1.0, 1.1]]),
              speedup([[4.0, 4.1], [4.2, 4.0]], [[2.0, 2.0], [2.1, 2.0]])]
    c = crossover([1, 8], points)
    assert c.bound == ABOVE and c.high_bound == ABOVE
    assert crossover_text(c, "LLaMA", "LLaDA").startswith("> 8 [")


@pytest.mark.slow
def test_the_b_star_interval_covers_at_least_its_level():
    """True speedups log-linear in log B, crossing 1 at B* = 6 between the measured batches 4 and 16; three
    sessions of five repetitions a side: the interval holds the true B* at least 95% of the time, within
    Monte-Carlo error."""
    rng = np.random.default_rng(4)
    batches, truth = [1, 4, 16], 6.0
    slope = 0.8  # log speedup falls 0.8 per unit of log B
    hits = 0
    for _ in range(DRAWS):
        drift = rng.normal(0.0, 0.2, 3)
        points = []
        for b in batches:
            log_speedup = -slope * (math.log(b) - math.log(truth))
            a = _sessions(rng, log_speedup, drift + rng.normal(0.0, 0.05, 3), 0.06, 0.03, 5)
            d = _sessions(rng, 0.0, drift, 0.06, 0.03, 5)
            points.append(speedup(a, d))
        c = crossover(batches, points)
        low = 0.0 if c.low_bound == AT_OR_BELOW else c.low
        high = math.inf if c.high_bound == ABOVE else c.high
        hits += low <= truth <= high
    assert hits / DRAWS >= 0.95 - TOLERANCE
