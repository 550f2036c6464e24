"""The verdict's quality sentence: the judge, the reference, the margins and the test behind S_parity, named once, then
per metric S_parity with the test's power, the step counts whose text is degenerate, and the speedup at every step
count that S_parity's bootstrap replicates reach often enough to matter.

"At 4 steps (58% of replicates) 3.15x; at 8 steps (42%) 1.52x" says what a single S_parity hides: where the
replicates over prompts split between step counts, the speedup is that uncertain too. A metric that cannot tell
its reference from an unrelated passage is named as such and decides nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from report.analysis.equivalence import CHANCE, TOO_FEW
from report.answer.findings import SHORT_LABEL
from report.analysis.intervals import NO_B_STAR, b_star_value, bracket_ends
from report.answer.pairing.build import VANILLA_PAIRING, Pairing, SParity
from report.answer.pairing.pairs import Sides
from report.analysis.parity import MIN_REPLICATE_SHARE, bracket
from specs.controls import PACKAGED_SMOLLM2

JUDGE_NAMES = {PACKAGED_SMOLLM2: f"{PACKAGED_SMOLLM2} (SmolLM2-135M-Instruct, a pretrained model this package did not train)"}


def quality_sentence(group: Sequence[Pairing], t: Sides, brief: bool = False) -> str:
    """One sentence over the headline metrics of the pair's vanilla pairing (`group`: every pairing of the pair): the
    judge, the reference, the margins and the test named once, then one clause per sampler setting where the
    diffusion model ran several (Dream's algs, block diffusion's thresholds), one result per metric. `brief` (the
    verdict's two lines): the reference and the test only, and no bootstrap replicates; the Findings say the rest."""
    measured = [p for p in group if p.quality_measured]
    settings = list(dict.fromkeys(p.sampler_setting for p in measured))
    clauses = []
    for setting in settings:
        at = [p for p in group if p.sampler_setting == setting]
        first = next(p for p in measured if p.sampler_setting == setting)
        vanilla = [p for p in at if p.pairing == VANILLA_PAIRING]
        swept = sorted({p.steps for p in at})
        single = len(swept) == 1 and setting is not None  # block diffusion's fixed schedule
        parts = "; ".join(_metric_clause(s, vanilla, swept, single, brief) for s in first.s_parity)
        clauses.append(f"at {setting}: {parts}" if len(settings) > 1 or single else parts)
    how = _brief_how(measured[0].s_parity) if brief else _how(measured[0].s_parity, t)
    model = measured[0].llada_model if brief else f"{measured[0].llada_model}, vanilla"
    return f"Quality ({model}; {how}): " + "; ".join(clauses) + "."


def _brief_how(found: Sequence[SParity]) -> str:
    """'against human continuation, two one-sided test at 5%, 24 prompts'."""
    references = " / ".join(dict.fromkeys(s.reference for s in found))
    tested = next((s for s in found if s.alpha is not None), None)
    test = f", two one-sided test at {tested.alpha:.0%}, {tested.n_prompts} prompts" if tested is not None else ""
    return f"against {references}{test}"


def _how(found: Sequence[SParity], t: Sides) -> str:
    """The judge, the reference, the margins, the test and the diversity guard, once: 'perplexity judged by
    packaged-smollm2 (...), against llama-mini greedy (the text that was timed), within 10% (...) for perplexity and
    within 0.02 for BERTScore F1, by a two one-sided test at 5% over 24 paired prompts'."""
    parts = []
    for s in found:
        if s.judge:
            under = f", the {t.ar} under test" if s.judge_under_test else ""
            parts.append(f"{SHORT_LABEL.get(s.metric, s.metric)} judged by {JUDGE_NAMES.get(s.judge, s.judge)}{under}")
    references = list(dict.fromkeys(s.reference for s in found))
    named = [f"{r} (the text that was timed)" if "greedy" in r else r for r in references]
    if len(references) == 1:
        parts.append(f"against {named[0]}")
    else:  # each metric's headline reference (the first that decides: report/analysis/parity.py)
        parts.append("against " + " and ".join(
            f"{name} for {', '.join(SHORT_LABEL.get(s.metric, s.metric) for s in found if s.reference == r)}"
            for r, name in zip(references, named)))
    margins = [f"{s.margin} for {SHORT_LABEL.get(s.metric, s.metric)}" for s in found if s.margin]
    if margins:
        parts.append(" and ".join(margins))
    tested = next((s for s in found if s.alpha is not None), None)
    if tested is not None:
        parts.append(f"by a two one-sided test at {tested.alpha:.0%} over {tested.n_prompts} paired prompts")
    human = next((s.human_diversity for s in found if s.human_diversity is not None), None)
    if human is not None:
        parts.append(f"degenerate text (distinct-2 well short of the human text's {human:.2f}) holds no parity")
    return ", ".join(parts)


def _metric_clause(s: SParity, vanilla: Sequence[Pairing], swept: list[int], single: bool, brief: bool = False) -> str:
    """S_parity on one metric, with the test's power; at a sampler setting of one step count (`single`: block
    diffusion's fixed schedule), only whether that setting reaches parity: a step count it cannot vary says nothing."""
    label = SHORT_LABEL.get(s.metric, s.metric)
    if not s.decides:
        reason = s.gate if s.gate and s.gate.startswith(TOO_FEW) else (s.gate or CHANCE).split(":")[0]
        return f"{label} decides no parity: {reason}"
    power = "" if s.power is None else f" (power {s.power:.0%}" + (
        f"; 80% needs {s.prompts_for_power} prompts)" if s.prompts_for_power and s.power < 0.8 and not brief else ")")
    degenerate = f", degenerate at {_steps(s.degenerate_steps)}" if s.degenerate_steps else ""
    if s.degenerate_steps and set(swept) <= set(s.degenerate_steps):
        degenerate = (", degenerate at every step count" if brief else
                      f", its text degenerate at every step count swept, so its {label} says nothing of its quality here")
    if single:
        return f"{label}: {'parity' if s.steps is not None else 'no parity'}{power}{degenerate}"
    if s.steps is None:
        head = f"{label}: no parity up to {swept[-1]} steps{power}{degenerate}"
    else:
        head = f"{label}: parity from {'≤ ' if s.bound == '<=' else ''}{s.steps} steps on{power}{degenerate}"
    return head + ("" if brief else _replicates(s, vanilla))


def _steps(steps: Sequence[int]) -> str:
    return ", ".join(str(k) for k in steps) + (" step" if list(steps) == [1] else " steps")


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
