"""The pairings (report/answer/pairing/build.py) in words: for the terminal after the Findings, and as the report's tables,
one per pair. Every number carries its interval and what that rests on, every extrapolated latency says so (and
whether a full run checked it), a point whose steps split into modes gives its speedup at each, and every B* of
the roofline names its model (roofs-only or floor-calibrated): a model of B*, never a bound on it."""

from __future__ import annotations

from collections.abc import Sequence

from report.document.content import Paragraph, Table
from report.analysis.intervals import ABOVE, AT_OR_BELOW, crossover_text
from report.answer.pairing.build import (
    BEST_PAIRING,
    ENGINE_PAIRING,
    NO_VARIANTS,
    PAIRING_ORDER,
    VANILLA_PAIRING,
    Pairing,
    PairingPoint,
    pairing_meaning,
    pairs_of,
    roofline_bound,
    speedup_meaning,
)
from report.answer.pairing.pairs import Pair, sides_of
from report.analysis.parity import bracket
from specs.engines import LLAMA_CPP
from specs.schema import VANILLA


def b_star_text(p: Pairing) -> str:
    """The measured B* with its interval, then the roofline's two models' (roofs-only, floor-calibrated), with the
    implementations the roofline picks for a pairing of several."""
    batches = ", ".join(str(q.batch_size) for q in p.speedups)
    text = f"{crossover_text(p.b_star, p.pair.ar_title, p.pair.dllm_title)}, batches {batches}"
    return f"{text}; {roofline_b_star_text(p)}"


def roofline_b_star_text(p: Pairing) -> str:
    if p.roofline_profile is None or (p.b_star_roofs is None and p.b_star_roofs_bound is None):
        return p.roofline_note or "no roofline profile for this device"
    text = (f"roofline ({p.roofline_profile}): the roofs-only model's B* "
            f"{roofline_value(p.b_star_roofs, p.b_star_roofs_bound)}")
    if p.calibration is not None:
        text += (f", the floor-calibrated model's {roofline_value(p.b_star_calibrated, p.b_star_calibrated_bound)} "
                 f"({p.calibration})")
    if p.roofline_implementations:
        text += f" ({p.roofline_implementations['llama']} vs {p.roofline_implementations['llada']})"
    return text


def roofline_value(b_star: float | None, bound: str | None = None) -> str:
    """'≤ 1' where the autoregressive model is ahead already at B = 1 (never '1.0'), '> 4096' beyond the search.
    `bound`: the value's (default: read from it, pairings.roofline_bound)."""
    bound = bound or roofline_bound(b_star)
    if bound == AT_OR_BELOW:
        return "≤ 1"
    if bound == ABOVE or b_star is None:
        return "> 4096"
    return f"{b_star:.3g}"


def speedup_text(q: PairingPoint, *, name_impls: bool, dllm: str) -> str:
    """One batch's speedup with its interval; `dllm`: how the text names the diffusion side."""
    impls = (f"{q.llama_impl} ({q.llama_execution}) vs {q.llada_impl} ({q.llada_execution}): " if name_impls else "")
    marks = f"; {extrapolation_mark(q, dllm)}" if q.llada_extrapolated else ""
    marks += f"; {modes_text(q)}" if q.speedup_at_modes else ""
    return (f"B = {q.batch_size}: {impls}{q.speedup:.3g}x {bracket(q.speedup_low, q.speedup_high)} "
            f"({q.interval_label}{marks})")


def extrapolation_mark(q: PairingPoint, dllm: str) -> str:
    """'LLaDA EXTRAPOLATED from its first 4 steps, UNCHECKED (no full run at this batch)'."""
    checked = "" if q.llada_extrapolation_checked else ", UNCHECKED (no full run at this batch and shape)"
    return f"{dllm} EXTRAPOLATED from its first {q.llada_timed_steps} steps{checked}"


def modes_text(q: PairingPoint) -> str:
    """'MODES: its shape's steps split at 21.6 / 31.2 ms, speedup 1.33x / 0.92x at each'."""
    steps = " / ".join(f"{s * 1e3:.3g}" for s in q.llada_step_modes_s or [])
    at = " / ".join(f"{v:.3g}x" for v in q.speedup_at_modes or [])
    return f"MODES: the steps at this shape split at {steps} ms, speedup {at} at each"


def setting_text(p: Pairing) -> str:
    """The diffusion setting besides its steps: 'block 32', 'alg entropy', 'block 32, sub-block 8, threshold 0.9'."""
    parts = ([f"block {p.block_length}"] if p.block_length is not None else []) + (
        [p.sampler_setting] if p.sampler_setting else [])
    return ", ".join(parts) or "whole sequence"


def heading(p: Pairing) -> str:
    parity = f" = S_parity ({', '.join(p.at_s_parity)})" if p.at_s_parity else ""
    ar = {VANILLA_PAIRING: f" {VANILLA}", ENGINE_PAIRING: f" ({LLAMA_CPP})"}.get(p.pairing, "")
    dllm = {BEST_PAIRING: "", ENGINE_PAIRING: f" ({LLAMA_CPP})"}.get(p.pairing, f" {VANILLA}")
    return (f"N_out {p.generation_length} (prompt {p.prompt_length}), {p.steps} steps{parity}, {setting_text(p)}: "
            f"{p.llama_model}{ar} vs {p.llada_model}{dllm}")


def pairings_text(pairings: Sequence[Pairing]) -> str:
    """The pairings for the terminal, after the Findings: per pairing (and pair, where there are several) and
    diffusion setting the speedup at every batch with its interval, then B* measured and the roofline's. Says so
    when no other implementation ran."""
    if not pairings:
        return ""
    multi = len({p.hardware for p in pairings}) > 1
    pairs = pairs_of(pairings)
    meaning = pairing_meaning(sides_of(pairs), pairs)
    lines = [f"The answer, each at its best first ({speedup_meaning(sides_of(pairs))})"]
    present = [k for k in PAIRING_ORDER if any(p.pairing == k for p in pairings)]
    for pairing in present:
        lines.append(f"  {pairing} pairing ({meaning[pairing]})")
        for pair in pairs:
            indent = "    " if len(pairs) == 1 else "      "
            group = [q for q in pairings if q.pairing == pairing and q.pair == pair]
            if len(pairs) > 1 and group:
                lines.append(f"    {pair.heading}")
            for p in group:
                lines.append(f"{indent}{heading(p)}" + (f" on {p.hardware}" if multi else ""))
                lines += [f"{indent}  {speedup_text(q, name_impls=pairing != VANILLA_PAIRING, dllm=pair.dllm_title)}"
                          for q in p.speedups]
                lines.append(f"{indent}  B*: {b_star_text(p)}")
    if present == [VANILLA_PAIRING]:
        lines.append(f"  best pairing: {NO_VARIANTS}")
    return "\n".join(lines)


def pairing_blocks(pairings: Sequence[Pairing], multi: bool) -> list[Paragraph | Table]:
    """The pairings in the report: one row per pairing and diffusion setting, each at its best first, then what
    each pairing means; a table per pair, headed by its two models, where the sweep has several."""
    if not pairings:
        return []
    present = list(dict.fromkeys(p.pairing for p in pairings))
    pairs = pairs_of(pairings)
    blocks: list[Paragraph | Table] = []
    for i, pair in enumerate(pairs):
        group = [p for p in pairings if p.pair == pair]
        head = f"{pair.heading}: " if len(pairs) > 1 else ""
        blocks.append(_pair_table(group, pair, multi, head, anchor="pairings-table" if i == 0 else None))
    if present == [VANILLA_PAIRING]:
        blocks.append(Paragraph(f"Best pairing: {NO_VARIANTS}."))
    return blocks


def _pair_table(pairings: Sequence[Pairing], pair: Pair, multi: bool, head: str, anchor: str | None) -> Table:
    present = [k for k in PAIRING_ORDER if any(p.pairing == k for p in pairings)]
    sides = sides_of([pair])
    algs = any(p.sampler_setting for p in pairings)
    columns = (["hardware"] if multi else []) + [
        "pairing", "P", "N_out", "steps", "block", *(["setting"] if algs else []), sides.ar, sides.dllm,
        "speedup at each batch [interval]", "B* measured [interval]; roofline", f"J/token {sides.ar} / {sides.dllm}"]
    rows = []
    for p in pairings:
        best = p.pairing != VANILLA_PAIRING
        steps = f"{p.steps}" + (f" = S_parity ({', '.join(p.at_s_parity)})" if p.at_s_parity else "")
        rows.append(tuple(([p.hardware] if multi else []) + [
            p.pairing, str(p.prompt_length), str(p.generation_length), steps,
            "–" if p.block_length is None else str(p.block_length), *([p.sampler_setting or "–"] if algs else []),
            f"{p.llama_model} {_impls_cell(p, autoregressive=True)}",
            f"{p.llada_model} {_impls_cell(p, autoregressive=False)}",
            "; ".join(speedup_text(q, name_impls=best and len(p.llama_impls) + len(p.llada_impls) > 2,
                                   dllm=sides.dllm) for q in p.speedups),
            b_star_text(p),
            "; ".join(f"B = {q.batch_size}: {_joules(q.llama_joules_per_token)} / {_joules(q.llada_joules_per_token)}"
                      + (" (extrapolated)" if q.llada_energy_extrapolated else "") for q in p.speedups),
        ]))
    meaning = pairing_meaning(sides, [pair])
    caption = (f"{head}The answer, each at its best first ({speedup_meaning(sides)}). "
               + " ".join(f"{k}: {meaning[k]}." for k in present)
               + " Each interval says its level and what it rests on: with several sessions, Student's t over the "
               "sessions' log ratios (paired by session); with one, Welch's t on the two runs' log latencies, which "
               "leaves out the variation between sessions. B*'s interval inverts the speedups' and guarantees at "
               "least 1 - k(1 - level) over its k batches where the speedup falls with B (report/analysis/intervals.py). "
               f"EXTRAPOLATED: {sides.dllm}'s latency timed from its first steps and scaled to all of them; UNCHECKED: "
               "no full run at that batch and shape checked it; MODES: the steps at that shape split into two modes, "
               f"and the speedup is given at each. S_parity is the vanilla {sides.dllm}'s (quality measured on the "
               "protocol's runs). Also in findings.json")
    return Table(tuple(columns), tuple(rows), caption, fold=False, anchor=anchor)


def _impls_cell(p: Pairing, *, autoregressive: bool) -> str:
    pick = [(q.batch_size, q.llama_impl if autoregressive else q.llada_impl,
             q.llama_execution if autoregressive else q.llada_execution) for q in p.speedups]
    if len({(impl, execution) for _, impl, execution in pick}) == 1:
        return f"{pick[0][1]} ({pick[0][2]})"
    return ", ".join(f"{impl} ({execution}, B = {b})" for b, impl, execution in pick)


def _joules(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g} J"
