"""Descriptive statistics of raw samples: median, quartiles and a percentile-bootstrap CI (fixed seed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95


@dataclass(frozen=True, slots=True)
class Summary:
    """Median, quartiles and the bootstrap CI of the median; every field None when there are no samples."""

    n: int
    median: float | None
    p25: float | None
    p75: float | None
    ci_low: float | None
    ci_high: float | None


def _finite(samples: Sequence[float] | None) -> np.ndarray:
    if not samples:
        return np.empty(0)
    values = np.asarray(samples, dtype=np.float64)
    return values[np.isfinite(values)]


def median(samples: Sequence[float] | None) -> float | None:
    values = _finite(samples)
    return float(np.median(values)) if values.size else None


def mean(samples: Sequence[float] | None) -> float | None:
    values = _finite(samples)
    return float(np.mean(values)) if values.size else None


def quantile(samples: Sequence[float] | None, q: float) -> float | None:
    """Linear-interpolated quantile (numpy's default); None for no samples."""
    values = _finite(samples)
    return float(np.quantile(values, q)) if values.size else None


def bootstrap_ci(
    samples: Sequence[float] | None,
    statistic: Callable[[np.ndarray], np.ndarray] = lambda x: np.median(x, axis=-1),
    *,
    level: float = CI_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of `statistic` (vectorised over the last axis).

    With one sample the interval collapses to that sample; with five repetitions it is close to their range,
    which is what five samples can say. The seed is fixed so a re-rendered report prints the same numbers.
    """
    values = _finite(samples)
    if not values.size:
        return None, None
    if values.size == 1:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(seed)
    draws = values[rng.integers(0, values.size, size=(resamples, values.size))]
    stats = statistic(draws)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_mean_ci(samples: Sequence[float] | None, **kwargs: float) -> tuple[float | None, float | None]:
    """Bootstrap CI of the mean (quality over prompts)."""
    return bootstrap_ci(samples, lambda x: np.mean(x, axis=-1), **kwargs)  # type: ignore[arg-type]


def summarize(samples: Sequence[float] | None) -> Summary:
    """Median, IQR bounds and the 95% bootstrap CI of the median."""
    values = _finite(samples)
    if not values.size:
        return Summary(0, None, None, None, None, None)
    low, high = bootstrap_ci(values.tolist())
    p25, p75 = np.quantile(values, [0.25, 0.75])
    return Summary(int(values.size), float(np.median(values)), float(p25), float(p75), low, high)
