"""Accelerated variants against vanilla at the same grid point: speedup with its interval, forwards, tokens per
forward, the quality delta paired by prompt, the cache's memory, the roofline's predicted speedup, and the batch
size from which a variant stops paying off.

Pure functions over the flat results table (report.table.flat), the quality long table (report.analysis.quality) and the
prediction table (report.analysis.predictions). Speedup = median latency of vanilla / median latency of the variant (> 1:
the variant is faster); its interval is report/analysis/intervals.py's, over the two runs' sessions and repetitions. Quality delta = variant - vanilla per prompt, its median over the prompts
both ran, with a percentile bootstrap CI over prompts (report.analysis.stats.rank_interval: continuations too short for a
metric rank worst) or the range below six prompts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from report.analysis import stats
from report.document.content import fmt_bytes
from report.analysis.parity import bracket
from report.analysis.quality import GENERATED
from report.table.sessions import row_speedup, shared_median
from report.table.flat import GRID_POINT, full_where_measured, vanilla_runs, with_sampler_setting
from specs.schema import VANILLA

# The quality metrics a variant's delta is reported for (DESIGN: generative perplexity and BERTScore F1).
DELTA_METRICS = ("gen_ppl", "bertscore_f1")
UNPAIRED = "unpaired"  # interval kind of a delta whose runs share no prompt: the difference of medians, no interval

# A variant run and its vanilla counterpart agree on everything but the implementation.
MATCH_KEYS = tuple(k for k in GRID_POINT if k != "impl")
# A payoff curve: one variant over batch sizes, everything else fixed.
CURVE_KEYS = ("hardware", "model", "arch", "impl", "prompt_length", "generation_length", "steps", "block_length",
              "remasking", "sampler_setting", "cfg_scale")

_F64, _I64, _STR = pl.Float64, pl.Int64, pl.String

VARIANT_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "model": _STR, "arch": _STR, "impl": _STR, "prompt_length": _I64, "generation_length": _I64,
    "steps": _I64, "block_length": _I64, "remasking": _STR, "sampler_setting": _STR, "cfg_scale": _F64, "batch_size": _I64,
    "run_id": _STR, "vanilla_run_id": _STR, "latency_s": _F64, "vanilla_latency_s": _F64, "speedup": _F64,
    "speedup_low": _F64, "speedup_high": _F64, "speedup_interval": _STR, "repetitions": _I64,
    "vanilla_repetitions": _I64, "forwards": _F64, "vanilla_forwards": _F64, "tokens_per_forward": _F64,
    "vanilla_tokens_per_forward": _F64, "cache_bytes": _I64, "preparation_s": _F64, "predicted_speedup": _F64,
    "forwards_source": _STR,
    **{f"{m}_{part}": _F64 for m in DELTA_METRICS for part in ("delta", "delta_low", "delta_high")},
    **{f"{m}_delta_interval": _STR for m in DELTA_METRICS},
    **{f"{m}_pairs": _I64 for m in DELTA_METRICS},
}
PAYOFF_SCHEMA: dict[str, pl.DataType] = {
    **{key: VARIANT_SCHEMA[key] for key in CURVE_KEYS}, "batch_sizes": _STR, "speedups": _STR,
    "predicted_speedups": _STR, "stops_at": _I64, "predicted_stops_at": _I64, "statement": _STR,
}


def variant_table(table: pl.DataFrame, long: pl.DataFrame, predictions: pl.DataFrame) -> pl.DataFrame:
    """One row per successful variant run (schema VARIANT_SCHEMA), beside the vanilla run at the same point.

    `table`: report.table.flat.results_table of every run; `long`: report.analysis.quality.quality_long_table of every run;
    `predictions`: report.analysis.predictions.prediction_table rows (faithful ones are read). A variant without a vanilla
    counterpart keeps its own numbers with the comparisons null."""
    ok = with_sampler_setting(table).filter((pl.col("status") == "ok") & pl.col("latency_e2e_s_median").is_not_null())
    variants = ok.filter(pl.col("impl").is_not_null() & (pl.col("impl") != VANILLA))
    if not variants.height:
        return pl.DataFrame(schema=VARIANT_SCHEMA)
    vanilla = {tuple(r[k] for k in MATCH_KEYS): r for r in full_where_measured(vanilla_runs(ok)).iter_rows(named=True)}
    faithful = predictions.filter((pl.col("fidelity") == "faithful") & pl.col("predicted_latency_s").is_not_null())
    predicted = {r["run_id"]: r for r in faithful.iter_rows(named=True)}
    generated = long.filter(pl.col("continuation") == GENERATED)
    rows = [_compare(row, vanilla.get(tuple(row[k] for k in MATCH_KEYS)), predicted, generated)
            for row in variants.iter_rows(named=True)]
    return pl.DataFrame(rows, schema=VARIANT_SCHEMA, orient="row").sort(
        ["hardware", "arch", "model", "generation_length", "prompt_length", "impl", "steps", "block_length",
         "batch_size"], nulls_last=True)


def _compare(row: dict[str, Any], base: dict[str, Any] | None, predicted: dict[str, dict[str, Any]],
             generated: pl.DataFrame) -> dict[str, Any]:
    out = {key: row[key] for key in (*CURVE_KEYS, "batch_size", "run_id", "cache_bytes", "preparation_s", "forwards",
                                     "tokens_per_forward")}
    out.update({"latency_s": row["latency_e2e_s_median"], "repetitions": row["latency_e2e_s_n"]})
    mine = predicted.get(row["run_id"])
    out["forwards_source"] = mine["forwards_source"] if mine else None
    if base is None:
        return out
    spread = row_speedup(base, row)
    out.update({  # both latencies over the sessions the speedup rests on
        "latency_s": shared_median(row, base), "vanilla_run_id": base["run_id"],
        "vanilla_latency_s": shared_median(base, row),
        "speedup": spread.estimate, "speedup_low": spread.low, "speedup_high": spread.high,
        "speedup_interval": spread.label, "vanilla_repetitions": spread.repetitions[0],
        "vanilla_forwards": base["forwards"], "vanilla_tokens_per_forward": base["tokens_per_forward"],
    })
    theirs = predicted.get(base["run_id"])
    if mine and theirs:
        out["predicted_speedup"] = theirs["predicted_latency_s"] / mine["predicted_latency_s"]
    for metric in DELTA_METRICS:
        delta = quality_delta(_by_prompt(generated, row["run_id"], metric), _by_prompt(generated, base["run_id"], metric))
        if delta is not None:
            value, interval, pairs = delta
            out.update({f"{metric}_delta": value, f"{metric}_delta_low": interval.low,
                        f"{metric}_delta_high": interval.high, f"{metric}_delta_interval": interval.kind or UNPAIRED,
                        f"{metric}_pairs": pairs})
    return out


def _by_prompt(generated: pl.DataFrame, run_id: str, metric: str) -> dict[int, float]:
    rows = generated.filter((pl.col("run_id") == run_id) & (pl.col("metric") == metric))
    first = rows.unique("prompt_id", keep="first", maintain_order=True)
    return dict(zip(first["prompt_id"].to_list(), first["value"].to_list()))


def quality_delta(variant: dict[int, float], vanilla: dict[int, float]) -> tuple[float, stats.Interval, int] | None:
    """(median delta, its interval, pairs): variant - vanilla per prompt over the prompts both ran (two texts too
    short for the metric tie at 0; one ranks worst), the interval over prompts (stats.rank_interval). Without a
    shared prompt: the difference of the medians with no interval (kind None, pairs 0). None without values."""
    if not variant or not vanilla:
        return None
    shared = sorted(set(variant) & set(vanilla))
    if not shared:
        difference = float(np.median(list(variant.values())) - np.median(list(vanilla.values())))
        return difference, stats.Interval(None, None, None, 0), 0
    diffs = np.array([0.0 if variant[p] == vanilla[p] else variant[p] - vanilla[p] for p in shared])
    return float(np.median(diffs)), stats.rank_interval(diffs), len(shared)


# ---------------------------------------------------------------- where a variant stops paying off


def payoff_table(variants: pl.DataFrame) -> pl.DataFrame:
    """Per variant curve over batch sizes (schema PAYOFF_SCHEMA): the first measured batch size whose speedup's
    point estimate falls below 1, measured and predicted by the roofline at the same batch sizes (null: it pays
    off at every batch measured), and a sentence saying so."""
    compared = variants.filter(pl.col("speedup").is_not_null())
    rows = []
    for key, curve in compared.group_by(list(CURVE_KEYS), maintain_order=True):
        curve = curve.sort("batch_size")
        batches = curve["batch_size"].to_list()
        measured = curve["speedup"].to_list()
        predicted = curve["predicted_speedup"].to_list()
        stops = first_below_one(batches, measured)
        has_prediction = None not in predicted
        predicted_stops = first_below_one(batches, predicted) if has_prediction else None
        rows.append((*key, ", ".join(map(str, batches)), ", ".join(f"{s:.3g}" for s in measured),
                     ", ".join("–" if p is None else f"{p:.3g}" for p in predicted), stops, predicted_stops,
                     payoff_statement(batches, measured, predicted if has_prediction else None)))
    frame = pl.DataFrame(rows, schema=PAYOFF_SCHEMA, orient="row")
    return frame.sort(["hardware", "arch", "model", "generation_length", "impl", "steps", "block_length"],
                      nulls_last=True)


def first_below_one(batches: list[int], speedups: list[float | None]) -> int | None:
    """The first batch size whose speedup is below 1 (the variant is slower than vanilla there), or None. A
    speedup of 1 up to rounding is level, not below: two predictions that sit on the same host floor."""
    return next((b for b, s in zip(batches, speedups) if s is not None and s < 1 and not _level(s)), None)


def payoff_statement(batches: list[int], measured: list[float], predicted: list[float] | None) -> str:
    """'pays off at every batch measured (B = 1, 8)', 'stops paying off at B = 8' or 'slower than vanilla
    already at B = 1', then the roofline's verdict at the same batch sizes (or that there is none)."""
    roofline = _verdict(batches, predicted) if predicted is not None else "no prediction (no profile for the device)"
    return f"measured: {_verdict(batches, measured)}; roofline: {roofline}"


def _level(speedup: float) -> bool:
    return math.isclose(speedup, 1.0, rel_tol=1e-9)


def _batch_list(batches: list[int]) -> str:
    return ", ".join(map(str, batches))


def _verdict(batches: list[int], speedups: list[float]) -> str:
    level = [b for b, s in zip(batches, speedups) if _level(s)]
    if len(level) == len(batches):
        # A compiled decode step on a datasheet profile: the same operators, no dispatch floor to remove.
        return "no change at any batch measured (speedup 1)"
    stops = first_below_one(batches, speedups)
    if stops is None and level:
        # Both on the host floor at the small batches (an eager cache variant): the roofline sees no gain there.
        paying = [b for b in batches if b not in level]
        return f"no change at B = {_batch_list(level)} (speedup 1), pays off at B = {_batch_list(paying)}"
    if stops is None:
        return f"pays off at every batch measured (B = {_batch_list(batches)})"
    if all(b in level for b in batches if b < stops):
        return f"slower than vanilla already at B = {stops}"
    return f"stops paying off at B = {stops}"


# ---------------------------------------------------------------- what the variant figures plot

POINT_SCHEMA: dict[str, pl.DataType] = {
    "run_id": _STR, "hardware": _STR, "model": _STR, "arch": _STR, "impl": _STR, "batch_size": _I64,
    "prompt_length": _I64, "generation_length": _I64, "steps": _I64, "block_length": _I64, "sampler_setting": _STR,
    "latency_s": _F64, "tokens_per_s": _F64, "tokens_per_forward": _F64, "metric": _STR, "quality": _F64,
    "quality_low": _F64, "quality_high": _F64,
}


def variant_points(table: pl.DataFrame, quality_by_run: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Every successful run (vanilla and variants) with its median latency, throughput, tokens per forward and
    its quality on `metric` (median over prompts with its interval; report.analysis.quality.quality_by_run of every run),
    schema POINT_SCHEMA: what the variant Pareto and tokens-per-forward figures place."""
    quality = quality_by_run.filter(pl.col("metric") == metric).select(
        "run_id", "metric", pl.col("value").alias("quality"), pl.col("interval_low").alias("quality_low"),
        pl.col("interval_high").alias("quality_high"))
    ok = with_sampler_setting(table).filter((pl.col("status") == "ok") & pl.col("latency_e2e_s_median").is_not_null())
    joined = ok.join(quality, on="run_id").with_columns(
        pl.col("latency_e2e_s_median").alias("latency_s"), pl.col("tokens_per_s_median").alias("tokens_per_s"),
        pl.col("impl").fill_null(VANILLA))
    return joined.select(list(POINT_SCHEMA)).cast(POINT_SCHEMA).sort(
        ["arch", "model", pl.col("impl") != VANILLA, "impl", "generation_length", "batch_size", "steps"],
        nulls_last=True)


def idle_confidence_rules(variants: pl.DataFrame) -> list[str]:
    """Variants whose confidence rule (threshold or factor: forwards measured per repetition) never ended a block
    early: as many forwards as vanilla at every point they ran. Their speedup cannot come from the rule."""
    ruled = variants.filter((pl.col("forwards_source") == "measured") & pl.col("vanilla_forwards").is_not_null())
    idle = ruled.group_by("model", "impl").agg((pl.col("forwards") >= pl.col("vanilla_forwards")).all().alias("idle"))
    return sorted(f"{m} {i}" for m, i, flag in idle.iter_rows() if flag)


# ---------------------------------------------------------------- for the terminal


def variants_text(variants: pl.DataFrame) -> str:
    """The Variants section in a few lines for the terminal, printed after the Findings: per variant curve the
    speedup at the smallest and the largest batch with their intervals, forwards, the quality deltas there, the
    cache, and where it stops paying off. Empty without variant runs."""
    compared = variants.filter(pl.col("speedup").is_not_null())
    if not compared.height:
        return ""
    lines = ["Variants (speedup over vanilla at the same point; > 1: faster)"]
    verdicts = {tuple(r[k] for k in CURVE_KEYS): r["statement"] for r in payoff_table(variants).iter_rows(named=True)}
    for key, curve in compared.group_by(list(CURVE_KEYS), maintain_order=True):
        curve = curve.sort("batch_size")
        steps = "" if key[CURVE_KEYS.index("steps")] is None else f", {key[CURVE_KEYS.index('steps')]} steps"
        lines.append(f"  {key[1]} {key[3]} (N_out {key[5]}{steps})")
        ends = [curve.row(0, named=True)] + ([curve.row(-1, named=True)] if curve.height > 1 else [])
        for r in ends:
            deltas = "; ".join(
                f"Δ {m} {r[f'{m}_delta']:+.3g} [{r[f'{m}_delta_low']:+.3g}, {r[f'{m}_delta_high']:+.3g}]"
                for m in DELTA_METRICS
                if r[f"{m}_delta"] is not None and r[f"{m}_delta_low"] is not None
            )
            cache = f"; KV cache {fmt_bytes(r['cache_bytes'])}" if r["cache_bytes"] is not None else ""
            predicted = f"; roofline {r['predicted_speedup']:.3g}x" if r["predicted_speedup"] is not None else ""
            lines.append(
                f"    B = {r['batch_size']}: {r['speedup']:.3g}x {bracket(r['speedup_low'], r['speedup_high'])} "
                f"({r['speedup_interval']}){predicted}; forwards "
                f"{r['vanilla_forwards']:g} -> {r['forwards']:g}" + (f"; {deltas}" if deltas else "") + cache)
        lines.append(f"    {verdicts[key]}")
    return "\n".join(lines)
