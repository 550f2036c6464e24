"""How good is an extrapolated LLaDA latency? The sweep's own check runs answer it (controls.extrapolation).

A budgeted sweep times only the first K steps of a LLaDA generation and extrapolates the rest from their mean
(`Samples.extrapolated`); at the spec's check points the same configuration also runs in full. A vanilla step
costs the same whatever the step count, so every extrapolated run is checked against the full runs at its shape
(its lengths, batch and block, any step count): its median timed step over theirs. A run off by more than
EXTRAPOLATION_TOLERANCE is `extrapolation_suspect`, and the speedups and B* leave it out. Everything else in the
report reads one row per grid point (`report.table.full_where_measured`), so the two kinds are never mixed.
"""

from __future__ import annotations

import math

import polars as pl

from report.table import GRID_POINT
from specs.results import EXTRAPOLATION_TOLERANCE

CHECK_SCHEMA: dict[str, pl.DataType] = {
    "hardware": pl.String, "model": pl.String, "batch_size": pl.Int64, "prompt_length": pl.Int64,
    "generation_length": pl.Int64, "steps": pl.Int64, "timed_steps": pl.Int64, "step_s": pl.Float64,
    "full_step_s": pl.Float64, "full_steps": pl.String, "step_ratio": pl.Float64, "suspect": pl.Boolean,
    "extrapolated_median_s": pl.Float64, "full_median_s": pl.Float64, "ratio": pl.Float64,
    "extrapolated_n": pl.Int64, "full_n": pl.Int64,
}


def _extrapolated() -> pl.Expr:
    return pl.col("extrapolated").fill_null(False)


def with_extrapolation_check(table: pl.DataFrame) -> pl.DataFrame:
    """`table` with `extrapolation_step_ratio` (an extrapolated run's median timed step over the median step of
    the successful full runs at its shape) and `extrapolation_suspect` (that ratio off 1 by more than the
    tolerance, either way); both null where a run is not extrapolated or no full run shares its shape."""
    if not table.height or "extrapolated" not in table.columns:
        return table
    shape = [k for k in GRID_POINT if k != "steps" and k in table.columns]
    full = (pl.col("status") == "ok") & ~_extrapolated()
    full_step = pl.when(full).then(pl.col("step_s_median")).median().over(shape)
    ratio = pl.when(_extrapolated() & (pl.col("status") == "ok")).then(pl.col("step_s_median") / full_step)
    return table.with_columns(ratio.alias("extrapolation_step_ratio")).with_columns(
        (pl.col("extrapolation_step_ratio").log().abs() > math.log1p(EXTRAPOLATION_TOLERANCE))
        .alias("extrapolation_suspect"))


def trusted(table: pl.DataFrame) -> pl.DataFrame:
    """The rows whose latency stands: every row but an extrapolation that failed its check."""
    if "extrapolation_suspect" not in table.columns:
        return table
    return table.filter(~pl.col("extrapolation_suspect").fill_null(False))


def checked_pairs(table: pl.DataFrame, value: str) -> pl.DataFrame:
    """Each check point's extrapolated row beside its full row (columns suffixed `_full`), among the successful
    rows that have `value`; empty where the table has no such pair."""
    if "extrapolated" not in table.columns or value not in table.columns:
        return table.clear()
    ok = table.filter((pl.col("status") == "ok") & pl.col(value).is_not_null())
    keys = [k for k in GRID_POINT if k in ok.columns]
    return ok.filter(_extrapolated()).join(ok.filter(~_extrapolated()), on=keys, how="inner", suffix="_full",
                                           nulls_equal=True)


def extrapolation_checks(table: pl.DataFrame) -> pl.DataFrame:
    """One row per extrapolated run that a full run checks (schema CHECK_SCHEMA): its median timed step beside
    the full runs' at its shape, their ratio and whether it is suspect; where the same step count also ran in
    full, both median latencies, their ratio and the repetitions each rests on. A ratio near 1 means the first
    K steps stand for the whole generation."""
    checked = with_extrapolation_check(table)
    if not checked.height or checked["extrapolation_step_ratio"].is_null().all():
        return pl.DataFrame(schema=CHECK_SCHEMA)
    shape = [k for k in GRID_POINT if k != "steps" and k in checked.columns]
    full = checked.filter((pl.col("status") == "ok") & ~_extrapolated()).group_by(shape).agg(
        pl.col("step_s_median").median().alias("full_step_s"),
        pl.col("steps").unique().sort().cast(pl.String).str.join(", ").alias("full_steps"))
    same = checked_pairs(checked, "latency_e2e_s_median").select(
        "run_id", pl.col("latency_e2e_s_median_full").alias("full_median_s"),
        pl.col("latency_e2e_s_n_full").alias("full_n"))
    rows = checked.filter(pl.col("extrapolation_step_ratio").is_not_null()).join(
        full, on=shape, how="left", nulls_equal=True).join(same, on="run_id", how="left")
    return rows.select(
        "hardware", "model", "batch_size", "prompt_length", "generation_length", "steps", "timed_steps",
        pl.col("step_s_median").alias("step_s"), "full_step_s", "full_steps",
        pl.col("extrapolation_step_ratio").alias("step_ratio"), pl.col("extrapolation_suspect").alias("suspect"),
        pl.col("latency_e2e_s_median").alias("extrapolated_median_s"), "full_median_s",
        (pl.col("latency_e2e_s_median") / pl.col("full_median_s")).alias("ratio"),
        pl.col("latency_e2e_s_n").alias("extrapolated_n"), "full_n",
    ).cast(CHECK_SCHEMA).sort(["hardware", "model", "generation_length", "prompt_length", "batch_size", "steps"])


def extrapolated_share(table: pl.DataFrame) -> tuple[int, int]:
    """(extrapolated, all) among the rows a figure reads: how many of its latencies were not timed in full."""
    if "extrapolated" not in table.columns:
        return 0, table.height
    return int(table["extrapolated"].fill_null(False).sum()), table.height
