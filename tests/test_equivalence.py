"""Parity as an equivalence test (report/analysis/equivalence.py) on synthetic per-prompt scores with a known truth: equal,
worse and better by a known margin; S_parity needs parity at every larger step; the calibration gate keeps a metric
at chance out of parity."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from report.analysis.equivalence import (
    BETTER,
    CHANCE,
    EQUIVALENT,
    INCONCLUSIVE,
    WORSE,
    Margin,
    median_interval,
    order_index,
    parity_index,
    replicate_parity,
    replicate_shares,
    separates,
    tost,
    worse_by,
)
from report.analysis.parity import parity_table
from report.analysis.quality import quality_long_table
from report.table.flat import results_table

N = 24
PPL = Margin("log", math.log(1.1), "within 10%")


def scores(level: float, seed: int, spread: float = 0.02) -> np.ndarray:
    """Per-prompt perplexities around `level` (lognormal, so log differences are the test's scale)."""
    return level * np.exp(np.random.default_rng(seed).normal(0.0, spread, N))


def test_equal_scores_are_equivalent() -> None:
    reference = scores(100.0, 0)
    result = tost(worse_by(reference * np.exp(np.random.default_rng(1).normal(0, 0.01, N)), reference, PPL),
                  PPL.size, 0.05)
    assert result.outcome == EQUIVALENT and result.holds
    assert result.low < 0 < result.high or abs(result.median) < 0.02


def test_worse_by_more_than_the_margin_is_worse_and_never_parity() -> None:
    reference = scores(100.0, 0)
    worse = reference * 1.3 * np.exp(np.random.default_rng(2).normal(0, 0.01, N))  # 30% worse on every prompt
    result = tost(worse_by(worse, reference, PPL), PPL.size, 0.05)
    assert result.outcome == WORSE and not result.holds
    assert result.median == pytest.approx(math.log(1.3), abs=0.02)


def test_better_by_more_than_the_margin_is_parity_but_not_equivalence() -> None:
    reference = scores(100.0, 0)
    better = reference * 0.7
    result = tost(worse_by(better, reference, PPL), PPL.size, 0.05)
    assert result.outcome == BETTER and result.holds  # "equivalent or better"


def test_a_difference_inside_the_margin_but_too_noisy_is_inconclusive() -> None:
    # No detectable difference is not equivalence: wide per-prompt noise leaves the interval past the margin.
    reference = scores(100.0, 0, spread=0.01)
    spread = np.random.default_rng(3).normal(0.0, 0.5, N)
    noisy = reference * np.exp(spread - np.median(spread))  # the median difference is exactly 0
    result = tost(worse_by(noisy, reference, PPL), PPL.size, 0.05)
    assert result.outcome == INCONCLUSIVE and not result.holds
    assert abs(result.median) < 1e-12 and result.low < -PPL.size and PPL.size < result.high


def test_the_median_interval_covers_at_its_level() -> None:
    # The sign test's interval is exact for any continuous distribution: coverage >= 90% at alpha = 0.05 each side.
    rng = np.random.default_rng(0)
    draws = rng.standard_cauchy((4000, N))  # heavy tails, median 0
    low, high = median_interval(draws, 0.05)
    coverage = float(np.mean((low <= 0) & (0 <= high)))
    assert 0.9 <= coverage <= 0.97
    assert order_index(N, 0.05) == 7 and order_index(3, 0.05) == -1


def test_a_continuation_ranked_worst_is_infinitely_worse() -> None:
    reference = np.full(4, 10.0)
    d = worse_by(np.array([math.inf, 10.0, 11.0, math.inf]), reference, PPL)
    assert d[0] == math.inf and d[1] == 0.0 and d[2] == pytest.approx(math.log(1.1))
    assert worse_by(np.array([math.inf]), np.array([math.inf]), PPL)[0] == 0.0  # two empty texts differ by nothing
    bertscore = Margin("higher", 0.02, "within 0.02")
    assert worse_by(np.array([0.5]), np.array([0.6]), bertscore)[0] == pytest.approx(0.1)


def test_s_parity_needs_parity_at_every_larger_step() -> None:
    holds = np.array([[False, True, True], [True, True, True], [False, False, False], [True, False, True]])
    assert parity_index(holds).tolist() == [1, 0, -1, 2]


def test_replicates_report_their_share_at_each_step_count() -> None:
    reference = scores(100.0, 0)
    d = np.stack([
        worse_by(reference * 2.0, reference, PPL),  # 1 step: far worse
        worse_by(reference * 1.0 * np.exp(np.random.default_rng(5).normal(0.02, 0.08, N)), reference, PPL),
        worse_by(reference * 0.9, reference, PPL),  # 4 steps: better
    ])  # fmt: skip
    boot = replicate_parity(d, PPL.size, 0.05, resamples=500, seed=0)
    shares = replicate_shares(boot, [1, 2, 4])
    assert 1 not in shares and set(shares) <= {2, 4, None}
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares.get(4, 0.0) > 0 and shares.get(2, 0.0) > 0  # the 2-step point is borderline


def test_the_calibration_gate_needs_the_reference_to_beat_an_unrelated_passage_by_the_margin() -> None:
    reference = scores(50.0, 0)
    assert separates(reference, reference * 1.5, PPL, 0.05).outcome == WORSE  # separates text from chance
    assert separates(reference, reference * 1.03, PPL, 0.05).outcome != WORSE  # within the margin: chance


def test_a_metric_at_chance_is_never_used_for_parity() -> None:
    from tests.test_quality_analysis import LLAMA_F1, noise, sweep

    # The unrelated passage scores as well as LLaMA's greedy text on BERTScore: LLaDA "matches" at 8 steps, but
    # the metric cannot tell text from chance, so the row decides nothing and says so.
    curve = {8: LLAMA_F1 + noise(1), 16: LLAMA_F1 + noise(2)}
    results = []
    for run in sweep(curve):
        chance = [r.model_copy(update={"bertscore_f1": float(f)})
                  for r, f in zip(run.calibration["unrelated"], LLAMA_F1 + noise(9, 0.005))]
        results.append(run.model_copy(update={"calibration": {**run.calibration, "unrelated": chance}}))
    table = parity_table(quality_long_table(results), results_table(results))
    f1 = table.filter((pl.col("metric") == "bertscore_f1") & (pl.col("reference") == "llama greedy")).row(0, named=True)
    assert f1["decides"] is False and f1["statement"].startswith(CHANCE) and "never matches" not in f1["statement"]
    ppl = table.filter((pl.col("metric") == "gen_ppl") & (pl.col("reference") == "llama greedy")).row(0, named=True)
    assert ppl["decides"] is True  # perplexity's unrelated passage (ppl 9.5 vs 6) is far from the reference
