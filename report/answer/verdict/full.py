"""The verdict in full: a few plain sentences a pair that the report's Findings give under the short verdict
(report/answer/verdict/short.py), with everything the short one leaves to them.

A reader asks before any table: who is faster at the smallest batch, at how many diffusion steps and at what
quality, from which batch the autoregressive model stays ahead (B*), and how sure we are. Every word is generated
from the pairings (report/answer/pairing/build.py), so the verdict changes when the measurements do, and it says only what was
measured:
- every speedup names its step count (and K / N_out), and whether quality was measured at that scale; where it was
  not (synthetic weights), the answer is given at K = N_out/4, N_out/2 and N_out where swept, beside what the
  family's authors published of its quality there (specs/registry.py);
- "at equal quality" only where parity holds on every headline metric; otherwise the metrics that reached parity,
  their judge, and whether the judge is the model under test;
- the pairings in their order (report/answer/pairing/build.py): each at its best first, naming how each side executes and
  saying when the two are not like for like; then the autoregressive model at its best against the vanilla
  diffusion model; then vanilla against vanilla, said to be eager against eager with the size of each side's
  time per forward beside its roofs (host overhead);
- every extrapolated diffusion latency says so, an unchecked one too, and a point whose shape's steps split into
  modes gives its speedup at each;
- B* always with its interval and what its inversion guarantees; the roofline's B* is a model's (roofs-only or
  floor-calibrated), never a bound;
- how sure: each interval's basis, and how the runs were taken (report/analysis/history.py: commit, processes,
  interleaving, warm-ups), passed in as `context`.
Each side is named by its family's title; where a sweep has several pairs, each pair's sentences open with its two
models, and a pair without an answer is named with why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from report.answer.findings import SHORT_LABEL
from report.analysis.intervals import AT_OR_BELOW, INTERPOLATED, NO_B_STAR, Crossover, bounded, crossover_text
from report.answer.pairing.text import modes_text
from report.answer.pairing.build import (
    BEST_PAIRING,
    ENGINE_PAIRING,
    PAIRING_ORDER,
    VANILLA_PAIRING,
    Pairing,
    PairingPoint,
    SParity,
    pairs_of,
)
from report.answer.pairing.pairs import Pair, Sides, sides_of
from report.analysis.parity import bracket
from report.table.flat import COMPILED
from report.answer.verdict.quality import quality_sentence
from report.answer.verdict.sure import how_sure
from specs.registry import family

MAX_SENTENCES = 6  # a pair's: four pairings, quality, how sure
NO_PAIRING = "No verdict: no autoregressive and diffusion model both ran successfully at the same lengths."
ONLY_VANILLA = ("No implementation other than vanilla ran, so each model at its best is the vanilla pairing "
                "(add variants to the spec's grid to compare them).")
# Without quality at this scale, the answer is given at these shares of N_out (the study's step range ends at N_out).
STEP_SHARES = (Fraction(1, 4), Fraction(1, 2), Fraction(1))


def full_verdict(pairings: Sequence[Pairing], unanswered: Sequence[str] = (), context: str = "",
            pair_contexts: Mapping[str, str] | None = None) -> list[str]:
    """At most MAX_SENTENCES sentences a pair: one per pairing present (the vanilla-only note when no variant ran),
    quality, and how sure (report/answer/verdict/sure.py), ending with how the pair's runs were taken: its entry of
    `pair_contexts` (by Pair.heading; report.analysis.history.pair_histories), else `context` (the sweep's history_text);
    then one per pair of the sweep without an answer (`unanswered`: report.answer.pairing.build.unanswered)."""
    if not pairings:
        return [f"No verdict: {reason}." for reason in unanswered] or [NO_PAIRING]
    pairs = pairs_of(pairings)
    headed = len(pairs) + len(unanswered) > 1
    kinds = [k for k in PAIRING_ORDER if any(p.pairing == k for p in pairings)]
    sentences: list[str] = []
    for pair in pairs:
        lead = f"{pair.heading}: " if headed else ""
        sides = sides_of([pair])
        mine = [p for p in pairings if p.pair == pair]
        spoken_at = {k: chosen_clauses([p for p in mine if p.pairing == k]) for k in kinds
                     if any(p.pairing == k for p in mine)}
        own = [lead + _pairing_sentence(k, spoken, sides, mine) for k, spoken in spoken_at.items()]
        if kinds == [VANILLA_PAIRING]:
            own.append(lead + ONLY_VANILLA)
        first = [p for _, at in next(iter(spoken_at.values())) for p in at]
        taken = (pair_contexts or {}).get(pair.heading, context)
        own += [lead + s for s in (quality_text(mine, pair, sides), how_sure(mine, first, taken)) if s]
        assert len(own) <= MAX_SENTENCES, own
        sentences += own
    return sentences + [f"{reason}." for reason in unanswered]


# ---------------------------------------------------------------- one sentence per pairing


Chosen = list[tuple[str, list[Pairing]]]  # (where the clause speaks: step count and quality, its pairings)


def chosen_clauses(group: list[Pairing]) -> Chosen:
    return _at_quality(group) if any(p.quality_measured for p in group) else _at_step_shares(group)


def _pairing_sentence(kind: str, chosen: Chosen, t: Sides, every: list[Pairing]) -> str:
    spoken = [p for _, at in chosen for p in at]
    if kind == VANILLA_PAIRING:
        lead = _vanilla_lead(spoken, t, every)
    elif kind == ENGINE_PAIRING:
        lead = ENGINE_LEAD
    else:
        lead = _best_lead(spoken, t) if kind == BEST_PAIRING else _ar_best_lead(spoken, t)
    clauses = [f"{where}: {speed_clause(ps, t)}" for where, ps in chosen]
    return f"{lead}{where_text(spoken)}, " + "; ".join(clauses) + "."


ENGINE_LEAD = "Both in llama.cpp, at engine parity (the architectures, not this package's Python loops)"


def _ar_best_lead(group: list[Pairing], t: Sides) -> str:
    """'LLaMA at its best against vanilla LLaDA (LLaMA static-compile (compiled); LLaDA vanilla (eager))'."""
    points = [q for p in group for q in p.speedups]
    ar = executions([(q.llama_execution, q.llama_impl) for q in points])
    dllm = executions([(q.llada_execution, q.llada_impl) for q in points])
    return f"{t.ar} at its best against vanilla {t.dllm} ({t.ar} {ar}; {t.dllm} {dllm})"


def _vanilla_lead(group: list[Pairing], t: Sides, every: list[Pairing]) -> str:
    """'Eager against eager (vanilla, the protocol's pair; it measures host overhead per forward as much as the
    architectures: at B = 1 eager LLaMA's decode pass took 20.2 ms, 18% of its roofs, against 5.79 ms compiled;
    vanilla LLaDA's step 27.3 ms, 55%)', each part where the runs recorded it."""
    p = group[0]
    q = p.speedups[0]
    parts = []
    if q.llama_forward_s is not None:
        text = f"eager {t.ar}'s decode pass took {_ms(q.llama_forward_s)}{_roofs(q.llama_roofs_fraction, ' of its roofs')}"
        faster = [(r.llama_forward_s, r.llama_execution) for o in every
                  if o.pairing != VANILLA_PAIRING and o.hardware == p.hardware
                  and (o.prompt_length, o.generation_length) == (p.prompt_length, p.generation_length)
                  for r in o.speedups if r.batch_size == q.batch_size and r.llama_execution != "eager"
                  and r.llama_forward_s is not None]
        if faster:  # compiled, or in another engine ("in llama.cpp")
            seconds, execution = faster[0]
            text += f", against {_ms(seconds)} {execution if execution == COMPILED else 'in ' + execution}"
        parts.append(text)
    if q.llada_forward_s is not None:
        parts.append(f"vanilla {t.dllm}'s step {_ms(q.llada_forward_s)}{_roofs(q.llada_roofs_fraction, '')}")
    size = f": at B = {q.batch_size} " + "; ".join(parts) if parts else ""
    return ("Eager against eager (vanilla, the protocol's pair; it measures each side's host overhead per forward as "
            f"much as the architectures{size})")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _roofs(fraction: float | None, what: str) -> str:
    return "" if fraction is None else f", {fraction:.0%}{what}"


def _best_lead(group: list[Pairing], t: Sides) -> str:
    """'Each at its best (LLaMA static-compile, compiled; LLaDA dual-cache, eager: not like for like, ...)'."""
    points = [q for p in group for q in p.speedups]
    ar = executions([(q.llama_execution, q.llama_impl) for q in points])
    dllm = executions([(q.llada_execution, q.llada_impl) for q in points])
    kinds_ar = sorted({q.llama_execution for q in points})
    kinds_dllm = sorted({q.llada_execution for q in points})
    text = f"Each at its best ({t.ar} {ar}; {t.dllm} {dllm}"
    if kinds_ar != kinds_dllm:
        text += (f": not like for like, {_article('/'.join(kinds_ar))} {t.ar} against "
                 f"{_article('/'.join(kinds_dllm))} {t.dllm}")
    eager_only = [side for side, kinds in ((t.ar, kinds_ar), (t.dllm, kinds_dllm)) if kinds == ["eager"]]
    if eager_only:  # an eager side's best is only the best of what ran
        text += f"; no compiled or graph-captured {' or '.join(eager_only)} was measured"
    return text + ")"


def executions(pairs: list[tuple[str, str]]) -> str:
    """'static-compile (compiled)', 'vanilla or dual-cache (eager)': the implementations used, by execution."""
    by_kind: dict[str, list[str]] = {}
    for execution, impl in pairs:
        names = by_kind.setdefault(execution, [])
        if impl not in names:
            names.append(impl)
    return ", ".join(f"{' or '.join(names)} ({execution})" for execution, names in by_kind.items())


def _article(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _at_quality(group: list[Pairing]) -> list[tuple[str, list[Pairing]]]:
    """One clause per sampler setting (Dream's alg, block diffusion's threshold), at the fewest steps from which all
    headline metrics hold parity ("at equal quality"), else those that reach it do, else the most swept."""
    settings = list(dict.fromkeys(p.sampler_setting for p in group))
    return [_at_setting([p for p in group if p.sampler_setting == setting], len(settings) > 1) for setting in settings]


def _at_setting(group: list[Pairing], named: bool) -> tuple[str, list[Pairing]]:
    s_parity = next((p.s_parity for p in group if p.quality_measured), group[0].s_parity)
    reached = [s for s in s_parity if s.decides and s.steps is not None]  # a metric at chance decides nothing
    swept = sorted({p.steps for p in group})
    # A setting of one step count (block diffusion's fixed schedule) says only whether it reaches parity.
    single = len(swept) == 1 and group[0].sampler_setting is not None
    setting, k = (f"at {group[0].sampler_setting}" if named or single else ""), swept[-1]
    can = "reaches" if any(s.decides for s in s_parity) else "can decide"
    if single:
        parity = ("at equal quality" if reached and len(reached) == len(s_parity) else
                  f"where quality matches on {_metrics(reached)} only" if reached else
                  f"where no headline metric {can} parity")
        where = f"{setting} ({_k(k, group)}), {parity}"
    elif reached and len(reached) == len(s_parity):
        k = max(s.steps for s in reached)
        where = f"at equal quality ({_parity_list(reached)}) at {_k(k, group)}"
    elif reached:
        k = max(s.steps for s in reached)
        where = f"at {_k(k, group)}, where quality matches on {_metrics(reached)} only"
    else:
        where = f"at {_k(k, group)}, the most swept, where no headline metric {can} parity"
    if setting and not single:
        where = f"{setting}, {where}"
    at = [p for p in group if p.steps == k] or [p for p in group if p.steps == swept[-1]]
    return where, at


def _at_step_shares(group: list[Pairing]) -> list[tuple[str, list[Pairing]]]:
    """Without quality: the speed at K = N_out/4, N_out/2 and N_out where swept (every step count when none is)."""
    chosen = []
    for share in STEP_SHARES:
        at = [p for p in group if Fraction(p.steps, p.generation_length) == share]
        if at:
            chosen.append((f"at K = {_share(share)} ({_steps_of(at)}), quality not measured", at))
    if not chosen:
        chosen = [(f"at {_k(k, group)}, quality not measured", [p for p in group if p.steps == k])
                  for k in sorted({p.steps for p in group})]
    return chosen


def speed_clause(group: list[Pairing], t: Sides, brief: bool = False) -> str:
    """Who is faster at each pairing's smallest batch, with its interval, and B* with its interval (`brief`: over
    several settings, without saying where their intervals are)."""
    firsts = [p.speedups[0] for p in group]
    at = f"B = {batch_list(sorted({q.batch_size for q in firsts}))}"
    if len(group) == 1:
        b_star = group[0].b_star
        if b_star is None:
            return f"{who_is_faster(firsts[0], at, t)}{speed_marks(firsts[0], t)}; {NO_B_STAR}"
        return (f"{who_is_faster(firsts[0], at, t)}{speed_marks(firsts[0], t)}"
                + ahead_clause(firsts[0], b_star, t, crossover_text(b_star, t.ar, t.dllm)))
    low, high = min(q.speedup for q in firsts), max(q.speedup for q in firsts)
    who = (f"{t.ar} is {1 / high:.3g}x–{1 / low:.3g}x faster than {t.dllm}" if high < 1
           else f"{t.dllm} is {low:.3g}x–{high:.3g}x faster than {t.ar}" if low >= 1
           else f"{t.dllm}'s speedup over {t.ar} runs from {low:.3g}x to {high:.3g}x"
           + ("" if brief else f" (> 1: {t.dllm} faster)"))
    scaled = sum(1 for q in firsts if q.llada_extrapolated)
    note = f" ({scaled} of those {t.dllm} latencies timed from their first steps and scaled)" if scaled else ""
    stars = sorted((c.estimate, c.bound) for c in (p.b_star for p in group) if c is not None)
    if not stars:
        return f"{who} at {at} over {len(group)} settings{note}; {NO_B_STAR}"
    b_star = "B* " + "–".join(dict.fromkeys(bounded(b, bound) for b, bound in (stars[0], stars[-1])))
    unplaced = len(group) - len(stars)
    placed = f", where placed ({unplaced} with one batch size place none)" if unplaced else ""
    where = ("each with its interval in the Findings" if any(p.b_star_low is not None for p in group)
             else "none with an interval")
    return (f"{who} at {at} over {len(group)} settings{note}, and {t.ar} stays ahead from {b_star}{placed}"
            + ("" if brief else f" ({where})"))


def ahead_clause(q: PairingPoint, c: Crossover, t: Sides, b_star: str) -> str:
    """', and LLaMA stays ahead from B* = 4.32 [..]'. Where the speedup at the smallest batch is a tie (its interval
    holds 1) while B* lies outside the batches measured, the two read different things and the words say which:
    B* the medians alone, the tie their interval."""
    equals = "= " if c.bound == INTERPOLATED else ""
    if c.bound == INTERPOLATED or is_sure(q) or q.speedup_low is None or q.speedup_high is None:
        return f", and {t.ar} stays ahead from B* {equals}{b_star}"
    leader = t.ar if c.bound == AT_OR_BELOW else t.dllm
    return (f"; on the medians alone {leader} is ahead at every batch measured (B* {b_star}), but at B = "
            f"{q.batch_size} the interval holds 1, so that lead is not sure there")


def is_sure(q: PairingPoint) -> bool:
    """Whether the speedup's interval leaves out 1 (one side surely faster)."""
    return (q.speedup_low is not None and q.speedup_low > 1) or (q.speedup_high is not None and q.speedup_high < 1)


def who_is_faster(q: PairingPoint, at: str, t: Sides) -> str:
    """Faster only when the whole interval says so; an interval around 1 is a tie."""
    interval = bracket(q.speedup_low, q.speedup_high)
    if q.speedup_low is not None and q.speedup_low > 1:
        return f"{t.dllm} is {q.speedup:.3g}x {interval} faster than {t.ar} at {at}"
    if q.speedup_high is not None and q.speedup_high < 1:
        return (f"{t.ar} is {1 / q.speedup:.3g}x {bracket(1 / q.speedup_high, 1 / q.speedup_low)} faster than "
                f"{t.dllm} at {at}")
    return f"neither is surely faster at {at} (speedup {q.speedup:.3g}x {interval})"


def speed_marks(q: PairingPoint, t: Sides) -> str:
    """What the speedup rests on beyond its interval: an extrapolated diffusion latency, checked or not; modes."""
    parts = []
    if q.llada_extrapolated:
        checked = "" if q.llada_extrapolation_checked else ", unchecked"
        parts.append(f"{t.dllm} timed {q.llada_timed_steps} steps and scaled{checked}")
    if q.speedup_at_modes:
        parts.append(modes_text(q))
    return f" ({'; '.join(parts)})" if parts else ""


def where_text(group: list[Pairing]) -> str:
    settings = {(p.hardware, p.prompt_length, p.generation_length, p.block_length, p.sampler_setting) for p in group}
    if len(settings) != 1:
        knob = "sampler setting" if any(p.sampler_setting for p in group) else "block"
        return f" over {len(settings)} settings of lengths, {knob} and device"
    hardware, prompt, gen, block, sampler = next(iter(settings))
    setting = ", ".join(([f"block {block}"] if block is not None else []) + ([sampler] if sampler else []))
    return f" on {hardware}, {prompt} + {gen} tokens" + (f", {setting}" if setting else "")


# ---------------------------------------------------------------- quality


def quality_text(group: list[Pairing], pair: Pair, t: Sides, brief: bool = False) -> str:
    """What the quality behind the speedups is (report/answer/verdict/quality.py); or, where none was measured, what the
    family's authors published (`brief`: that the Findings say it)."""
    if not any(p.quality_measured for p in group):
        if brief:
            return f"Quality was not measured here; the Findings give what {t.dllm}'s authors published, if anything."
        published = family(pair.dllm_arch).published_quality
        return ("Quality was not measured here: "
                + (published if published else f"no published {t.dllm} quality at these step counts is recorded")
                + ".")
    return quality_sentence(group, t, brief)


# ---------------------------------------------------------------- formats


def _k(k: int, group: list[Pairing]) -> str:
    """'4 steps (K = N_out/8)'."""
    gens = sorted({p.generation_length for p in group if p.steps == k}) or [group[0].generation_length]
    shares = ", ".join(dict.fromkeys(_share(Fraction(k, g)) for g in gens))
    return f"{k} step{'s' if k != 1 else ''} (K = {shares})"


def _share(share: Fraction) -> str:
    if share == 1:
        return "N_out"
    if share.numerator == 1:
        return f"N_out/{share.denominator}"
    return f"{share.numerator} N_out/{share.denominator}"


def _steps_of(group: list[Pairing]) -> str:
    return ", ".join(dict.fromkeys(f"{p.steps} steps for {p.generation_length} tokens" for p in group))


def _parity_list(reached: list[SParity]) -> str:
    return ", ".join(f"{SHORT_LABEL.get(s.metric, s.metric)} as good as {s.reference} from {_parity_steps(s)} steps"
                     for s in reached)


def _metrics(reached: list[SParity]) -> str:
    return " and ".join(SHORT_LABEL.get(s.metric, s.metric) for s in reached)


def _parity_steps(s: SParity) -> str:
    return f"≤ {s.steps}" if s.bound == "<=" else str(s.steps)


def batch_list(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values[:-1]) + (" and " if len(values) > 1 else "") + str(values[-1])
