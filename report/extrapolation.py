"""How good is an extrapolated LLaDA latency? The sweep's own check runs answer it (controls.extrapolation).

A budgeted sweep times only the first K steps of a LLaDA generation and extrapolates the rest from their mean
(`Samples.extrapolated`); at the spec's check points the same configuration also runs in full. This module
pairs the two at each check point; everything else in the report reads one row per grid point
(`report.table.full_where_measured`), so the two are never mixed.
"""

from __future__ import annotations

import polars as pl

from report.table import GRID_POINT

CHECK_SCHEMA: dict[str, pl.DataType] = {
    "hardware": pl.String, "model": pl.String, "batch_size": pl.Int64, "prompt_length": pl.Int64,
    "generation_length": pl.Int64, "steps": pl.Int64, "timed_steps": pl.Int64,
    "extrapolated_median_s": pl.Float64, "full_median_s": pl.Float64, "ratio": pl.Float64,
    "extrapolated_n": pl.Int64, "full_n": pl.Int64,
}


def checked_pairs(table: pl.DataFrame, value: str) -> pl.DataFrame:
    """Each check point's extrapolated row beside its full row (columns suffixed `_full`), among the successful
    rows that have `value`; empty where the table has no such pair."""
    if "extrapolated" not in table.columns or value not in table.columns:
        return table.clear()
    ok = table.filter((pl.col("status") == "ok") & pl.col(value).is_not_null())
    keys = [k for k in GRID_POINT if k in ok.columns]
    extrapolated = ok.filter(pl.col("extrapolated").fill_null(False))
    full = ok.filter(~pl.col("extrapolated").fill_null(False))
    return extrapolated.join(full, on=keys, how="inner", suffix="_full", nulls_equal=True)


def extrapolation_checks(table: pl.DataFrame) -> pl.DataFrame:
    """One row per check point: the extrapolated and the full median latency, their ratio and the repetitions
    each rests on. A ratio near 1 means the first K steps stand for the whole generation."""
    paired = checked_pairs(table, "latency_e2e_s_median")
    if not paired.height:
        return pl.DataFrame(schema=CHECK_SCHEMA)
    return paired.select(
        "hardware", "model", "batch_size", "prompt_length", "generation_length", "steps", "timed_steps",
        pl.col("latency_e2e_s_median").alias("extrapolated_median_s"),
        pl.col("latency_e2e_s_median_full").alias("full_median_s"),
        (pl.col("latency_e2e_s_median") / pl.col("latency_e2e_s_median_full")).alias("ratio"),
        pl.col("latency_e2e_s_n").alias("extrapolated_n"),
        pl.col("latency_e2e_s_n_full").alias("full_n"),
    ).cast(CHECK_SCHEMA).sort(["hardware", "model", "generation_length", "batch_size", "steps"])


def extrapolated_share(table: pl.DataFrame) -> tuple[int, int]:
    """(extrapolated, all) among the rows a figure reads: how many of its latencies were not timed in full."""
    if "extrapolated" not in table.columns:
        return 0, table.height
    return int(table["extrapolated"].fill_null(False).sum()), table.height
