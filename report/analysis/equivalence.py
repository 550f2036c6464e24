"""Parity as an equivalence test: two one-sided tests (TOST) on paired per-prompt differences, a margin per metric,
and the calibration gate that decides whether a metric can tell text from chance at all.

A difference is how much *worse* a text is than the reference, in the margin's units: log(ppl / ppl_ref) for a
perplexity (so a margin ratio of 1.1 is ±log 1.1), the NLL difference in nats (the same number), BERTScore's
difference in its own units. The test is distribution-free: the (1 − 2α) interval of the median difference from
order statistics (the sign test's interval, exact under any continuous distribution, and usable with the +inf of a
continuation ranked worst). TOST at α holds equivalence when that interval lies inside (−margin, margin);
non-inferiority (equivalence or better) when its upper end is below the margin. Parity is non-inferiority:
"equivalent or better", never "not detectably different".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

EQUIVALENT, BETTER, WORSE, INCONCLUSIVE = "equivalent", "not worse (may be better)", "worse", "inconclusive"
CHANCE = "cannot separate text from chance at this scale"
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
    (±inf) is infinitely worse, and two such texts differ by nothing."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if margin.kind == "log":
            d = np.log(values) - np.log(reference)
        elif margin.kind == "lower":
            d = values - reference
        else:
            d = reference - values
    return np.where(np.isnan(d), 0.0, d)


def order_index(n: int, alpha: float) -> int:
    """The 0-based rank k of the lower end of the median's (1 − 2α) interval [d_(k), d_(n−1−k)]: the largest k
    with P(Binomial(n, 1/2) ≤ k) ≤ α, so that each end misses the median with probability at most α. −1 when n
    is too small for any."""
    k = -1
    while k + 1 < n - 2 - k and scipy_stats.binom.cdf(k + 1, n, 0.5) <= alpha:
        k += 1
    return k


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
                     seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """S_parity's index in each bootstrap replicate over prompts (K where a replicate never reaches parity):
    prompts resampled jointly for every step count (the same prompts at every k). d: [K, N] → [R]."""
    k, n = d.shape
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))  # [R, N]
    resampled = d[:, picks]  # [K, R, N]
    index = parity_index(np.moveaxis(parity_holds(resampled, margin, alpha), 0, -1))  # [R]
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
