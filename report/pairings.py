"""The answer both ways: each autoregressive model against each diffusion model it pairs with (report/pairs.py:
LLaMA against LLaDA, Qwen2.5 against Dream), as the protocol pairs them (vanilla against vanilla) and as each
would be deployed (at each point, each model's fastest measured implementation).

Per pairing, pair, hardware, lengths and diffusion setting (step count, block, Dream's alg): the speedup
L_e2e(AR) / L_e2e(dLLM) at every batch size both ran (> 1: the diffusion model is faster) with its interval
(report.parity.ratio_interval: a BCa CI from six repetitions a side, else the range of the ratio, which is no CI),
the joules per generated token of both runs, S_parity where quality was measured (the vanilla diffusion model's:
variants' quality moves are the Variants section's), and B*: measured (report.findings.measured_crossover over the
throughput ratios) and the faithful roofline's on the device's profile. The roofline's B* of the best pairing
takes, at each batch it tries, each model's fastest predicted implementation among those that ran.

`findings.json` beside report.md holds these objects (FindingsFile); `pairings_text` prints them. Their fields keep
the first pair's names: `llama_*` is the pair's autoregressive side, `llada_*` its diffusion side. The text names
each side by the family titles of the pairs present (report.pairs.sides_of).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

from report import stats
from report.document import Paragraph, Table
from report.extrapolation import trusted
from report.findings import b_star_measured_text, measured_crossover
from report.pairs import Pair, Sides, is_ar, is_dllm, pair_of, peers_of, sides_of, sweep_pairs
from report.parity import ratio_interval
from report.quality import FIGURE_METRICS
from report.table import full_where_measured, with_dream_alg
from roofline.crossover import MAX_BATCH, crossing_batch
from roofline.errors import RooflineInputError
from roofline.hardware import HardwareProfile
from roofline.predict import predict_run
from specs.registry import archs_of
from specs.results import RunResult
from specs.schema import VANILLA

VANILLA_PAIRING, BEST_PAIRING = "vanilla", "best"
NO_VARIANTS = ("no other implementation ran: every run is the vanilla implementation, so the best pairing is the "
               "vanilla pairing")
# The diffusion curve a pairing follows over batch sizes (its implementation is the pairing's choice).
CURVE = ("hardware", "prompt_length", "generation_length", "model", "steps", "block_length", "remasking",
         "dream_alg", "cfg_scale", "dtype")
# A pairing record built without its families (an older caller) is of the first family of each paradigm.
_FIRST_AR, _FIRST_DLLM = archs_of("autoregressive")[0], archs_of("diffusion")[0]


def pairing_meaning(sides: Sides) -> dict[str, str]:
    """What each pairing is, naming the sides as `sides` does."""
    return {
        VANILLA_PAIRING: f"vanilla {sides.ar} against vanilla {sides.dllm}: the protocol",
        BEST_PAIRING: "at each point, each model's fastest measured implementation: what would be deployed",
    }


def speedup_meaning(sides: Sides) -> str:
    return (f"speedup = L_e2e({sides.ar}) / L_e2e({sides.dllm}) at the same batch and lengths (> 1: {sides.dllm} is "
            f"faster); B* = the batch size from which {sides.ar}'s throughput stays ahead")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SParity(_Record):
    """The vanilla LLaDA's S_parity on one headline metric against its headline reference."""

    metric: str
    reference: str
    steps: int | None  # None: no parity within the swept steps
    bound: str | None  # "=" or "<=" (parity already at the fewest swept steps)
    ci_low_steps: int | None = None  # 95% bootstrap CI over prompts (None: above the largest swept, or no CI)
    ci_high_steps: int | None = None
    parity_fraction: float | None = None  # share of bootstrap replicates that reach parity


class PairingPoint(_Record):
    """One batch size: both runs, the speedup with its interval, and their energy."""

    batch_size: int
    llama_impl: str
    llada_impl: str
    llama_run_id: str
    llada_run_id: str
    llama_latency_s: float
    llada_latency_s: float
    speedup: float
    speedup_low: float
    speedup_high: float
    interval: str  # report.stats kind: "bca95", "pct95" or "range" (a range of a few values is no CI)
    interval_label: str  # e.g. "range of the ratio over 3 + 3 repetitions (not a CI)"
    llama_repetitions: int
    llada_repetitions: int
    llada_extrapolated: bool  # LLaDA's latency timed from its first steps, the rest extrapolated
    throughput_ratio: float  # T(LLaMA) / T(LLaDA): > 1, LLaMA ahead (what B* reads)
    llama_joules_per_token: float | None = None
    llada_joules_per_token: float | None = None
    llada_energy_extrapolated: bool | None = None


class Pairing(_Record):
    """One pairing of one pair at one diffusion setting over the batch sizes both ran. `llama_*`: the pair's
    autoregressive model, `llada_*`: its diffusion model (of families `ar_arch` and `dllm_arch`)."""

    pairing: Literal["vanilla", "best"]
    hardware: str
    prompt_length: int
    generation_length: int
    steps: int
    block_length: int | None  # None: a family without blocks (Dream)
    llama_model: str
    llada_model: str
    llama_impls: list[str]  # every implementation the pairing used, in the order of the batch sizes
    llada_impls: list[str]
    s_parity: list[SParity]
    at_s_parity: list[str]  # the metrics whose S_parity is this step count
    speedups: list[PairingPoint]
    b_star_measured: float
    b_star_bound: str  # "=": interpolated crossing; "<=": LLaMA ahead at every batch; ">": LLaDA ahead at every one
    b_star_roofline: float | None  # None: no profile, or no crossing up to MAX_BATCH (see roofline_note)
    roofline_profile: str | None
    roofline_note: str | None = None
    roofline_implementations: dict[str, str] | None = None  # best pairing: the fastest predicted at B*
    # Written to findings.json only where they say something (findings_json): Dream's alg where it has one, the
    # families where a sweep has several pairs.
    dream_alg: str | None = None
    ar_arch: str = _FIRST_AR
    dllm_arch: str = _FIRST_DLLM

    @property
    def pair(self) -> Pair:
        return Pair(ar_model=self.llama_model, ar_arch=self.ar_arch, dllm_model=self.llada_model,
                    dllm_arch=self.dllm_arch)


class FindingsFile(_Record):
    """findings.json: every pairing object, what the numbers mean, and what a reader must know."""

    # Only in a report rendered with --allow-unverified, above all else: each verification failure (absent when
    # verified, so the file of a verified sweep is unchanged).
    unverified: list[str] = []
    verdict: list[str] = []  # report/verdict.py: the answer in at most five sentences a pair, first in the file
    sweep: str
    pairings: list[str]  # the pairings present
    # Only where a sweep has several pairs: each as 'dllm (family) vs ar (family)', in the findings' order.
    pairs: list[str] = []
    meaning: dict[str, str]
    speedup: str
    notes: list[str]
    findings: list[Pairing]


# ---------------------------------------------------------------- building the pairings


def pairing_table(
    table: pl.DataFrame, results: Sequence[RunResult], parity: pl.DataFrame, crossovers: pl.DataFrame,
    profiles: dict[str, HardwareProfile],
) -> list[Pairing]:
    """Both pairings (the best one only when some run is not vanilla) of every pair (report.pairs.sweep_pairs).
    `table`: report.table.results_table of every run; `parity`: report.parity.parity_table; `crossovers`:
    report.findings.crossover_table (the vanilla pairing's roofline B*, so the Findings agree); `profiles`: each
    hardware's roofline profile."""
    table = with_dream_alg(table)
    pairs = sweep_pairs(table)
    ok = table.filter((pl.col("status") == "ok") & pl.col("latency_e2e_s_median").is_not_null()
                      & pl.col("tokens_per_s_median").is_not_null())
    ok = trusted(full_where_measured(ok.with_columns(pl.col("impl").fill_null(VANILLA))))
    by_id = {r.run_id: r for r in results}
    pairings = [VANILLA_PAIRING] + ([BEST_PAIRING] if (ok["impl"] != VANILLA).any() else [])
    autoregressive, diffusion = ok.filter(is_ar()), ok.filter(is_dllm())
    out: list[Pairing] = []
    for pairing in pairings:
        for key, curve in diffusion.group_by(list(CURVE), maintain_order=True):
            where = dict(zip(CURVE, key))
            at = autoregressive.filter((pl.col("hardware") == where["hardware"])
                                       & (pl.col("prompt_length") == where["prompt_length"])
                                       & (pl.col("generation_length") == where["generation_length"]))
            for ar_model in peers_of(pairs, where["model"]):
                ar, dllm = at.filter(pl.col("model") == ar_model), curve
                pair = pair_of(pairs, ar_model, where["model"])
                if not ar.height or pair is None:
                    continue
                if pairing == VANILLA_PAIRING:
                    ar, dllm = ar.filter(pl.col("impl") == VANILLA), dllm.filter(pl.col("impl") == VANILLA)
                built = _pairing(pairing, where, pair, ar, dllm, parity, crossovers, profiles.get(where["hardware"]),
                                 by_id)
                if built is not None:
                    out.append(built)
    rank = {pair: i for i, pair in enumerate(pairs)}  # pairs in registry order (report.pairs.pairs_from)
    return sorted(out, key=lambda p: (p.pairing != VANILLA_PAIRING, rank[p.pair], p.hardware, p.generation_length,
                                      p.prompt_length, p.llada_model, p.block_length or 0, p.steps,
                                      p.dream_alg or ""))


def _fastest(rows: pl.DataFrame) -> dict[str, Any]:
    """The row with the lowest median latency (vanilla first on a tie)."""
    return rows.sort(["latency_e2e_s_median", pl.col("impl") != VANILLA, "impl"]).row(0, named=True)


def _pairing(pairing: str, where: dict[str, Any], pair: Pair, ar: pl.DataFrame, curve: pl.DataFrame,
             parity: pl.DataFrame, crossovers: pl.DataFrame, profile: HardwareProfile | None,
             by_id: dict[str, RunResult]) -> Pairing | None:
    batches = sorted(set(ar["batch_size"].to_list()) & set(curve["batch_size"].to_list()))
    if not batches:
        return None
    points = [_point(_fastest(ar.filter(pl.col("batch_size") == b)), _fastest(curve.filter(pl.col("batch_size") == b)))
              for b in batches]
    b_star, bound = measured_crossover(batches, [p.throughput_ratio for p in points])
    s_parity = _s_parity(parity, where, pair.ar_model)
    common = {"pairing": pairing, "hardware": where["hardware"], "prompt_length": where["prompt_length"],
              "generation_length": where["generation_length"], "steps": where["steps"],
              "block_length": where["block_length"], "llama_model": pair.ar_model, "llada_model": where["model"],
              "dream_alg": where["dream_alg"], "ar_arch": pair.ar_arch, "dllm_arch": pair.dllm_arch,
              "llama_impls": _ordered(p.llama_impl for p in points),
              "llada_impls": _ordered(p.llada_impl for p in points), "s_parity": s_parity,
              "at_s_parity": [s.metric for s in s_parity if s.steps == where["steps"]], "speedups": points,
              "b_star_measured": b_star, "b_star_bound": bound,
              "roofline_profile": profile.name if profile is not None else None}
    if profile is None:
        return Pairing(**common, b_star_roofline=None, roofline_note="no roofline profile for this device")
    if where["cfg_scale"]:
        return Pairing(**common, b_star_roofline=None, roofline_note="the roofline's B* is not computed with CFG")
    if pairing == VANILLA_PAIRING:
        row = with_dream_alg(crossovers).filter((pl.col("hardware") == where["hardware"])
                                & (pl.col("prompt_length") == where["prompt_length"])
                                & (pl.col("generation_length") == where["generation_length"])
                                & (pl.col("llada_model") == where["model"]) & (pl.col("steps") == where["steps"])
                                & pl.col("block_length").eq_missing(where["block_length"])
                                & pl.col("dream_alg").eq_missing(where["dream_alg"])
                                & (pl.col("llama_model") == pair.ar_model))
        predicted = row["predicted_b_star"][0] if row.height else None
        return Pairing(**common, b_star_roofline=predicted,
                       roofline_note=None if predicted is not None else f"no crossing up to B = {MAX_BATCH}")
    llama_runs = _representatives(ar, by_id)
    llada_runs = _representatives(curve, by_id)
    try:
        predicted, chosen = best_roofline_crossover(llama_runs, llada_runs, profile,
                                                    prefer=[*common["llama_impls"], *common["llada_impls"]])
    except RooflineInputError as exc:
        return Pairing(**common, b_star_roofline=None, roofline_note=str(exc))
    return Pairing(**common, b_star_roofline=predicted, roofline_implementations=chosen,
                   roofline_note=None if predicted is not None else f"no crossing up to B = {MAX_BATCH}")


def _ordered(names: Any) -> list[str]:
    return list(dict.fromkeys(names))


def _point(ar: dict[str, Any], dllm: dict[str, Any]) -> PairingPoint:
    llama_s = np.asarray(ar["latency_e2e_s_samples"], dtype=np.float64)
    llada_s = np.asarray(dllm["latency_e2e_s_samples"], dtype=np.float64)
    spread = ratio_interval(llama_s, llada_s)
    kind = spread.kind or stats.RANGE
    label = (f"{stats.INTERVAL_LABEL[kind]} of the ratio over {llama_s.size} + {llada_s.size} repetitions"
             + (" (too few for a CI)" if kind == stats.RANGE else ""))
    return PairingPoint(
        batch_size=ar["batch_size"], llama_impl=ar["impl"], llada_impl=dllm["impl"], llama_run_id=ar["run_id"],
        llada_run_id=dllm["run_id"], llama_latency_s=ar["latency_e2e_s_median"],
        llada_latency_s=dllm["latency_e2e_s_median"], speedup=float(np.median(llama_s) / np.median(llada_s)),
        speedup_low=float(spread.low), speedup_high=float(spread.high), interval=kind, interval_label=label,
        llama_repetitions=int(llama_s.size), llada_repetitions=int(llada_s.size),
        llada_extrapolated=bool(dllm["extrapolated"]),
        throughput_ratio=ar["tokens_per_s_median"] / dllm["tokens_per_s_median"],
        llama_joules_per_token=ar.get("joules_per_token"), llada_joules_per_token=dllm.get("joules_per_token"),
        llada_energy_extrapolated=dllm.get("energy_extrapolated"),
    )


def _s_parity(parity: pl.DataFrame, where: dict[str, Any], ar_model: str) -> list[SParity]:
    """The headline S_parity of this diffusion curve against its pair's references on each figure metric (it does
    not depend on the batch)."""
    if not parity.height:
        return []
    rows = with_dream_alg(parity).filter(
        pl.col("headline") & pl.col("metric").is_in(list(FIGURE_METRICS)) & (pl.col("hardware") == where["hardware"])
        & (pl.col("prompt_length") == where["prompt_length"])
        & (pl.col("generation_length") == where["generation_length"]) & (pl.col("llada_model") == where["model"])
        & pl.col("block_length").eq_missing(where["block_length"]) & pl.col("remasking").eq_missing(where["remasking"])
        & pl.col("dream_alg").eq_missing(where["dream_alg"]) & pl.col("cfg_scale").eq_missing(where["cfg_scale"])
        & (pl.col("llama_model") == ar_model))
    rows = rows.sort("batch_size").unique("metric", keep="first", maintain_order=True).sort("metric")
    return [SParity(metric=r["metric"], reference=r["reference_label"], steps=r["s_parity_steps"],
                    bound=r["s_parity_bound"], ci_low_steps=r["s_parity_low_steps"],
                    ci_high_steps=r["s_parity_high_steps"], parity_fraction=r["parity_fraction"])
            for r in rows.iter_rows(named=True)]


# ---------------------------------------------------------------- the roofline's B* of the best pairing


def _representatives(rows: pl.DataFrame, by_id: dict[str, RunResult]) -> dict[str, tuple[RunResult, float | None]]:
    """Per implementation: the run at its smallest batch and its median measured forwards (a confidence rule is
    costed at those), the configuration the roofline re-costs at other batch sizes."""
    out: dict[str, tuple[RunResult, float | None]] = {}
    for row in rows.sort("batch_size").iter_rows(named=True):
        result = by_id.get(row["run_id"])
        if row["impl"] in out or result is None:
            continue
        forwards = result.samples.forwards if result.samples else None
        out[row["impl"]] = (result, stats.median([float(f) for f in forwards]) if forwards else None)
    return out


def _fastest_predicted(runs: dict[str, tuple[RunResult, float | None]], profile: HardwareProfile,
                       batch: int, prefer: Sequence[str] = ()) -> tuple[str, float]:
    """(implementation, latency) of the fastest predicted implementation at `batch`. A tie (a host floor that
    every implementation hits) goes to the first of `prefer` (the measured pairing's), then by name."""
    best: tuple[str, float] | None = None
    for impl in sorted(runs, key=lambda name: (name not in prefer, list(prefer).index(name) if name in prefer else 0,
                                               name)):
        result, forwards = runs[impl]
        config = result.config.model_copy(update={"batch_size": batch})
        latency = predict_run(config, profile, "faithful", shape=result.model_shape,
                              measured_forwards=forwards).latency_s
        if best is None or latency < best[1] * (1 - 1e-9):
            best = (impl, latency)
    assert best is not None, "a pairing has runs on both sides"
    return best


def best_roofline_crossover(
    llama: dict[str, tuple[RunResult, float | None]], llada: dict[str, tuple[RunResult, float | None]],
    profile: HardwareProfile, max_batch: int = MAX_BATCH, prefer: Sequence[str] = (),
) -> tuple[float | None, dict[str, str]]:
    """The faithful roofline's B* when each model runs its fastest predicted implementation at each batch, and the
    implementations it picks there (ties to `prefer`; keyed 'llama' for the AR side, 'llada' for the diffusion
    side). Both generate B x N_out tokens, so T(AR) / T(dLLM) = L(dLLM) / L(AR)."""

    def log_ratio(batch: int) -> float:
        return math.log(_fastest_predicted(llada, profile, batch, prefer)[1]
                        / _fastest_predicted(llama, profile, batch, prefer)[1])

    crossing = crossing_batch(log_ratio, max_batch)
    at = max_batch if crossing is None else max(1, round(crossing))
    chosen = {"llama": _fastest_predicted(llama, profile, at, prefer)[0],
              "llada": _fastest_predicted(llada, profile, at, prefer)[0]}
    return crossing, chosen


# ---------------------------------------------------------------- findings.json and the terminal


def findings_file(sweep: str, pairings: Sequence[Pairing], unverified: Sequence[str] = (),
                  verdict: Sequence[str] = (), sides: Sides | None = None) -> FindingsFile:
    """findings.json's record. `sides`: how the text names each side (report.pairs.table_sides of the sweep; by
    default the pairings' own)."""
    present = _ordered(p.pairing for p in pairings)
    sides = sides or sides_of([p.pair for p in pairings])
    notes = [NO_VARIANTS] if present == [VANILLA_PAIRING] else []
    if any(p.interval == stats.RANGE for q in pairings for p in q.speedups):
        notes.append(f"an interval marked 'range' is the range of the ratio over fewer than {stats.MIN_CI_SAMPLES} "
                     "repetitions a side: not a confidence interval")
    if any(p.llada_extrapolated for q in pairings for p in q.speedups):
        notes.append(f"llada_extrapolated: {sides.dllm}'s latency (and its joules per token) timed from its first "
                     "steps and extrapolated to all of them (controls.extrapolation)")
    meaning = pairing_meaning(sides)
    return FindingsFile(verdict=list(verdict), sweep=sweep, pairings=present,
                        pairs=[pair.heading for pair in _pairs(pairings)], meaning={k: meaning[k] for k in present},
                        speedup=speedup_meaning(sides), notes=notes, findings=list(pairings),
                        unverified=list(unverified))


def findings_json(record: FindingsFile) -> str:
    """findings.json's text. A field is written only where it says something: `unverified` when verification
    failed, `pairs` and each finding's families when the sweep has several pairs, `dream_alg` where a finding has
    one; so the file of a sweep of one pair of blockwise families reads as it always has."""
    several = len(record.pairs) > 1
    exclude: dict[str, Any] = {} if record.unverified else {"unverified": True}
    if not several:
        exclude["pairs"] = True
    per_finding: dict[int | str, Any] = {}
    for i, finding in enumerate(record.findings):
        drop = ({"dream_alg"} if finding.dream_alg is None else set()) | (set() if several else {"ar_arch", "dllm_arch"})
        if drop:
            per_finding[i] = drop
    if per_finding:
        exclude["findings"] = per_finding
    return record.model_dump_json(indent=1, exclude=exclude) + "\n"


def _pairs(pairings: Sequence[Pairing]) -> list[Pair]:
    return list(dict.fromkeys(p.pair for p in pairings))


def b_star_text(p: Pairing) -> str:
    """'3.11 (between measured batches 1, 8); roofline (profile): 1' and the implementations the roofline picks."""
    batches = ", ".join(str(q.batch_size) for q in p.speedups)
    text = b_star_measured_text(p.b_star_measured, p.b_star_bound, batches, p.pair.ar_title, p.pair.dllm_title)
    if p.roofline_profile is None:
        return text + "; no roofline profile for this device"
    roofline = f"{p.b_star_roofline:.3g}" if p.b_star_roofline is not None else (p.roofline_note or "none")
    text += f"; roofline ({p.roofline_profile}): {roofline}"
    if p.roofline_implementations:
        text += f" ({p.roofline_implementations['llama']} vs {p.roofline_implementations['llada']})"
    return text


def speedup_text(q: PairingPoint, *, name_impls: bool, dllm: str) -> str:
    """One batch's speedup with its interval; `dllm`: how the text names the diffusion side."""
    impls = f"{q.llama_impl} vs {q.llada_impl}: " if name_impls else ""
    kind = stats.INTERVAL_LABEL.get(q.interval, q.interval)
    extrapolated = f"; {dllm} extrapolated" if q.llada_extrapolated else ""
    return (f"B = {q.batch_size}: {impls}{q.speedup:.3g}x [{q.speedup_low:.3g}, {q.speedup_high:.3g}] "
            f"({kind}, n={q.llama_repetitions}+{q.llada_repetitions}{extrapolated})")


def setting_text(p: Pairing) -> str:
    """The diffusion setting besides its steps: 'block 32', 'alg entropy', or both."""
    parts = ([f"block {p.block_length}"] if p.block_length is not None else []) + (
        [f"alg {p.dream_alg}"] if p.dream_alg else [])
    return ", ".join(parts) or "whole sequence"


def heading(p: Pairing) -> str:
    parity = f" = S_parity ({', '.join(p.at_s_parity)})" if p.at_s_parity else ""
    impls = "" if p.pairing == BEST_PAIRING else f" {VANILLA}"
    return (f"N_out {p.generation_length} (prompt {p.prompt_length}), {p.steps} steps{parity}, {setting_text(p)}: "
            f"{p.llama_model}{impls} vs {p.llada_model}{impls}")


def pairings_text(pairings: Sequence[Pairing]) -> str:
    """Both pairings for the terminal, after the Findings: per pairing (and pair, where there are several) and
    diffusion setting the speedup at every batch with its interval, then B* measured and the roofline's. Says so
    when no other implementation ran."""
    if not pairings:
        return ""
    multi = len({p.hardware for p in pairings}) > 1
    pairs = _pairs(pairings)
    meaning = pairing_meaning(sides_of(pairs))
    lines = [f"The answer both ways ({speedup_meaning(sides_of(pairs))})"]
    present = _ordered(p.pairing for p in pairings)
    for pairing in present:
        lines.append(f"  {pairing} pairing ({meaning[pairing]})")
        for pair in pairs:
            indent = "    " if len(pairs) == 1 else "      "
            group = [q for q in pairings if q.pairing == pairing and q.pair == pair]
            if len(pairs) > 1 and group:
                lines.append(f"    {pair.heading}")
            for p in group:
                lines.append(f"{indent}{heading(p)}" + (f" on {p.hardware}" if multi else ""))
                lines += [f"{indent}  {speedup_text(q, name_impls=pairing == BEST_PAIRING, dllm=pair.dllm_title)}"
                          for q in p.speedups]
                lines.append(f"{indent}  B*: {b_star_text(p)}")
    if present == [VANILLA_PAIRING]:
        lines.append(f"  best pairing: {NO_VARIANTS}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the Findings section


def pairing_blocks(pairings: Sequence[Pairing], multi: bool) -> list[Paragraph | Table]:
    """The answer both ways in the report: one row per pairing and diffusion setting, then what each pairing means;
    a table per pair, headed by its two models, where the sweep has several."""
    if not pairings:
        return []
    present = _ordered(p.pairing for p in pairings)
    pairs = _pairs(pairings)
    blocks: list[Paragraph | Table] = []
    for i, pair in enumerate(pairs):
        group = [p for p in pairings if p.pair == pair]
        head = f"{pair.heading}: " if len(pairs) > 1 else ""
        blocks.append(_pair_table(group, pair, multi, head, anchor="pairings-table" if i == 0 else None))
    if present == [VANILLA_PAIRING]:
        blocks.append(Paragraph(f"Best pairing: {NO_VARIANTS}."))
    return blocks


def _pair_table(pairings: Sequence[Pairing], pair: Pair, multi: bool, head: str, anchor: str | None) -> Table:
    present = _ordered(p.pairing for p in pairings)
    sides = sides_of([pair])
    algs = any(p.dream_alg for p in pairings)
    columns = (["hardware"] if multi else []) + [
        "pairing", "P", "N_out", "steps", "block", *(["alg"] if algs else []), sides.ar, sides.dllm,
        "speedup at each batch [interval]", "B* measured; roofline", f"J/token {sides.ar} / {sides.dllm}"]
    rows = []
    for p in pairings:
        best = p.pairing == BEST_PAIRING
        steps = f"{p.steps}" + (f" = S_parity ({', '.join(p.at_s_parity)})" if p.at_s_parity else "")
        rows.append(tuple(([p.hardware] if multi else []) + [
            p.pairing, str(p.prompt_length), str(p.generation_length), steps,
            "–" if p.block_length is None else str(p.block_length), *([p.dream_alg or "–"] if algs else []),
            f"{p.llama_model} {_impls_cell(p, autoregressive=True)}",
            f"{p.llada_model} {_impls_cell(p, autoregressive=False)}",
            "; ".join(speedup_text(q, name_impls=best and len(p.llama_impls) + len(p.llada_impls) > 2,
                                   dllm=sides.dllm) for q in p.speedups),
            b_star_text(p),
            "; ".join(f"B = {q.batch_size}: {_joules(q.llama_joules_per_token)} / {_joules(q.llada_joules_per_token)}"
                      + (" (extrapolated)" if q.llada_energy_extrapolated else "") for q in p.speedups),
        ]))
    meaning = pairing_meaning(sides)
    caption = (f"{head}The answer both ways ({speedup_meaning(sides)}). "
               + " ".join(f"{k}: {meaning[k]}." for k in present)
               + f" Intervals: a 95% BCa CI of the ratio of medians from {stats.MIN_CI_SAMPLES} repetitions a side, "
               f"else the range of the ratio (n = {sides.ar} + {sides.dllm} repetitions), which is not a confidence "
               f"interval. S_parity is the vanilla {sides.dllm}'s (quality measured on the protocol's runs). Also in "
               "findings.json")
    return Table(tuple(columns), tuple(rows), caption, fold=False, anchor=anchor)


def _impls_cell(p: Pairing, *, autoregressive: bool) -> str:
    impls = p.llama_impls if autoregressive else p.llada_impls
    if len(impls) == 1:
        return impls[0]
    pick = [(q.batch_size, q.llama_impl if autoregressive else q.llada_impl) for q in p.speedups]
    return ", ".join(f"{impl} (B = {b})" for b, impl in pick)


def _joules(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g} J"
