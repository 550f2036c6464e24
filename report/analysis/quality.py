"""Quality at report time: a per-prompt long table from the runs, quality per run and per setting with intervals
over prompts, the calibration texts read per metric, and the ELBO's Monte-Carlo precision.

Pure functions over RunResults and polars frames (no plotting, no workers). A continuation too short to have a
metric (an empty text has no perplexity) ranks worst rather than leaving its prompt out: dropping it would drop
that prompt from every comparison and favour the model that produced it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from report.analysis import stats
from report.analysis.diversity import REPETITION, setting_diversity
from report.answer.pairing.pairs import is_ar
from report.table.flat import sampler_setting, vanilla_runs
from specs.registry import family
from specs.results import QualityRecord, RunResult, RunStatus

SYNTHETIC_NOTE = "synthetic weights: quality not meaningful"
UNKNOWN_HARDWARE = "unknown"

# Which continuation a row scores: the run's own decoding, LLaMA sampled at quality.llama_sampled_temperature,
# or a calibration text scored as if generated (the real continuation; another prompt's real continuation).
GENERATED, SAMPLED, REFERENCE, UNRELATED = "generated", "sampled", "reference", "unrelated"

# Metric families: how a metric is judged, and so what its calibration texts mean.
SIMILARITY, LIKELIHOOD, BOUND, DEGENERACY = "similarity", "likelihood", "bound", "degeneracy"


@dataclass(frozen=True)
class Metric:
    label: str  # for tables and axes, with the unit
    higher_is_better: bool
    parity: bool  # has a LLaMA counterpart, so S_parity is defined
    family: str  # SIMILARITY (BERTScore), LIKELIHOOD (the LLaMA evaluator), BOUND (LLaDA's ELBO), DEGENERACY


METRICS: dict[str, Metric] = {
    "bertscore_precision": Metric("BERTScore precision", True, True, SIMILARITY),
    "bertscore_recall": Metric("BERTScore recall", True, True, SIMILARITY),
    "bertscore_f1": Metric("BERTScore F1", True, True, SIMILARITY),
    "nll_per_token": Metric("evaluator NLL (nats/token)", False, True, LIKELIHOOD),
    "gen_ppl": Metric("generative perplexity (evaluator)", False, True, LIKELIHOOD),
    # The same under the second evaluator (e.g. the AR model under test): reported, labelled, never the headline.
    "nll_per_token_second": Metric("second evaluator NLL (nats/token)", False, True, LIKELIHOOD),
    "gen_ppl_second": Metric("generative perplexity (second evaluator)", False, True, LIKELIHOOD),
    # LLaDA's own bound: no LLaMA counterpart, never a perplexity beside LLaMA's exact one.
    "elbo_nll_per_token": Metric("LLaDA ELBO NLL upper bound (nats/token)", False, False, BOUND),
    "repeated_bigram_rate": Metric("repeated-bigram rate", False, True, DEGENERACY),
    "distinct_1": Metric("distinct-1", True, True, DEGENERACY),
    "distinct_2": Metric("distinct-2", True, True, DEGENERACY),
}
_STDERR = {"elbo_nll_per_token": "elbo_nll_per_token_stderr"}
assert set(METRICS) | set(_STDERR.values()) == set(QualityRecord.model_fields) - {"prompt_id", "sample"}, \
    "METRICS must cover QualityRecord"
# The metrics the figures and the headline parity rows show (DESIGN: BERTScore F1, generative perplexity).
FIGURE_METRICS = ("bertscore_f1", "gen_ppl")
# REPETITION (report/analysis/diversity.py) is shown beside every perplexity: a low perplexity alone rewards repetitive text.

# What each calibration text means, per metric family (None: not shown, the texts say nothing for it).
CALIBRATION_MEANING: dict[tuple[str, str], str | None] = {
    (SIMILARITY, REFERENCE): "ceiling: the reference continuation scored against itself",
    (SIMILARITY, UNRELATED): "chance: another prompt's continuation scored against this reference",
    (LIKELIHOOD, REFERENCE): "human text's level, not the best end: the judge's greedy text scores far lower",
    (LIKELIHOOD, UNRELATED): "an off-topic human passage: fluent text that ignores the prompt",
    (BOUND, REFERENCE): "human text's level under LLaDA's bound, not the best end: greedy text scores lower",
    (BOUND, UNRELATED): "an off-topic human passage under LLaDA's bound",
    (DEGENERACY, REFERENCE): "human text's level",
    # The unrelated texts are the same human continuations rotated by one prompt: the same distribution.
    (DEGENERACY, UNRELATED): None,
}
CALIBRATION_TEXT = {REFERENCE: "human continuation", UNRELATED: "unrelated passage"}

_F64, _I64, _STR, _BOOL = pl.Float64, pl.Int64, pl.String, pl.Boolean

LONG_SCHEMA: dict[str, pl.DataType] = {
    "run_id": _STR, "sweep": _STR, "model": _STR, "arch": _STR, "impl": _STR, "weights": _STR, "quality_note": _STR,
    "evaluator": _STR, "second_evaluator": _STR, "hardware": _STR, "batch_size": _I64, "prompt_length": _I64, "generation_length": _I64,
    "block_length": _I64, "steps": _I64, "remasking": _STR, "sampler_setting": _STR, "cfg_scale": _F64,
    "continuation": _STR,
    "temperature": _F64, "prompt_id": _I64, "sample": _I64, "metric": _STR, "value": _F64, "empty": _BOOL, "stderr": _F64,
    "higher_is_better": _BOOL, "useful_tokens": _I64,
}

# A setting: one quality-vs-steps point. Batch size is not part of it: greedy text does not depend on the batch,
# and each setting is read at its smallest batch size.
SETTING_KEYS = ("sweep", "hardware", "model", "arch", "prompt_length", "generation_length", "steps", "block_length",
                "remasking", "sampler_setting", "cfg_scale", "continuation", "temperature", "metric")
BY_SETTING_SCHEMA: dict[str, pl.DataType] = {
    **{key: LONG_SCHEMA[key] for key in SETTING_KEYS}, "batch_size": _I64, "metric_label": _STR,
    "higher_is_better": _BOOL, "n": _I64, "empty": _I64, "value": _F64, "interval_low": _F64,
    "interval_high": _F64, "interval": _STR, "repetition": _F64, "diversity": _F64, "human_diversity": _F64,
    "degenerate": _BOOL, "stderr_median": _F64, "tokens_per_forward": _F64, "quality_note": _STR,
}
BY_RUN_SCHEMA: dict[str, pl.DataType] = {
    "run_id": _STR, "metric": _STR, "value": _F64, "interval_low": _F64, "interval_high": _F64, "interval": _STR,
    "n": _I64,
}
CALIBRATION_SCHEMA: dict[str, pl.DataType] = {
    "sweep": _STR, "hardware": _STR, "metric": _STR, "metric_label": _STR, "prompt_length": _I64,
    "generation_length": _I64, "scored_by": _STR, "text": _STR, "n": _I64, "value": _F64, "interval_low": _F64,
    "interval_high": _F64, "interval": _STR, "meaning": _STR,
}
ELBO_PRECISION_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "model": _STR, "prompt_length": _I64, "generation_length": _I64, "samples": _I64,
    "n_prompts": _I64, "stderr_per_prompt": _F64, "stderr_of_median": _F64, "smallest_step_difference": _F64,
    "small_enough": _BOOL,
}


@dataclass(frozen=True)
class QualityData:
    """Everything the quality figures and sections read. by_run: one row per (run, metric). by_setting: one
    row per setting and metric at its smallest batch size. calibration: the human and unrelated texts per
    metric. parity: report.analysis.parity.parity_table. parity_markers: the headline S_parity of each curve
    (report.analysis.parity.parity_markers). elbo_precision: the ELBO's Monte-Carlo SE next to its step differences."""

    long: pl.DataFrame
    by_run: pl.DataFrame
    by_setting: pl.DataFrame
    calibration: pl.DataFrame
    parity: pl.DataFrame
    parity_markers: pl.DataFrame
    elbo_precision: pl.DataFrame


# ---------------------------------------------------------------- the long table


def quality_long_table(results: Iterable[RunResult]) -> pl.DataFrame:
    """One row per ok run x continuation x prompt x metric the run computed (schema LONG_SCHEMA).

    `continuation`: generated (the run's own decoding, at `temperature` = controls.temperature), sampled
    (LLaMA at quality.llama_sampled_temperature), reference / unrelated (calibration; temperature null).
    A metric the run computed but a continuation does not have (no tokens, no bigram) is ranked worst: +inf
    where lower is better, -inf where higher is, with `empty` set. `stderr` is the ELBO's Monte-Carlo SE.
    """
    rows: list[dict[str, Any]] = []
    for result in results:
        if result.status is not RunStatus.OK or result.quality is None:
            continue
        base = _run_columns(result)
        useful = {g.prompt_id: g.useful_tokens for g in result.generations}
        sets: list[tuple[str, float | None, Sequence[QualityRecord]]] = [
            (GENERATED, result.config.controls.temperature, result.quality)
        ]
        if result.quality_sampled is not None:
            sets.append((SAMPLED, result.config.quality.llama_sampled_temperature, result.quality_sampled))
        for name, records in (result.calibration or {}).items():
            sets.append((name, None, records))
        for continuation, temperature, records in sets:
            enabled = enabled_metrics(result, continuation)
            for record in records:
                for metric in enabled:
                    spec = METRICS[metric]
                    value = getattr(record, metric)
                    stderr = getattr(record, _STDERR[metric]) if metric in _STDERR else None
                    empty = value is None
                    if empty:
                        value = -math.inf if spec.higher_is_better else math.inf
                    rows.append({
                        **base, "continuation": continuation, "temperature": temperature,
                        "prompt_id": record.prompt_id, "sample": record.sample, "metric": metric, "value": float(value), "empty": empty,
                        "stderr": stderr, "higher_is_better": spec.higher_is_better,
                        "useful_tokens": useful.get(record.prompt_id) if continuation == GENERATED else None,
                    })
    if not rows:
        return pl.DataFrame(schema=LONG_SCHEMA)
    return pl.DataFrame(rows, schema=LONG_SCHEMA, orient="row")


def enabled_metrics(result: RunResult, continuation: str) -> list[str]:
    """The metrics the run's quality settings compute for a continuation (an absent value then means the text
    was too short for the metric, not that the metric was off)."""
    quality = result.config.quality
    out = []
    if quality.bertscore is not None:
        out += ["bertscore_precision", "bertscore_recall", "bertscore_f1"]
    if quality.perplexity is not None:
        out += ["nll_per_token", "gen_ppl"]
        if quality.perplexity.second_evaluator is not None:
            out += ["nll_per_token_second", "gen_ppl_second"]
    # The workers score LLaDA's ELBO with LLaDA's own masking (workers/quality/scorer.py): its sampler's models only.
    if quality.elbo is not None and family(result.config.model.arch).sampler == "llada" and continuation != SAMPLED:
        out.append("elbo_nll_per_token")
    return out + ["repeated_bigram_rate", "distinct_1", "distinct_2"]


def _run_columns(result: RunResult) -> dict[str, Any]:
    config = result.config
    evaluator = config.evaluator.name if config.evaluator is not None else None
    second = config.second_evaluator.name if config.second_evaluator is not None else None
    return {
        "run_id": result.run_id, "sweep": result.sweep, "model": config.model.name, "arch": config.model.arch,
        "impl": config.impl_name, "weights": result.weights, "quality_note": result.quality_note, "evaluator": evaluator,
        "second_evaluator": second,
        "hardware": result.environment.device if result.environment else UNKNOWN_HARDWARE,
        "batch_size": config.batch_size, "prompt_length": config.prompt_length,
        "generation_length": config.generation_length, "block_length": config.block_length,
        "steps": config.steps, "remasking": config.remasking,
        "sampler_setting": sampler_setting(config), "cfg_scale": config.cfg_scale,
    }


# ---------------------------------------------------------------- per run and per setting


def median_over_prompts(values: np.ndarray) -> tuple[float, stats.Interval]:
    """The median over prompts and its interval (BCa CI from six prompts up, else the range); infinite values
    (continuations ranked worst) take part as ranks."""
    finite = values[np.isfinite(values)]
    middle = float(np.median(values)) if values.size else math.nan
    if finite.size == values.size:
        return middle, stats.interval(values)
    # Ranks only: a percentile bootstrap of the median (BCa needs finite jackknife values).
    return middle, stats.rank_interval(values)


def quality_by_run(long: pl.DataFrame) -> pl.DataFrame:
    """Median over prompts of each metric of each run's own continuations, with its interval (schema
    BY_RUN_SCHEMA); the Pareto frontier plots these."""
    rows = []
    generated = long.filter(pl.col("continuation") == GENERATED)
    for key, group in _groups(generated, ("run_id", "metric")):
        value, spread = median_over_prompts(group["value"].to_numpy())
        rows.append((key["run_id"], key["metric"], value, spread.low, spread.high, spread.label, spread.n))
    return pl.DataFrame(rows, schema=BY_RUN_SCHEMA, orient="row")


def quality_by_setting(long: pl.DataFrame, diversity_margin: float | None = None) -> pl.DataFrame:
    """Median over prompts per setting (SETTING_KEYS) at its smallest batch size, with its interval, the number
    of continuations ranked worst, the repetition rate of the same texts (shown beside every perplexity), its
    diversity beside the human text's and whether it is degenerate by `diversity_margin` (the spec's
    quality.parity; report/analysis/diversity.py) and, for the ELBO, the median Monte-Carlo SE (schema BY_SETTING_SCHEMA).
    Generated and sampled continuations only; the calibration texts are in `calibration_table`. Vanilla runs only
    (variants: report.analysis.variants)."""
    own = vanilla_runs(long).filter(pl.col("continuation").is_in([GENERATED, SAMPLED]))
    if not own.height:
        return pl.DataFrame(schema=BY_SETTING_SCHEMA)
    keys = [k for k in SETTING_KEYS if k != "metric"]
    smallest = own.group_by(keys).agg(pl.col("batch_size").min())
    own = own.join(smallest, on=[*keys, "batch_size"], nulls_equal=True)
    repetition = (
        own.filter(pl.col("metric") == REPETITION).group_by(keys).agg(pl.col("value").median().alias("repetition"))
    )
    rows = []
    for key, group in _groups(own, SETTING_KEYS):
        metric = METRICS[key["metric"]]
        value, spread = median_over_prompts(group["value"].to_numpy())
        stderr = group["stderr"].drop_nulls()
        rows.append({
            **key, "batch_size": int(group["batch_size"][0]), "metric_label": metric.label,
            "higher_is_better": metric.higher_is_better, "n": group["prompt_id"].n_unique(),
            "empty": int(group["empty"].sum()), "value": value, "interval_low": spread.low,
            "interval_high": spread.high, "interval": spread.label, "repetition": None, "diversity": None,
            "human_diversity": None, "degenerate": None, "stderr_median": float(stderr.median()) if stderr.len() else None,
            "tokens_per_forward": _tokens_per_forward(key), "quality_note": notes_of(group),
        })
    table = pl.DataFrame(rows, schema=BY_SETTING_SCHEMA, orient="row").drop("repetition", "diversity",
                                                                          "human_diversity", "degenerate")
    table = table.join(repetition, on=keys, how="left", nulls_equal=True)
    human = long.filter(pl.col("continuation") == REFERENCE)
    table = table.join(setting_diversity(own, human, keys, diversity_margin), on=keys, how="left", nulls_equal=True)
    table = table.with_columns(
        pl.when(pl.col("metric").is_in(["gen_ppl", "nll_per_token"])).then(pl.col("repetition")).alias("repetition")
    )
    return table.select(list(BY_SETTING_SCHEMA)).sort(
        ["sweep", "hardware", "metric", "arch", "model", "generation_length", "block_length", "continuation", "steps"],
        nulls_last=True,
    )


def _tokens_per_forward(key: dict[str, Any]) -> float | None:
    """N_out over model forwards per sequence: an AR model 1, a diffusion model N_out / steps (a CFG step is two
    forwards)."""
    if not family(key["arch"]).is_diffusion:
        return 1.0
    if not key["steps"]:
        return None
    return key["generation_length"] / (key["steps"] * (2 if key["cfg_scale"] else 1))


def calibration_table(long: pl.DataFrame) -> pl.DataFrame:
    """What each metric gives the human continuation and an unrelated passage, read per metric (schema
    CALIBRATION_SCHEMA). BERTScore: the reference against itself is the ceiling, the unrelated passage chance.
    Perplexity and the ELBO: the human text is a level, not the best end (greedy text of the judge scores far
    lower). Degeneracy: only the human level (the unrelated texts are the same texts rotated)."""
    rows = []
    texts = vanilla_runs(long).filter(pl.col("continuation").is_in([REFERENCE, UNRELATED]))
    for key, group in _groups(texts, ("sweep", "hardware", "prompt_length", "generation_length", "metric",
                                      "continuation")):
        metric = METRICS[key["metric"]]
        meaning = CALIBRATION_MEANING[(metric.family, key["continuation"])]
        if meaning is None:
            continue
        # The texts and (but for the ELBO) their judge are the same in every run: one value per prompt, from the
        # AR runs where present (the ELBO exists in LLaDA runs only).
        source = group.filter(is_ar()) if metric.family != BOUND else group
        source = (source if source.height else group).sort("run_id")
        first_run = source["run_id"][0]
        values = source.filter(pl.col("run_id") == first_run).sort("prompt_id")["value"].to_numpy()
        value, spread = median_over_prompts(values)
        scored_by = {SIMILARITY: "BERTScore scorer", DEGENERACY: "word counts"}.get(metric.family)
        if scored_by is None:
            judge = "second_evaluator" if key["metric"].endswith("_second") else "evaluator"
            scored_by = source["model"][0] if metric.family == BOUND else (source[judge][0] or "evaluator")
        rows.append({
            "sweep": key["sweep"], "hardware": key["hardware"], "metric": key["metric"], "metric_label": metric.label,
            "prompt_length": key["prompt_length"], "generation_length": key["generation_length"],
            "scored_by": scored_by, "text": CALIBRATION_TEXT[key["continuation"]], "n": int(values.size),
            "value": value, "interval_low": spread.low, "interval_high": spread.high, "interval": spread.label,
            "meaning": meaning,
        })
    if not rows:
        return pl.DataFrame(schema=CALIBRATION_SCHEMA)
    return pl.DataFrame(rows, schema=CALIBRATION_SCHEMA, orient="row").sort(
        ["sweep", "hardware", "metric", "generation_length", "text"])


# The median of N draws has about 1.2533 x the standard error of their mean (normal data, large N).
_MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
# The ELBO's Monte-Carlo error is small enough when the median's share of it is under a third of the smallest
# difference between adjacent step counts: the curve's steps are then not Monte-Carlo noise.
ELBO_SE_RATIO = 1 / 3


def elbo_precision(by_setting: pl.DataFrame, samples: dict[str, int]) -> pl.DataFrame:
    """Per LLaDA model and lengths: the ELBO's Monte-Carlo SE per prompt (median), its share in the median over
    prompts, and the smallest difference between adjacent step counts it must be small next to
    (schema ELBO_PRECISION_SCHEMA). `samples`: Monte-Carlo samples per model (quality.elbo.samples)."""
    elbo = by_setting.filter((pl.col("metric") == "elbo_nll_per_token") & (pl.col("continuation") == GENERATED)
                             & pl.col("stderr_median").is_not_null())
    rows = []
    for key, group in _groups(elbo, ("hardware", "model", "prompt_length", "generation_length")):
        group = group.sort("steps")
        values = group["value"].to_numpy()
        diffs = np.abs(np.diff(values[np.isfinite(values)]))
        smallest = float(diffs.min()) if diffs.size else None
        per_prompt = float(group["stderr_median"].median())
        n = int(group["n"].min())
        of_median = _MEDIAN_EFFICIENCY * per_prompt / math.sqrt(n)
        rows.append((key["hardware"], key["model"], key["prompt_length"], key["generation_length"],
                     samples.get(key["model"]), n, per_prompt, of_median, smallest,
                     None if smallest is None else of_median <= ELBO_SE_RATIO * smallest))
    return pl.DataFrame(rows, schema=ELBO_PRECISION_SCHEMA, orient="row")


# ---------------------------------------------------------------- helpers


def _groups(frame: pl.DataFrame, keys: Sequence[str]) -> list[tuple[dict[str, Any], pl.DataFrame]]:
    """(key values, rows) per group, in a stable order; null keys form their own group."""
    if not frame.height:
        return []
    return [(dict(zip(keys, values)), group) for values, group in frame.group_by(list(keys), maintain_order=True)]


def notes_of(rows: pl.DataFrame) -> str | None:
    """The distinct notes of the runs behind a row; synthetic weights always say so."""
    notes = {part.strip() for note in rows["quality_note"].drop_nulls().to_list() for part in note.split(";")}
    notes.discard("")
    if "synthetic" in rows["weights"].to_list():
        notes.add(SYNTHETIC_NOTE)
    ordered = sorted(notes, key=lambda n: (n != SYNTHETIC_NOTE, n))
    return "; ".join(ordered) or None
