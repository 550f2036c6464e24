"""How good is an extrapolated LLaDA latency? The sweep's own check runs answer it (controls.extrapolation).

A budgeted sweep times only the first K steps of a LLaDA generation and extrapolates the rest from their mean
(`Samples.extrapolated`); at the spec's check points the same configuration also runs in full. A vanilla step
costs the same whatever the step count, so every extrapolated run is checked against the full runs at its shape
(its lengths, batch and block, any step count): the median of its timed steps over the median of theirs, median
against median. A run off by more than EXTRAPOLATION_TOLERANCE is `extrapolation_suspect`, and the speedups and
B* leave it out. An extrapolated run no full run checks (none at its batch and shape) is unchecked, and says so.
Everything else in the report reads one row per grid point (`report.table.flat.full_where_measured`), so the two kinds
are never mixed.

The same premise says every repetition at a vanilla diffusion shape times the same step, whatever its step count:
where those repetitions' median steps split into two modes (`step_modes`), a point there is flagged and its speedup
given at each mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from report.table.flat import GRID_POINT
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
    the successful full runs at its shape, each over every timed step: `step_s_p50`) and `extrapolation_suspect`
    (that ratio off 1 by more than the tolerance, either way); both null where a run is not extrapolated or no full
    run shares its shape."""
    if not table.height or "extrapolated" not in table.columns:
        return table
    shape = shape_columns(table)
    full = (pl.col("status") == "ok") & ~_extrapolated()
    full_step = pl.when(full).then(pl.col("step_s_p50")).median().over(shape)
    ratio = pl.when(_extrapolated() & (pl.col("status") == "ok")).then(pl.col("step_s_p50") / full_step)
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
    shape = shape_columns(checked)
    full = checked.filter((pl.col("status") == "ok") & ~_extrapolated()).group_by(shape).agg(
        pl.col("step_s_p50").median().alias("full_step_s"),
        pl.col("steps").unique().sort().cast(pl.String).str.join(", ").alias("full_steps"))
    same = checked_pairs(checked, "latency_e2e_s_median").select(
        "run_id", pl.col("latency_e2e_s_median_full").alias("full_median_s"),
        pl.col("latency_e2e_s_n_full").alias("full_n"))
    rows = checked.filter(pl.col("extrapolation_step_ratio").is_not_null()).join(
        full, on=shape, how="left", nulls_equal=True).join(same, on="run_id", how="left")
    return rows.select(
        "hardware", "model", "batch_size", "prompt_length", "generation_length", "steps", "timed_steps",
        pl.col("step_s_p50").alias("step_s"), "full_step_s", "full_steps",
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


def shape_columns(table: pl.DataFrame) -> list[str]:
    """The columns of a grid point but its step count: the runs that time the same vanilla step."""
    return [k for k in GRID_POINT if k != "steps" and k in table.columns]


def extrapolation_summary(runs: pl.DataFrame, dllm: str = "LLaDA") -> str | None:
    """'27 of 33 LLaDA runs timed only their first 4 steps and were scaled up to 64x; 18 were checked against a full
    run at their batch and shape (2 failed and are left out), 9 never were (B = 64)': over the successful diffusion
    runs of `runs` (one row per run, `with_extrapolation_check`). None where nothing was extrapolated."""
    if "extrapolated" not in runs.columns:
        return None
    runs = with_extrapolation_check(runs)
    diffusion = runs.filter((pl.col("status") == "ok") & pl.col("steps").is_not_null())
    scaled = diffusion.filter(_extrapolated())
    if not scaled.height:
        return None
    timed = ", ".join(str(t) for t in sorted(set(scaled["timed_steps"].drop_nulls().to_list())))
    factor = max(s / t for s, t in scaled.select("steps", "timed_steps").iter_rows() if t)
    checked = scaled.filter(pl.col("extrapolation_step_ratio").is_not_null())
    failed = checked.filter(pl.col("extrapolation_suspect").fill_null(False)).height
    unchecked = scaled.filter(pl.col("extrapolation_step_ratio").is_null())
    text = (f"{scaled.height} of {diffusion.height} {dllm} runs timed only their first {timed} steps and were "
            f"scaled up to {factor:g}x; {checked.height or 'none'} {'was' if checked.height == 1 else 'were'} checked "
            "against a full run at their batch and shape")
    if failed:
        text += f" ({failed} failed and are left out)"
    if unchecked.height:
        batches = ", ".join(str(b) for b in sorted(set(unchecked["batch_size"].to_list())))
        text += f", {unchecked.height} never were (B = {batches}: unchecked)"
    return text


# ---------------------------------------------------------------- modes of a vanilla step


@dataclass(frozen=True)
class StepModes:
    """Two modes of the repetitions' median step at one vanilla diffusion shape: each mode's median step and how
    many repetitions fell in it."""

    fast_s: float
    slow_s: float
    fast_repetitions: int
    slow_repetitions: int


MIN_MODE_REPETITIONS = 2  # a mode is a cluster of repetitions, never one stray


def split_modes(values: list[float]) -> StepModes | None:
    """Two modes in `values` (positive step times): the largest gap between consecutive sorted values, in log,
    where it exceeds EXTRAPOLATION_TOLERANCE and each side's own spread, with MIN_MODE_REPETITIONS a side; None
    otherwise."""
    logs = np.sort(np.log(np.asarray([v for v in values if v > 0], np.float64)))
    if logs.size < 2 * MIN_MODE_REPETITIONS:
        return None
    gaps = np.diff(logs)[MIN_MODE_REPETITIONS - 1: logs.size - MIN_MODE_REPETITIONS]
    cut = int(gaps.argmax()) + MIN_MODE_REPETITIONS
    fast, slow = logs[:cut], logs[cut:]
    gap = slow[0] - fast[-1]
    if gap <= math.log1p(EXTRAPOLATION_TOLERANCE) or gap <= fast[-1] - fast[0] or gap <= slow[-1] - slow[0]:
        return None
    return StepModes(float(np.exp(np.median(fast))), float(np.exp(np.median(slow))), int(fast.size),
                     int(slow.size))


def step_modes(table: pl.DataFrame) -> dict[tuple, StepModes]:
    """Per vanilla diffusion shape (`_shape`'s columns, as a tuple in that order) whose repetitions' median steps
    split into two modes (`split_modes`), over every successful run there, any step count."""
    if "step_s_samples" not in table.columns or not table.height:
        return {}
    shape = shape_columns(table)
    vanilla = table.filter((pl.col("status") == "ok") & pl.col("steps").is_not_null()
                           & (pl.col("impl").is_null() | (pl.col("impl") == "vanilla")))
    out = {}
    for key, rows in vanilla.group_by(shape, maintain_order=True):
        medians = [float(np.median(rep)) for reps in rows["step_s_samples"].to_list() for rep in reps or [] if rep]
        modes = split_modes(medians)
        if modes is not None:
            out[tuple(key)] = modes
    return out


def shape_key(row: dict, table: pl.DataFrame) -> tuple:
    """A row's key into `step_modes(table)`."""
    return tuple(row.get(k) for k in shape_columns(table))
