"""The answer both ways: each autoregressive model against each diffusion model it pairs with (report/pairs.py:
LLaMA against LLaDA, Qwen2.5 against Dream), as the protocol pairs them (vanilla against vanilla) and as each
would be deployed (at each point, each model's fastest measured implementation).

Per pairing, pair, hardware, lengths and diffusion setting (step count, block, Dream's alg): the speedup
L_e2e(AR) / L_e2e(dLLM) at every batch size both ran (> 1: the diffusion model is faster) with its interval and
what it rests on (report/intervals.py: sessions x repetitions), how each side executes (eager, compiled,
graph-captured), the joules per generated token of both runs, S_parity where quality was measured (the vanilla
diffusion model's: variants' quality moves are the Variants section's), and B*: measured from the same speedups
with its interval, and the roofline's on the device's profile twice: on the roofs alone (each latency at its lower
bound) and with the profile's calibrated floor (a model fitted to measured runs, not a bound). The roofline's B* of
the best pairing takes, at each batch it tries, each model's fastest predicted implementation among those that ran.

`findings.json` beside report.md holds these objects (FindingsFile). Their fields keep the first pair's names:
`llama_*` is the pair's autoregressive side, `llada_*` its diffusion side. A pair of the sweep that has no answer
(every run of one side failed, or no model to pair with) is named with the reason in `unanswered`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict

from report import stats
from report.extrapolation import trusted
from report.intervals import ABOVE, AT_OR_BELOW, INTERPOLATED, Crossover, Speedup, crossover
from report.pairs import Pair, Sides, is_ar, is_dllm, pair_of, peers_of, sides_of, sweep_pairs
from report.quality import FIGURE_METRICS
from report.sessions import row_speedup
from report.table import full_where_measured, with_dream_alg
from roofline.crossover import MAX_BATCH, crossing_batch
from roofline.errors import RooflineInputError
from roofline.hardware import HardwareProfile
from roofline.predict import predict_run
from specs.registry import archs_of, family
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
    """The vanilla diffusion model's S_parity on one headline metric against its headline reference."""

    metric: str
    reference: str
    judge: str | None = None  # the model that scores the metric (perplexity's evaluator), where one does
    judge_under_test: bool = False  # the judge is the pair's own autoregressive model
    steps: int | None  # None: no parity within the swept steps
    bound: str | None  # "=" or "<=" (parity already at the fewest swept steps)
    # The S_parity of bootstrap replicates over prompts spans these step counts: the swept grid's resolution, no
    # confidence interval (None: above the largest swept, or too few prompts).
    replicate_low_steps: int | None = None
    replicate_high_steps: int | None = None
    parity_fraction: float | None = None  # share of bootstrap replicates that reach parity
    # The equivalence test behind it (report/equivalence.py): its margin, α and prompts; the replicates' S_parity
    # by step count (shares in step order); whether the metric passed its calibration gate, and the gate's words.
    margin: str | None = None
    alpha: float | None = None
    n_prompts: int | None = None
    replicate_steps: list[int] = []
    replicate_shares: list[float] = []
    decides: bool = True
    gate: str | None = None


class PairingPoint(_Record):
    """One batch size: both runs, how each executes, the speedup with its interval and basis, their energy."""

    batch_size: int
    llama_impl: str
    llada_impl: str
    llama_execution: str  # eager, compiled or graph-captured (report.table.execution_of)
    llada_execution: str
    llama_run_id: str
    llada_run_id: str
    llama_latency_s: float
    llada_latency_s: float
    speedup: float
    speedup_low: float | None
    speedup_high: float | None
    interval_level: float | None  # the interval's nominal coverage (None: no interval)
    interval_method: str  # report.intervals: "t-sessions", "rank-shift" or "none"
    interval_label: str  # e.g. "95% t interval over sessions, 3 sessions x 5 + 5 repetitions"
    sessions: int
    llama_repetitions: int  # a session's (the fewest)
    llada_repetitions: int
    llada_extrapolated: bool  # the diffusion latency timed from its first steps, the rest extrapolated
    llama_joules_per_token: float | None = None
    llada_joules_per_token: float | None = None
    llada_energy_extrapolated: bool | None = None


class Pairing(_Record):
    """One pairing of one pair at one diffusion setting over the batch sizes both ran. `llama_*`: the pair's
    autoregressive model, `llada_*`: its diffusion model (of families `ar_arch` and `dllm_arch`). Every B* comes with
    its bound: "=" a crossing between measured (or, for the roofline, computed) batches, "<=" the autoregressive
    model ahead already at the smallest batch (the value is that batch), ">" not yet at the largest."""

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
    b_star_bound: str
    b_star_low: float
    b_star_low_bound: str
    b_star_high: float
    b_star_high_bound: str
    b_star_level: float | None  # the pointwise level the interval inverts (it covers at least that)
    roofline_profile: str | None
    b_star_roofs: float | None = None  # on the roofs alone (None: no profile, CFG, or an error in roofline_note)
    b_star_roofs_bound: str | None = None
    b_star_calibrated: float | None = None  # with the profile's floor: a model fitted to measured runs
    b_star_calibrated_bound: str | None = None
    calibration: str | None = None  # the floor and what it was fitted on (None: the profile has none)
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

    @property
    def b_star(self) -> Crossover:
        return Crossover(self.b_star_measured, self.b_star_bound, self.b_star_low, self.b_star_low_bound,
                         self.b_star_high, self.b_star_high_bound, self.b_star_level)

    @property
    def quality_measured(self) -> bool:
        """Whether the sweep measured the diffusion model's quality at these lengths (S_parity was sought)."""
        return bool(self.s_parity)


class FindingsFile(_Record):
    """findings.json: every pairing object, what the numbers mean, and what a reader must know."""

    # Only in a report rendered with --allow-unverified, above all else: each verification failure (absent when
    # verified, so the file of a verified sweep is unchanged).
    unverified: list[str] = []
    verdict: list[str] = []  # report/verdict.py: the answer in a few sentences a pair, first in the file
    sweep: str
    pairings: list[str]  # the pairings present
    # Only where a sweep has several pairs: each as 'dllm (family) vs ar (family)', in the findings' order.
    pairs: list[str] = []
    # Each pair of the sweep without an answer, with why (every run of one side failed, or nothing to pair with).
    unanswered: list[str] = []
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
    `table`: report.table.results_table of every run, sessions pooled (report.sessions.pool_sessions); `parity`:
    report.parity.parity_table; `crossovers`: report.findings.crossover_table (the vanilla pairing's roofline B*, so
    the Findings agree); `profiles`: each hardware's roofline profile."""
    table = with_dream_alg(table)
    pairs = sweep_pairs(table)
    ok = table.filter((pl.col("status") == "ok") & pl.col("latency_e2e_s_median").is_not_null())
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
             by_id: dict[str, RunResult]) -> Pairing | None:
    batches = sorted(set(ar["batch_size"].to_list()) & set(curve["batch_size"].to_list()))
    if not batches:
        return None
    rows = [(_fastest(ar.filter(pl.col("batch_size") == b)), _fastest(curve.filter(pl.col("batch_size") == b)))
            for b in batches]
    measured = [row_speedup(a, d) for a, d in rows]
    b_star = crossover(batches, measured)
    s_parity = _s_parity(parity, where, pair.ar_model)
    points = [_point(a, d, s) for (a, d), s in zip(rows, measured)]
    common = {"pairing": pairing, "hardware": where["hardware"], "prompt_length": where["prompt_length"],
              "generation_length": where["generation_length"], "steps": where["steps"],
              "block_length": where["block_length"], "llama_model": pair.ar_model, "llada_model": where["model"],
              "dream_alg": where["dream_alg"], "ar_arch": pair.ar_arch, "dllm_arch": pair.dllm_arch,
              "llama_impls": _ordered(p.llama_impl for p in points),
              "llada_impls": _ordered(p.llada_impl for p in points), "s_parity": s_parity,
              "at_s_parity": [s.metric for s in s_parity if s.steps == where["steps"]], "speedups": points,
              "b_star_measured": b_star.estimate, "b_star_bound": b_star.bound, "b_star_low": b_star.low,
              "b_star_low_bound": b_star.low_bound, "b_star_high": b_star.high, "b_star_high_bound": b_star.high_bound,
              "b_star_level": b_star.level, "roofline_profile": profile.name if profile is not None else None}
    if profile is None:
        return Pairing(**common, roofline_note="no roofline profile for this device")
    if where["cfg_scale"]:
        return Pairing(**common, roofline_note="the roofline's B* is not computed with CFG")
    roofline: dict[str, Any] = {"calibration": profile.floor_note()}
    if pairing == VANILLA_PAIRING:
        row = with_dream_alg(crossovers).filter((pl.col("hardware") == where["hardware"])
                                & (pl.col("prompt_length") == where["prompt_length"])
                                & (pl.col("generation_length") == where["generation_length"])
                                & (pl.col("llada_model") == where["model"]) & (pl.col("steps") == where["steps"])
                                & pl.col("block_length").eq_missing(where["block_length"])
                                & pl.col("dream_alg").eq_missing(where["dream_alg"])
                                & (pl.col("llama_model") == pair.ar_model))
        roofs = row["predicted_b_star_roofs"][0] if row.height else None
        calibrated = row["predicted_b_star"][0] if row.height else None
    else:
        llama_runs, llada_runs = _representatives(ar, by_id), _representatives(curve, by_id)
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


def _ordered(names: Any) -> list[str]:
    return list(dict.fromkeys(names))


def _point(ar: dict[str, Any], dllm: dict[str, Any], s: Speedup) -> PairingPoint:
    return PairingPoint(
        batch_size=ar["batch_size"], llama_impl=ar["impl"], llada_impl=dllm["impl"],
        llama_execution=ar.get("execution") or "eager", llada_execution=dllm.get("execution") or "eager",
        llama_run_id=ar["run_id"], llada_run_id=dllm["run_id"], llama_latency_s=ar["latency_e2e_s_median"],
        llada_latency_s=dllm["latency_e2e_s_median"], speedup=s.estimate, speedup_low=s.low, speedup_high=s.high,
        interval_level=s.level, interval_method=s.method, interval_label=s.label, sessions=s.sessions,
        llama_repetitions=s.repetitions[0], llada_repetitions=s.repetitions[1],
        llada_extrapolated=bool(dllm["extrapolated"]),
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
    return [SParity(metric=r["metric"], reference=r["reference_label"], judge=r.get("judge"),
                    judge_under_test=r.get("judge") == ar_model, steps=r["s_parity_steps"],
                    bound=r["s_parity_bound"], replicate_low_steps=r["s_parity_low_steps"],
                    replicate_high_steps=r["s_parity_high_steps"], parity_fraction=r["parity_fraction"],
                    margin=r.get("margin"), alpha=r.get("alpha"), n_prompts=r.get("n_prompts"),
                    replicate_steps=r.get("replicate_steps") or [], replicate_shares=r.get("replicate_shares") or [],
                    decides=r.get("decides") is not False, gate=r.get("gate"))
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
    """The roofline's B* on `profile` when each model runs its fastest predicted implementation at each batch, and
    the implementations it picks there (ties to `prefer`; keyed 'llama' for the AR side, 'llada' for the diffusion
    side). Both generate B x N_out tokens, so T(AR) / T(dLLM) = L(dLLM) / L(AR)."""

    def log_ratio(batch: int) -> float:
        return math.log(_fastest_predicted(llada, profile, batch, prefer)[1]
                        / _fastest_predicted(llama, profile, batch, prefer)[1])

    crossing = crossing_batch(log_ratio, max_batch)
    at = max_batch if crossing is None else max(1, round(crossing))
    chosen = {"llama": _fastest_predicted(llama, profile, at, prefer)[0],
              "llada": _fastest_predicted(llada, profile, at, prefer)[0]}
    return crossing, chosen


# ---------------------------------------------------------------- findings.json


def findings_file(sweep: str, pairings: Sequence[Pairing], unverified: Sequence[str] = (),
                  verdict: Sequence[str] = (), sides: Sides | None = None,
                  missing: Sequence[str] = ()) -> FindingsFile:
    """findings.json's record. `sides`: how the text names each side (report.pairs.table_sides of the sweep; by
    default the pairings' own); `missing`: `unanswered` of the sweep."""
    present = _ordered(p.pairing for p in pairings)
    sides = sides or sides_of([p.pair for p in pairings])
    notes = [NO_VARIANTS] if present == [VANILLA_PAIRING] else []
    if any(q.sessions == 1 for p in pairings for q in p.speedups):
        notes.append("an interval over one session's repetitions leaves out the variation between sessions "
                     "(controls.sessions repeats the grid in fresh processes)")
    if any(p.llada_extrapolated for q in pairings for p in q.speedups):
        notes.append(f"llada_extrapolated: {sides.dllm}'s latency (and its joules per token) timed from its first "
                     "steps and extrapolated to all of them (controls.extrapolation)")
    meaning = pairing_meaning(sides)
    return FindingsFile(verdict=list(verdict), sweep=sweep, pairings=present,
                        pairs=[pair.heading for pair in pairs_of(pairings)], unanswered=list(missing),
                        meaning={k: meaning[k] for k in present}, speedup=speedup_meaning(sides), notes=notes,
                        findings=list(pairings), unverified=list(unverified))


def findings_json(record: FindingsFile) -> str:
    """findings.json's text. A field is written only where it says something: `unverified` when verification
    failed, `unanswered` when a pair has no answer, `pairs` and each finding's families when the sweep has several
    pairs, `dream_alg` where a finding has one."""
    several = len(record.pairs) > 1
    exclude: dict[str, Any] = {} if record.unverified else {"unverified": True}
    if not record.unanswered:
        exclude["unanswered"] = True
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


def pairs_of(pairings: Sequence[Pairing]) -> list[Pair]:
    return list(dict.fromkeys(p.pair for p in pairings))
