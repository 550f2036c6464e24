"""Figure 15: joules per generated token against batch size, one line per model, implementation and diffusion
setting, one panel per length pair; points whose energy is scaled from the timed steps drawn hollow."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.figures.axes import plain_log_axis, power_of_two_axis
from report.figures.common import FigureSkipped, Series, matching, tuple_of
from report.figures.frame import Frame, length_panels
from report.figures.style import ARCH_LABEL, ARCH_MARKER, impl_styles, steps_colors
from report.answer.pairing.pairs import is_ar
from report.table.flat import with_sampler_setting

EXTRAPOLATED_MARK = "extrapolated"
LINE_KEYS = ("arch", "model", "impl", "steps", "block_length", "sampler_setting")


def energy_per_token(df: pl.DataFrame) -> Figure:
    """Joules per generated token (log) against batch size (log2). `df`: this hardware's rows of the flat table,
    every implementation, one row per grid point (report.table.flat.full_where_measured). An AR model's vanilla line
    is its family's colour and a diffusion model's vanilla lines its family's shades by step count
    (report.figures.common.steps_colors); each variant keeps its own colour and marker
    (report.figures.common.impl_styles). A point whose joules per token are scaled from its timed steps is hollow
    and marked in the plotted data."""
    frame = Frame.of("energy_per_token", df)
    rows = df.filter((pl.col("status") == "ok") & pl.col("joules_per_token").is_not_null())
    if not rows.height:
        raise FigureSkipped("no run recorded energy (no NVML or readable RAPL counter on the machine)")
    rows = with_sampler_setting(rows.with_columns(pl.col("impl").fill_null("vanilla")))
    styles = impl_styles(rows["impl"].to_list())
    step_color = steps_colors(rows)
    blocks = rows.filter(pl.col("block_length").is_not_null())["block_length"].n_unique()
    lengths = length_panels(rows)
    axes = frame.draw(len(lengths), columns=3, panel_size=(4.8, 3.8))
    for ax, at in zip(axes, lengths):
        sub = at.of(rows)
        series = []
        order = [~is_ar(), "model", pl.col("impl") != "vanilla", "impl", "steps", "block_length", "sampler_setting"]
        for key in sub.select(LINE_KEYS).unique().sort(order, nulls_last=True).iter_rows(named=True):
            points = matching(sub, key).sort("batch_size")
            label = _label(key, blocks > 1)
            variant_color, marker = styles[key["impl"]]
            color = variant_color or step_color[(key["arch"], key["steps"])]
            marker = marker or ARCH_MARKER.get(key["arch"], "o")
            marks = tuple(EXTRAPOLATED_MARK if e else "" for e in points["energy_extrapolated"].fill_null(False))
            s = Series(label, "line", tuple_of(points["batch_size"]), tuple_of(points["joules_per_token"]),
                       arch=key["arch"], model=key["model"], markers=marks)
            series.append(s)
            ax.plot(s.x, s.y, color=color, linestyle="-" if key["impl"] == "vanilla" else "--", linewidth=1.2,
                    label=label, zorder=2)
            for x, y, mark in zip(s.x, s.y, marks):
                ax.plot([x], [y], marker=marker, color=color, markersize=6, linestyle="none", zorder=3,
                        markerfacecolor="white" if mark else color)
        power_of_two_axis(ax, "x", rows["batch_size"].to_list())
        plain_log_axis(ax, "y")
        frame.panel(ax, at.title, "batch size B (sequences)", "joules per generated token", "log2", "log", series,
                    title_size=10)
    if any(m for p in frame.panels for s in p.series for m in s.markers):
        ax0 = axes[0]
        ax0.plot([], [], marker="o", color="#666666", markerfacecolor="white", linestyle="none",
                 label="hollow: J/token scaled from the timed steps (extrapolated)")
    sources = sorted({f"{s.upper()}: {scope}" for s, scope in
                      rows.select("energy_source", "energy_scope").unique().iter_rows()})
    notes = (f"Counter: {'; '.join(sources)}. Joules over the measured repetitions / (repetitions x B x N_out); "
             "a board or package counter includes its idle power. Solid: vanilla; dashed: a variant.",)
    return frame.finish("Energy per generated token by batch size", notes, df)


def _label(key: dict, show_block: bool) -> str:
    arch = ARCH_LABEL.get(key["arch"], key["arch"])
    impl = "" if key["impl"] == "vanilla" else f" {key['impl']}"
    if key["steps"] is None:
        return f"{key['model']}{impl} ({arch})"
    block = f", block {key['block_length']}" if show_block and key["block_length"] is not None else ""
    alg = f", {key['sampler_setting']}" if key.get("sampler_setting") else ""
    return f"{key['model']}{impl}: {key['steps']} steps{block}{alg}"
