"""Figure 14: quality against tokens per forward pass with every implementation variant beside vanilla."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.figures.axes import power_of_two_axis
from report.figures.common import FigureSkipped, matching
from report.figures.frame import Frame
from report.figures.marks import draw_impl_series
from report.figures.quality import (
    CI_NOTE,
    METRIC_LABEL,
    TOKENS_PER_FORWARD,
    VARIANT_QUALITY,
    metric_label,
    quality_axis,
    quality_series,
)
from report.figures.style import impl_styles
from report.answer.pairing.pairs import table_sides
from report.table.flat import with_sampler_setting

SERIES_KEYS = ("arch", "model", "impl", "prompt_length", "generation_length", "block_length", "sampler_setting")


def variant_quality_vs_tokens_per_forward(df: pl.DataFrame, points: dict[str, pl.DataFrame]) -> Figure:
    """Quality (y) against tokens per forward (x, log2: N_out over the forwards that ran, a confidence rule's
    measured median) for every run at its smallest batch size: one line per model, implementation and lengths
    over LLaDA's steps. One panel per metric. `df`: this hardware's rows of the flat table; `points`: per metric,
    report.analysis.variants.variant_points."""
    frame = Frame.of("variant_quality_vs_tokens_per_forward", df)
    chosen = {m: _smallest_batch(with_sampler_setting(p).filter((pl.col("hardware") == frame.hardware)
                                          & pl.col("tokens_per_forward").is_not_null()))
              for m, p in points.items()}
    chosen = {m: p for m, p in chosen.items() if p.filter(pl.col("impl") != "vanilla").height}
    if not chosen:
        raise FigureSkipped("no variant run has both tokens per forward and a quality value")
    styles = impl_styles([i for p in chosen.values() for i in p["impl"].to_list()])
    for ax, (metric, sub) in zip(frame.draw(len(chosen), columns=2, panel_size=(5.2, 4.0)), chosen.items()):
        series = []
        for key in sub.select(SERIES_KEYS).unique().sort(list(SERIES_KEYS), nulls_last=True).rows(named=True):
            rows = matching(sub, key).sort("tokens_per_forward")
            label = f"{key['model']}: {key['impl']}, N_out = {key['generation_length']}" + (
                f", {key['sampler_setting']}" if key["sampler_setting"] else "")
            s = quality_series(label, key["arch"], key["model"], rows, "tokens_per_forward", *VARIANT_QUALITY)
            series.append(s)
            draw_impl_series(ax, s, styles[key["impl"]])
        power_of_two_axis(ax, "x", [x for s in series for x in s.x])
        frame.panel(ax, METRIC_LABEL.get(metric, metric), TOKENS_PER_FORWARD, metric_label(metric), "log2",
                    quality_axis(ax, metric), series)
    notes = (CI_NOTE + f" Each run at its smallest batch size; {table_sides(df).dllm} points are labelled with their "
             "step count (a confidence rule runs fewer forwards than its steps, so it sits further right).",)
    return frame.finish("Quality vs tokens per forward pass, every variant", notes, df)


def _smallest_batch(points: pl.DataFrame) -> pl.DataFrame:
    """Each setting's row at its smallest batch size."""
    keys = [*SERIES_KEYS, "steps"]
    smallest = points.group_by(keys).agg(pl.col("batch_size").min())
    return points.join(smallest, on=[*keys, "batch_size"], nulls_equal=True)
