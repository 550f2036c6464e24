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
- With one session, it is Welch's t interval for the difference of mean log latency between the two runs'
  repetitions (Welch-Satterthwaite degrees of freedom): each side's spread is its own, so a noisy eager side
  beside a steady one is not assumed away (a rank interval for a pure shift is, and covers 81% where it states
  90% at 3 + 3 repetitions with CVs of 0.2 and 0.03). It rests on log-normal repetition noise, covers repetition
  noise only, and says so; tests/test_intervals.py measures its coverage with equal and unequal spreads.
- B* comes from the same per-batch speedups (so the two never disagree): the crossing of log speedup through 0,
  interpolated linearly in log B from the batch before the autoregressive model stays ahead. Its interval
  inverts the pointwise intervals: the crossings of their low and high ends. Where the truth falls with B and is
  log-linear between measured batches, B* is inside whenever every pointwise interval covers its truth, so by
  the union bound it covers at least 1 - k(1 - level) for k pointwise intervals (`Crossover.coverage`: 90% for
  two 95% intervals); beyond the measured batches it is open-ended and says so.

Percentile bootstraps are not used for these: over 3 sessions or 3-5 repetitions a percentile (or BCa)
bootstrap of a median or a mean covers far less than its nominal level (tests/test_intervals.py measures it
beside the intervals above, on simulated draws whose truth is known)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

LEVEL = 0.95
SESSIONS = "t-sessions"  # Student's t over per-session log ratios
WELCH = "welch-log"  # one session: Welch's t on the two runs' log latencies
NONE = "none"  # too few samples for any interval
METHOD_LABEL = {SESSIONS: "t interval over sessions", WELCH: "Welch t interval on log latencies over repetitions",
                NONE: "no interval"}
NO_INTERVAL_NEEDS = "an interval needs two sessions, or two repetitions a side in one"
# B* is placed only between measured batches: one batch size places none, at or beyond it.
MIN_BATCHES = 2
NO_B_STAR = "no B* could be placed with one batch size"
# Bounds of a B* end: a crossing interpolated between measured batches, or beyond the measured range.
INTERPOLATED, AT_OR_BELOW, ABOVE = "=", "<=", ">"


@dataclass(frozen=True, slots=True)
class Speedup:
    """A ratio of two sides' latencies (> 1: the denominator's side is faster) with its interval and basis."""

    estimate: float
    low: float | None
    high: float | None
    level: float | None  # the interval's nominal coverage (None: no interval)
    method: str  # SESSIONS, WELCH or NONE
    sessions: int  # sessions that ran both sides
    repetitions: tuple[int, int]  # repetitions per session (the fewest), numerator and denominator side
    # Each planned session it could not use, with why: 'session 2 of 2 (llada-tiny failed: error)'.
    left_out: tuple[str, ...] = ()

    @property
    def basis(self) -> str:
        """'3 sessions x 5 + 5 repetitions', '1 of 2 sessions x 3 + 3 repetitions, leaving out session 2 of 2 (...)'."""
        a, b = self.repetitions
        planned = self.sessions + len(self.left_out)
        of = f" of {planned}" if self.left_out else ""
        text = f"{self.sessions}{of} session{'s' if planned != 1 else ''} x {a} + {b} repetitions"
        return text + (f", leaving out {', '.join(self.left_out)}" if self.left_out else "")

    @property
    def label(self) -> str:
        """The interval in words: its level, kind and basis, and what it leaves out."""
        if self.level is None:
            return f"no interval ({self.basis}: {NO_INTERVAL_NEEDS})"
        text = f"{level_text(self.level)} {METHOD_LABEL[self.method]}, {self.basis}"
        if self.method == WELCH:
            text += "; one session: excludes variation between sessions"
        return text


@dataclass(frozen=True, slots=True)
class Crossover:
    """B*: the batch from which the autoregressive side's throughput stays ahead, with its interval. Each value
    comes with its bound: INTERPOLATED (between two measured batches), AT_OR_BELOW (ahead already at the smallest
    measured batch: the value is that batch) or ABOVE (not yet at the largest: the value is that batch). Its
    interval is None where a speedup it rests on has none (nothing to invert)."""

    estimate: float
    bound: str
    low: float | None
    low_bound: str | None
    high: float | None
    high_bound: str | None
    level: float | None  # the pointwise level of the intervals it inverts (None: no interval)
    inverted: int = 0  # how many pointwise intervals it inverts (one per measured batch)
    left_out: tuple[str, ...] = ()  # the sessions its speedups leave out, with why (Speedup.left_out)

    @property
    def interpolated(self) -> bool:
        return self.bound == INTERPOLATED

    @property
    def coverage(self) -> float | None:
        """What the inversion guarantees (None: no interval): see `inverted_coverage`."""
        return None if self.level is None else inverted_coverage(self.level, self.inverted)


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
        centre, half = session_t(logs, level)
        return Speedup(estimate, float(np.exp(centre - half)), float(np.exp(centre + half)), level, SESSIONS,
                       len(shared), reps)
    a, b = shared[0]
    if a.size < 2 or b.size < 2:
        return Speedup(estimate, None, None, None, NONE, 1, reps)
    centre, half = welch_log(np.log(a), np.log(b), level)
    low, high = float(np.exp(centre - half)), float(np.exp(centre + half))
    # The interval is about the mean log ratio; the estimate, a ratio of medians, is kept inside it.
    return Speedup(estimate, min(low, estimate), max(high, estimate), level, WELCH, 1, reps)


def session_t(logs: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """(centre, half-width) of Student's t interval for the mean of `logs` over its last axis (S >= 2 values: one
    per session); vectorised over the leading axes."""
    s = logs.shape[-1]
    half = scipy_stats.t.ppf((1 + level) / 2, s - 1) * logs.std(axis=-1, ddof=1) / math.sqrt(s)
    return logs.mean(axis=-1), half


def welch_log(log_a: np.ndarray, log_b: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """(centre, half-width) of Welch's t interval for mean(log_a) - mean(log_b) over the last axis (at least two
    values a side), with Welch-Satterthwaite degrees of freedom; vectorised over the leading axes. Two sides
    without spread give a half-width of zero."""
    m, n = log_a.shape[-1], log_b.shape[-1]
    va, vb = log_a.var(axis=-1, ddof=1) / m, log_b.var(axis=-1, ddof=1) / n
    se2 = va + vb
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(se2 > 0, se2 ** 2 / (va ** 2 / (m - 1) + vb ** 2 / (n - 1)), m + n - 2)
    half = scipy_stats.t.ppf((1 + level) / 2, df) * np.sqrt(se2)
    return log_a.mean(axis=-1) - log_b.mean(axis=-1), half


def location_interval(per_session: Sequence[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The interval of a configuration's typical value across sessions (one positive value per session: its
    median): Student's t over their logs, the same basis as the speedups'. None below two sessions."""
    values = np.asarray([v for v in per_session if v > 0], np.float64)
    if values.size < 2:
        return None
    centre, half = session_t(np.log(values), level)
    return float(np.exp(centre - half)), float(np.exp(centre + half))


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


def crossover(batches: Sequence[int], points: Sequence[Speedup]) -> Crossover | None:
    """B* and its interval from the speedup at each batch (`points`, in the order of `batches`); None below
    MIN_BATCHES (one batch says nothing of where the autoregressive model overtakes). A lower speedup crosses 1
    sooner, so B*'s low end is the crossing of the intervals' low ends and its high end the crossing of their high
    ends; where any point has no interval, B* has none."""
    if len(batches) < MIN_BATCHES:
        return None
    estimate, bound = crossing(batches, [p.estimate for p in points])
    left_out = tuple(dict.fromkeys(gap for p in points for gap in p.left_out))
    if any(p.low is None or p.high is None or p.level is None for p in points):
        return Crossover(estimate, bound, None, None, None, None, None, len(points), left_out)
    low, low_bound = crossing(batches, [p.low for p in points if p.low is not None])
    high, high_bound = crossing(batches, [p.high for p in points if p.high is not None])
    level = min(p.level for p in points if p.level is not None)
    return Crossover(estimate, bound, low, low_bound, high, high_bound, level, len(points), left_out)


def inverted_coverage(level: float, intervals: int) -> float:
    """What inverting `intervals` pointwise intervals of `level` guarantees B*'s interval (the union bound): at least
    1 - k(1 - level), never below 0."""
    return max(0.0, 1 - intervals * (1 - level))


def crossover_text(c: Crossover | None, ar: str, dllm: str) -> str:
    """'5.3 [3.9, 9.4] (interpolated between measured batches; at least 90%: 2 pointwise 95% intervals inverted)',
    its open-ended forms, '5.3 (...; no interval: ...)' where a speedup has none, NO_B_STAR for one batch; and the
    sessions its speedups leave out."""
    if c is None:
        return NO_B_STAR
    interval = "" if c.low is None else f" {bracket_ends(c)}"
    if c.bound == AT_OR_BELOW:
        where = f"{ar} ahead already at the smallest batch measured"
    elif c.bound == ABOVE:
        where = f"{dllm} still ahead at the largest batch measured"
    else:
        where = "interpolated between measured batches"
    gaps = f"; its speedups leave out {', '.join(c.left_out)}" if c.left_out else ""
    return f"{b_star_value(c)}{interval} ({where}; {coverage_text(c)}{gaps})"


def b_star_value(c: Crossover) -> str:
    """'4.32', '≤ 1' or '> 16': B* alone, with its bound."""
    return bounded(c.estimate, c.bound)


def bracket_ends(c: Crossover) -> str:
    """'[3.46, 5.4]', '[≤ 1, 1.3]': B*'s interval with its bounds; '(no interval)' where it has none."""
    if c.low is None or c.high is None:
        return "(no interval)"
    return f"[{bounded(c.low, c.low_bound)}, {bounded(c.high, c.high_bound)}]"


def coverage_text(c: Crossover) -> str:
    """'at least 90%: 2 pointwise 95% intervals inverted', or why there is no interval."""
    if c.level is None or c.coverage is None:
        return f"no interval: a speedup it rests on has none ({NO_INTERVAL_NEEDS})"
    count = f"{c.inverted} pointwise {level_text(c.level)} interval{'s' if c.inverted != 1 else ''} inverted"
    return f"at least {level_text(c.coverage)}: {count}"


def level_text(level: float) -> str:
    """'95%', '96.8%': a level as a reader checks it, without rounding an attained 96.8% up to 97%."""
    return f"{level:.0%}" if abs(level * 100 - round(level * 100)) < 1e-9 else f"{level:.1%}"


def bounded(value: float, bound: str | None) -> str:
    """'≤ 1', '> 16' or '4.32': a B* value with its bound."""
    return {AT_OR_BELOW: f"≤ {value:g}", ABOVE: f"> {value:g}"}.get(bound, f"{value:.3g}")
