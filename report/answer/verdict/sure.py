"""How sure the verdict is: the short verdict's last bullet (`brief_sure`), and the full verdict's last sentence a pair (`how_sure`): what each interval rests on, what B*'s inversion guarantees, the
roofline's B* as a model beside the measured one, what was extrapolated, and how the pair's runs were taken.

The roofline clause speaks of one sampler setting; where the pair's first pairing ran several (block diffusion's
thresholds, Dream's algs) it names the one it cites, since each setting has its own forwards and so its own B*.
"""

from __future__ import annotations

from collections.abc import Sequence

from report.analysis.intervals import METHOD_LABEL, NONE, b_star_value, level_text
from report.answer.pairing.text import roofline_value
from report.answer.pairing.build import Pairing, PairingPoint


def how_sure(group: Sequence[Pairing], first: Sequence[Pairing], context: str) -> str:
    """`group`: every pairing of the pair; `first`: those its first pairing sentence speaks of (the roofline clause
    cites one of them); `context`: how the pair's runs were taken (report.analysis.history.history_text), said last."""
    points = [q for p in group for q in p.speedups]
    text = "How sure: " + _intervals(points)
    covered = _coverage(group)
    if covered is not None:
        text += (f"; B*'s interval inverts one of them per batch, which guarantees at least {level_text(covered)} "
                 "where the speedup falls with B and is log-linear between measured batches")
    roofline = roofline_clause(first)
    if roofline:
        text += f"; {roofline}"
    text += _extrapolated(points)
    # S_parity's replicate shares at each step count are the quality sentence's (report/answer/verdict/quality.py)
    if context:
        text += f"; {context}"
    return text + "."


def brief_sure(group: Sequence[Pairing], disturbed: str | None) -> str:
    """The short verdict's last bullet, over every pair of the sweep: what the intervals rest on, what B*'s
    guarantees, what was extrapolated, and whether any session was flagged as disturbed (`disturbed`:
    report.table.sessions.disturbed_text; None where no session could be judged)."""
    points = [q for p in group for q in p.speedups]
    text = "How sure: " + _intervals(points)
    covered = _coverage(group)
    if covered is not None:
        text += f"; B*'s interval inverts them, at least {level_text(covered)}"
    text += _extrapolated(points)
    if disturbed:
        text += f"; they rest on {disturbed}, flagged as disturbed: the machine was busy, so they measure its load too"
    elif disturbed is not None:
        text += "; no session was flagged as disturbed"
    return text + "."


def _intervals(points: Sequence[PairingPoint]) -> str:
    """"each speedup's interval is a 95% t interval over sessions, 3 sessions x 2 + 2 repetitions", or which have none."""
    labels = sorted({q.interval_label for q in points if q.interval_level is not None})
    bare = sorted({q.interval_label for q in points if q.interval_level is None})
    parts = ["each speedup's interval is a " + " or a ".join(labels)] if labels else []
    if bare:  # 'no interval (1 session x 1 + 1 repetitions: an interval needs ...)'
        count = "no speedup has an interval" if not labels else f"{sum(q.interval_level is None for q in points)} have none"
        parts.append(f"{count} " + "; ".join(label.removeprefix(f"{METHOD_LABEL[NONE]} ") for label in bare))
    return "; ".join(parts)


def _coverage(group: Sequence[Pairing]) -> float | None:
    covered = [c.coverage for c in (p.b_star for p in group) if c is not None and c.coverage is not None]
    return min(covered) if covered else None


def _extrapolated(points: Sequence[PairingPoint]) -> str:
    extrapolated = [q for q in points if q.llada_extrapolated]
    if not extrapolated:
        return ""
    unchecked = sum(1 for q in extrapolated if not q.llada_extrapolation_checked)
    return (f"; {len(extrapolated)} of the {len(points)} diffusion latencies behind these speedups are "
            "extrapolated from their first timed steps" + (f" ({unchecked} unchecked)" if unchecked else ""))


def roofline_clause(group: Sequence[Pairing]) -> str:
    """The roofline's B* for the first of `group` that has one: two models, never a bound, beside the measured B*
    of the same setting, which it names where `group` spans several."""
    p = next((p for p in group if p.b_star_roofs_bound is not None), None)
    if p is None:
        return ""
    several = len({q.sampler_setting for q in group}) > 1
    at = f"at {p.sampler_setting}, " if several and p.sampler_setting else ""
    text = (f"the roofline ({p.roofline_profile}) is a model, not a bound on B*: {at}its roofs-only B* is "
            f"{roofline_value(p.b_star_roofs, p.b_star_roofs_bound)}")
    if p.calibration:
        text += (f" and its floor-calibrated B* {roofline_value(p.b_star_calibrated, p.b_star_calibrated_bound)} "
                 f"({p.calibration})")
    measured = (f"{b_star_value(p.b_star)} measured at {p.steps} steps" if p.b_star is not None
                else f"no measured B* at {p.steps} steps (one batch size)")
    return text + f", against {measured}"
