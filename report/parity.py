"""S_parity and the speedup at parity (report-draft 3.1.4), defined so that noise cannot fake them.

S_parity is the fewest swept steps k from which a diffusion model's quality (median over prompts) is at least as
good as the reference's at k and at every larger swept step: a curve that crosses early and falls back again does
not count. It is found once per (pair, generation length, diffusion setting, metric, reference) on one batch size
(the smallest that ran every step count: greedy text does not depend on the batch), and the speedup
L_e2e(AR) / L_e2e(dLLM at S_parity) is then evaluated at every batch size measured. A diffusion model's references
are its pair's autoregressive model (report/pairs.py: LLaDA's is LLaMA, Dream's Qwen2.5), greedy and sampled, and
the human continuation; the kinds keep the first pair's names ("llama greedy": the pair's AR model, greedy). Parity at the fewest swept steps is "<= k_min": fewer
steps were not tried, so the speedup there is a lower bound.

How sure. S_parity: a paired bootstrap over prompts (scipy.stats.bootstrap; LLaDA's step counts and the
reference resampled with the same prompts), read at the 2.5% and 97.5% points of the replicates' S_parity: a
minimum over a grid of step counts, so that span is the grid's resolution and no confidence interval (it is never
called one); `parity_fraction` is the share of replicates that reach parity at all. Speedup: conditional on
S_parity (the row's step count held fixed), report/intervals.py's interval over the two runs' sessions and
repetitions.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as scipy_stats

from report import stats
from report.pairs import is_ar, is_dllm, pairs_from, peers_of
from report.quality import GENERATED, LIKELIHOOD, METRICS, REFERENCE, REPETITION, SAMPLED, _groups, notes_of
from report.sessions import row_speedup
from report.table import vanilla_runs, with_dream_alg

NO_PARITY = "no parity within the swept steps"
GREEDY, SAMPLED_REF, HUMAN = "llama greedy", "llama sampled", "human continuation"
# Which reference heads the report, per metric family. Perplexity is judged by the LLaMA under test, whose
# greedy text is its own mode (far below human text in perplexity): its headline is LLaMA sampled, else the
# human continuation's level. BERTScore and degeneracy are not judged by LLaMA: LLaMA greedy heads them.
HEADLINE_ORDER = {LIKELIHOOD: (SAMPLED_REF, HUMAN, GREEDY)}
DEFAULT_HEADLINE_ORDER = (GREEDY, SAMPLED_REF, HUMAN)
# Human text is a reference where "as good as" means something: not BERTScore (the reference is its own target).
HUMAN_FAMILIES = frozenset({LIKELIHOOD, "degeneracy"})

_F64, _I64, _STR, _BOOL = pl.Float64, pl.Int64, pl.String, pl.Boolean

PARITY_SCHEMA: dict[str, pl.DataType] = {
    "sweep": _STR, "hardware": _STR, "metric": _STR, "metric_label": _STR, "higher_is_better": _BOOL,
    "prompt_length": _I64, "generation_length": _I64, "block_length": _I64, "remasking": _STR, "dream_alg": _STR,
    "cfg_scale": _F64, "llada_model": _STR, "llada_temperature": _F64, "reference": _STR, "reference_label": _STR,
    "reference_model": _STR, "reference_temperature": _F64, "judge": _STR, "headline": _BOOL, "quality_batch_size": _I64,
    "n_prompts": _I64, "steps_swept": _STR, "reference_value": _F64, "reference_interval_low": _F64,
    "reference_interval_high": _F64, "reference_repetition": _F64, "llada_value_at_parity": _F64,
    "llada_repetition_at_parity": _F64, "llada_value_at_max_steps": _F64, "s_parity_steps": _I64,
    "s_parity_bound": _STR, "s_parity_low_steps": _I64, "s_parity_high_steps": _I64, "parity_fraction": _F64,
    "replicates": _I64, "batch_size": _I64, "llama_model": _STR, "llama_latency_e2e_s": _F64,
    "llada_latency_e2e_at_parity_s": _F64, "speedup": _F64, "speedup_low": _F64, "speedup_high": _F64,
    "speedup_interval": _STR, "goodput_speedup": _F64, "low_useful": _BOOL, "statement": _STR,
    "quality_note": _STR,
}
# A diffusion curve over steps: everything but the steps (and the batch) fixed.
_CURVE_KEYS = ("sweep", "hardware", "model", "prompt_length", "generation_length", "block_length", "remasking",
               "dream_alg", "cfg_scale", "temperature", "metric")
_GRID_KEYS = ("sweep", "hardware", "prompt_length", "generation_length", "metric")


def parity_index(curve: np.ndarray, reference: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """The index of the fewest steps from which the curve is at least as good as the reference at that and
    every larger step, or -1 when it is not at the largest; vectorised over [..., K] with reference [...]."""
    reached = curve >= reference[..., None] if higher_is_better else curve <= reference[..., None]  # [..., K]
    holds = np.flip(np.logical_and.accumulate(np.flip(reached, -1), axis=-1), -1)  # [..., K]: all reached from k
    return np.where(holds[..., -1], holds.argmax(axis=-1), -1)


def parity_table(
    long: pl.DataFrame, table: pl.DataFrame, *, resamples: int = stats.BOOTSTRAP_RESAMPLES,
    seed: int = stats.BOOTSTRAP_SEED, level: float = stats.CI_LEVEL,
) -> pl.DataFrame:
    """Parity rows (schema PARITY_SCHEMA): one per metric with an AR counterpart x diffusion curve x its pair's
    reference x batch size measured (`llama_model`: the pair's AR model). `long`:
    report.quality.quality_long_table; `table`: the flat results table (latency repetitions and goodput at every
    batch size). Vanilla runs only: variants never move S_parity."""
    long, table = with_dream_alg(vanilla_runs(long)), with_dream_alg(vanilla_runs(table))
    pairs = pairs_from({*long.select("model", "arch").iter_rows(), *table.select("model", "arch").iter_rows()})
    rows: list[dict[str, Any]] = []
    generated = long.filter(pl.col("continuation") == GENERATED)
    diffusion = generated.filter(is_dllm() & pl.col("steps").is_not_null())
    autoregressive = long.filter(is_ar() & pl.col("continuation").is_in([GENERATED, SAMPLED]))
    human = long.filter(is_dllm() & (pl.col("continuation") == REFERENCE))
    ok = table.filter(pl.col("status") == "ok")
    for key, curve in _groups(diffusion, _CURVE_KEYS):
        metric = METRICS[key["metric"]]
        if not metric.parity:
            continue
        batch = _quality_batch(curve)
        curve = curve.filter(pl.col("batch_size") == batch)
        for ar_model in peers_of(pairs, key["model"]):
            ar = autoregressive.filter(pl.col("model") == ar_model)
            references = _references(key, batch, ar, human, metric.family)
            order = HEADLINE_ORDER.get(metric.family, DEFAULT_HEADLINE_ORDER)
            present = {kind for kind, *_ in references}
            headline = next((kind for kind in order if kind in present), None)
            for kind, label, ref_model, ref_temperature, reference in references:
                found = _parity(curve, reference, metric.higher_is_better, resamples, seed, level)
                if found is None:
                    continue
                base = {
                    "sweep": key["sweep"], "hardware": key["hardware"], "metric": key["metric"],
                    "metric_label": metric.label, "higher_is_better": metric.higher_is_better,
                    "prompt_length": key["prompt_length"], "generation_length": key["generation_length"],
                    "block_length": key["block_length"], "remasking": key["remasking"], "dream_alg": key["dream_alg"],
                    "cfg_scale": key["cfg_scale"], "llada_model": key["model"], "llada_temperature": key["temperature"],
                    "reference": kind, "reference_label": label, "reference_model": ref_model,
                    "reference_temperature": ref_temperature, "judge": _judge(curve, metric.family),
                    "headline": kind == headline,
                    "quality_batch_size": batch, **found,
                    "quality_note": notes_of(pl.concat([curve, reference], how="vertical_relaxed")),
                }
                base.update(_repetition(long, key, batch, kind, ref_model, found["s_parity_steps"]))
                rows.extend(_speedup_rows(base, key, ok, ar_model, level, seed))
    if not rows:
        return pl.DataFrame(schema=PARITY_SCHEMA)
    return pl.DataFrame(rows, schema=PARITY_SCHEMA, orient="row").sort(
        ["sweep", "hardware", "metric", "prompt_length", "generation_length", "block_length", "llada_model",
         "dream_alg", "headline", "reference", "batch_size", "llama_model"],
        descending=[False] * 8 + [True, False, False, False], nulls_last=True,
    )


PARITY_MARKER_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "model": _STR, "prompt_length": _I64, "generation_length": _I64, "block_length": _I64,
    "dream_alg": _STR, "llama_model": _STR, "metric": _STR, "reference_label": _STR, "s_parity": _F64, "s_parity_bound": _STR, "s_parity_low": _F64,
    "s_parity_high": _F64, "statement": _STR,
}


def parity_markers(parity: pl.DataFrame) -> pl.DataFrame:
    """The headline S_parity of each diffusion curve against each of its pair's AR models (hardware, model,
    lengths, block length or alg, metric), once: it does not depend on the batch size (the speedup does; that is
    in the parity table)."""
    rows = with_dream_alg(parity).filter(pl.col("headline"))
    if not rows.height:
        return pl.DataFrame(schema=PARITY_MARKER_SCHEMA)
    rows = rows.sort("batch_size").unique(
        ["hardware", "llada_model", "prompt_length", "generation_length", "block_length", "remasking", "dream_alg",
         "cfg_scale", "metric", "llama_model"], keep="first", maintain_order=True,
    )
    return rows.select(
        "hardware", pl.col("llada_model").alias("model"), "prompt_length", "generation_length", "block_length",
        "dream_alg", "llama_model", "metric", "reference_label", pl.col("s_parity_steps").cast(pl.Float64).alias("s_parity"), "s_parity_bound",
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


def _parity(
    curve: pl.DataFrame, reference: pl.DataFrame, higher: bool, resamples: int, seed: int, level: float
) -> dict[str, Any] | None:
    """S_parity of a curve against a reference, its bootstrap interval and fraction; None without shared
    prompts."""
    steps = np.array(sorted(curve["steps"].unique().to_list()), dtype=np.int64)  # [K]
    prompts = set(reference["prompt_id"].to_list())
    for k in steps:
        prompts &= set(curve.filter(pl.col("steps") == int(k))["prompt_id"].to_list())
    prompt_ids = np.array(sorted(prompts), dtype=np.int64)  # [N]
    if prompt_ids.size == 0:
        return None
    values = np.stack([_by_prompt(curve.filter(pl.col("steps") == int(k)), prompt_ids) for k in steps])  # [K, N]
    ref = _by_prompt(reference, prompt_ids)  # [N]
    f = np.median(values, axis=-1)  # [K]
    q = float(np.median(ref))
    point = int(parity_index(f, np.array(q), higher))
    ref_interval = stats.interval(ref) if np.isfinite(ref).all() else stats.rank_interval(ref)
    s_low = s_high = None
    fraction = replicates = None
    if prompt_ids.size >= stats.MIN_CI_SAMPLES:
        boot = _bootstrap_parity(ref, values, higher, resamples, seed)  # [R]: index, K = no parity
        fraction, replicates = float(np.mean(boot < steps.size)), int(boot.size)
        alpha = (1.0 - level) / 2.0
        low, high = np.quantile(boot, [alpha, 1.0 - alpha], method="inverted_cdf")
        s_low = int(steps[int(low)]) if low < steps.size else None
        s_high = int(steps[int(high)]) if high < steps.size else None
    s_parity = int(steps[point]) if point >= 0 else None
    return {
        "n_prompts": int(prompt_ids.size), "steps_swept": ", ".join(str(int(k)) for k in steps),
        "reference_value": q, "reference_interval_low": ref_interval.low,
        "reference_interval_high": ref_interval.high,
        "llada_value_at_parity": float(f[point]) if point >= 0 else None,
        "llada_value_at_max_steps": float(f[-1]), "s_parity_steps": s_parity,
        "s_parity_bound": None if s_parity is None else ("<=" if point == 0 else "="),
        "s_parity_low_steps": s_low, "s_parity_high_steps": s_high, "parity_fraction": fraction,
        "replicates": replicates,
    }


def _bootstrap_parity(ref: np.ndarray, values: np.ndarray, higher: bool, resamples: int, seed: int) -> np.ndarray:
    """The replicates' S_parity index (K where a replicate never reaches parity), prompts resampled jointly."""
    k = values.shape[0]

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        q = np.median(samples[0], axis=axis)  # [R]
        f = np.stack([np.median(s, axis=axis) for s in samples[1:]], axis=-1)  # [R, K]
        index = parity_index(f, q, higher)
        return np.where(index < 0, k, index).astype(np.float64)

    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", scipy_stats.DegenerateDataWarning)
        result = scipy_stats.bootstrap(
            (ref, *values), statistic, paired=True, vectorized=True, n_resamples=resamples, method="percentile",
            random_state=np.random.default_rng(seed),
        )
    return np.asarray(result.bootstrap_distribution)


def _by_prompt(rows: pl.DataFrame, prompt_ids: np.ndarray) -> np.ndarray:
    """The value of each prompt id (the first where a setting has several runs). [N]"""
    first = rows.unique("prompt_id", keep="first", maintain_order=True)
    lookup = dict(zip(first["prompt_id"].to_list(), first["value"].to_list()))
    return np.array([lookup[int(p)] for p in prompt_ids], dtype=np.float64)


def _repetition(
    long: pl.DataFrame, key: dict[str, Any], batch: int, kind: str, ref_model: str | None, s_parity: int | None
) -> dict[str, float | None]:
    """The repeated-bigram rate of the reference's texts and of the diffusion model's at S_parity, beside every
    perplexity."""
    if METRICS[key["metric"]].family != LIKELIHOOD:
        return {"reference_repetition": None, "llada_repetition_at_parity": None}
    rep = long.filter((pl.col("metric") == REPETITION) & (pl.col("sweep") == key["sweep"])
                      & (pl.col("hardware") == key["hardware"]) & (pl.col("prompt_length") == key["prompt_length"])
                      & (pl.col("generation_length") == key["generation_length"]))
    if kind == HUMAN:
        ref = rep.filter((pl.col("continuation") == REFERENCE) & (pl.col("model") == key["model"]))
    else:
        ref = rep.filter((pl.col("model") == ref_model)
                         & (pl.col("continuation") == (GENERATED if kind == GREEDY else SAMPLED)))
        smallest = ref.filter(pl.col("batch_size") == batch)
        ref = smallest if smallest.height else ref
    if s_parity is None:
        llada = rep.clear()
    else:
        llada = rep.filter((pl.col("model") == key["model"]) & (pl.col("continuation") == GENERATED)
                           & (pl.col("steps") == s_parity) & (pl.col("batch_size") == batch)
                           & pl.col("block_length").eq_missing(key["block_length"])
                           & pl.col("dream_alg").eq_missing(key["dream_alg"]))
    return {
        "reference_repetition": float(ref.unique("prompt_id")["value"].median()) if ref.height else None,
        "llada_repetition_at_parity": float(llada["value"].median()) if llada.height else None,
    }


# ---------------------------------------------------------------- speedup


def _speedup_rows(
    base: dict[str, Any], key: dict[str, Any], ok: pl.DataFrame, ar_model: str, level: float, seed: int
) -> list[dict[str, Any]]:
    """One row per batch size that the pair's AR model ran at this grid point: the speedup at S_parity there."""
    grid = ok.filter((pl.col("hardware") == key["hardware"]) & (pl.col("sweep") == key["sweep"])
                     & (pl.col("prompt_length") == key["prompt_length"])
                     & (pl.col("generation_length") == key["generation_length"]))
    llama = grid.filter(is_ar() & (pl.col("model") == ar_model))
    s = base["s_parity_steps"]
    llada = grid.clear() if s is None else grid.filter(
        (pl.col("model") == key["model"]) & (pl.col("steps") == s)
        & pl.col("block_length").eq_missing(key["block_length"]) & pl.col("remasking").eq_missing(key["remasking"])
        & pl.col("dream_alg").eq_missing(key["dream_alg"]) & (pl.col("cfg_scale") == key["cfg_scale"])
    )
    out = []
    for batch in sorted(llama["batch_size"].unique().to_list()):
        ar = llama.filter(pl.col("batch_size") == batch).row(0, named=True)
        at = llada.filter(pl.col("batch_size") == batch)
        row = {**base, "batch_size": batch, "llama_model": ar["model"],
               "llama_latency_e2e_s": ar["latency_e2e_s_median"]}
        diffusion = at.row(0, named=True) if at.height else None
        speedup = low = high = goodput = None
        label = None
        if diffusion is not None and diffusion["latency_e2e_s_median"]:
            spread = row_speedup(ar, diffusion)
            speedup, low, high = spread.estimate, spread.low, spread.high
            label = f"{spread.label}, S_parity held at {s}"
            if ar["goodput_tokens_per_s_median"] and diffusion["goodput_tokens_per_s_median"]:
                goodput = diffusion["goodput_tokens_per_s_median"] / ar["goodput_tokens_per_s_median"]
        row.update({
            "llada_latency_e2e_at_parity_s": diffusion["latency_e2e_s_median"] if diffusion else None,
            "speedup": speedup, "speedup_low": low, "speedup_high": high, "speedup_interval": label,
            "goodput_speedup": goodput,
            "low_useful": bool(ar["low_useful"]) or bool(diffusion and diffusion["low_useful"]),
        })
        row["statement"] = statement(row, s is not None and diffusion is None)
        out.append(row)
    return out


def statement(row: dict[str, Any], missing_run: bool = False) -> str:
    """One sentence for a parity row: S_parity with its interval and fraction, then the speedup at the batch."""
    s = row["s_parity_steps"]
    swept = row["steps_swept"]
    largest = swept.split(", ")[-1]
    fraction = row["parity_fraction"]
    reach = (f"{fraction:.0%} of {row['replicates']} bootstrap replicates reach parity" if fraction is not None
             else f"no interval: {row['n_prompts']} prompts")
    if s is None:
        return f"{NO_PARITY} ({swept}; {reach})"
    interval = replicate_span(row["s_parity_low_steps"], row["s_parity_high_steps"], largest) if fraction else ""
    if row["s_parity_bound"] == "<=":
        text = f"parity already at the fewest swept steps (S_parity <= {s}"
    else:
        text = f"parity from {s} steps on (S_parity = {s}"
    text += f"; {interval}; {reach})" if interval else f"; {reach})"
    if missing_run:
        return text + f"; {row['llada_model']} at {s} steps did not run at B = {row['batch_size']}"
    if row["speedup"] is not None:
        bound = ">= " if row["s_parity_bound"] == "<=" else ""
        text += (f"; speedup at B = {row['batch_size']}: {bound}{row['speedup']:.3g}x "
                 f"{bracket(row['speedup_low'], row['speedup_high'])} ({row['speedup_interval']})")
        if row["s_parity_bound"] == "<=":
            text += ", a lower bound: fewer steps were not swept"
    return text


def replicate_span(low: int | None, high: int | None, largest: str) -> str:
    """Where the bootstrap replicates over prompts put S_parity: the swept grid's resolution, which no coverage
    guarantee comes with (a minimum over a grid of step counts is no smooth statistic), so never called a CI."""
    ends = [str(v) if v is not None else f"beyond {largest}" for v in (low, high)]
    span = ends[0] if ends[0] == ends[1] else f"{ends[0]}–{ends[1]}"
    return f"replicates over prompts put it at {span} steps (the grid's resolution, not a confidence interval)"


def bracket(low: float | None, high: float | None) -> str:
    """'[2.3, 3.1]', or 'no interval' where the samples support none."""
    return "(no interval)" if low is None or high is None else f"[{low:.3g}, {high:.3g}]"


def _judge(curve: pl.DataFrame, family: str) -> str | None:
    """The model that scores a likelihood metric (the evaluator), which may be the autoregressive model under test."""
    if family != LIKELIHOOD or "evaluator" not in curve.columns:
        return None
    judges = curve["evaluator"].drop_nulls()
    return judges[0] if judges.len() else None
