"""The answer three ways: each autoregressive model against each diffusion model it pairs with (report/answer/pairing/pairs.py:
LLaMA against LLaDA, Qwen2.5 against Dream). First each at its fastest measured implementation (what measures
the architectures as they would be deployed), then the autoregressive model at its fastest against the vanilla
diffusion model, then vanilla against vanilla, both eager: the protocol's pair, which on a GPU measures each
side's host overhead per forward as much as the architectures. A pairing is built only where it differs from the
others (the first needs a variant on either side, the second on both).

Per pairing, pair, hardware, lengths and diffusion setting (step count, block, Dream's alg): the speedup
L_e2e(AR) / L_e2e(dLLM) at every batch size both ran (> 1: the diffusion model is faster) with its interval and
what it rests on (report/analysis/intervals.py: sessions x repetitions), how each side executes (eager, compiled,
graph-captured), each side's time per forward and share of its roofs, whether the diffusion latency was
extrapolated and checked and whether its shape's step times split into modes (report/analysis/extrapolation.py), the
joules per generated token of both runs, S_parity where quality was measured (the vanilla diffusion model's), and
B*: measured from the same speedups with its interval, and the roofline's on the device's profile twice: the
roofs-only model's (each latency at the roofs) and the floor-calibrated model's (fitted to measured runs). Neither
is a bound on B*: a ratio of two lower bounds bounds nothing.

`findings.json` (report/answer/findings_file.py) holds these objects (report/answer/pairing/records.py). Their fields keep the
first pair's names: `llama_*` is the pair's autoregressive side, `llada_*` its diffusion side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from report.analysis.extrapolation import StepModes, shape_key, step_modes, trusted
from report.analysis.intervals import ABOVE, AT_OR_BELOW, INTERPOLATED, Crossover, Speedup, crossover
from report.answer.pairing.records import Pairing, PairingPoint, SParity
from report.answer.pairing.roofline import best_roofline_crossover, representatives
from report.answer.pairing.pairs import Pair, Sides, is_ar, is_dllm, pair_of, peers_of, sweep_pairs
from report.analysis.quality import FIGURE_METRICS
from report.table.sessions import row_speedup, shared_median
from report.table.flat import full_where_measured, with_sampler_setting
from roofline.errors import RooflineInputError
from roofline.hardware import HardwareProfile
from specs.engines import LLAMA_CPP
from specs.registry import family
from specs.results import RunResult
from specs.schema import VANILLA

ENGINE_PAIRING, BEST_PAIRING, AR_BEST_PAIRING, VANILLA_PAIRING = "engine", "best", "best-ar", "vanilla"
PAIRING_ORDER = (ENGINE_PAIRING, BEST_PAIRING, AR_BEST_PAIRING, VANILLA_PAIRING)
NO_VARIANTS = ("no other implementation ran: every run is the vanilla implementation, so the best pairing is the "
               "vanilla pairing")
# The diffusion curve a pairing follows over batch sizes (its implementation is the pairing's choice).
CURVE = ("hardware", "prompt_length", "generation_length", "model", "steps", "block_length", "remasking",
         "sampler_setting", "cfg_scale", "dtype")
# What each sampler family's vanilla implementation is, and its time against the official code in the CPU bench of
# docs/samplers.md (`just bench`: small random models, 2 threads): "vanilla" is not the untouched reference.
VANILLA_IS = {
    "autoregressive": "this package's decode loop over transformers' model with a preallocated KV cache (0.86x "
                      "model.generate()'s time in the CPU bench of docs/samplers.md)",
    "llada": "the official algorithm with logits for the current block only (0.49x the official code's time in "
             "the same bench)",
    "dream": "the official algorithm with logits for the generated window only (0.88x the official projection's "
             "time in the same bench)",
}


def vanilla_is(arch: str) -> str:
    """What a family's vanilla implementation is (VANILLA_IS by its sampler)."""
    sampler = family(arch).sampler
    return VANILLA_IS.get(sampler, f"this package's {sampler} sampler")


def pairing_meaning(sides: Sides, pairs: Sequence[Pair] = ()) -> dict[str, str]:
    """What each pairing is, naming the sides as `sides` does; with `pairs`, what each side's vanilla is."""
    vanilla = "".join(f"; vanilla {title}: {text}" for title, text in dict.fromkeys(
        (title, vanilla_is(arch)) for p in pairs for title, arch in ((p.ar_title, p.ar_arch),
                                                                      (p.dllm_title, p.dllm_arch))))
    return {
        ENGINE_PAIRING: (f"{sides.ar} and {sides.dllm} both in llama.cpp, a production engine ({sides.ar} with its "
                         f"own decode loop, {sides.dllm}'s forward under this package's sampler): the architectures "
                         "at engine parity"),
        BEST_PAIRING: ("at each point, each model's fastest measured implementation, each side named compiled, "
                       "graph-captured or eager: the architectures as they would be deployed"),
        AR_BEST_PAIRING: f"{sides.ar} at its fastest measured implementation against the vanilla {sides.dllm}",
        VANILLA_PAIRING: (f"vanilla {sides.ar} against vanilla {sides.dllm}, both eager (the protocol's pair): in "
                          f"PyTorch, it measures each side's host overhead per eager forward as much as the "
                          f"architectures, {sides.ar}'s once per token in this package's Python loop{vanilla}"),
    }


def speedup_meaning(sides: Sides) -> str:
    return (f"speedup = L_e2e({sides.ar}) / L_e2e({sides.dllm}) at the same batch and lengths, median against "
            f"median (> 1: {sides.dllm} is faster); B* = the batch size from which {sides.ar}'s throughput stays "
            "ahead")


# ---------------------------------------------------------------- building the pairings


def pairing_table(
    table: pl.DataFrame, results: Sequence[RunResult], parity: pl.DataFrame, crossovers: pl.DataFrame,
    profiles: dict[str, HardwareProfile],
) -> list[Pairing]:
    """The pairings (PAIRING_ORDER; each only where it differs from the others) of every pair (report.answer.pairing.pairs.sweep_pairs).
    `table`: report.table.flat.results_table of every run, sessions pooled (report.table.sessions.pool_sessions); `parity`:
    report.analysis.parity.parity_table; `crossovers`: report.answer.findings.crossover_table (the vanilla pairing's roofline B*, so
    the Findings agree); `profiles`: each hardware's roofline profile."""
    table = with_sampler_setting(table)
    pairs = sweep_pairs(table)
    ok = table.filter((pl.col("status") == "ok") & pl.col("latency_e2e_s_median").is_not_null())
    ok = trusted(full_where_measured(ok.with_columns(pl.col("impl").fill_null(VANILLA))))
    by_id = {r.run_id: r for r in results}
    autoregressive, diffusion = ok.filter(is_ar()), ok.filter(is_dllm())
    ar_variants, dllm_variants = (autoregressive["impl"] != VANILLA).any(), (diffusion["impl"] != VANILLA).any()
    in_engine = (autoregressive["engine"] == LLAMA_CPP).any() and (diffusion["engine"] == LLAMA_CPP).any()
    pairings = ([ENGINE_PAIRING] if in_engine else []) + ([BEST_PAIRING] if ar_variants or dllm_variants else []) + (
        [AR_BEST_PAIRING] if ar_variants and dllm_variants else []) + [VANILLA_PAIRING]
    modes = step_modes(table)
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
                if pairing == ENGINE_PAIRING:
                    ar, dllm = ar.filter(pl.col("engine") == LLAMA_CPP), dllm.filter(pl.col("engine") == LLAMA_CPP)
                if pairing == VANILLA_PAIRING:
                    ar = ar.filter(pl.col("impl") == VANILLA)
                if pairing not in (BEST_PAIRING, ENGINE_PAIRING):
                    dllm = dllm.filter(pl.col("impl") == VANILLA)
                built = _pairing(pairing, where, pair, ar, dllm, parity, crossovers, profiles.get(where["hardware"]),
                                 by_id, lambda row: modes.get(shape_key(row, table)))
                if built is not None:
                    out.append(built)
    rank = {pair: i for i, pair in enumerate(pairs)}  # pairs in registry order (report.answer.pairing.pairs.pairs_from)
    return sorted(out, key=lambda p: (PAIRING_ORDER.index(p.pairing), rank[p.pair], p.hardware, p.generation_length,
                                      p.prompt_length, p.llada_model, p.block_length or 0, p.steps,
                                      p.sampler_setting or ""))


def unanswered(table: pl.DataFrame, pairings: Sequence[Pairing]) -> list[str]:
    """Each pair of the sweep that no pairing answers, with why; and a sweep of one paradigm, said as such."""
    pairs = sweep_pairs(table)
    if not pairs and table.height:
        models = sorted(set(table["model"].to_list()))
        paradigms = {family(a).paradigm for a in table["arch"].to_list()}
        other = "diffusion" if paradigms == {"autoregressive"} else "autoregressive"
        return [f"nothing to compare: the sweep has no {other} model to pair with {', '.join(models)}"]
    answered = {p.pair for p in pairings}
    return [f"{pair.heading}: no answer: {_why_unanswered(table, pair)}" for pair in pairs if pair not in answered]


def _why_unanswered(table: pl.DataFrame, pair: Pair) -> str:
    reasons = []
    for model in (pair.dllm_model, pair.ar_model):
        runs = table.filter(pl.col("model") == model)
        if not runs.filter(pl.col("status") == "ok").height:
            counts = runs["status"].value_counts(sort=True).iter_rows()
            reasons.append(f"every {model} run failed ({', '.join(f'{n} {status}' for status, n in counts)})")
    return "; ".join(reasons) or "the two models ran no common lengths, hardware and batch size"


def _fastest(rows: pl.DataFrame) -> dict[str, Any]:
    """The row with the lowest median latency (vanilla first on a tie)."""
    return rows.sort(["latency_e2e_s_median", pl.col("impl") != VANILLA, "impl"]).row(0, named=True)


def _pairing(pairing: str, where: dict[str, Any], pair: Pair, ar: pl.DataFrame, curve: pl.DataFrame,
             parity: pl.DataFrame, crossovers: pl.DataFrame, profile: HardwareProfile | None,
             by_id: dict[str, RunResult], modes_of: Callable[[dict[str, Any]], StepModes | None]) -> Pairing | None:
    batches = sorted(set(ar["batch_size"].to_list()) & set(curve["batch_size"].to_list()))
    if not batches:
        return None
    rows = [(_fastest(ar.filter(pl.col("batch_size") == b)), _fastest(curve.filter(pl.col("batch_size") == b)))
            for b in batches]
    measured = [row_speedup(a, d) for a, d in rows]
    b_star = crossover(batches, measured)
    s_parity = _s_parity(parity, where, pair.ar_model)
    points = [_point(a, d, s, modes_of(d)) for (a, d), s in zip(rows, measured)]
    common = {"pairing": pairing, "hardware": where["hardware"], "prompt_length": where["prompt_length"],
              "generation_length": where["generation_length"], "steps": where["steps"],
              "block_length": where["block_length"], "llama_model": pair.ar_model, "llada_model": where["model"],
              "sampler_setting": where["sampler_setting"], "ar_arch": pair.ar_arch, "dllm_arch": pair.dllm_arch,
              "llama_impls": _ordered(p.llama_impl for p in points),
              "llada_impls": _ordered(p.llada_impl for p in points), "s_parity": s_parity,
              "at_s_parity": [s.metric for s in s_parity if s.steps == where["steps"]], "speedups": points,
              **b_star_fields(b_star), "roofline_profile": profile.name if profile is not None else None}
    if profile is None:
        return Pairing(**common, roofline_note="no roofline profile for this device")
    if where["cfg_scale"]:
        return Pairing(**common, roofline_note="the roofline's B* is not computed with CFG")
    roofline: dict[str, Any] = {"calibration": profile.floor_note()}
    if pairing == VANILLA_PAIRING:
        row = with_sampler_setting(crossovers).filter((pl.col("hardware") == where["hardware"])
                                & (pl.col("prompt_length") == where["prompt_length"])
                                & (pl.col("generation_length") == where["generation_length"])
                                & (pl.col("llada_model") == where["model"]) & (pl.col("steps") == where["steps"])
                                & pl.col("block_length").eq_missing(where["block_length"])
                                & pl.col("sampler_setting").eq_missing(where["sampler_setting"])
                                & (pl.col("llama_model") == pair.ar_model))
        roofs = row["predicted_b_star_roofs"][0] if row.height else None
        calibrated = row["predicted_b_star"][0] if row.height else None
    else:
        llama_runs, llada_runs = representatives(ar, by_id), representatives(curve, by_id)
        prefer = [*common["llama_impls"], *common["llada_impls"]]
        try:
            roofs, _ = best_roofline_crossover(llama_runs, llada_runs, profile.roofs_only(), prefer=prefer)
            calibrated, chosen = best_roofline_crossover(llama_runs, llada_runs, profile, prefer=prefer)
        except RooflineInputError as exc:
            return Pairing(**common, roofline_note=str(exc))
        roofline["roofline_implementations"] = chosen
    if not profile.has_floor:
        calibrated = None
    roofline.update(b_star_roofs=roofs, b_star_roofs_bound=roofline_bound(roofs), b_star_calibrated=calibrated,
                    b_star_calibrated_bound=roofline_bound(calibrated) if profile.has_floor else None)
    return Pairing(**common, **roofline)


def roofline_bound(b_star: float | None) -> str:
    """The bound of a roofline B* (roofline.crossover.crossing_batch): 1.0 is "ahead already at B = 1", None "not
    up to MAX_BATCH"."""
    if b_star is None:
        return ABOVE
    return AT_OR_BELOW if b_star == 1.0 else INTERPOLATED


def b_star_fields(c: Crossover | None) -> dict[str, Any]:
    """A Pairing's measured B* fields: all None where no B* could be placed (one batch size)."""
    if c is None:
        return dict.fromkeys(("b_star_measured", "b_star_bound", "b_star_low", "b_star_low_bound", "b_star_high",
                              "b_star_high_bound", "b_star_level", "b_star_coverage"))
    return {"b_star_measured": c.estimate, "b_star_bound": c.bound, "b_star_low": c.low, "b_star_low_bound": c.low_bound,
            "b_star_high": c.high, "b_star_high_bound": c.high_bound, "b_star_level": c.level,
            "b_star_coverage": c.coverage}


def _ordered(names: Any) -> list[str]:
    return list(dict.fromkeys(names))


def _point(ar: dict[str, Any], dllm: dict[str, Any], s: Speedup, modes: StepModes | None) -> PairingPoint:
    extrapolated = bool(dllm["extrapolated"])
    own_step = dllm.get("step_s_p50")
    at_modes = None
    if modes is not None and own_step:
        at_modes = [s.estimate * own_step / step for step in (modes.fast_s, modes.slow_s)]
    return PairingPoint(
        batch_size=ar["batch_size"], llama_impl=ar["impl"], llada_impl=dllm["impl"],
        llama_execution=ar.get("execution") or "eager", llada_execution=dllm.get("execution") or "eager",
        llama_run_id=ar["run_id"], llada_run_id=dllm["run_id"], llama_latency_s=shared_median(ar, dllm),
        llada_latency_s=shared_median(dllm, ar), sessions_left_out=list(s.left_out), speedup=s.estimate, speedup_low=s.low, speedup_high=s.high,
        interval_level=s.level, interval_method=s.method, interval_label=s.label, sessions=s.sessions,
        llama_repetitions=s.repetitions[0], llada_repetitions=s.repetitions[1], llada_extrapolated=extrapolated,
        llama_joules_per_token=ar.get("joules_per_token"), llada_joules_per_token=dllm.get("joules_per_token"),
        llada_energy_extrapolated=dllm.get("energy_extrapolated"), llama_forward_s=ar.get("itl_pass_s_median"),
        llada_forward_s=dllm.get("step_s_median"), llama_roofs_fraction=ar.get("roofline_efficiency"),
        llada_roofs_fraction=dllm.get("roofline_efficiency"),
        llada_timed_steps=dllm.get("timed_steps") if extrapolated else None,
        llada_extrapolation_checked=(dllm.get("extrapolation_step_ratio") is not None) if extrapolated else None,
        llada_step_modes_s=[modes.fast_s, modes.slow_s] if at_modes else None, speedup_at_modes=at_modes,
    )


def _s_parity(parity: pl.DataFrame, where: dict[str, Any], ar_model: str) -> list[SParity]:
    """The headline S_parity of this diffusion curve against its pair's references on each figure metric (it does
    not depend on the batch)."""
    if not parity.height:
        return []
    rows = with_sampler_setting(parity).filter(
        pl.col("headline") & pl.col("metric").is_in(list(FIGURE_METRICS)) & (pl.col("hardware") == where["hardware"])
        & (pl.col("prompt_length") == where["prompt_length"])
        & (pl.col("generation_length") == where["generation_length"]) & (pl.col("llada_model") == where["model"])
        & pl.col("block_length").eq_missing(where["block_length"]) & pl.col("remasking").eq_missing(where["remasking"])
        & pl.col("sampler_setting").eq_missing(where["sampler_setting"]) & pl.col("cfg_scale").eq_missing(where["cfg_scale"])
        & (pl.col("llama_model") == ar_model))
    rows = rows.sort("batch_size").unique("metric", keep="first", maintain_order=True).sort("metric")
    return [SParity(metric=r["metric"], reference=r["reference_label"], judge=r.get("judge"),
                    judge_under_test=r.get("judge") == ar_model, steps=r["s_parity_steps"],
                    bound=r["s_parity_bound"], replicate_low_steps=r["s_parity_low_steps"],
                    replicate_high_steps=r["s_parity_high_steps"], parity_fraction=r["parity_fraction"],
                    margin=r.get("margin"), alpha=r.get("alpha"), n_prompts=r.get("n_prompts"),
                    replicate_steps=r.get("replicate_steps") or [], replicate_shares=r.get("replicate_shares") or [],
                    decides=r.get("decides") is not False, gate=r.get("gate"), coverage=r.get("difference_coverage"),
                    power=r.get("power"), power_sd=r.get("power_sd"), prompts_for_power=r.get("prompts_for_power"),
                    degenerate_steps=r.get("degenerate_steps") or [], reference_diversity=r.get("reference_diversity"),
                    human_diversity=r.get("human_diversity"))
            for r in rows.iter_rows(named=True)]


def pairs_of(pairings: Sequence[Pairing]) -> list[Pair]:
    return list(dict.fromkeys(p.pair for p in pairings))
