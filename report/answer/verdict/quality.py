"""The verdict's quality sentence: the judge, the reference, the margin and the test behind S_parity, and the speedup
at every step count that S_parity's bootstrap replicates reach often enough to matter.

"At 4 steps (58% of replicates) 3.15x; at 8 steps (42%) 1.52x" says what a single S_parity hides: where the
replicates over prompts split between step counts, the speedup is that uncertain too. A metric that cannot tell
its reference from an unrelated passage is named as such and decides nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from report.analysis.equivalence import CHANCE
from report.answer.findings import SHORT_LABEL
from report.analysis.intervals import NO_B_STAR, b_star_value, bracket_ends
from report.answer.pairing.build import VANILLA_PAIRING, Pairing, SParity
from report.answer.pairing.pairs import Sides
from report.analysis.parity import MIN_REPLICATE_SHARE, bracket
from specs.controls import PACKAGED_SMOLLM2

JUDGE_NAMES = {PACKAGED_SMOLLM2: f"{PACKAGED_SMOLLM2} (SmolLM2-135M-Instruct, a pretrained model this package did not train)"}


def quality_sentence(group: Sequence[Pairing], t: Sides) -> str:
    """One sentence over the headline metrics of the pair's vanilla pairing (`group`: every pairing of the pair), one
    clause per sampler setting where the diffusion model ran several (Dream's algs, block diffusion's thresholds)."""
    measured = [p for p in group if p.quality_measured]
    settings = list(dict.fromkeys(p.sampler_setting for p in measured))
    clauses = []
    for setting in settings:
        at = [p for p in group if p.sampler_setting == setting]
        first = next(p for p in measured if p.sampler_setting == setting)
        vanilla = [p for p in at if p.pairing == VANILLA_PAIRING]
        swept = sorted({p.steps for p in at})
        single = len(swept) == 1 and setting is not None  # block diffusion's fixed schedule
        parts = "; ".join(_metric_clause(s, vanilla, swept, t, single) for s in first.s_parity)
        clauses.append(f"at {setting}: {parts}" if len(settings) > 1 or single else parts)
    return f"Quality ({measured[0].llada_model}, vanilla): " + "; ".join(clauses) + "."


def _metric_clause(s: SParity, vanilla: Sequence[Pairing], swept: list[int], t: Sides, single: bool) -> str:
    """S_parity on one metric; at a sampler setting of one step count (`single`: block diffusion's fixed schedule),
    only whether that setting reaches parity: a step count it cannot vary says nothing."""
    label = SHORT_LABEL.get(s.metric, s.metric)
    judge = ""
    if s.judge:
        judge = f" judged by {JUDGE_NAMES.get(s.judge, s.judge)}" + (f", the {t.ar} under test," if s.judge_under_test else "")
    reference = f"against {s.reference}" + (" (the text that was timed)" if "greedy" in s.reference else "")
    if not s.decides:
        return f"{label}{judge} {CHANCE}, so it decides no parity"
    test = f" (a two one-sided test at {s.alpha:.0%}, {s.n_prompts} paired prompts)" if s.alpha is not None else ""
    if single:
        verdict = "parity" if s.steps is not None else "no parity"
        return f"{label}{judge} {reference}: {verdict}, {'' if s.steps is not None else 'not '}{s.margin} or better{test}"
    if s.steps is None:
        head = f"{label}{judge} {reference} is not {s.margin} or better at every step count up to {swept[-1]}{test}"
    else:
        bound = "≤ " if s.bound == "<=" else ""
        head = f"{label}{judge} {reference} is {s.margin} or better from {bound}{s.steps} steps on{test}"
    return head + _replicates(s, vanilla)


def _replicates(s: SParity, vanilla: Sequence[Pairing]) -> str:
    """'; S_parity over bootstrap replicates of the prompts: at 4 steps (58%) 3.15x [..] at B = 1, B* 7.07 [..]'."""
    if s.parity_fraction is None:
        return ""
    spoken = []
    for steps, share in zip(s.replicate_steps, s.replicate_shares):
        if share < MIN_REPLICATE_SHARE:
            continue
        text = f"at {steps} steps ({share:.0%})"
        at = next((p for p in vanilla if p.steps == steps), None)
        if at is not None and at.speedups:
            q = at.speedups[0]
            text += f" {q.speedup:.3g}x {bracket(q.speedup_low, q.speedup_high)} at B = {q.batch_size}, {_b_star(at)}"
        spoken.append(text)
    never = 1.0 - s.parity_fraction
    if never >= MIN_REPLICATE_SHARE:
        spoken.append(f"no parity within the swept steps ({never:.0%})")
    if not spoken:
        return ""
    return "; S_parity over bootstrap replicates of the prompts: " + "; ".join(spoken)


def _b_star(p: Pairing) -> str:
    """'B* 4.32 [3.46, 5.4]', 'B* ≤ 1 [≤ 1, 1.3]', 'B* > 16 (no interval)': B* and its interval with their bounds;
    or that one batch size places none."""
    c = p.b_star
    if c is None:
        return NO_B_STAR
    return f"B* {b_star_value(c)} {bracket_ends(c)}"
