"""Quality at report time: a per-prompt long table, quality vs steps with bootstrap CIs, and the parity table.

Pure functions over polars frames built from RunResults (no plotting, no workers). Statistics follow the
study (report-draft 3.1.4): f_llada(k) and Q_llama are the median over prompts of a metric;
S_parity = min{k : f_llada(k) at least as good as Q_llama} in the metric's direction, and
Speedup = L_e2e(LLaMA) / L_e2e(LLaDA at S_parity) at each batch size. CIs are percentile bootstraps with
a fixed seed: prompts are resampled jointly for LLaDA's runs and the LLaMA reference (paired, the same
prompt ids), and each run's repetitions are resampled for its latency median.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from report.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CI_LEVEL
from specs.results import QualityRecord, RunResult, RunStatus

NO_PARITY = "no parity within the swept steps"
SYNTHETIC_NOTE = "synthetic weights: quality not meaningful"
UNKNOWN_HARDWARE = "unknown"

# Which continuation a row scores: the run's own decoding, LLaMA sampled at quality.llama_sampled_temperature,
# or a calibration text scored as if generated (the real reference; another prompt's reference).
GENERATED, SAMPLED, REFERENCE, UNRELATED = "generated", "sampled", "reference", "unrelated"
CALIBRATION_LABELS = {
    REFERENCE: "reference continuation (calibration)",
    UNRELATED: "unrelated passage (calibration)",
}


@dataclass(frozen=True)
class Metric:
    label: str  # for tables and axes, with the unit
    higher_is_better: bool
    parity: bool  # has a LLaMA counterpart, so S_parity is defined


METRICS: dict[str, Metric] = {
    "bertscore_precision": Metric("BERTScore precision", True, True),
    "bertscore_recall": Metric("BERTScore recall", True, True),
    "bertscore_f1": Metric("BERTScore F1", True, True),
    "nll_per_token": Metric("evaluator NLL (nats/token)", False, True),
    "gen_ppl": Metric("generative perplexity (evaluator)", False, True),
    # LLaDA's own bound: no LLaMA counterpart, never a perplexity beside LLaMA's exact one.
    "elbo_nll_per_token": Metric("LLaDA ELBO NLL upper bound (nats/token)", False, False),
    "repeated_bigram_rate": Metric("repeated-bigram rate", False, True),
    "distinct_1": Metric("distinct-1", True, True),
    "distinct_2": Metric("distinct-2", True, True),
}
assert set(METRICS) == set(QualityRecord.model_fields) - {"prompt_id"}, "METRICS must cover QualityRecord"

_F64, _I64, _STR, _BOOL = pl.Float64, pl.Int64, pl.String, pl.Boolean

LONG_SCHEMA: dict[str, pl.DataType] = {
    "run_id": _STR, "sweep": _STR, "model": _STR, "arch": _STR, "weights": _STR, "quality_note": _STR,
    "hardware": _STR, "batch_size": _I64, "prompt_length": _I64, "generation_length": _I64,
    "block_length": _I64, "steps": _I64, "remasking": _STR, "cfg_scale": _F64, "continuation": _STR,
    "temperature": _F64, "prompt_id": _I64, "metric": _STR, "value": _F64, "higher_is_better": _BOOL,
    "useful_tokens": _I64, "latency_e2e_median_s": _F64, "latency_e2e_samples_s": pl.List(_F64),
}

# A quality-vs-steps curve is one (setting, continuation, metric); steps is null for LLaMA.
SETTING_KEYS = (
    "sweep", "hardware", "model", "arch", "weights", "prompt_length", "generation_length", "block_length",
    "remasking", "cfg_scale", "batch_size", "steps", "continuation", "temperature", "metric",
)
VS_STEPS_SCHEMA: dict[str, pl.DataType] = {
    **{key: LONG_SCHEMA[key] for key in SETTING_KEYS}, "metric_label": _STR, "higher_is_better": _BOOL,
    "runs": _I64, "n_prompts": _I64, "value_median": _F64, "value_ci_low": _F64, "value_ci_high": _F64,
    "latency_e2e_median_s": _F64, "quality_note": _STR,
}

PARITY_SCHEMA: dict[str, pl.DataType] = {
    "row_kind": _STR, "sweep": _STR, "hardware": _STR, "metric": _STR, "metric_label": _STR,
    "higher_is_better": _BOOL, "prompt_length": _I64, "generation_length": _I64, "block_length": _I64,
    "batch_size": _I64, "remasking": _STR, "cfg_scale": _F64, "llada_model": _STR, "llada_temperature": _F64,
    "reference": _STR, "reference_model": _STR, "reference_temperature": _F64, "n_prompts": _I64,
    "steps_swept": _STR, "reference_value": _F64, "reference_ci_low": _F64, "reference_ci_high": _F64,
    "llada_value_at_parity": _F64, "llada_value_at_max_steps": _F64, "s_parity_steps": _I64,
    "s_parity_ci_low_steps": _I64, "s_parity_ci_high_steps": _I64, "parity_fraction": _F64,
    "llama_latency_e2e_s": _F64, "llada_latency_e2e_at_parity_s": _F64, "speedup": _F64,
    "speedup_ci_low": _F64, "speedup_ci_high": _F64, "statement": _STR, "quality_note": _STR,
}


# ---------------------------------------------------------------- the long table


def quality_long_table(results: Iterable[RunResult]) -> pl.DataFrame:
    """One row per ok run x continuation x prompt x metric with a value (schema LONG_SCHEMA).

    `continuation`: generated (the run's own decoding, at `temperature` = controls.temperature), sampled
    (LLaMA at quality.llama_sampled_temperature), reference / unrelated (calibration; temperature null).
    `useful_tokens` (tokens before the first EOS) is known for generated rows only.
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
            for record in records:
                for metric, spec in METRICS.items():
                    value = getattr(record, metric)
                    if value is None:
                        continue
                    rows.append(
                        {
                            **base,
                            "continuation": continuation,
                            "temperature": temperature,
                            "prompt_id": record.prompt_id,
                            "metric": metric,
                            "value": float(value),
                            "higher_is_better": spec.higher_is_better,
                            "useful_tokens": useful.get(record.prompt_id)
                            if continuation == GENERATED
                            else None,
                        }
                    )
    if not rows:
        return pl.DataFrame(schema=LONG_SCHEMA)
    return pl.DataFrame(rows, schema=LONG_SCHEMA, orient="row")


def _run_columns(result: RunResult) -> dict[str, Any]:
    config = result.config
    latency = list(result.samples.latency_e2e_s) if result.samples else []
    return {
        "run_id": result.run_id, "sweep": result.sweep, "model": config.model.name, "arch": config.model.arch,
        "weights": result.weights, "quality_note": result.quality_note,
        "hardware": result.environment.device if result.environment else UNKNOWN_HARDWARE,
        "batch_size": config.batch_size, "prompt_length": config.prompt_length,
        "generation_length": config.generation_length, "block_length": config.block_length,
        "steps": config.steps, "remasking": config.remasking, "cfg_scale": config.cfg_scale,
        "latency_e2e_median_s": float(np.median(latency)) if latency else None,
        "latency_e2e_samples_s": latency,
    }


# ---------------------------------------------------------------- quality vs steps


def quality_vs_steps(
    long: pl.DataFrame, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
    level: float = CI_LEVEL,
) -> pl.DataFrame:
    """Median over prompts and its percentile-bootstrap CI per setting (SETTING_KEYS), schema VS_STEPS_SCHEMA.

    LLaDA rows have `steps`; LLaMA rows (steps null) are the levels a curve is compared with; calibration
    rows (continuation reference / unrelated) show what "good" and "chance" score for each metric.
    """
    rows = []
    for key, group in _groups(long, SETTING_KEYS):
        values = group["value"].to_numpy()
        low, high = _median_ci(values, resamples, seed, level)
        latency = group["latency_e2e_median_s"].drop_nulls()
        rows.append(
            {
                **key, "metric_label": METRICS[key["metric"]].label,
                "higher_is_better": METRICS[key["metric"]].higher_is_better,
                "runs": group["run_id"].n_unique(), "n_prompts": group["prompt_id"].n_unique(),
                "value_median": float(np.median(values)), "value_ci_low": low, "value_ci_high": high,
                "latency_e2e_median_s": float(latency.median()) if latency.len() else None,
                "quality_note": _notes(group),
            }
        )
    table = (
        pl.DataFrame(rows, schema=VS_STEPS_SCHEMA, orient="row")
        if rows
        else pl.DataFrame(schema=VS_STEPS_SCHEMA)
    )
    return table.sort(
        [
            "sweep", "hardware", "metric", "arch", "model", "generation_length", "block_length", "batch_size",
            "continuation", "steps",
        ],
        nulls_last=True,
    )


def _median_ci(values: np.ndarray, resamples: int, seed: int, level: float) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = np.median(values[rng.integers(0, values.size, size=(resamples, values.size))], axis=-1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return float(low), float(high)


# ---------------------------------------------------------------- parity


# A LLaDA curve over steps: everything but steps fixed. A LLaMA reference at the same point of the grid.
_GRID_KEYS = ("sweep", "hardware", "prompt_length", "generation_length", "batch_size", "metric")
_LLADA_KEYS = (*_GRID_KEYS, "model", "block_length", "remasking", "cfg_scale", "temperature")
_LLAMA_KEYS = (*_GRID_KEYS, "model", "continuation", "temperature")
_CALIBRATION_KEYS = (
    "sweep", "hardware", "model", "arch", "prompt_length", "generation_length", "continuation", "metric",
)


def parity_table(
    long: pl.DataFrame, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
    level: float = CI_LEVEL,
) -> pl.DataFrame:
    """S_parity and the speedup at parity, with bootstrap CIs, plus calibration rows (schema PARITY_SCHEMA).

    Parity rows (`row_kind` "parity"): one per metric with a LLaMA counterpart x (prompt length, generation
    length, block length, batch size, LLaDA settings) x reference ("llama greedy" = LLaMA's own decoding at
    temperature 0, "llama sampled" = at a temperature > 0). `s_parity_ci_high_steps` is null when more than
    the upper tail of the bootstrap never reaches parity within the swept steps; `parity_fraction` is the
    share of bootstrap replicates that reach it, and the speedup CI is taken over those replicates.
    Calibration rows (`row_kind` "calibration"): per model and lengths, the median over prompts of the real
    reference continuation and of an unrelated passage scored as if generated.
    """
    rows: list[dict[str, Any]] = []
    generated = long.filter(pl.col("continuation") == GENERATED)
    llada = generated.filter((pl.col("arch") == "llada") & pl.col("steps").is_not_null())
    llama = long.filter((pl.col("arch") == "llama") & pl.col("continuation").is_in([GENERATED, SAMPLED]))
    references: dict[tuple[Any, ...], list[tuple[dict[str, Any], pl.DataFrame]]] = defaultdict(list)
    for key, group in _groups(llama, _LLAMA_KEYS):
        references[tuple(key[c] for c in _GRID_KEYS)].append((key, group))
    for key, curve in _groups(llada, _LLADA_KEYS):
        metric = METRICS[key["metric"]]
        if not metric.parity:
            continue
        for ref_key, reference in references.get(tuple(key[c] for c in _GRID_KEYS), []):
            row = _parity_row(key, curve, ref_key, reference, metric, resamples, seed, level)
            if row is not None:
                rows.append(row)
    for key, group in _groups(
        long.filter(pl.col("continuation").is_in([REFERENCE, UNRELATED])), _CALIBRATION_KEYS
    ):
        rows.append(_calibration_row(key, group, resamples, seed, level))
    if not rows:
        return pl.DataFrame(schema=PARITY_SCHEMA)
    table = pl.DataFrame(rows, schema=PARITY_SCHEMA, orient="row")
    return table.sort(
        [
            "sweep", "hardware", "row_kind", "metric", "prompt_length", "generation_length", "block_length",
            "batch_size", "llada_model", "reference",
        ],
        descending=[False, False, True] + [False] * 7,
        nulls_last=True,
    )


def first_parity(curve: np.ndarray, reference: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Index of the first k at least as good as the reference, or -1; vectorised over [..., K]."""
    reached = curve >= reference[..., None] if higher_is_better else curve <= reference[..., None]
    return np.where(reached.any(axis=-1), reached.argmax(axis=-1), -1)


def _parity_row(
    key: dict[str, Any], curve: pl.DataFrame, ref_key: dict[str, Any], reference: pl.DataFrame,
    metric: Metric, resamples: int, seed: int, level: float,
) -> dict[str, Any] | None:
    """One parity row: a LLaDA curve over steps against one LLaMA reference; None without shared prompts."""
    steps = np.array(sorted(curve["steps"].unique().to_list()), dtype=np.int64)  # [K]
    prompts = set(reference["prompt_id"].to_list())
    for k in steps:
        prompts &= set(curve.filter(pl.col("steps") == int(k))["prompt_id"].to_list())  # every step has them
    prompt_ids = np.array(sorted(prompts), dtype=np.int64)  # [N]
    if prompt_ids.size == 0:
        return None
    runs = [curve.filter(pl.col("steps") == int(k)) for k in steps]
    values = np.stack([_by_prompt(run, prompt_ids) for run in runs])  # [K, N]
    ref_values = _by_prompt(reference, prompt_ids)  # [N]
    rng = np.random.default_rng(seed)
    alpha = (1.0 - level) / 2.0

    # Point estimates, then the paired bootstrap over prompts.
    f = np.median(values, axis=-1)  # [K]
    q = float(np.median(ref_values))
    point = int(first_parity(f, np.array(q), metric.higher_is_better))
    draws = rng.integers(0, prompt_ids.size, size=(resamples, prompt_ids.size))  # [R, N]
    f_boot = np.median(values[:, draws], axis=-1).T  # [R, K]
    q_boot = np.median(ref_values[draws], axis=-1)  # [R]
    index_boot = first_parity(f_boot, q_boot, metric.higher_is_better)  # [R]
    reached = index_boot >= 0
    # Not reached counts as beyond the largest swept step (inf); inverted_cdf picks an actual replicate value.
    s_boot = np.where(reached, steps[np.maximum(index_boot, 0)].astype(np.float64), np.inf)  # [R]
    s_low, s_high = (
        _steps_or_none(v) for v in np.quantile(s_boot, [alpha, 1.0 - alpha], method="inverted_cdf")
    )

    # Latency: each run's median over repetitions; the bootstrap resamples repetitions.
    ref_latency = _latency_samples(reference)
    step_latency = [_latency_samples(run) for run in runs]
    llama_latency = float(np.median(ref_latency)) if ref_latency.size else None
    llada_latency = float(np.median(step_latency[point])) if point >= 0 and step_latency[point].size else None
    speedup = llama_latency / llada_latency if llama_latency is not None and llada_latency else None
    speedup_low, speedup_high = _speedup_ci(ref_latency, step_latency, index_boot, rng, alpha)

    s_parity = int(steps[point]) if point >= 0 else None
    swept = ", ".join(str(int(k)) for k in steps)
    beyond = f">{steps[-1]}"
    ci_text = f"{level:.0%} CI {beyond if s_low is None else s_low}–{beyond if s_high is None else s_high}"
    if s_parity is None:
        statement = f"{NO_PARITY} ({swept}; bootstrap reaches it in {reached.mean():.0%})"
    else:
        statement = f"parity at {s_parity} steps ({ci_text})"
        statement += f"; speedup {speedup:.3g}x" if speedup else ""
    ref_low, ref_high = _median_ci(ref_values, resamples, seed, level)
    greedy = ref_key["continuation"] == GENERATED and not ref_key["temperature"]
    return {
        "row_kind": "parity", "sweep": key["sweep"], "hardware": key["hardware"], "metric": key["metric"],
        "metric_label": metric.label, "higher_is_better": metric.higher_is_better,
        "prompt_length": key["prompt_length"], "generation_length": key["generation_length"],
        "block_length": key["block_length"], "batch_size": key["batch_size"], "remasking": key["remasking"],
        "cfg_scale": key["cfg_scale"], "llada_model": key["model"], "llada_temperature": key["temperature"],
        "reference": "llama greedy" if greedy else "llama sampled", "reference_model": ref_key["model"],
        "reference_temperature": ref_key["temperature"], "n_prompts": int(prompt_ids.size),
        "steps_swept": swept, "reference_value": q, "reference_ci_low": ref_low,
        "reference_ci_high": ref_high, "llada_value_at_parity": float(f[point]) if point >= 0 else None,
        "llada_value_at_max_steps": float(f[-1]), "s_parity_steps": s_parity, "s_parity_ci_low_steps": s_low,
        "s_parity_ci_high_steps": s_high, "parity_fraction": float(reached.mean()),
        "llama_latency_e2e_s": llama_latency, "llada_latency_e2e_at_parity_s": llada_latency,
        "speedup": speedup, "speedup_ci_low": speedup_low, "speedup_ci_high": speedup_high,
        "statement": statement, "quality_note": _notes(pl.concat([curve, reference])),
    }


def _speedup_ci(
    ref_latency: np.ndarray, step_latency: list[np.ndarray], index_boot: np.ndarray, rng: np.random.Generator,
    alpha: float,
) -> tuple[float | None, float | None]:
    """Percentile CI of L_e2e(LLaMA) / L_e2e(LLaDA at a replicate's S_parity), over replicates at parity."""
    reached = np.flatnonzero(index_boot >= 0)  # [R']
    if not reached.size or not ref_latency.size or not all(s.size for s in step_latency):
        return None, None
    resamples = index_boot.size
    ref_boot = _median_draws(ref_latency, resamples, rng)  # [R]
    step_boot = np.stack([_median_draws(s, resamples, rng) for s in step_latency])  # [K, R]
    ratio = ref_boot[reached] / step_boot[index_boot[reached], reached]  # [R']
    low, high = np.quantile(ratio, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _calibration_row(
    key: dict[str, Any], group: pl.DataFrame, resamples: int, seed: int, level: float
) -> dict[str, Any]:
    # Every run of a model carries the same calibration: one value per prompt.
    values = group.unique("prompt_id", keep="first").sort("prompt_id")["value"].to_numpy()
    low, high = _median_ci(values, resamples, seed, level)
    metric = METRICS[key["metric"]]
    return {
        "row_kind": "calibration",
        "sweep": key["sweep"],
        "hardware": key["hardware"],
        "metric": key["metric"],
        "metric_label": metric.label,
        "higher_is_better": metric.higher_is_better,
        "prompt_length": key["prompt_length"],
        "generation_length": key["generation_length"],
        "reference": CALIBRATION_LABELS.get(key["continuation"], key["continuation"]),
        "reference_model": key["model"],
        "n_prompts": int(values.size),
        "reference_value": float(np.median(values)),
        "reference_ci_low": low,
        "reference_ci_high": high,
        "statement": (
            "what the real continuation scores (the 'good' end)"
            if key["continuation"] == REFERENCE
            else "what an unrelated passage scores (the 'chance' end)"
        ),
        "quality_note": _notes(group),
    }


# ---------------------------------------------------------------- helpers


def _groups(frame: pl.DataFrame, keys: Sequence[str]) -> list[tuple[dict[str, Any], pl.DataFrame]]:
    """(key values, rows) per group, in a stable order; null keys form their own group."""
    if not frame.height:
        return []
    out = []
    for values, group in frame.group_by(list(keys), maintain_order=True):
        out.append((dict(zip(keys, values)), group))
    return out


def _by_prompt(rows: pl.DataFrame, prompt_ids: np.ndarray) -> np.ndarray:
    """The value of each prompt id (the first where a setting has several runs). [N]"""
    first = rows.unique("prompt_id", keep="first")
    lookup = dict(zip(first["prompt_id"].to_list(), first["value"].to_list()))
    return np.array([lookup[int(p)] for p in prompt_ids], dtype=np.float64)


def _latency_samples(rows: pl.DataFrame) -> np.ndarray:
    """The latency repetitions of the (first) run behind these rows. [M]"""
    first = rows.unique("run_id", keep="first").sort("run_id")
    samples = first["latency_e2e_samples_s"][0] if first.height else None
    return np.array(samples.to_list() if samples is not None else [], dtype=np.float64)


def _median_draws(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    return np.median(samples[rng.integers(0, samples.size, size=(resamples, samples.size))], axis=-1)  # [R]


def _steps_or_none(value: float) -> int | None:
    return None if np.isinf(value) else int(value)


def _notes(rows: pl.DataFrame) -> str | None:
    """The distinct notes of the runs behind a row; synthetic weights always say so."""
    notes = {part.strip() for note in rows["quality_note"].drop_nulls().to_list() for part in note.split(";")}
    notes.discard("")
    if "synthetic" in rows["weights"].to_list():
        notes.add(SYNTHETIC_NOTE)
    ordered = sorted(notes, key=lambda n: (n != SYNTHETIC_NOTE, n))
    return "; ".join(ordered) or None
