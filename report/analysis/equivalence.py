"""Parity as an equivalence test: two one-sided tests (TOST) on paired per-prompt differences, a margin per metric,
and the calibration gate that decides whether a metric can tell text from chance at all.

A difference is how much *worse* a text is than the reference, in the margin's units: log(ppl / ppl_ref) for a
perplexity (so a margin ratio of 1.1 is ±log 1.1), the NLL difference in nats (the same number), BERTScore's
difference in its own units. The test is distribution-free: the (1 − 2α) interval of the median difference from
order statistics (the sign test's interval, exact under any continuous distribution, and usable with the +inf of a
continuation ranked worst). TOST at α holds equivalence when that interval lies inside (−margin, margin);
non-inferiority (equivalence or better) when its upper end is below the margin. Parity is non-inferiority:
"equivalent or better", never "not detectably different".

Each interval states its real coverage (the order statistics make it at least, not exactly, 1 − 2α: 93.6% for 24
prompts at α = 0.05), and each test its power at the margin: the chance that it finds parity where the true median
difference is zero, from the sweep's own per-prompt spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

EQUIVALENT, BETTER, WORSE, INCONCLUSIVE = "equivalent", "not worse (may be better)", "worse", "inconclusive"
CHANCE = "cannot separate text from chance at this scale"
# The gate fails for another reason: an unrelated passage is surely worse, by less than the margin. The margin is too
# wide for this metric, not the metric too weak.
MARGIN_TOO_WIDE = "the margin is wider than the gap between the reference and an unrelated passage"
TOO_FEW = "cannot decide"
POWER_TARGET = 0.8  # the power a sweep should have to find parity where the true difference is zero
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Margin:
    """How a metric's differences are taken and how large an equivalent one may be."""

    kind: str  # "log" (a perplexity: log ratio), "lower" (lower is better: x − r), "higher" (r − x)
    size: float  # in the difference's units (log 1.1 for a 10% perplexity margin)
    text: str  # e.g. "within 10% (|Δ log ppl| ≤ log 1.1)"


@dataclass(frozen=True)
class TostResult:
    """One test: the median difference (worse > 0), its (1 − 2α) interval, and the outcome."""

    median: float
    low: float
    high: float
    outcome: str
    n: int

    @property
    def holds(self) -> bool:
        """Equivalent or better: parity."""
        return self.outcome in (EQUIVALENT, BETTER)


def worse_by(values: np.ndarray, reference: np.ndarray, margin: Margin) -> np.ndarray:
    """How much worse each value is than the reference, in the margin's units (> 0: worse); a text ranked worst
    (±inf) is infinitely worse, and two such texts differ by nothing. A missing score (NaN) on either side is no
    evidence of parity: it counts as infinitely worse."""
    values, reference = np.broadcast_arrays(np.asarray(values, np.float64), np.asarray(reference, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        if margin.kind == "log":
            d = np.log(values) - np.log(reference)
        elif margin.kind == "lower":
            d = values - reference
        else:
            d = reference - values
    both_worst = np.isinf(values) & (values == reference)
    return np.where(both_worst, 0.0, np.where(np.isnan(d), math.inf, d))


def order_index(n: int, alpha: float) -> int:
    """The 0-based rank k of the lower end of the median's (1 − 2α) interval [d_(k), d_(n−1−k)]: the largest k
    with P(Binomial(n, 1/2) ≤ k) ≤ α, so that each end misses the median with probability at most α. −1 when n
    is too small for any."""
    k = int(scipy_stats.binom.ppf(alpha, n, 0.5))
    while k >= 0 and scipy_stats.binom.cdf(k, n, 0.5) > alpha:
        k -= 1
    while scipy_stats.binom.cdf(k + 1, n, 0.5) <= alpha:
        k += 1
    return min(k, (n - 2) // 2)


def min_prompts(alpha: float) -> int:
    """The fewest paired prompts with which the test can decide at all at α (5 at α = 0.05): below it the median's
    interval is unbounded and no outcome but "inconclusive" is possible."""
    n = 1
    while order_index(n, alpha) < 0:
        n += 1
    return n


def coverage(n: int, alpha: float) -> float | None:
    """The real coverage of the (1 − 2α) median interval of n differences: 1 − 2 P(Binomial(n, 1/2) ≤ k), which
    the discreteness of order statistics puts above 1 − 2α (0.936 for n = 24 at α = 0.05). None: no interval."""
    k = order_index(n, alpha)
    return None if k < 0 else float(1.0 - 2.0 * scipy_stats.binom.cdf(k, n, 0.5))


def spread(d: np.ndarray) -> float | None:
    """The per-prompt spread of paired differences as a normal sd (1.4826 × the median absolute deviation: robust
    to a continuation ranked worst, whose difference is infinite); None where it is not positive and finite."""
    finite_centre = np.median(d)
    if not np.isfinite(finite_centre):
        return None
    sd = 1.4826 * float(np.median(np.abs(d - finite_centre)))
    return sd if np.isfinite(sd) and sd > 0 else None


def power(n: int, alpha: float, margin: float, sd: float, true_difference: float = 0.0) -> float:
    """The chance that the test finds parity (the interval's upper end below the margin) with n prompts whose
    differences are normal around `true_difference` with this sd. The upper end d_(n−1−k) is below the margin
    exactly when at least n − k differences are, so the count below the margin is Binomial(n, p)."""
    k = order_index(n, alpha)
    if k < 0:
        return 0.0
    p = float(scipy_stats.norm.cdf((margin - true_difference) / sd))
    return float(scipy_stats.binom.sf(n - k - 1, n, p))


def prompts_for_power(alpha: float, margin: float, sd: float, target: float = POWER_TARGET,
                      most: int = 100_000) -> int | None:
    """About the fewest prompts from which the test has `target` power where the true difference is zero (None
    beyond `most`): doubling, then bisection. Power rises with n but in small saw-teeth (the order statistic
    moves in whole ranks), so a count a little above this one may fall just short of the target."""
    low = min_prompts(alpha)
    if power(low, alpha, margin, sd) >= target:
        return low
    high = low
    while power(high, alpha, margin, sd) < target:
        if high >= most:
            return None
        low, high = high, min(2 * high, most)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if power(middle, alpha, margin, sd) >= target else (middle, high)
    return high


def median_interval(d: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The (1 − 2α) distribution-free interval of the median of d along its last axis ([..., N] → [...], [...]);
    (−inf, inf) when N is too small for one."""
    n = d.shape[-1]
    k = order_index(n, alpha)
    if k < 0:
        shape = d.shape[:-1]
        return np.full(shape, -math.inf), np.full(shape, math.inf)
    ordered = np.sort(d, axis=-1)
    return ordered[..., k], ordered[..., n - 1 - k]


def outcome(low: float, high: float, margin: float) -> str:
    if high < margin and low > -margin:
        return EQUIVALENT
    if high < margin:
        return BETTER
    if low >= margin:
        return WORSE
    return INCONCLUSIVE


def tost(d: np.ndarray, margin: float, alpha: float) -> TostResult:
    """TOST at α of paired differences d ([N], worse > 0) against ±margin."""
    low, high = median_interval(d, alpha)
    return TostResult(float(np.median(d)), float(low), float(high), outcome(float(low), float(high), margin), int(d.size))


def parity_index(holds: np.ndarray) -> np.ndarray:
    """The fewest index from which `holds` is true at that and every larger index, or −1; over [..., K]."""
    tail = np.flip(np.logical_and.accumulate(np.flip(holds, -1), axis=-1), -1)  # [..., K]
    return np.where(tail[..., -1], tail.argmax(axis=-1), -1)


def parity_holds(d: np.ndarray, margin: float, alpha: float) -> np.ndarray:
    """Non-inferiority at α for each leading index of d ([..., N] → [...]): the upper end below the margin."""
    return median_interval(d, alpha)[1] < margin


def replicate_parity(d: np.ndarray, margin: float, alpha: float, *, resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED, allowed: np.ndarray | None = None) -> np.ndarray:
    """S_parity's index in each bootstrap replicate over prompts (K where a replicate never reaches parity):
    prompts resampled jointly for every step count (the same prompts at every k). d: [K, N] → [R]. `allowed`
    ([K]): step counts that may hold parity at all (degenerate text may not)."""
    k, n = d.shape
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))  # [R, N]
    resampled = d[:, picks]  # [K, R, N]
    holds = parity_holds(resampled, margin, alpha)  # [K, R]
    if allowed is not None:
        holds &= allowed[:, None]
    index = parity_index(np.moveaxis(holds, 0, -1))  # [R]
    return np.where(index < 0, k, index)


def replicate_shares(index: np.ndarray, steps: list[int]) -> dict[int | None, float]:
    """The share of replicates whose S_parity is each swept step count (None: no parity), in step order."""
    shares: dict[int | None, float] = {}
    for i, k in enumerate(steps):
        share = float(np.mean(index == i))
        if share:
            shares[k] = share
    never = float(np.mean(index >= len(steps)))
    if never:
        shares[None] = never
    return shares


def separates(reference: np.ndarray, unrelated: np.ndarray, margin: Margin, alpha: float) -> TostResult:
    """The calibration gate: is the unrelated passage worse than the reference by more than the margin (the lower
    end of the interval above it)? If not, chance text could pass the equivalence test, and the metric decides
    nothing. Returned as the test of unrelated vs reference; `outcome` is WORSE where the gate passes."""
    return tost(worse_by(unrelated, reference, margin), margin.size, alpha)
