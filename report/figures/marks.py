"""How a figure draws its points: a measured point filled, an extrapolated one hollow (in every figure, so no
extrapolation looks measured), with the count the caption gives; and the note where a floor-calibrated roofline is
drawn over the very runs it was fitted to."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from report.figures.common import Series, error_bars
from report.figures.style import ARCH_COLOR, ARCH_MARKER

HOLLOW_LABEL = "hollow: extrapolated from the first timed steps (not measured in full)"


def draw_points(ax, s: Series, color, marker: str, *, size: float = 5, linestyle: str = "none",
                zorder: float = 4, linewidth: float = 1.4) -> None:
    """A series' points with their error bars (where it has bounds), joined by `linestyle`: a measured point filled,
    an extrapolated one (`Series.hollow`) hollow, in the same colour, so no figure shows an extrapolation as if it
    were measured."""
    yerr = error_bars(s) if s.y_low is not None and s.y_high is not None else None
    ax.errorbar(s.x, s.y, yerr=yerr, color=color, marker=marker, markersize=size, linestyle=linestyle,
                linewidth=linewidth, capsize=2, elinewidth=1.0, label=s.label, zorder=zorder)
    hollow = [i for i, flag in enumerate(s.hollow) if flag]
    if hollow:
        ax.plot([s.x[i] for i in hollow], [s.y[i] for i in hollow], linestyle="none", marker=marker,
                markersize=size, markerfacecolor="white", markeredgecolor=color, zorder=zorder + 0.5)


def scatter_points(ax, series: Series, color, marker: str, *, edge=None, **style) -> None:
    """`draw_points` for a scatter without error bars: measured points filled (edged in `edge`), extrapolated ones
    hollow, and the legend entry drawn filled (the series' style, not its first point's)."""
    hollow = series.hollow or (False,) * len(series.x)
    for flag in (False, True):
        at = [i for i, h in enumerate(hollow) if h == flag]
        if at:
            ax.scatter([series.x[i] for i in at], [series.y[i] for i in at], marker=marker,
                       color="white" if flag else color, edgecolors=color if flag else (edge or color), **style)
    ax.scatter([], [], marker=marker, color=color, edgecolors=edge or color, label=series.label, **style)


def hollow_of(rows: pl.DataFrame) -> tuple[bool, ...]:
    """Per row: whether its latency was extrapolated from its first timed steps (drawn hollow)."""
    if "extrapolated" not in rows.columns:
        return (False,) * rows.height
    return tuple(bool(v) for v in rows["extrapolated"].fill_null(False))


def hollow_by_run(df: pl.DataFrame, run_ids: Iterable[str]) -> tuple[bool, ...]:
    """`hollow_of` for rows of another frame (predictions), read from df's runs by run_id."""
    flags = dict(df.select("run_id", pl.col("extrapolated").fill_null(False)).iter_rows()) \
        if "extrapolated" in df.columns else {}
    return tuple(bool(flags.get(run_id, False)) for run_id in run_ids)


def hollow_legend(ax, series: Iterable[Series], what: str = "points") -> str | None:
    """A legend entry for hollow marks where any series has one, and the count the caption gives: 'Hollow: 27 of 42
    points extrapolated ...'; None where none is."""
    flags = [flag for s in series for flag in (s.hollow or (False,) * len(s.x))]
    if not any(flags):
        return None
    ax.plot([], [], linestyle="none", marker="o", markerfacecolor="white", markeredgecolor="#555555",
            label=HOLLOW_LABEL)
    return (f"Hollow: {sum(flags)} of {len(flags)} {what} extrapolated from their first timed steps and scaled to "
            "every step; filled: measured in full.")


def fitted_note(df: pl.DataFrame, calibration: str | None) -> tuple[str, ...]:
    """Where a figure draws the floor-calibrated roofline over runs the floor was fitted to (its calibration names
    this sweep): a note that they sit on it by construction, not as a test of the model."""
    sweeps = set(df["sweep"].drop_nulls().to_list()) if "sweep" in df.columns else set()
    if not calibration or not any(f"the {sweep} sweep" in calibration for sweep in sweeps):
        return ()
    return (f"In sample: the roofline's floor ({calibration}) was fitted to runs drawn here, so they fall on its "
            "prediction by construction; that agreement tests nothing.",)


def draw_impl_series(ax, s: Series, style: tuple[str | None, str], *, annotate: bool = True) -> None:
    """One series of a variant figure: its points with their intervals as error bars, joined when it is a line,
    in its implementation's colour and marker (`impl_styles`; vanilla: its arch's), each point labelled with its
    text mark (LLaDA's step count) when `annotate`."""
    color, marker = style
    arch = s.arch or ""
    draw_points(ax, s, color or ARCH_COLOR.get(arch, "black"), marker or ARCH_MARKER.get(arch, "o"), size=6,
                linestyle="-" if s.kind == "line" else "none")
    if annotate:
        for x, y, mark in zip(s.x, s.y, s.markers):
            if mark:
                ax.annotate(mark, (x, y), xytext=(4, -9), textcoords="offset points", fontsize=6, color="#333333")
