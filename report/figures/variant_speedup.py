"""Figure 12: each accelerated variant's speedup over vanilla against batch size, measured with its interval and
the faithful roofline's prediction dashed."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.figures.axes import power_of_two_axis, value_axis
from report.figures.common import (
    FigureSkipped,
    Series,
    matching,
    tuple_of,
)
from report.figures.frame import Frame
from report.figures.marks import draw_impl_series
from report.figures.style import ARCH_LABEL, impl_styles
from report.table.flat import with_sampler_setting

# One panel per model, lengths and diffusion schedule (steps, block or Dream's alg): one line per variant.
PANEL_KEYS = ("arch", "model", "prompt_length", "generation_length", "steps", "block_length", "sampler_setting")
ROOFLINE_LABEL = "roofline prediction (dashed, the variant's colour)"


def variant_speedup(df: pl.DataFrame, variants: pl.DataFrame) -> Figure:
    """Speedup over vanilla (vanilla's median latency / the variant's, > 1: the variant is faster) against batch
    size (log2): one line per variant with its interval, the roofline's predicted speedup at the same points
    dashed, y = 1 drawn. One panel per model, lengths and LLaDA step count and block.
    `df`: this hardware's rows of the flat table (for the caption); `variants`: report.analysis.variants.variant_table."""
    frame = Frame.of("variant_speedup", df)
    rows = with_sampler_setting(variants).filter((pl.col("hardware") == frame.hardware) & pl.col("speedup").is_not_null())
    if not rows.height:
        raise FigureSkipped("no variant run has a vanilla run at the same grid point"
                            if variants.height else "no variant runs in this sweep")
    styles = impl_styles(rows["impl"].to_list())
    keys = rows.select(PANEL_KEYS).unique().sort(list(PANEL_KEYS), nulls_last=True).rows(named=True)
    for ax, key in zip(frame.draw(len(keys), columns=2, panel_size=(5.2, 4.0)), keys):
        sub = matching(rows, key)
        series = []
        for impl in sorted(sub["impl"].unique().to_list()):
            points = sub.filter(pl.col("impl") == impl).sort("batch_size")
            label = impl
            color, marker = styles[impl]
            measured = Series(label, "line", tuple_of(points["batch_size"]), tuple_of(points["speedup"]),
                              tuple_of(points["speedup_low"]), tuple_of(points["speedup_high"]), arch=key["arch"],
                              model=key["model"], markers=tuple(points["speedup_interval"].fill_null("").to_list()))
            series.append(measured)
            draw_impl_series(ax, measured, (color, marker), annotate=False)  # marks: the interval kinds
            predicted = points.filter(pl.col("predicted_speedup").is_not_null())
            if predicted.height:
                roofline = Series(f"{label}: roofline", "line", tuple_of(predicted["batch_size"]),
                                  tuple_of(predicted["predicted_speedup"]), arch=key["arch"], model=key["model"],
                                  markers=tuple(predicted["forwards_source"].fill_null("").to_list()))
                series.append(roofline)
                ax.plot(roofline.x, roofline.y, color=color, linestyle="--", linewidth=1.0, zorder=2)
        if any(s.label.endswith(": roofline") for s in series):
            ax.plot([], [], color="#666666", linestyle="--", linewidth=1.0, label=ROOFLINE_LABEL)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":", label="vanilla (speedup 1)")
        series.append(Series("vanilla (speedup 1)", "hline", (), (1.0,)))
        power_of_two_axis(ax, "x", rows["batch_size"].to_list())
        yscale = value_axis(ax, [v for s in series for v in (*s.y, *(s.y_high or ()))], log_above_ratio=8.0)
        setting = (f", block {key['block_length']}" if key["block_length"] is not None else "") + (
            f", {key['sampler_setting']}" if key["sampler_setting"] else "")
        schedule = f", {key['steps']} steps{setting}" if key["steps"] is not None else ""
        title = (f"{key['model']} ({ARCH_LABEL.get(key['arch'], key['arch'])}){schedule}\n"
                 f"prompt {key['prompt_length']}, N_out = {key['generation_length']}")
        frame.panel(ax, title, "batch size B (sequences)", "speedup over vanilla (x)", "log2", yscale, series,
                    title_size=10)
    notes = ("Speedup: vanilla's median end-to-end latency over the variant's at the same model, lengths, steps and "
             "batch. Error bars: the 95% BCa bootstrap CI of the ratio of medians when both runs have six "
             "repetitions, else the range of the ratio. Dashed: the faithful roofline's predicted speedup on this "
             "device's profile (a confidence rule costed at its measured forwards, else at the step cap).",)
    return frame.finish("Speedup of each variant over vanilla by batch size", notes, df)
