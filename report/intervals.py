"""The answer's intervals: a speedup between two runs, and the batch B* where the autoregressive model overtakes
the diffusion model, each with the level it covers and what it rests on (sessions x repetitions).

The unit of replication is the session (a fresh process; on a GPU a fresh CUDA context): repetitions inside one
session share its clocks, allocator, compiled kernels and drift, so an interval over repetitions alone says
nothing of how a second session would come out. So:

- The speedup at a point is exp(mean over sessions s of log(median L_AR,s / median L_dLLM,s)): with one session,
  the ratio of the two runs' medians.
- With two or more sessions that ran both sides, its interval is Student's t with S - 1 degrees of freedom over
  the per-session log ratios: paired by session, so whatever drift a session shares between the two models (both
  ran in it, interleaved point by point) cancels, and what does not cancel is measured, not assumed.
- With one session, it is the distribution-free interval for the shift of log latency between the two runs'
  repetitions (the Mann-Whitney / Hodges-Lehmann interval: order statistics of the pairwise log ratios), at the
  highest level up to `LEVEL` that the repetitions support: 3 + 3 repetitions support 90% at most (their whole
  range of ratios), 5 + 5 support 96.8%. It covers repetition noise only, and says so.
- B* comes from the same per-batch speedups (so the two never disagree): the crossing of log speedup through 0,
  interpolated linearly in log B from the batch before the autoregressive model stays ahead. Its interval
  inverts the pointwise intervals: the crossings of their low and high ends. Where the truth is monotone in B
  and log-linear between measured batches, B* escapes the interval only if an endpoint's interval misses, so it
  covers at least the pointwise level; beyond the measured batches it is open-ended and says so.

Percentile bootstraps are not used for these: over 3 sessions or 3-5 repetitions a percentile (or BCa)
bootstrap of a median or a mean covers far less than its nominal level (tests/test_intervals.py measures it
beside the intervals above, on simulated draws whose truth is known)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as scipy_stats

LEVEL = 0.95
SESSIONS = "t-sessions"  # Student's t over per-session log ratios
RANKS = "rank-shift"  # one session: distribution-free interval of the shift of log latency
NONE = "none"  # too few samples for any interval
METHOD_LABEL = {SESSIONS: "t interval over sessions", RANKS: "distribution-free interval over repetitions",
                NONE: "no interval"}
# Bounds of a B* end: a crossing interpolated between measured batches, or beyond the measured range.
INTERPOLATED, AT_OR_BELOW, ABOVE = "=", "<=", ">"


@dataclass(frozen=True, slots=True)
class Speedup:
    """A ratio of two sides' latencies (> 1: the denominator's side is faster) with its interval and basis."""

    estimate: float
    low: float | None
    high: float | None
    level: float | None  # the interval's nominal coverage (None: no interval)
    method: str  # SESSIONS, RANKS or NONE
    sessions: int  # sessions that ran both sides
    repetitions: tuple[int, int]  # repetitions per session (the fewest), numerator and denominator side

    @property
    def basis(self) -> str:
        """'3 sessions x 5 + 5 repetitions' or '1 session x 3 + 3 repetitions'."""
        a, b = self.repetitions
        return f"{self.sessions} session{'s' if self.sessions != 1 else ''} x {a} + {b} repetitions"

    @property
    def label(self) -> str:
        """The interval in words: its level, kind and basis, and what it leaves out."""
        if self.level is None:
            return f"no interval ({self.basis})"
        text = f"{level_text(self.level)} {METHOD_LABEL[self.method]}, {self.basis}"
        if self.method == RANKS:
            text += "; one session: excludes variation between sessions"
        return text


@dataclass(frozen=True, slots=True)
class Crossover:
    """B*: the batch from which the autoregressive side's throughput stays ahead, with its interval. Each value
    comes with its bound: INTERPOLATED (between two measured batches), AT_OR_BELOW (ahead already at the smallest
    measured batch: the value is that batch) or ABOVE (not yet at the largest: the value is that batch)."""

    estimate: float
    bound: str
    low: float
    low_bound: str
    high: float
    high_bound: str
    level: float | None  # the pointwise level the interval inverts (its coverage is at least that)

    @property
    def interpolated(self) -> bool:
        return self.bound == INTERPOLATED


# ---------------------------------------------------------------- the speedup


def speedup(numerator: Sequence[Sequence[float]], denominator: Sequence[Sequence[float]],
            level: float = LEVEL) -> Speedup:
    """The speedup median(numerator) / median(denominator) from each side's repetitions per session, aligned by
    index (session i of one side ran in the same session as session i of the other; an empty list: that side has
    no run there). See the module docstring for the interval."""
    shared = [(np.asarray(a, np.float64), np.asarray(b, np.float64)) for a, b in zip(numerator, denominator)
              if len(a) and len(b)]
    shared = [(a[np.isfinite(a) & (a > 0)], b[np.isfinite(b) & (b > 0)]) for a, b in shared]
    shared = [(a, b) for a, b in shared if a.size and b.size]
    if not shared:
        raise ValueError("speedup: no session ran both sides")
    reps = (min(a.size for a, _ in shared), min(b.size for _, b in shared))
    logs = np.array([math.log(np.median(a)) - math.log(np.median(b)) for a, b in shared])
    estimate = float(np.exp(logs.mean()))
    if len(shared) >= 2:
        half = scipy_stats.t.ppf((1 + level) / 2, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))
        centre = logs.mean()
        return Speedup(estimate, float(np.exp(centre - half)), float(np.exp(centre + half)), level, SESSIONS,
                       len(shared), reps)
    a, b = shared[0]
    shift = shift_interval(np.log(a), np.log(b), level)
    if shift is None:
        return Speedup(estimate, None, None, None, NONE, 1, reps)
    low, high, achieved = shift
    return Speedup(estimate, float(np.exp(low)), float(np.exp(high)), achieved, RANKS, 1, reps)


def shift_interval(x: np.ndarray, y: np.ndarray, level: float = LEVEL) -> tuple[float, float, float] | None:
    """The distribution-free interval for the shift d in x ~ y + d (Hodges-Lehmann / Mann-Whitney): the k-th
    smallest and largest of the m*n differences x_i - y_j, with k the largest count whose exact two-sided
    confidence is at least `level`, else k = 1 (the whole range) at the confidence it has. Returns (low, high,
    confidence); None when even the whole range has no confidence (one repetition a side)."""
    m, n = int(x.size), int(y.size)
    differences = np.sort((x[:, None] - y[None, :]).ravel())
    if m * n > _EXACT_PAIRS:  # the normal approximation of U (mean mn/2, variance mn(m+n+1)/12)
        k = max(1, int(math.floor(m * n / 2 - scipy_stats.norm.ppf((1 + level) / 2)
                                  * math.sqrt(m * n * (m + n + 1) / 12))))
        return float(differences[k - 1]), float(differences[m * n - k]), level
    cdf = _rank_sum_cdf(m, n)  # P(U <= u) under exchangeability, u = 0 .. m*n
    k = 1
    while k < len(cdf) and 1 - 2 * cdf[k] >= level:  # the interval [D_(k+1), D_(mn-k)] still holds `level`
        k += 1
    confidence = 1 - 2 * cdf[k - 1]
    if confidence <= 0:
        return None
    return float(differences[k - 1]), float(differences[m * n - k]), float(confidence)


_EXACT_PAIRS = 900  # up to 30 x 30 repetitions the exact distribution, beyond it the normal approximation


@lru_cache(maxsize=64)
def _rank_sum_cdf(m: int, n: int) -> tuple[float, ...]:
    """The exact null distribution function of the Mann-Whitney U for samples of m and n (no ties): counts of
    U = u built by the recursion f(m, n, u) = f(m - 1, n, u - n) + f(m, n - 1, u), as probabilities."""
    counts = np.zeros((m + 1, n + 1, m * n + 1))
    counts[0, :, 0] = 1.0
    counts[:, 0, 0] = 1.0
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            counts[i, j, :] = counts[i, j - 1, :]
            counts[i, j, j:] += counts[i - 1, j, : m * n + 1 - j]
    probabilities = counts[m, n] / counts[m, n].sum()
    return tuple(np.cumsum(probabilities))


# ---------------------------------------------------------------- B*


def crossing(batches: Sequence[int], speedups: Sequence[float]) -> tuple[float, str]:
    """B* from speedups L_e2e(AR) / L_e2e(dLLM) at increasing batch sizes (> 1: the diffusion model faster): the
    batch from which the autoregressive model stays ahead (speedup <= 1) at every larger measured batch,
    interpolated linearly in log B and log speedup from the batch before it. (batches[0], AT_OR_BELOW) when it is
    ahead already at the smallest batch; (batches[-1], ABOVE) when not yet at the largest."""
    logs = np.log(np.asarray(speedups, dtype=np.float64))
    ahead = logs <= 0
    holds = np.flip(np.logical_and.accumulate(np.flip(ahead)))  # the AR model ahead from here on
    if not holds[-1]:
        return float(batches[-1]), ABOVE
    first = int(holds.argmax())
    if first == 0:
        return float(batches[0]), AT_OR_BELOW
    b0, b1 = math.log(batches[first - 1]), math.log(batches[first])
    r0, r1 = logs[first - 1], logs[first]
    fraction = r0 / (r0 - r1) if r1 != r0 else 1.0
    return math.exp(b0 + fraction * (b1 - b0)), INTERPOLATED


def crossover(batches: Sequence[int], points: Sequence[Speedup]) -> Crossover:
    """B* and its interval from the speedup at each batch (`points`, in the order of `batches`). A lower speedup
    crosses 1 sooner, so B*'s low end is the crossing of the intervals' low ends and its high end the crossing of
    their high ends. A point without an interval lends its estimate to both."""
    estimate, bound = crossing(batches, [p.estimate for p in points])
    low, low_bound = crossing(batches, [p.low if p.low is not None else p.estimate for p in points])
    high, high_bound = crossing(batches, [p.high if p.high is not None else p.estimate for p in points])
    levels = [p.level for p in points]
    level = None if any(v is None for v in levels) else min(v for v in levels if v is not None)
    return Crossover(estimate, bound, low, low_bound, high, high_bound, level)


def crossover_text(c: Crossover, ar: str, dllm: str) -> str:
    """'5.3 [3.9, 9.4] (interpolated between measured batches; 95% interval)' and its open-ended forms."""
    interval = f"[{_end(c.low, c.low_bound)}, {_end(c.high, c.high_bound)}]"
    level = f"{level_text(c.level)} interval" if c.level is not None else "no interval"
    if c.bound == AT_OR_BELOW:
        where = f"{ar} ahead already at the smallest batch measured"
    elif c.bound == ABOVE:
        where = f"{dllm} still ahead at the largest batch measured"
    else:
        where = "interpolated between measured batches"
    return f"{_end(c.estimate, c.bound)} {interval} ({where}; {level})"


def level_text(level: float) -> str:
    """'95%', '96.8%': a level as a reader checks it, without rounding an attained 96.8% up to 97%."""
    return f"{level:.0%}" if abs(level * 100 - round(level * 100)) < 1e-9 else f"{level:.1%}"


def _end(value: float, bound: str) -> str:
    return {AT_OR_BELOW: f"≤ {value:g}", ABOVE: f"> {value:g}"}.get(bound, f"{value:.3g}")
