"""The verdict: at most five plain sentences that open report.md, report.html, findings.json and the terminal.

A reader asks three things before any table: who is faster at equal quality at the smallest batch, from which
batch the autoregressive model stays ahead, and how sure we are. Every word here is generated from the pairings
(report/pairings.py), one sentence per pairing (vanilla, best) and pair covering every headline quality reference,
then one on the statistics; nothing is written by hand, so the verdict changes when the measurements do. Each
side is named by its family's title (LLaMA, LLaDA; Qwen2.5, Dream); where a sweep has several pairs (report/pairs.py)
each pair's sentences open with its two models.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

from report import stats
from report.findings import SHORT_LABEL
from report.pairings import BEST_PAIRING, VANILLA_PAIRING, Pairing, PairingPoint, SParity
from report.pairs import Sides, sides_of

MAX_SENTENCES = 5  # a pair's
NO_PAIRING = "No verdict: no successful runs of both models at the same lengths."
ONLY_VANILLA = ("No implementation other than vanilla ran, so each model at its best is the vanilla pairing "
                "(add variants to the spec's grid to compare them).")


def verdict(pairings: Sequence[Pairing]) -> list[str]:
    """At most MAX_SENTENCES sentences a pair: one per pairing present and pair (each quality reference in it),
    the vanilla-only note when no variant ran, and how sure the speedups and S_parity are."""
    if not pairings:
        return [NO_PAIRING]
    pairs = list(dict.fromkeys(p.pair for p in pairings))
    kinds = [k for k in (VANILLA_PAIRING, BEST_PAIRING) if any(p.pairing == k for p in pairings)]
    sentences = []
    for pair in pairs:
        lead = f"{pair.heading}: " if len(pairs) > 1 else ""
        sides = sides_of([pair])
        for k in kinds:
            group = [p for p in pairings if p.pairing == k and p.pair == pair]
            if group:
                sentences.append(lead + _pairing_sentence(k, group, sides))
    if kinds == [VANILLA_PAIRING]:
        sentences.append(ONLY_VANILLA)
    sentences.append(_how_sure(pairings, sides_of(pairs)))
    assert len(sentences) <= MAX_SENTENCES * len(pairs), sentences
    return sentences


# ---------------------------------------------------------------- one sentence per pairing


def _pairing_sentence(kind: str, group: list[Pairing], t: Sides) -> str:
    references = _by_reference(group)
    spoken = [p for matched in references.values() for p, _ in matched] or group  # the pairings it speaks of
    lead = ("Vanilla against vanilla (the protocol)" if kind == VANILLA_PAIRING
            else f"Each at its best ({t.ar} {_impls(p.llama_impls for p in spoken)}, "
                 f"{t.dllm} {_impls(p.llada_impls for p in spoken)})")
    clauses, unmatched = [], []
    for (metric, reference), matched in references.items():
        label = SHORT_LABEL.get(metric, metric)
        if not matched:
            swept = sorted({p.steps for p in group})
            unmatched.append(f"{t.dllm}'s {label} never matches {reference}'s within the {swept[0]}–{swept[-1]} "
                             "steps swept")
            continue
        parity = ", ".join(sorted({_parity_steps(s) for _, s in matched}, key=_leading_number))
        clauses.append(f"at equal quality ({label} as good as {reference} from {parity} steps) "
                       + _speed_clause([p for p, _ in matched], t))
    clauses += unmatched
    if not clauses:  # no quality measured: the speed at every step count swept
        steps = sorted({p.steps for p in group})
        clauses.append(f"without a quality measurement, at {_steps_list(steps)} steps " + _speed_clause(group, t))
    where = _where(group)
    return f"{lead}{where}: " + "; ".join(clauses) + "."


def _by_reference(group: list[Pairing]) -> dict[tuple[str, str], list[tuple[Pairing, SParity]]]:
    """Per headline (metric, reference): the pairings whose step count is S_parity there, with that S_parity."""
    out: dict[tuple[str, str], list[tuple[Pairing, SParity]]] = {}
    for p in group:
        for s in p.s_parity:
            matched = out.setdefault((s.metric, s.reference), [])
            if s.steps == p.steps:
                matched.append((p, s))
    return out


def _speed_clause(group: list[Pairing], t: Sides) -> str:
    """Who is faster at each pairing's smallest batch, and from which batch the AR model stays ahead."""
    firsts = [p.speedups[0] for p in group]
    batches = sorted({q.batch_size for q in firsts})
    at = f"B = {_steps_list(batches)}"
    if len(firsts) == 1:
        return f"{_who_is_faster(firsts[0], at, t)}, and {_b_star_clause(group, t)}"
    low, high = min(q.speedup for q in firsts), max(q.speedup for q in firsts)
    who = (f"{t.ar} is {1 / high:.3g}x–{1 / low:.3g}x faster than {t.dllm}" if high < 1
           else f"{t.dllm} is {low:.3g}x–{high:.3g}x faster than {t.ar}" if low >= 1
           else f"{t.dllm}'s speedup over {t.ar} runs from {low:.3g}x to {high:.3g}x (> 1: {t.dllm} faster)")
    return f"{who} at {at} over {len(firsts)} settings, and {_b_star_clause(group, t)}"


def _who_is_faster(q: PairingPoint, at: str, t: Sides) -> str:
    """Faster only when the whole bracket says so; a bracket around 1 is a tie."""
    bracket = f"[{q.speedup_low:.3g}, {q.speedup_high:.3g}]"
    if q.speedup_low > 1:
        return f"{t.dllm} is {q.speedup:.3g}x {bracket} faster than {t.ar} at {at}"
    if q.speedup_high < 1:
        return (f"{t.ar} is {1 / q.speedup:.3g}x [{1 / q.speedup_high:.3g}, {1 / q.speedup_low:.3g}] faster than "
                f"{t.dllm} at {at}")
    return f"the two are level at {at} (speedup {q.speedup:.3g}x {bracket}, a bracket around 1)"


def _b_star_clause(group: list[Pairing], t: Sides) -> str:
    texts = sorted({(p.b_star_measured, p.b_star_bound, max(q.batch_size for q in p.speedups)) for p in group})
    if len(texts) == 1:
        b, bound, largest = texts[0]
        if bound == "<=":
            return f"{t.ar} is ahead from the smallest batch measured, B = {b:g}, on"
        if bound == ">":
            return f"{t.dllm} stays ahead up to the largest batch measured, B = {largest:g}"
        return f"{t.ar} stays ahead from B = {b:.3g}"
    low, high = texts[0], texts[-1]
    return f"{t.ar} stays ahead from B {_bound(low)} to B {_bound(high)}, depending on the setting"


def _bound(point: tuple[float, str, int]) -> str:
    b, bound, _ = point
    return {"<=": f"≤ {b:g}", ">": f"> {b:g}"}.get(bound, f"= {b:.3g}")


def _where(group: list[Pairing]) -> str:
    settings = {(p.hardware, p.prompt_length, p.generation_length, p.block_length, p.dream_alg) for p in group}
    if len(settings) != 1:
        knob = "alg" if any(p.dream_alg for p in group) else "block"
        return f", over {len(settings)} settings of lengths, {knob} and device"
    hardware, prompt, gen, block, alg = next(iter(settings))
    setting = ", ".join(([f"block {block}"] if block is not None else []) + ([f"alg {alg}"] if alg else []))
    return f" on {hardware}, {prompt} + {gen} tokens" + (f", {setting}" if setting else "")


# ---------------------------------------------------------------- how sure


def _how_sure(pairings: Sequence[Pairing], t: Sides) -> str:
    points = [q for p in pairings for q in p.speedups]
    repetitions = sorted({(q.llama_repetitions, q.llada_repetitions) for q in points})
    reps = " or ".join(f"{a} + {b}" for a, b in repetitions)
    kinds = sorted({q.interval for q in points})
    if kinds == [stats.RANGE]:
        bracket = (f"the range of the ratio, not a confidence interval (a 95% CI needs {stats.MIN_CI_SAMPLES} "
                   "repetitions a side)")
    else:
        bracket = " or ".join(f"the {stats.INTERVAL_LABEL.get(k, k)}" + (" (too few repetitions for a CI)"
                                                                         if k == stats.RANGE else "")
                              for k in kinds) + " of the ratio of medians"
    text = (f"How sure: each speedup rests on {reps} measured repetitions ({t.ar} + {t.dllm}), and its bracket is "
            f"{bracket}")
    if any(q.llada_extrapolated for q in points):
        text += f"; some {t.dllm} latencies are extrapolated from their first timed steps"
    parity = _parity_intervals(pairings)
    if parity:
        text += "; " + "; ".join(parity)
    return text + "."


def _parity_intervals(pairings: Sequence[Pairing]) -> list[str]:
    """The 95% bootstrap CI over prompts of each S_parity that was found (once per metric and reference)."""
    seen: dict[tuple[str, str, int, int], str] = {}
    for p in pairings:
        for s in p.s_parity:
            if s.steps is None or s.parity_fraction is None:
                continue
            key = (s.metric, s.reference, p.generation_length, p.prompt_length)
            if key in seen:
                continue
            largest = max(q.steps for q in pairings if q.generation_length == p.generation_length)
            high = s.ci_high_steps if s.ci_high_steps is not None else f"beyond {largest}"
            low = s.ci_low_steps if s.ci_low_steps is not None else _parity_steps(s)
            seen[key] = (f"S_parity on {SHORT_LABEL.get(s.metric, s.metric)} has a 95% bootstrap CI over prompts of "
                         f"{low}–{high} steps ({s.parity_fraction:.0%} of replicates reach parity)")
    return list(seen.values())


# ---------------------------------------------------------------- formats


def _impls(lists: Iterable[list[str]]) -> str:
    names = list(dict.fromkeys(name for names in lists for name in names))
    return " or ".join(names)


def _parity_steps(s: SParity) -> str:
    return f"≤ {s.steps}" if s.bound == "<=" else str(s.steps)


def _leading_number(text: str) -> int:
    return int(text.lstrip("≤ "))


def _steps_list(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values[:-1]) + (" and " if len(values) > 1 else "") + str(values[-1])


# ---------------------------------------------------------------- the terminal

TERMINAL_WIDTH = 110


def verdict_text(sentences: Sequence[str], markdown: Path, findings_json: Path) -> str:
    """What a sweep prints after its run table: the verdict, one wrapped paragraph per sentence, and where the
    full Findings, both pairings and the variants are (the report's path is the line after it)."""
    lines = ["", "Verdict"]
    for sentence in sentences:
        lines += textwrap.wrap(sentence, TERMINAL_WIDTH, initial_indent="  - ", subsequent_indent="    ")
    lines.append(f"The full Findings, both pairings and any variants: {markdown} and {findings_json.name} beside it")
    return "\n".join(lines)
