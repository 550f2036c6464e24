"""Figure 13: the latency-quality Pareto frontier with every implementation variant beside vanilla."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.figures.axes import plain_log_axis
from report.figures.common import FigureSkipped
from report.figures.frame import Frame
from report.figures.marks import draw_impl_series
from report.figures.quality import (
    CI_NOTE,
    METRIC_LABEL,
    VARIANT_QUALITY,
    draw_frontier,
    metric_label,
    quality_axis,
    quality_series,
)
from report.figures.style import impl_styles
from report.answer.pairing.pairs import table_sides
from report.table.flat import HIGHER_IS_BETTER, with_sampler_setting


def variant_pareto(df: pl.DataFrame, points: pl.DataFrame, metric: str) -> Figure:
    """Median end-to-end latency (x, log) against quality (y) for every run, vanilla and variants: each
    (model, implementation) a curve over LLaDA's steps (a point for LLaMA), the Pareto frontier of them all
    dashed. One panel per generation length and batch size (latencies of different batches are not
    comparable). `df`: this hardware's rows of the flat table; `points`: report.analysis.variants.variant_points."""
    frame = Frame.of(f"variant_pareto_{metric}", df)
    points = with_sampler_setting(points).filter(pl.col("hardware") == frame.hardware)
    if points.filter(pl.col("impl") != "vanilla").height == 0:
        raise FigureSkipped("no variant run has both a latency and a "
                            f"{METRIC_LABEL.get(metric, metric)} value")
    styles = impl_styles(points["impl"].to_list())
    keys = points.select("prompt_length", "generation_length", "batch_size").unique().sort(
        ["generation_length", "prompt_length", "batch_size"]).rows(named=True)
    for ax, key in zip(frame.draw(len(keys), columns=3, panel_size=(4.8, 3.8)), keys):
        sub = points.filter(pl.all_horizontal(pl.col(k) == v for k, v in key.items()))
        series = []
        for (arch, model, impl, alg), rows in sub.group_by(["arch", "model", "impl", "sampler_setting"], maintain_order=True):
            rows = rows.sort("steps", nulls_last=True)
            label = f"{model}: {impl}" + (f", {alg}" if alg else "")
            s = quality_series(label, arch, model, rows, "latency_s", *VARIANT_QUALITY)
            series.append(s)
            draw_impl_series(ax, s, styles[impl])
        series.append(draw_frontier(ax, sub, "latency_s", HIGHER_IS_BETTER.get(metric, True)))
        plain_log_axis(ax, "x")
        frame.panel(ax, f"N_out = {key['generation_length']}, prompt {key['prompt_length']}, B = {key['batch_size']}",
                    "end-to-end latency, median (s)", metric_label(metric), "log", quality_axis(ax, metric), series,
                    title_size=10)
    notes = (CI_NOTE + f" {table_sides(df).dllm} points are labelled with their step count; circled points are on "
             "the frontier.",)
    return frame.finish(f"Latency vs quality ({METRIC_LABEL.get(metric, metric)}) with every variant: the Pareto "
                        "frontier", notes, df)
