"""S_parity and the speedup at parity (report-draft 3.1.4), decided by an equivalence test so that noise cannot fake
them.

At each swept step count k, a diffusion model's per-prompt quality is paired with its reference's and tested by
TOST at the spec's α against the spec's margin (report/analysis/equivalence.py): parity at k is "equivalent or better".
S_parity is the fewest swept k from which parity holds at k and at every larger swept step: a curve that passes
early and fails again does not count. It is found once per (pair, generation length, diffusion setting, metric,
reference) on one batch size (the smallest that ran every step count: greedy text does not depend on the batch),
and the speedup L_e2e(AR) / L_e2e(dLLM at S_parity) is then evaluated at every batch size measured. A metric
decides parity only where its reference beats an unrelated passage by more than the margin (the calibration
gate); elsewhere it "cannot separate text from chance at this scale". A diffusion model's references are its
pair's autoregressive model (report/answer/pairing/pairs.py), greedy (the text that was timed, the headline) and sampled (the
median of its samples per prompt), and the human continuation; the kinds keep the first pair's names ("llama
greedy": the pair's AR model, greedy). Parity at the fewest swept steps is "<= k_min": fewer steps were not
tried, so the speedup there is a lower bound.

How sure. S_parity: a paired bootstrap over prompts (every step count and the reference resampled with the same
prompts, the test applied in each replicate); the share of replicates at each step count is reported, and the
2.5%–97.5% span of the replicates is the grid's resolution, never called a confidence interval. Speedup:
conditional on S_parity (the row's step count held fixed), report/analysis/intervals.py's interval over the two runs'
sessions and repetitions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
from report.analysis import stats
from report.analysis.diversity import (
    DIVERSITY,
    REPETITION,
    Floor,
    curve_diversity,
    diversity_columns,
    human_floor,
    median_diversity,
    repetition_beside,
)
from report.analysis.equivalence import (
    WORSE,
    Margin,
    TostResult,
    coverage,
    min_prompts,
    parity_holds,
    power,
    prompts_for_power,
    replicate_parity,
    replicate_shares,
    separates,
    spread,
    tost,
    worse_by,
)
from report.analysis.equivalence import parity_index as equivalence_index
from report.answer.pairing.pairs import is_ar, is_dllm, pairs_from, peers_of
from report.analysis.quality import (
    GENERATED,
    LIKELIHOOD,
    METRICS,
    REFERENCE,
    SAMPLED,
    UNRELATED,
    _groups,
    notes_of,
)
from report.analysis.parity_speedup import speedup_rows
from report.analysis.parity_text import (
    NO_PARITY,
    bracket,
    degenerate_reference_text,
    gate_text,
    percent,
    replicate_span,
    statement,
    too_few_text,
)
from report.table.flat import vanilla_runs, with_sampler_setting
from specs.controls import ParitySpec

__all__ = ["NO_PARITY", "PARITY_SCHEMA", "bracket", "parity_markers", "parity_table", "replicate_span", "statement"]

GREEDY, SAMPLED_REF, HUMAN = "llama greedy", "llama sampled", "human continuation"
# Which reference heads the report: the AR model's greedy text, which is what was timed (the judge is independent).
DEFAULT_HEADLINE_ORDER = (GREEDY, SAMPLED_REF, HUMAN)
# Human text is a reference where "as good as" means something: not BERTScore (the reference is its own target).
HUMAN_FAMILIES = frozenset({LIKELIHOOD})
MIN_REPLICATE_SHARE = 0.10  # a step count holding this share of the replicates gets its speedup in the verdict

_F64, _I64, _STR, _BOOL = pl.Float64, pl.Int64, pl.String, pl.Boolean

PARITY_SCHEMA: dict[str, pl.DataType] = {
    "sweep": _STR, "hardware": _STR, "metric": _STR, "metric_label": _STR, "higher_is_better": _BOOL,
    "prompt_length": _I64, "generation_length": _I64, "block_length": _I64, "remasking": _STR, "sampler_setting": _STR,
    "cfg_scale": _F64, "llada_model": _STR, "llada_temperature": _F64, "reference": _STR, "reference_label": _STR,
    "reference_model": _STR, "reference_temperature": _F64, "judge": _STR, "headline": _BOOL, "quality_batch_size": _I64,
    "n_prompts": _I64, "steps_swept": _STR, "reference_value": _F64, "reference_interval_low": _F64,
    "reference_interval_high": _F64, "reference_repetition": _F64, "llada_value_at_parity": _F64,
    "llada_repetition_at_parity": _F64, "llada_value_at_max_steps": _F64, "s_parity_steps": _I64,
    "s_parity_bound": _STR, "s_parity_low_steps": _I64, "s_parity_high_steps": _I64, "parity_fraction": _F64,
    "replicates": _I64, "replicate_steps": pl.List(_I64), "replicate_shares": pl.List(_F64), "alpha": _F64,
    "margin": _STR, "test": _STR, "test_steps": _I64, "difference": _F64, "difference_low": _F64,
    "difference_high": _F64, "difference_coverage": _F64, "power": _F64, "power_sd": _F64,
    "prompts_for_power": _I64, "human_diversity": _F64, "diversity_margin": _F64, "reference_diversity": _F64,
    "reference_degenerate": _BOOL, "degenerate_steps": pl.List(_I64), "decides": _BOOL, "gate": _STR, "batch_size": _I64, "llama_model": _STR, "llama_latency_e2e_s": _F64,
    "llada_latency_e2e_at_parity_s": _F64, "speedup": _F64, "speedup_low": _F64, "speedup_high": _F64,
    "speedup_interval": _STR, "goodput_speedup": _F64, "low_useful": _BOOL, "statement": _STR,
    "quality_note": _STR,
}
# A diffusion curve over steps: everything but the steps (and the batch) fixed.
_CURVE_KEYS = ("sweep", "hardware", "model", "prompt_length", "generation_length", "block_length", "remasking",
               "sampler_setting", "cfg_scale", "temperature", "metric")
_GRID_KEYS = ("sweep", "hardware", "prompt_length", "generation_length", "metric")


def parity_table(
    long: pl.DataFrame, table: pl.DataFrame, settings: ParitySpec = ParitySpec(), *,
    resamples: int = stats.BOOTSTRAP_RESAMPLES, seed: int = stats.BOOTSTRAP_SEED, level: float = stats.CI_LEVEL,
) -> pl.DataFrame:
    """Parity rows (schema PARITY_SCHEMA): one per metric with a margin x diffusion curve x its pair's reference
    x batch size measured (`llama_model`: the pair's AR model). `long`: report.analysis.quality.quality_long_table;
    `table`: the flat results table (latency repetitions and goodput at every batch size); `settings`: the spec's
    quality.parity (α and the margins). Vanilla runs only: variants never move S_parity."""
    long, table = with_sampler_setting(vanilla_runs(long)), with_sampler_setting(vanilla_runs(table))
    pairs = pairs_from({*long.select("model", "arch").iter_rows(), *table.select("model", "arch").iter_rows()})
    rows: list[dict[str, Any]] = []
    generated = long.filter(pl.col("continuation") == GENERATED)
    diffusion = generated.filter(is_dllm() & pl.col("steps").is_not_null())
    autoregressive = long.filter(is_ar() & pl.col("continuation").is_in([GENERATED, SAMPLED]))
    human = long.filter(is_dllm() & (pl.col("continuation") == REFERENCE))
    unrelated = long.filter(pl.col("continuation") == UNRELATED)
    ok = table.filter(pl.col("status") == "ok")
    for key, curve in _groups(diffusion, _CURVE_KEYS):
        metric = METRICS[key["metric"]]
        margin = margin_of(key["metric"], settings)
        if not metric.parity or margin is None:
            continue
        batch = _quality_batch(curve)
        curve = curve.filter(pl.col("batch_size") == batch)
        floor = human_floor(_at_point(human, key, DIVERSITY).filter(pl.col("model") == key["model"]),
                            settings.diversity_margin)
        swept = sorted(int(k) for k in curve["steps"].unique())
        diversity = curve_diversity(_at_point(diffusion, key, DIVERSITY, _CURVE_KEYS).filter(
            pl.col("batch_size") == batch), swept)
        for ar_model in peers_of(pairs, key["model"]):
            ar = autoregressive.filter(pl.col("model") == ar_model)
            references = _references(key, batch, ar, human, metric.family)
            diverse = _reference_rows(key, batch, ar, human, metric.family, DIVERSITY)
            repeated = _reference_rows(key, batch, ar, human, metric.family, REPETITION)
            texts = {(kind, label): (median_diversity(diverse[kind, label]) if (kind, label) in diverse else None,
                                     repeated.get((kind, label), ar.clear())) for kind, label, *_ in references}
            chance = _unrelated(unrelated, key, ar_model)
            tested = []
            for reference in references:
                kind, label, *_, rows_ = reference
                columns = diversity_columns(floor, texts[kind, label][0], swept, diversity)
                found = _parity(curve, rows_, chance, margin, settings.alpha, resamples, seed, level,
                                np.array([k not in columns["degenerate_steps"] for k in swept]))
                if found is not None:
                    found.update(columns)
                    _decide(found, floor, settings.alpha)
                    tested.append((reference, found))
            headline = _headline(tested)
            for (kind, label, ref_model, ref_temperature, reference), found in tested:
                repetitions = texts[kind, label][1]
                base = {
                    "sweep": key["sweep"], "hardware": key["hardware"], "metric": key["metric"],
                    "metric_label": metric.label, "higher_is_better": metric.higher_is_better,
                    "prompt_length": key["prompt_length"], "generation_length": key["generation_length"],
                    "block_length": key["block_length"], "remasking": key["remasking"], "sampler_setting": key["sampler_setting"],
                    "cfg_scale": key["cfg_scale"], "llada_model": key["model"], "llada_temperature": key["temperature"],
                    "reference": kind, "reference_label": label, "reference_model": ref_model,
                    "reference_temperature": ref_temperature, "judge": _judge(curve, key["metric"]),
                    "headline": kind == headline,
                    "quality_batch_size": batch, **found,
                    "quality_note": notes_of(pl.concat([curve, reference], how="vertical_relaxed")),
                }
                if metric.family == LIKELIHOOD:
                    base.update(repetition_beside(long, {**key, "batch_size": batch}, repetitions,
                                                  found["s_parity_steps"]))
                else:
                    base.update({"reference_repetition": None, "llada_repetition_at_parity": None})
                rows.extend(speedup_rows(base, key, ok, ar_model, level, seed))
    if not rows:
        return pl.DataFrame(schema=PARITY_SCHEMA)
    return pl.DataFrame(rows, schema=PARITY_SCHEMA, orient="row").sort(
        ["sweep", "hardware", "metric", "prompt_length", "generation_length", "block_length", "llada_model",
         "sampler_setting", "headline", "reference", "batch_size", "llama_model"],
        descending=[False] * 8 + [True, False, False, False], nulls_last=True,
    )


PARITY_MARKER_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "model": _STR, "prompt_length": _I64, "generation_length": _I64, "block_length": _I64,
    "sampler_setting": _STR, "llama_model": _STR, "metric": _STR, "reference_label": _STR, "s_parity": _F64, "s_parity_bound": _STR, "s_parity_low": _F64,
    "s_parity_high": _F64, "statement": _STR,
}


def parity_markers(parity: pl.DataFrame) -> pl.DataFrame:
    """The headline S_parity of each diffusion curve against each of its pair's AR models (hardware, model,
    lengths, block length or alg, metric), once: it does not depend on the batch size (the speedup does; that is
    in the parity table)."""
    rows = with_sampler_setting(parity).filter(pl.col("headline"))
    if not rows.height:
        return pl.DataFrame(schema=PARITY_MARKER_SCHEMA)
    rows = rows.sort("batch_size").unique(
        ["hardware", "llada_model", "prompt_length", "generation_length", "block_length", "remasking", "sampler_setting",
         "cfg_scale", "metric", "llama_model"], keep="first", maintain_order=True,
    )
    return rows.select(
        "hardware", pl.col("llada_model").alias("model"), "prompt_length", "generation_length", "block_length",
        "sampler_setting", "llama_model", "metric", "reference_label", pl.col("s_parity_steps").cast(pl.Float64).alias("s_parity"), "s_parity_bound",
        pl.col("s_parity_low_steps").cast(pl.Float64).alias("s_parity_low"),
        pl.col("s_parity_high_steps").cast(pl.Float64).alias("s_parity_high"), "statement",
    ).cast(PARITY_MARKER_SCHEMA)


# ---------------------------------------------------------------- S_parity


def _quality_batch(curve: pl.DataFrame) -> int:
    """The smallest batch size that ran every step count the curve has."""
    counts = curve.group_by("batch_size").agg(pl.col("steps").n_unique().alias("k"))
    most = counts["k"].max()
    return int(counts.filter(pl.col("k") == most)["batch_size"].min())


def _references(
    key: dict[str, Any], batch: int, llama: pl.DataFrame, human: pl.DataFrame, family: str
) -> list[tuple[str, str, str | None, float | None, pl.DataFrame]]:
    """(kind, label, model, temperature, rows) of each reference at this grid point: the AR model's own decoding
    (greedy at temperature 0), sampled, and the human continuation where it is a meaningful level."""
    at = llama.filter(pl.all_horizontal(pl.col(c) == key[c] for c in _GRID_KEYS))
    out: list[tuple[str, str, str | None, float | None, pl.DataFrame]] = []
    for (model, continuation, temperature), rows in at.group_by(["model", "continuation", "temperature"],
                                                              maintain_order=True):
        same_batch = rows.filter(pl.col("batch_size") == batch)
        rows = same_batch if same_batch.height else rows.filter(pl.col("batch_size") == rows["batch_size"].min())
        greedy = continuation == GENERATED and not temperature
        kind = GREEDY if greedy else SAMPLED_REF
        label = f"{model} greedy" if greedy else f"{model} sampled (T = {temperature:g})"
        out.append((kind, label, model, temperature, rows))
    if family in HUMAN_FAMILIES:
        texts = human.filter(pl.all_horizontal(pl.col(c) == key[c] for c in (*_GRID_KEYS, "model")))
        if texts.height:
            first = texts.sort("run_id")["run_id"][0]
            out.append((HUMAN, "human continuation", None, None, texts.filter(pl.col("run_id") == first)))
    return sorted(out, key=lambda r: (r[0], r[1]))


def _reference_rows(key: dict[str, Any], batch: int, llama: pl.DataFrame, human: pl.DataFrame, family: str,
                    metric: str) -> dict[tuple[str, str], pl.DataFrame]:
    """Each reference's rows on another metric (its diversity, its repetition), by (kind, label)."""
    return {(kind, label): rows for kind, label, *_, rows in _references({**key, "metric": metric}, batch, llama,
                                                                          human, family)}


def _at_point(frame: pl.DataFrame, key: dict[str, Any], metric: str, keys: tuple[str, ...] = _GRID_KEYS) -> pl.DataFrame:
    """The rows of `frame` at the key's coordinates (`keys`), on another metric."""
    return frame.filter(pl.all_horizontal(pl.col(c).eq_missing(key[c]) for c in keys if c != "metric")
                        & (pl.col("metric") == metric))


def margin_of(metric: str, settings: ParitySpec) -> Margin | None:
    """The spec's equivalence margin for a metric, in the units its differences are taken in; None: no margin
    (degeneracy, the ELBO), so the metric decides no parity."""
    ratio = settings.perplexity_ratio
    if metric.startswith("gen_ppl"):
        return Margin("log", math.log(ratio), f"within {percent(ratio - 1)} (|Δ log ppl| ≤ log {ratio:g})")
    if metric.startswith("nll_per_token"):
        return Margin("lower", math.log(ratio), f"within log {ratio:g} = {math.log(ratio):.3g} nats/token")
    if metric.startswith("bertscore_"):
        return Margin("higher", settings.bertscore_f1, f"within {settings.bertscore_f1:g}")
    return None


def _parity(
    curve: pl.DataFrame, reference: pl.DataFrame, unrelated: pl.DataFrame | None, margin: Margin, alpha: float,
    resamples: int, seed: int, level: float, allowed: np.ndarray,
) -> dict[str, Any] | None:
    """S_parity of a curve against a reference by the equivalence test, the test at S_parity (else at the most
    swept steps) with its interval's real coverage and its power at the margin, the calibration gate and the
    bootstrap replicates' S_parity; None without shared prompts. `allowed` ([K]): the step counts whose text is not
    degenerate, the only ones that may hold parity."""
    steps = np.array(sorted(curve["steps"].unique().to_list()), dtype=np.int64)  # [K]
    prompts = set(reference["prompt_id"].to_list())
    for k in steps:
        prompts &= set(curve.filter(pl.col("steps") == int(k))["prompt_id"].to_list())
    prompt_ids = np.array(sorted(prompts), dtype=np.int64)  # [N]
    if prompt_ids.size == 0:
        return None
    values = np.stack([_by_prompt(curve.filter(pl.col("steps") == int(k)), prompt_ids) for k in steps])  # [K, N]
    ref = _by_prompt(reference, prompt_ids)  # [N]
    d = worse_by(values, ref[None, :], margin)  # [K, N]
    point = int(equivalence_index(parity_holds(d, margin.size, alpha) & allowed))
    at = point if point >= 0 else steps.size - 1
    test = tost(d[at], margin.size, alpha)
    sd = spread(d[at])
    gate = _gate(ref, prompt_ids, unrelated, margin, alpha)
    ref_interval = stats.interval(ref) if np.isfinite(ref).all() else stats.rank_interval(ref)
    s_low = s_high = fraction = replicates = None
    shares: dict[int | None, float] = {}
    if prompt_ids.size >= stats.MIN_CI_SAMPLES:
        boot = replicate_parity(d, margin.size, alpha, resamples=resamples, seed=seed, allowed=allowed)  # [R]
        shares = replicate_shares(boot, [int(k) for k in steps])
        fraction, replicates = float(np.mean(boot < steps.size)), int(boot.size)
        tail = (1.0 - level) / 2.0
        low, high = np.quantile(boot, [tail, 1.0 - tail], method="inverted_cdf")
        s_low = int(steps[int(low)]) if low < steps.size else None
        s_high = int(steps[int(high)]) if high < steps.size else None
    s_parity = int(steps[point]) if point >= 0 else None
    medians = np.median(values, axis=-1)  # [K]
    return {
        "n_prompts": int(prompt_ids.size), "steps_swept": ", ".join(str(int(k)) for k in steps),
        "reference_value": float(np.median(ref)), "reference_interval_low": ref_interval.low,
        "reference_interval_high": ref_interval.high,
        "llada_value_at_parity": float(medians[point]) if point >= 0 else None,
        "llada_value_at_max_steps": float(medians[-1]), "s_parity_steps": s_parity,
        "s_parity_bound": None if s_parity is None else ("<=" if point == 0 else "="),
        "s_parity_low_steps": s_low, "s_parity_high_steps": s_high, "parity_fraction": fraction,
        "replicates": replicates, "replicate_steps": [k for k in shares if k is not None],
        "replicate_shares": [v for k, v in shares.items() if k is not None], "alpha": alpha, "margin": margin.text,
        "test": test.outcome, "test_steps": int(steps[at]), "difference": test.median, "difference_low": test.low,
        "difference_high": test.high, "difference_coverage": coverage(test.n, alpha), "power_sd": sd,
        "power": None if sd is None else power(test.n, alpha, margin.size, sd),
        "prompts_for_power": None if sd is None else prompts_for_power(alpha, margin.size, sd),
        "decides": gate is None or gate.outcome == WORSE, "gate": gate_text(gate, margin),
    }


def _decide(found: dict[str, Any], floor: Floor | None, alpha: float) -> None:
    """What keeps a row from deciding before its calibration gate: too few prompts for the test to decide at all,
    or a degenerate reference (whose low perplexity is no quality to match)."""
    if found["n_prompts"] < min_prompts(alpha):
        found["decides"], found["gate"] = False, too_few_text(found["n_prompts"], alpha)
    elif found["reference_degenerate"] and floor is not None:
        found["decides"], found["gate"] = False, degenerate_reference_text(floor, found["reference_diversity"])


def _headline(tested: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> str | None:
    """The reference that heads the report: the first of DEFAULT_HEADLINE_ORDER that decides (its text not degenerate,
    its metric past the calibration gate), else the first whose text is not degenerate, else the first present."""
    for usable in (lambda f: f["decides"], lambda f: not f["reference_degenerate"], lambda f: True):
        kinds = {reference[0] for reference, found in tested if usable(found)}
        chosen = next((kind for kind in DEFAULT_HEADLINE_ORDER if kind in kinds), None)
        if chosen is not None:
            return chosen
    return None


def _gate(ref: np.ndarray, prompt_ids: np.ndarray, unrelated: pl.DataFrame | None, margin: Margin,
          alpha: float) -> TostResult | None:
    """The reference against an unrelated passage at the same prompts (None where the sweep scored none)."""
    if unrelated is None or not unrelated.height:
        return None
    have = set(unrelated["prompt_id"].to_list())
    keep = np.array([p in have for p in prompt_ids])
    if not keep.any():
        return None
    return separates(ref[keep], _by_prompt(unrelated, prompt_ids[keep]), margin, alpha)


def _unrelated(unrelated: pl.DataFrame, key: dict[str, Any], ar_model: str) -> pl.DataFrame | None:
    """The unrelated passages' values at this grid point, from the AR model's runs (the same texts in every run)."""
    rows = unrelated.filter(pl.all_horizontal(pl.col(c) == key[c] for c in _GRID_KEYS) & (pl.col("model") == ar_model))
    if not rows.height:
        return None
    return rows.filter(pl.col("run_id") == rows.sort("run_id")["run_id"][0])


def _by_prompt(rows: pl.DataFrame, prompt_ids: np.ndarray) -> np.ndarray:
    """The value of each prompt id: the median of its samples (one for every text but the sampled reference), from
    the first run where a setting has several. [N]"""
    first = rows.filter(pl.col("run_id") == rows["run_id"][0]) if "run_id" in rows.columns else rows
    per_prompt = first.group_by("prompt_id").agg(pl.col("value").median())
    lookup = dict(zip(per_prompt["prompt_id"].to_list(), per_prompt["value"].to_list()))
    return np.array([lookup[int(p)] for p in prompt_ids], dtype=np.float64)


def _judge(curve: pl.DataFrame, metric: str) -> str | None:
    """The model that scores a likelihood metric (the evaluator, or the second one), which may be the
    autoregressive model under test."""
    column = "second_evaluator" if metric.endswith("_second") else "evaluator"
    if METRICS[metric].family != LIKELIHOOD or column not in curve.columns:
        return None
    judges = curve[column].drop_nulls()
    return judges[0] if judges.len() else None
