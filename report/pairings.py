"""The answer both ways: LLaMA against LLaDA as the protocol pairs them (vanilla against vanilla) and as each
architecture would be deployed (at each point, each model's fastest measured implementation).

Per pairing, hardware, lengths, LLaDA model, block and step count: the speedup L_e2e(LLaMA) / L_e2e(LLaDA) at
every batch size both ran (> 1: LLaDA is faster) with its interval (report.parity.ratio_interval: a BCa CI from
six repetitions a side, else the range of the ratio, which is no CI), the joules per generated token of both runs,
S_parity where quality was measured (the vanilla LLaDA's: variants' quality moves are the Variants section's), and
B*: measured (report.findings.measured_crossover over the throughput ratios) and the faithful roofline's on the
device's profile. The roofline's B* of the best pairing takes, at each batch it tries, each model's fastest
predicted implementation among those that ran.

`findings.json` beside report.md holds these objects (FindingsFile); `pairings_text` prints them.
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
from report.findings import measured_crossover
from report.parity import ratio_interval
from report.quality import FIGURE_METRICS
from report.table import full_where_measured
from roofline.crossover import MAX_BATCH, crossing_batch
from roofline.errors import RooflineInputError
from roofline.hardware import HardwareProfile
from roofline.predict import predict_run
from specs.results import RunResult
from specs.schema import VANILLA

VANILLA_PAIRING, BEST_PAIRING = "vanilla", "best"
PAIRING_MEANING = {
    VANILLA_PAIRING: "vanilla LLaMA against vanilla LLaDA: the protocol",
    BEST_PAIRING: "at each point, each model's fastest measured implementation: what would be deployed",
}
NO_VARIANTS = ("no other implementation ran: every run is the vanilla implementation, so the best pairing is the "
               "vanilla pairing")
SPEEDUP_MEANING = ("speedup = L_e2e(LLaMA) / L_e2e(LLaDA) at the same batch and lengths (> 1: LLaDA is faster); "
                   "B* = the batch size from which LLaMA's throughput stays ahead")
# The LLaDA curve a pairing follows over batch sizes (its implementation is the pairing's choice).
CURVE = ("hardware", "prompt_length", "generation_length", "model", "steps", "block_length", "remasking",
         "cfg_scale", "dtype")


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
    pairing: Literal["vanilla", "best"]
    hardware: str
    prompt_length: int
    generation_length: int
    steps: int
    block_length: int
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


class FindingsFile(_Record):
    """findings.json: every pairing object, what the numbers mean, and what a reader must know."""

    # Only in a report rendered with --allow-unverified, above all else: each verification failure (absent when
    # verified, so the file of a verified sweep is unchanged).
    unverified: list[str] = []
    verdict: list[str] = []  # report/verdict.py: the answer in at most five sentences, first in the file
    sweep: str
    pairings: list[str]  # the pairings present
    meaning: dict[str, str]
    speedup: str
    notes: list[str]
    findings: list[Pairing]


# ---------------------------------------------------------------- building the pairings


def pairing_table(
    table: pl.DataFrame, results: Sequence[RunResult], parity: pl.DataFrame, crossovers: pl.DataFrame,
    profiles: dict[str, HardwareProfile],
) -> list[Pairing]:
    """Both pairings (the best one only when some run is not vanilla). `table`: report.table.results_table of every
    run; `parity`: report.parity.parity_table; `crossovers`: report.findings.crossover_table (the vanilla pairing's
    roofline B*, so the Findings agree); `profiles`: each hardware's roofline profile."""
    ok = table.filter((pl.col("status") == "ok") & pl.col("latency_e2e_s_median").is_not_null()
                      & pl.col("tokens_per_s_median").is_not_null())
    ok = full_where_measured(ok.with_columns(pl.col("impl").fill_null(VANILLA)))
    by_id = {r.run_id: r for r in results}
    pairings = [VANILLA_PAIRING] + ([BEST_PAIRING] if (ok["impl"] != VANILLA).any() else [])
    llama, llada = ok.filter(pl.col("arch") == "llama"), ok.filter(pl.col("arch") == "llada")
    out: list[Pairing] = []
    for pairing in pairings:
        for key, curve in llada.group_by(list(CURVE), maintain_order=True):
            where = dict(zip(CURVE, key))
            ar = llama.filter((pl.col("hardware") == where["hardware"])
                              & (pl.col("prompt_length") == where["prompt_length"])
                              & (pl.col("generation_length") == where["generation_length"]))
            if not ar.height:
                continue
            ar = ar.filter(pl.col("model") == sorted(ar["model"].unique().to_list())[0])
            if pairing == VANILLA_PAIRING:
                ar, curve = ar.filter(pl.col("impl") == VANILLA), curve.filter(pl.col("impl") == VANILLA)
            built = _pairing(pairing, where, ar, curve, parity, crossovers, profiles.get(where["hardware"]), by_id)
            if built is not None:
                out.append(built)
    return sorted(out, key=lambda p: (p.pairing != VANILLA_PAIRING, p.hardware, p.generation_length,
                                      p.prompt_length, p.llada_model, p.block_length, p.steps))


def _fastest(rows: pl.DataFrame) -> dict[str, Any]:
    """The row with the lowest median latency (vanilla first on a tie)."""
    return rows.sort(["latency_e2e_s_median", pl.col("impl") != VANILLA, "impl"]).row(0, named=True)


def _pairing(pairing: str, where: dict[str, Any], ar: pl.DataFrame, curve: pl.DataFrame, parity: pl.DataFrame,
             crossovers: pl.DataFrame, profile: HardwareProfile | None,
             by_id: dict[str, RunResult]) -> Pairing | None:
    batches = sorted(set(ar["batch_size"].to_list()) & set(curve["batch_size"].to_list()))
    if not batches:
        return None
    points = [_point(_fastest(ar.filter(pl.col("batch_size") == b)), _fastest(curve.filter(pl.col("batch_size") == b)))
              for b in batches]
    b_star, bound = measured_crossover(batches, [p.throughput_ratio for p in points])
    s_parity = _s_parity(parity, where)
    llama_model = str(ar["model"][0])
    common = {"pairing": pairing, "hardware": where["hardware"], "prompt_length": where["prompt_length"],
              "generation_length": where["generation_length"], "steps": where["steps"],
              "block_length": where["block_length"], "llama_model": llama_model, "llada_model": where["model"],
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
        row = crossovers.filter((pl.col("hardware") == where["hardware"])
                                & (pl.col("prompt_length") == where["prompt_length"])
                                & (pl.col("generation_length") == where["generation_length"])
                                & (pl.col("llada_model") == where["model"]) & (pl.col("steps") == where["steps"])
                                & (pl.col("block_length") == where["block_length"]))
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


def _s_parity(parity: pl.DataFrame, where: dict[str, Any]) -> list[SParity]:
    """The headline S_parity of this LLaDA curve on each figure metric (it does not depend on the batch)."""
    if not parity.height:
        return []
    rows = parity.filter(
        pl.col("headline") & pl.col("metric").is_in(list(FIGURE_METRICS)) & (pl.col("hardware") == where["hardware"])
        & (pl.col("prompt_length") == where["prompt_length"])
        & (pl.col("generation_length") == where["generation_length"]) & (pl.col("llada_model") == where["model"])
        & (pl.col("block_length") == where["block_length"]) & (pl.col("remasking") == where["remasking"])
        & pl.col("cfg_scale").eq_missing(where["cfg_scale"]))
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
    implementations it picks there (ties to `prefer`). Both generate B x N_out tokens, so T(LLaMA) / T(LLaDA) =
    L(LLaDA) / L(LLaMA)."""

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
                  verdict: Sequence[str] = ()) -> FindingsFile:
    present = _ordered(p.pairing for p in pairings)
    notes = [NO_VARIANTS] if present == [VANILLA_PAIRING] else []
    if any(p.interval == stats.RANGE for q in pairings for p in q.speedups):
        notes.append(f"an interval marked 'range' is the range of the ratio over fewer than {stats.MIN_CI_SAMPLES} "
                     "repetitions a side: not a confidence interval")
    if any(p.llada_extrapolated for q in pairings for p in q.speedups):
        notes.append("llada_extrapolated: LLaDA's latency (and its joules per token) timed from its first steps and "
                     "extrapolated to all of them (controls.extrapolation)")
    return FindingsFile(verdict=list(verdict), sweep=sweep, pairings=present,
                        meaning={k: PAIRING_MEANING[k] for k in present},
                        speedup=SPEEDUP_MEANING, notes=notes, findings=list(pairings), unverified=list(unverified))


def b_star_text(p: Pairing) -> str:
    """'3.11 (between measured batches 1, 8); roofline (profile): 1' and the implementations the roofline picks."""
    batches = ", ".join(str(q.batch_size) for q in p.speedups)
    if p.b_star_bound == "<=":
        text = f"<= {p.b_star_measured:g}: LLaMA ahead at every batch measured ({batches})"
    elif p.b_star_bound == ">":
        text = f"> {p.b_star_measured:g}: LLaDA ahead at every batch measured ({batches})"
    else:
        text = f"{p.b_star_measured:.3g} (between measured batches {batches})"
    if p.roofline_profile is None:
        return text + "; no roofline profile for this device"
    roofline = f"{p.b_star_roofline:.3g}" if p.b_star_roofline is not None else (p.roofline_note or "none")
    text += f"; roofline ({p.roofline_profile}): {roofline}"
    if p.roofline_implementations:
        text += f" ({p.roofline_implementations['llama']} vs {p.roofline_implementations['llada']})"
    return text


def speedup_text(q: PairingPoint, *, name_impls: bool) -> str:
    impls = f"{q.llama_impl} vs {q.llada_impl}: " if name_impls else ""
    kind = stats.INTERVAL_LABEL.get(q.interval, q.interval)
    extrapolated = "; LLaDA extrapolated" if q.llada_extrapolated else ""
    return (f"B = {q.batch_size}: {impls}{q.speedup:.3g}x [{q.speedup_low:.3g}, {q.speedup_high:.3g}] "
            f"({kind}, n={q.llama_repetitions}+{q.llada_repetitions}{extrapolated})")


def heading(p: Pairing) -> str:
    parity = f" = S_parity ({', '.join(p.at_s_parity)})" if p.at_s_parity else ""
    impls = "" if p.pairing == BEST_PAIRING else f" {VANILLA}"
    return (f"N_out {p.generation_length} (prompt {p.prompt_length}), {p.steps} steps{parity}, block "
            f"{p.block_length}: {p.llama_model}{impls} vs {p.llada_model}{impls}")


def pairings_text(pairings: Sequence[Pairing]) -> str:
    """Both pairings for the terminal, after the Findings: per pairing and LLaDA setting the speedup at every batch
    with its interval, then B* measured and the roofline's. Says so when no other implementation ran."""
    if not pairings:
        return ""
    multi = len({p.hardware for p in pairings}) > 1
    lines = [f"The answer both ways ({SPEEDUP_MEANING})"]
    present = _ordered(p.pairing for p in pairings)
    for pairing in present:
        lines.append(f"  {pairing} pairing ({PAIRING_MEANING[pairing]})")
        for p in (q for q in pairings if q.pairing == pairing):
            lines.append(f"    {heading(p)}" + (f" on {p.hardware}" if multi else ""))
            lines += [f"      {speedup_text(q, name_impls=pairing == BEST_PAIRING)}" for q in p.speedups]
            lines.append(f"      B*: {b_star_text(p)}")
    if present == [VANILLA_PAIRING]:
        lines.append(f"  best pairing: {NO_VARIANTS}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the Findings section


def pairing_blocks(pairings: Sequence[Pairing], multi: bool) -> list[Paragraph | Table]:
    """The answer both ways in the report: one row per pairing and LLaDA setting, then what each pairing means."""
    if not pairings:
        return []
    present = _ordered(p.pairing for p in pairings)
    columns = (["hardware"] if multi else []) + [
        "pairing", "P", "N_out", "steps", "block", "LLaMA", "LLaDA", "speedup at each batch [interval]",
        "B* measured; roofline", "J/token LLaMA / LLaDA"]
    rows = []
    for p in pairings:
        best = p.pairing == BEST_PAIRING
        steps = f"{p.steps}" + (f" = S_parity ({', '.join(p.at_s_parity)})" if p.at_s_parity else "")
        rows.append(tuple(([p.hardware] if multi else []) + [
            p.pairing, str(p.prompt_length), str(p.generation_length), steps, str(p.block_length),
            f"{p.llama_model} {_impls_cell(p, 'llama')}", f"{p.llada_model} {_impls_cell(p, 'llada')}",
            "; ".join(speedup_text(q, name_impls=best and len(p.llama_impls) + len(p.llada_impls) > 2)
                      for q in p.speedups),
            b_star_text(p),
            "; ".join(f"B = {q.batch_size}: {_joules(q.llama_joules_per_token)} / {_joules(q.llada_joules_per_token)}"
                      + (" (extrapolated)" if q.llada_energy_extrapolated else "") for q in p.speedups),
        ]))
    caption = (f"The answer both ways ({SPEEDUP_MEANING}). "
               + " ".join(f"{k}: {PAIRING_MEANING[k]}." for k in present)
               + f" Intervals: a 95% BCa CI of the ratio of medians from {stats.MIN_CI_SAMPLES} repetitions a side, "
               "else the range of the ratio (n = LLaMA + LLaDA repetitions), which is not a confidence interval. "
               "S_parity is the vanilla LLaDA's (quality measured on the protocol's runs). Also in findings.json")
    blocks: list[Paragraph | Table] = [Table(tuple(columns), tuple(rows), caption, fold=False, anchor="pairings-table")]
    if present == [VANILLA_PAIRING]:
        blocks.append(Paragraph(f"Best pairing: {NO_VARIANTS}."))
    return blocks


def _impls_cell(p: Pairing, arch: str) -> str:
    impls = p.llama_impls if arch == "llama" else p.llada_impls
    if len(impls) == 1:
        return impls[0]
    pick = [(q.batch_size, q.llama_impl if arch == "llama" else q.llada_impl) for q in p.speedups]
    return ", ".join(f"{impl} (B = {b})" for b, impl in pick)


def _joules(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g} J"
