"""Figure 14: quality against tokens per forward pass with every implementation variant beside vanilla."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

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
    power_of_two_axis,
    tuple_of,
)
from report.figures.quality import CI_NOTE, METRIC_LABEL, metric_label

SERIES_KEYS = ("arch", "model", "impl", "prompt_length", "generation_length", "block_length")


def variant_quality_vs_tokens_per_forward(df: pl.DataFrame, points: dict[str, pl.DataFrame]) -> Figure:
    """Quality (y) against tokens per forward (x, log2: N_out over the forwards that ran, a confidence rule's
    measured median) for every run at its smallest batch size: one line per model, implementation and lengths
    over LLaDA's steps. One panel per metric. `df`: this hardware's rows of the flat table; `points`: per metric,
    report.variants.variant_points."""
    name = "variant_quality_vs_tokens_per_forward"
    hardware = one_hardware(df, name)
    chosen = {m: _smallest_batch(p.filter((pl.col("hardware") == hardware) & pl.col("tokens_per_forward").is_not_null()))
              for m, p in points.items()}
    chosen = {m: p for m, p in chosen.items() if p.filter(pl.col("impl") != "vanilla").height}
    if not chosen:
        raise FigureSkipped("no variant run has both tokens per forward and a quality value")
    styles = impl_styles([i for p in chosen.values() for i in p["impl"].to_list()])
    fig, axes = new_figure(len(chosen), columns=2, panel_size=(5.2, 4.0))
    panels = []
    for ax, (metric, sub) in zip(axes, chosen.items()):
        series = []
        for key in sub.select(SERIES_KEYS).unique().sort(list(SERIES_KEYS), nulls_last=True).rows(named=True):
            rows = sub.filter(pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in key.items())).sort("tokens_per_forward")
            label = f"{key['model']}: {key['impl']}, N_out = {key['generation_length']}"
            s = Series(label, "line" if key["arch"] == "llada" else "points", tuple_of(rows["tokens_per_forward"]),
                       tuple_of(rows["quality"]), tuple_of(rows["quality_low"]), tuple_of(rows["quality_high"]),
                       arch=key["arch"], model=key["model"],
                       markers=tuple("" if k is None else str(k) for k in rows["steps"].to_list()))
            series.append(s)
            draw_impl_series(ax, s, styles[key["impl"]])
        power_of_two_axis(ax, "x", [x for s in series for x in s.x])
        ax.set_title(METRIC_LABEL.get(metric, metric))
        ax.set_xlabel("tokens per forward pass (N_out / forwards)")
        ax.set_ylabel(metric_label(metric))
        panels.append(Panel(ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), "log2", "linear", tuple(series)))
    figure_legend(fig, axes)
    fig.suptitle("Quality vs tokens per forward pass, every variant")
    notes = (CI_NOTE + " Each run at its smallest batch size; LLaDA points are labelled with their step count (a "
             "confidence rule runs fewer forwards than its steps, so it sits further right).",)
    return attach(fig, FigureData(name, hardware, caption(df, hardware), tuple(panels), notes))


def _smallest_batch(points: pl.DataFrame) -> pl.DataFrame:
    """Each setting's row at its smallest batch size."""
    keys = [*SERIES_KEYS, "steps"]
    smallest = points.group_by(keys).agg(pl.col("batch_size").min())
    return points.join(smallest, on=[*keys, "batch_size"], nulls_equal=True)
