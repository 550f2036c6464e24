"""Descriptive statistics of raw samples: median, quartiles, mean ± sd, CV, tail percentiles, and an interval
that says what it is: a 95% BCa bootstrap CI (scipy.stats.bootstrap, fixed seed) from `MIN_CI_SAMPLES`
samples up, the plain range below that (three repetitions cannot support a 95% interval: the min-max of three
draws covers the median only 75% of the time)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95
# Fewer samples than this get their range, never a "CI" (vLLM and optimum-benchmark report >= 10 runs).
MIN_CI_SAMPLES = 6
# The tail percentiles reported for per-token and per-step timings (vLLM's benchmark_serving reports these).
TAIL_PERCENTILES = (50, 90, 99)

CI = "bca95"
PERCENTILE_CI = "pct95"
RANGE = "range"
SESSIONS_T = "t95-sessions"  # a configuration over several sessions: report/intervals.py's location_interval
INTERVAL_LABEL = {CI: "95% BCa CI", PERCENTILE_CI: "95% percentile bootstrap CI", RANGE: "range",
                  SESSIONS_T: "95% t interval over the sessions' medians"}


@dataclass(frozen=True, slots=True)
class Interval:
    """An interval around a statistic and what kind it is: `CI` (95% BCa bootstrap) or `RANGE` (min-max)."""

    low: float | None
    high: float | None
    kind: str | None  # CI, PERCENTILE_CI, RANGE, or None without samples
    n: int

    @property
    def label(self) -> str:
        """'95% BCa CI, n=10' or 'range, n=3': an interval is never shown without what it rests on."""
        if self.kind is None:
            return "no samples"
        return f"{INTERVAL_LABEL[self.kind]}, n={self.n}"


@dataclass(frozen=True, slots=True)
class Summary:
    """Median, quartiles, the interval of the median, mean, sd and CV; every value None without samples."""

    n: int
    median: float | None
    p25: float | None
    p75: float | None
    low: float | None
    high: float | None
    interval: str | None  # CI or RANGE
    mean: float | None
    sd: float | None
    cv: float | None  # sd / mean


def _finite(samples: Sequence[float] | np.ndarray | None) -> np.ndarray:
    if samples is None or len(samples) == 0:
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


def percentiles(samples: Sequence[float] | None, points: Sequence[int] = TAIL_PERCENTILES) -> dict[int, float | None]:
    """p50/p90/p99 (or `points`) of the samples; None each without samples."""
    values = _finite(samples)
    if not values.size:
        return dict.fromkeys(points)
    return {p: float(v) for p, v in zip(points, np.percentile(values, list(points)))}


def _median_axis(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis)


def interval(
    samples: Sequence[float] | np.ndarray | None,
    statistic: Callable[..., np.ndarray] = _median_axis,
    *,
    level: float = CI_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    min_samples: int = MIN_CI_SAMPLES,
) -> Interval:
    """The BCa bootstrap CI of `statistic` (vectorised, `axis` keyword) from `min_samples` samples up, else
    the samples' range. Identical samples give a zero-width interval; the seed is fixed so a re-rendered report
    prints the same numbers."""
    values = _finite(samples)
    n = int(values.size)
    if n == 0:
        return Interval(None, None, None, 0)
    if n < min_samples:
        return Interval(float(values.min()), float(values.max()), RANGE, n)
    if float(values.min()) == float(values.max()):
        return Interval(float(values[0]), float(values[0]), CI, n)
    with warnings.catch_warnings():
        # BCa's acceleration is undefined when the jackknife values all tie (a median over many ties):
        # scipy warns and returns NaN, and the percentile interval below stands in.
        warnings.simplefilter("ignore", scipy_stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy_stats.bootstrap(
            (values,), statistic, vectorized=True, n_resamples=resamples, confidence_level=level,
            method="BCa", random_state=np.random.default_rng(seed),
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):
        draws = np.asarray(result.bootstrap_distribution)
        low, high = (float(v) for v in np.quantile(draws, [(1 - level) / 2, (1 + level) / 2]))
        return Interval(*_within_samples(low, high, values, statistic), PERCENTILE_CI, n)
    return Interval(*_within_samples(low, high, values, statistic), CI, n)


def _within_samples(
    low: float, high: float, values: np.ndarray, statistic: Callable[..., np.ndarray]
) -> tuple[float, float]:
    """A median's interval clipped to the samples' range: every resample's median lies inside it, but the
    midpoint of two equal values or BCa's interpolation can land one rounding step outside."""
    if statistic is not _median_axis:
        return low, high
    lowest, highest = float(values.min()), float(values.max())
    return min(max(low, lowest), highest), min(max(high, lowest), highest)


def rank_interval(
    samples: Sequence[float] | np.ndarray, *, level: float = CI_LEVEL, resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED, min_samples: int = MIN_CI_SAMPLES,
) -> Interval:
    """The interval of the median when some samples are infinite (ranked worst, not measured): the percentile
    bootstrap read with the inverted CDF, so every bound is a value that occurs; the range below
    `min_samples`. NaN samples are dropped."""
    values = np.asarray(samples, dtype=np.float64)
    values = values[~np.isnan(values)]
    n = int(values.size)
    if n == 0:
        return Interval(None, None, None, 0)
    if n < min_samples:
        return Interval(float(values.min()), float(values.max()), RANGE, n)
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy_stats.bootstrap(
            (values,), _median_axis, vectorized=True, n_resamples=resamples, confidence_level=level,
            method="percentile", random_state=np.random.default_rng(seed),
        )
    draws = np.asarray(result.bootstrap_distribution)
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return Interval(float(low), float(high), PERCENTILE_CI, n)


def summarize(samples: Sequence[float] | None) -> Summary:
    """Median, IQR bounds, the interval of the median (CI or range by sample count), mean, sd and CV."""
    values = _finite(samples)
    if not values.size:
        return Summary(0, None, None, None, None, None, None, None, None, None)
    spread = interval(values)
    p25, p75 = np.quantile(values, [0.25, 0.75])
    avg = float(np.mean(values))
    sd = float(np.std(values, ddof=1)) if values.size > 1 else None
    cv = sd / avg if sd is not None and avg else None
    return Summary(int(values.size), float(np.median(values)), float(p25), float(p75), spread.low, spread.high,
                   spread.kind, avg, sd, cv)
