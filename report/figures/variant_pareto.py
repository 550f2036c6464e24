"""Figure 13: the latency-quality Pareto frontier with every implementation variant beside vanilla."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.analysis import pareto_front
from report.figures.common import (
    FigureData,
    FigureSkipped,
    Panel,
    Series,
    attach,
    caption,
    draw_impl_series,
    figure_legend,
    impl_styles,
    new_figure,
    one_hardware,
    plain_log_axis,
    tuple_of,
)
from report.figures.quality import CI_NOTE, METRIC_LABEL, metric_label
from report.table import HIGHER_IS_BETTER


def variant_pareto(df: pl.DataFrame, points: pl.DataFrame, metric: str) -> Figure:
    """Median end-to-end latency (x, log) against quality (y) for every run, vanilla and variants: each
    (model, implementation) a curve over LLaDA's steps (a point for LLaMA), the Pareto frontier of them all
    dashed. One panel per generation length and batch size (latencies of different batches are not
    comparable). `df`: this hardware's rows of the flat table; `points`: report.variants.variant_points."""
    name = f"variant_pareto_{metric}"
    hardware = one_hardware(df, name)
    points = points.filter(pl.col("hardware") == hardware)
    if points.filter(pl.col("impl") != "vanilla").height == 0:
        raise FigureSkipped("no variant run has both a latency and a "
                            f"{METRIC_LABEL.get(metric, metric)} value")
    styles = impl_styles(points["impl"].to_list())
    keys = points.select("prompt_length", "generation_length", "batch_size").unique().sort(
        ["generation_length", "prompt_length", "batch_size"]).rows(named=True)
    fig, axes = new_figure(len(keys), columns=3, panel_size=(4.8, 3.8))
    panels = []
    for ax, key in zip(axes, keys):
        sub = points.filter(pl.all_horizontal(pl.col(k) == v for k, v in key.items()))
        series = []
        for (arch, model, impl), rows in sub.group_by(["arch", "model", "impl"], maintain_order=True):
            rows = rows.sort("steps", nulls_last=True)
            s = Series(f"{model}: {impl}", "line" if arch == "llada" else "points", tuple_of(rows["latency_s"]),
                       tuple_of(rows["quality"]), tuple_of(rows["quality_low"]), tuple_of(rows["quality_high"]),
                       arch=arch, model=model,
                       markers=tuple("" if k is None else str(k) for k in rows["steps"].to_list()))
            series.append(s)
            draw_impl_series(ax, s, styles[impl])
        front = pareto_front(sub, x="latency_s", y="quality", higher_is_better=HIGHER_IS_BETTER.get(metric, True))
        frontier = Series("Pareto frontier", "frontier", tuple_of(front["latency_s"]), tuple_of(front["quality"]),
                          markers=tuple(front["run_id"].to_list()))
        series.append(frontier)
        ax.step(frontier.x, frontier.y, where="post", color="#444444", linestyle="--", linewidth=1.0,
                label=frontier.label, zorder=1)
        ax.scatter(frontier.x, frontier.y, s=90, facecolors="none", edgecolors="#444444", linewidths=1.0, zorder=4)
        plain_log_axis(ax, "x")
        title = f"N_out = {key['generation_length']}, prompt {key['prompt_length']}, B = {key['batch_size']}"
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("end-to-end latency, median (s)")
        ax.set_ylabel(metric_label(metric))
        panels.append(Panel(title, ax.get_xlabel(), ax.get_ylabel(), "log", "linear", tuple(series)))
    figure_legend(fig, axes)
    fig.suptitle(f"Latency vs quality ({METRIC_LABEL.get(metric, metric)}) with every variant: the Pareto frontier")
    notes = (CI_NOTE + " LLaDA points are labelled with their step count; circled points are on the frontier.",)
    return attach(fig, FigureData(name, hardware, caption(df, hardware), tuple(panels), notes))
