"""Quality per run and per setting, and the parity table, in the shapes the figures and sections read.

Per-run quality (Pareto) is the median over prompts with a bootstrap CI, from the flat table. Per-setting
quality (quality vs steps, block ablation) and the parity table come from report/quality_analysis.py (the
study's statistics, paired bootstraps); without that module the per-run numbers stand in for the settings and
the parity table is left out with a note.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import polars as pl

from report import stats
from report.table import HIGHER_IS_BETTER, QUALITY_METRICS

QUALITY_MODULE = "report.quality_analysis"
# The metrics the figures and the headline parity table show (DESIGN: BERTScore F1, generative perplexity).
FIGURE_METRICS = ("bertscore_f1", "gen_ppl")
GENERATED = "generated"
# A setting: one quality-vs-steps point; batch size is left out (greedy output does not depend on it).
SETTING_KEYS = ("hardware", "model", "arch", "prompt_length", "generation_length", "steps", "block_length",
                "remasking", "cfg_scale", "continuation")
STATISTIC = "median over prompts"

BY_RUN_SCHEMA = {"run_id": pl.String, "metric": pl.String, "value": pl.Float64, "ci_low": pl.Float64,
                 "ci_high": pl.Float64, "n": pl.Int64}
BY_SETTING_SCHEMA = {
    "hardware": pl.String, "model": pl.String, "arch": pl.String, "prompt_length": pl.Int64,
    "generation_length": pl.Int64, "steps": pl.Int64, "block_length": pl.Int64, "remasking": pl.String,
    "cfg_scale": pl.Float64, "continuation": pl.String, "temperature": pl.Float64, "batch_size": pl.Int64,
    "metric": pl.String, "value": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64,
    "higher_is_better": pl.Boolean,
}
PARITY_MARKER_SCHEMA = {
    "hardware": pl.String, "model": pl.String, "prompt_length": pl.Int64, "generation_length": pl.Int64,
    "block_length": pl.Int64, "batch_size": pl.Int64, "metric": pl.String, "s_parity": pl.Float64,
    "s_parity_ci_low": pl.Float64, "s_parity_ci_high": pl.Float64, "statement": pl.String,
}


@dataclass(frozen=True)
class QualityData:
    """by_run: one row per (run, metric). by_setting: one row per setting and metric (the smallest batch size
    stands for the setting). parity: the quality module's parity table (None without it). parity_markers: the
    S_parity of each figure-2 curve (schema PARITY_MARKER_SCHEMA), None without a parity analysis."""

    by_run: pl.DataFrame
    by_setting: pl.DataFrame
    parity: pl.DataFrame | None
    source: str
    notes: tuple[str, ...] = ()
    parity_markers: pl.DataFrame | None = None


def quality_by_run(table: pl.DataFrame) -> pl.DataFrame:
    """Median over prompts of each metric of each successful run, with a bootstrap 95% CI of the median."""
    rows = []
    for run in table.filter(pl.col("status") == "ok").iter_rows(named=True):
        for metric in QUALITY_METRICS:
            values = run[f"{metric}_samples"] or []
            if values:
                low, high = stats.bootstrap_ci(values)
                rows.append((run["run_id"], metric, stats.median(values), low, high, len(values)))
    return pl.DataFrame(rows, schema=BY_RUN_SCHEMA, orient="row")


def _smallest_batch(frame: pl.DataFrame) -> pl.DataFrame:
    keys = [*SETTING_KEYS, "metric"]
    return frame.sort("batch_size").unique(keys, keep="first", maintain_order=True)


def quality_by_setting(table: pl.DataFrame, by_run: pl.DataFrame) -> pl.DataFrame:
    """Per-setting quality from the per-run numbers: the run at the smallest batch size stands for its setting."""
    if not by_run.height:
        return pl.DataFrame(schema=BY_SETTING_SCHEMA)
    joined = by_run.join(
        table.select("run_id", "batch_size", "temperature", *[k for k in SETTING_KEYS if k != "continuation"]),
        on="run_id",
    ).with_columns(pl.lit(GENERATED).alias("continuation"))
    out = _smallest_batch(joined).with_columns(
        pl.col("metric").replace_strict(HIGHER_IS_BETTER, default=True).alias("higher_is_better")
    )
    return out.select(list(BY_SETTING_SCHEMA)).cast(BY_SETTING_SCHEMA).sort(_SETTING_ORDER, nulls_last=True)


_SETTING_ORDER = ["hardware", "metric", "arch", "model", "generation_length", "block_length", "continuation", "steps"]


def quality_data(results: list, table: pl.DataFrame) -> QualityData:
    """The quality frames for the figures and sections, from the quality module when it imports and runs."""
    by_run = quality_by_run(table)
    try:
        module = importlib.import_module(QUALITY_MODULE)
    except ImportError:
        return QualityData(
            by_run, quality_by_setting(table, by_run), None, "per-run medians over prompts (report/quality.py)",
            ("The parity analysis (report/quality_analysis.py) is not available: no S_parity, no parity table.",),
        )
    try:
        long = module.quality_long_table(results)
        by_setting = setting_frame(module.quality_vs_steps(long))
        parity = module.parity_table(long)
    except Exception as exc:
        return QualityData(by_run, quality_by_setting(table, by_run), None,
                           "per-run medians over prompts (report/quality.py)",
                           (f"The parity analysis failed ({exc.__class__.__name__}: {exc}); no parity table.",))
    return QualityData(by_run, by_setting, parity, "report/quality_analysis.py", (), parity_markers(parity))


def setting_frame(vs_steps: pl.DataFrame) -> pl.DataFrame:
    """quality_analysis.quality_vs_steps → BY_SETTING_SCHEMA: the run's own and LLaMA's sampled continuations
    (not the calibration texts), the smallest batch size per setting."""
    rows = vs_steps.filter(pl.col("continuation").is_in([GENERATED, "sampled"])).rename({
        "value_median": "value", "value_ci_low": "ci_low", "value_ci_high": "ci_high", "n_prompts": "n",
    })
    if not rows.height:
        return pl.DataFrame(schema=BY_SETTING_SCHEMA)
    return _smallest_batch(rows).select(list(BY_SETTING_SCHEMA)).cast(BY_SETTING_SCHEMA).sort(_SETTING_ORDER, nulls_last=True)


def parity_markers(parity: pl.DataFrame) -> pl.DataFrame:
    """S_parity per (hardware, LLaDA model, lengths, block length, metric) against LLaMA's greedy output, at the
    smallest batch size (quality does not depend on it; the speedup, in the parity table, does)."""
    rows = parity.filter((pl.col("row_kind") == "parity") & (pl.col("reference") == "llama greedy"))
    if not rows.height:
        return pl.DataFrame(schema=PARITY_MARKER_SCHEMA)
    rows = rows.sort("batch_size").unique(
        ["hardware", "llada_model", "prompt_length", "generation_length", "block_length", "remasking", "cfg_scale",
         "metric"], keep="first", maintain_order=True,
    )
    return rows.select(
        "hardware", pl.col("llada_model").alias("model"), "prompt_length", "generation_length", "block_length",
        "batch_size", "metric", pl.col("s_parity_steps").cast(pl.Float64).alias("s_parity"),
        pl.col("s_parity_ci_low_steps").cast(pl.Float64).alias("s_parity_ci_low"),
        pl.col("s_parity_ci_high_steps").cast(pl.Float64).alias("s_parity_ci_high"), "statement",
    ).cast(PARITY_MARKER_SCHEMA)
