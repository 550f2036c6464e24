"""Degenerate text: a text whose diversity falls short of the human continuation's by more than the spec's margin.

A judge's perplexity rewards repetition: the miniature LLaDA at one step, four fifths of its word bigrams repeats,
scores a lower perplexity than at 2, 4 or 8 steps. So no perplexity is read as quality without its diversity beside
it, measured against the human continuation of the same prompts: the median over prompts of distinct-2 (unique word
bigrams / word bigrams, workers/quality/degeneracy.py; 1 − the repeated-bigram rate). A setting whose median falls
below the human text's by more than `quality.parity.diversity_margin` is *degenerate*: it reaches no parity, and a
reference that is degenerate decides none (report/analysis/parity.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

DIVERSITY = "distinct_2"
DIVERSITY_LABEL = "distinct-2"
REPETITION = "repeated_bigram_rate"


@dataclass(frozen=True)
class Floor:
    """The least diversity a text may have: the human continuation's median less the margin."""

    human: float
    margin: float

    def degenerate(self, value: float | None) -> bool:
        return value is not None and value < self.human - self.margin

    def shortfall(self, value: float) -> str:
        """'distinct-2 0.41 against the human text's 0.93, short by more than 0.1'."""
        return (f"{DIVERSITY_LABEL} {value:.2f} against the human text's {self.human:.2f}, short by more than "
                f"{self.margin:g}")


def median_diversity(rows: pl.DataFrame, metric: str = DIVERSITY) -> float | None:
    """The median over prompts of a text's diversity (per prompt the median over its samples, from the first run of
    the setting): rows are long-table rows of one text at one setting, any metric."""
    rows = rows.filter(pl.col("metric") == metric)
    if not rows.height:
        return None
    first = rows.filter(pl.col("run_id") == rows.sort("run_id")["run_id"][0])
    value = first.group_by("prompt_id").agg(pl.col("value").median())["value"].median()
    return None if value is None else float(value)


def human_floor(human: pl.DataFrame, margin: float) -> Floor | None:
    """The floor set by the human continuations (`human`: their long-table rows at one grid point); None where
    degeneracy was not scored."""
    level = median_diversity(human)
    return None if level is None else Floor(level, margin)


def curve_diversity(rows: pl.DataFrame, steps: list[int]) -> list[float | None]:
    """The diversity of a diffusion curve's text at each swept step count (rows: the curve at its quality batch)."""
    return [median_diversity(rows.filter(pl.col("steps") == k)) for k in steps]


def degenerate_steps(floor: Floor | None, steps: list[int], diversity: list[float | None]) -> list[int]:
    return [] if floor is None else [k for k, v in zip(steps, diversity) if floor.degenerate(v)]


def diversity_columns(floor: Floor | None, reference: float | None, steps: list[int],
                      diversity: list[float | None]) -> dict[str, Any]:
    """A parity row's diversity: the human level, the margin, the reference's, and the step counts degenerate."""
    return {
        "human_diversity": None if floor is None else floor.human,
        "diversity_margin": None if floor is None else floor.margin,
        "reference_diversity": reference,
        "reference_degenerate": floor is not None and floor.degenerate(reference),
        "degenerate_steps": degenerate_steps(floor, steps, diversity),
    }


def setting_diversity(own: pl.DataFrame, human: pl.DataFrame, keys: list[str], margin: float | None) -> pl.DataFrame:
    """Per setting (`keys`, at the rows' batch), its median distinct-2 (per prompt the median over samples), the human
    continuation's at the same grid point, and whether the setting is degenerate (None where no margin is given).
    `own`: the settings' long rows; `human`: the human continuations' long rows."""
    grid = ["sweep", "hardware", "prompt_length", "generation_length"]
    per_prompt = own.filter(pl.col("metric") == DIVERSITY).group_by([*keys, "prompt_id"]).agg(pl.col("value").median())
    level = per_prompt.group_by(keys).agg(pl.col("value").median().alias("diversity"))
    first = human.filter(pl.col("metric") == DIVERSITY).sort("run_id").unique([*grid, "prompt_id"], keep="first")
    floor = first.group_by(grid).agg(pl.col("value").median().alias("human_diversity"))
    out = level.join(floor, on=grid, how="left", nulls_equal=True)
    degenerate = (pl.col("diversity") < pl.col("human_diversity") - margin) if margin is not None else pl.lit(None)
    return out.with_columns(degenerate.cast(pl.Boolean).alias("degenerate"))


def repetition_beside(long: pl.DataFrame, where: dict[str, Any], reference: pl.DataFrame,
                      s_parity: int | None) -> dict[str, float | None]:
    """The repeated-bigram rate of the reference's texts and of the diffusion model's at S_parity, shown beside every
    perplexity. `where`: the curve's key and quality batch; `reference`: the reference's rows at any metric."""
    at = reference.filter(pl.col("metric") == REPETITION)
    llada = long.clear() if s_parity is None else long.filter(
        (pl.col("metric") == REPETITION) & (pl.col("sweep") == where["sweep"])
        & (pl.col("hardware") == where["hardware"]) & (pl.col("model") == where["model"])
        & (pl.col("prompt_length") == where["prompt_length"])
        & (pl.col("generation_length") == where["generation_length"]) & (pl.col("continuation") == "generated")
        & (pl.col("steps") == s_parity) & (pl.col("batch_size") == where["batch_size"])
        & pl.col("block_length").eq_missing(where["block_length"])
        & pl.col("sampler_setting").eq_missing(where["sampler_setting"]))
    return {
        "reference_repetition": float(at.unique("prompt_id")["value"].median()) if at.height else None,
        "llada_repetition_at_parity": float(llada["value"].median()) if llada.height else None,
    }
