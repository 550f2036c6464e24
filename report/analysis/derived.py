"""Derived data the figures plot: Pareto frontiers, ITL by context, step time by length, the memory grid.

Pure functions of the flat results table; the figure modules only select and draw what these return. The per-run
views (ITL by context, step time, the memory grid) read the vanilla runs only: variants are compared in
report.analysis.variants.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from report.analysis import stats
from report.answer.pairing.pairs import is_ar, is_dllm
from report.table.flat import vanilla_runs


def pareto_front(points: pl.DataFrame, *, x: str, y: str, higher_is_better: bool = True) -> pl.DataFrame:
    """Rows not dominated by another row (lower-or-equal x and better-or-equal y, one strictly), sorted by x.

    Lower x (latency) is always better; `higher_is_better` says which way y (quality) points.
    """
    clean = points.filter(pl.col(x).is_not_null() & pl.col(y).is_not_null() & pl.col(x).is_finite()
                          & pl.col(y).is_finite())
    if not clean.height:
        return clean
    sign = 1.0 if higher_is_better else -1.0
    ordered = clean.with_columns((pl.col(y) * sign).alias("_score")).sort([x, "_score"], descending=[False, True])
    keep, best = [], -np.inf
    for score in ordered["_score"].to_list():
        keep.append(score > best)
        best = max(best, score)
    return ordered.filter(pl.Series(keep)).drop("_score")


def itl_by_context(df: pl.DataFrame) -> pl.DataFrame:
    """Autoregressive inter-token latency against the context each decode pass attends.

    Decode pass i (1-based) of a run follows the prefill, so it attends prompt_length + i positions. For each
    (model, batch size, prompt length) the run with the longest generation is used (it covers the shorter
    contexts); its per-pass times are reduced to the median over repetitions.
    """
    llama = vanilla_runs(df).filter(
        is_ar() & (pl.col("status") == "ok") & (pl.col("itl_s_samples").list.len() > 0))
    schema = {"model": pl.String, "batch_size": pl.Int64, "prompt_length": pl.Int64, "generation_length": pl.Int64,
              "run_id": pl.String, "context_length": pl.Int64, "itl_s_median": pl.Float64}
    if not llama.height:
        return pl.DataFrame(schema=schema)
    longest = llama.sort("generation_length", descending=True).unique(
        ["model", "batch_size", "prompt_length"], keep="first", maintain_order=True
    )
    rows = []
    for run in longest.iter_rows(named=True):
        reps = [r for r in run["itl_s_samples"] if r]
        width = min(len(r) for r in reps)
        per_pass = np.median(np.asarray([r[:width] for r in reps], dtype=np.float64), axis=0)
        for i, value in enumerate(per_pass, start=1):
            rows.append((run["model"], run["batch_size"], run["prompt_length"], run["generation_length"],
                         run["run_id"], run["prompt_length"] + i, float(value)))
    return pl.DataFrame(rows, schema=schema, orient="row").sort(["model", "batch_size", "prompt_length", "context_length"])


def step_time_by_length(df: pl.DataFrame) -> pl.DataFrame:
    """Diffusion time per step by (model, batch size, sequence length), over every run that shares them (different
    step counts, block lengths and algs run the same full-sequence forward each step): the median of the runs'
    median steps and the range of them (never a bootstrap of their pooled repetitions, which are not independent
    draws of one run)."""
    llada = vanilla_runs(df).filter(
        is_dllm() & (pl.col("status") == "ok") & pl.col("step_s_median").is_not_null())
    rows = []
    for (model, batch, length), runs in llada.group_by(["model", "batch_size", "sequence_length"]):
        medians = runs["step_s_median"].to_list()
        rows.append((model, batch, length, stats.median(medians), min(medians), max(medians), stats.RANGE,
                     runs.height, runs.height))
    schema = {"model": pl.String, "batch_size": pl.Int64, "sequence_length": pl.Int64, "step_s_median": pl.Float64,
              "step_s_interval_low": pl.Float64, "step_s_interval_high": pl.Float64, "step_s_interval": pl.String,
              "step_s_n": pl.Int64, "runs": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row").sort(["model", "batch_size", "sequence_length"])


def memory_grid(df: pl.DataFrame) -> pl.DataFrame:
    """One cell per (model, sequence length, batch size): the largest peak of its runs, and its state.

    State: "oom" if any run of the cell ran out of memory, else "ok" when a peak was measured, else
    "error" (the runs failed for another reason). A diffusion model's steps, block lengths and algs share a cell:
    they do not change what is held in memory at once.
    """
    keyed = vanilla_runs(df).filter(pl.col("status").is_in(["ok", "oom", "error", "crashed"]))
    return (
        keyed.group_by(["model", "arch", "sequence_length", "batch_size"])
        .agg(
            pl.col("peak_memory_bytes").max().alias("peak_memory_bytes"),
            (pl.col("status") == "oom").any().alias("_oom"),
            pl.col("peak_memory_kind").drop_nulls().first().alias("peak_memory_kind"),
        )
        .with_columns(
            pl.when(pl.col("_oom")).then(pl.lit("oom"))
            .when(pl.col("peak_memory_bytes").is_not_null()).then(pl.lit("ok"))
            .otherwise(pl.lit("error")).alias("state")
        )
        .drop("_oom")
        .sort(["arch", "model", "sequence_length", "batch_size"])
    )
