"""The verdict: what a newcomer reads in thirty seconds, first in report.md, report.html, findings.json and the
terminal; the report's Findings give it in full (report/answer/verdict/full.py) with the tables behind it.

A pair's verdict is one bullet per distinct pairing (report/answer/pairing/build.py): who is faster at the smallest batch at the
step count it speaks of, with its interval, and from which batch the autoregressive model stays ahead (B*). A
pairing whose runs are another's (each at its best where no variant ran faster than vanilla) is one line saying so,
not a second bullet with the same numbers. Then the quality behind that step count (report/answer/verdict/quality.py),
and one bullet for the whole sweep on how sure it is: what the intervals rest on, and whether any session they rest
on was flagged as disturbed (report/table/sessions.py). The roofline's B*, each side's host overhead, whether the two
execute like for like, and how the runs were taken stay in the Findings. Budget: the terminal prints at most 12
lines for one pair (the quality bullet 2 of them), at most 6 more for each further pair.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from report.document.content import printable
from report.analysis.intervals import NO_B_STAR, b_star_value, bracket_ends
from report.answer.pairing.build import (
    AR_BEST_PAIRING,
    BEST_PAIRING,
    ENGINE_PAIRING,
    PAIRING_ORDER,
    VANILLA_PAIRING,
    Pairing,
    pairs_of,
)
from report.answer.findings import VERDICT_COLUMN
from report.answer.pairing.pairs import Pair, Sides, sides_of
from report.answer.verdict.full import (
    NO_PAIRING,
    ONLY_VANILLA,
    Chosen,
    ahead_clause,
    chosen_clauses,
    executions,
    quality_text,
    speed_clause,
    speed_marks,
    where_text,
    who_is_faster,
)
from report.answer.verdict.sure import brief_sure
from report.table.flat import EAGER
from specs.engines import LLAMA_CPP, engine

__all__ = ["NO_PAIRING", "ONLY_VANILLA", "ONLY_VANILLA_BRIEF", "verdict", "verdict_text"]


def verdict(pairings: Sequence[Pairing], unanswered: Sequence[str] = (), disturbed: str | None = None) -> list[str]:
    """Each pair's bullets (headed by its two models where the sweep has several pairs or an unanswered one), then
    how sure, then each pair without an answer (`unanswered`: report.answer.pairing.build.unanswered). `disturbed`:
    report.table.sessions.disturbed_text of the sweep's sessions ('' where none was flagged, None where none could be
    judged: no CPU-timed run)."""
    if not pairings:
        return [f"No verdict: {reason}." for reason in unanswered] or [NO_PAIRING]
    pairs = pairs_of(pairings)
    headed = len(pairs) + len(unanswered) > 1
    sentences: list[str] = []
    for pair in pairs:
        lead = f"{pair.heading}: " if headed else ""
        mine = [p for p in pairings if p.pair == pair]
        sentences += [lead + s for s in _pair_sentences(mine, pair, sides_of([pair]), _only_vanilla(pairings))]
    sentences.append(brief_sure(pairings, disturbed))
    return sentences + [f"{reason}." for reason in unanswered]


def _only_vanilla(pairings: Sequence[Pairing]) -> bool:
    return all(p.pairing == VANILLA_PAIRING for p in pairings)


def _pair_sentences(mine: list[Pairing], pair: Pair, t: Sides, only_vanilla: bool) -> list[str]:
    """One bullet per distinct pairing, the lines that say which pairings coincide, and the quality."""
    kinds = [k for k in PAIRING_ORDER if any(p.pairing == k for p in mine)]
    spoken = {k: chosen_clauses([p for p in mine if p.pairing == k]) for k in kinds}
    # A pairing whose spoken runs are a later one's is said once, under the later (vanilla: the protocol's pair).
    runs = {k: _runs(chosen) for k, chosen in spoken.items()}
    same = {k: next(o for o in reversed(kinds) if runs[o] == runs[k]) for k in kinds}
    bullets = []
    for kind in kinds:
        if same[kind] == kind:
            where = where_text([p for _, at in spoken[kind] for p in at]) if not bullets else ""
            bullets.append(f"{_label(kind, spoken[kind], t)}{where}, " + "; ".join(
                f"{at}: {_speed(ps, t)}" for at, ps in spoken[kind]) + ".")
    for kind in dict.fromkeys(same.values()):
        alike = [k for k in kinds if same[k] == kind and k != kind]
        if alike:
            names = " and ".join(_NAME[k](t) for k in alike)
            steps = " and ".join(dict.fromkeys(str(p.steps) for _, at in spoken[kind] for p in at))
            bullets.append(f"{names} {'is' if len(alike) == 1 else 'are'} the {_lower_first(_NAME[kind](t))} pairing here: "
                           f"no variant ran faster at {steps} steps.")
    engine_hint = ENGINE_PAIRING not in kinds and _engine_would_answer(mine, pair)
    if only_vanilla:  # no variant ran in the whole sweep
        bullets.append(ONLY_VANILLA_IN_PYTORCH if engine_hint else ONLY_VANILLA_BRIEF)
    elif engine_hint:
        bullets.append(no_engine_parity(t))
    return bullets + [quality_text(mine, pair, t, brief=True)]


def _engine_would_answer(mine: list[Pairing], pair: Pair) -> bool:
    """Whether llama.cpp runs both families of a pair whose autoregressive side ran only eager PyTorch here."""
    families = engine(LLAMA_CPP).families
    eager = all(q.llama_execution == EAGER for p in mine for q in p.speedups)
    return eager and pair.ar_arch in families and pair.dllm_arch in families


ONLY_VANILLA_BRIEF = "Only vanilla ran, so it is also each at its best."
ONLY_VANILLA_IN_PYTORCH = "Only vanilla ran, all in PyTorch; with both in llama.cpp: `just sweep specs/engine.yaml`."
def no_engine_parity(t: Sides) -> str:
    """One line: what a PyTorch-only pairing carries on its autoregressive side, and the command that removes it."""
    return f"Both in PyTorch ({t.ar} pays its Python loop every token); in llama.cpp: `just sweep specs/engine.yaml`."


_NAME = {
    ENGINE_PAIRING: lambda t: "Both in llama.cpp, at engine parity",
    BEST_PAIRING: lambda t: "Each at its best",
    AR_BEST_PAIRING: lambda t: f"{t.ar} at its best against vanilla {t.dllm}",
    VANILLA_PAIRING: lambda t: "Vanilla",
}


def _lower_first(name: str) -> str:
    """'Vanilla' -> 'vanilla' mid-sentence; a name that opens with a model's title ('LLaMA at its best') stays."""
    return name[0].lower() + name[1:] if name[1:2].islower() else name


def _runs(chosen: Chosen) -> frozenset[tuple]:
    """What a pairing's bullet would say: its runs (by id and implementation) and their speedups."""
    return frozenset((p.steps, q.batch_size, q.llama_run_id, q.llada_run_id, q.llama_impl, q.llada_impl, q.speedup)
                     for _, at in chosen for p in at for q in p.speedups)


def _label(kind: str, chosen: Chosen, t: Sides) -> str:
    """'Vanilla against vanilla (both eager)', 'Each at its best (LLaMA static-compile (compiled); LLaDA dual-cache
    (eager))': the pairing and how each side executes."""
    points = [q for _, at in chosen for p in at for q in p.speedups]
    if kind == VANILLA_PAIRING:
        return "Vanilla against vanilla (both eager)"
    if kind == ENGINE_PAIRING:
        return _NAME[kind](t)
    ar = executions([(q.llama_execution, q.llama_impl) for q in points])
    dllm = executions([(q.llada_execution, q.llada_impl) for q in points])
    return f"{_NAME[kind](t)} ({t.ar} {ar}; {t.dllm} {dllm})"


def _speed(group: list[Pairing], t: Sides) -> str:
    """Who is faster at the smallest batch with its interval, and B* with its interval; over several settings, the
    ranges (report/answer/verdict/full.py)."""
    if len(group) != 1:
        return speed_clause(group, t, brief=True)
    q, c = group[0].speedups[0], group[0].b_star
    who = who_is_faster(q, f"B = {q.batch_size}", t) + speed_marks(q, t)
    if c is None:
        return f"{who}; {NO_B_STAR}"
    return who + ahead_clause(q, c, t, f"{b_star_value(c)} {bracket_ends(c)}")


# ---------------------------------------------------------------- the terminal

TERMINAL_WIDTH = 110
TERMINAL_LINES = 12  # for one pair, counted from "Verdict" to the report's path
TERMINAL_LINES_PER_PAIR = 6  # for each further pair
QUALITY_LINES = 2  # of those, the quality bullet's budget (report/answer/verdict/quality.py)


def verdict_text(sentences: Sequence[str], markdown: Path, findings_json: Path, report_line: str) -> str:
    """What a sweep prints after its run table: the verdict, one wrapped bullet per sentence, then one line with the
    report's path (`report_line`, report.document.summary's) and where the verdict is in full. A spec's text in them (a judge's
    path) shows its control characters, never acts on the terminal."""
    lines = ["", "Verdict"]
    for sentence in sentences:
        lines += textwrap.wrap(printable(sentence), TERMINAL_WIDTH, initial_indent="  - ", subsequent_indent="    ")
    lines.append(f"{report_line}; in full, with every pairing, the roofline, the sessions and how the runs were taken: "
                 f"{markdown} and {findings_json.name}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the figures


def with_verdict_steps(crossovers: pl.DataFrame, pairings: Sequence[Pairing]) -> pl.DataFrame:
    """`crossovers` (report.answer.findings.crossover_table) with VERDICT_COLUMN: whether the verdict's vanilla bullet
    speaks of the row's step count, so the Findings figure marks the B* the verdict gives."""
    spoken = {(p.hardware, p.prompt_length, p.generation_length, p.llama_model, p.llada_model, p.steps,
               p.block_length, p.sampler_setting)
              for pair in pairs_of(pairings)
              for _, at in chosen_clauses([p for p in pairings if p.pair == pair and p.pairing == VANILLA_PAIRING])
              for p in at}
    keys = ["hardware", "prompt_length", "generation_length", "llama_model", "llada_model", "steps", "block_length",
            "sampler_setting"]
    flags = [tuple(row) in spoken for row in crossovers.select(keys).iter_rows()]
    return crossovers.with_columns(pl.Series(VERDICT_COLUMN, flags, dtype=pl.Boolean))
