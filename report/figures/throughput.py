"""Figure 3: generation throughput (tokens/s) by batch size, both models side by side, each bar with the interval of
its median."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from report.figures.axes import value_axis
from report.figures.common import (
    FigureSkipped,
    Series,
    at_primary_block,
    interval_note,
    llada_settings,
    tuple_of,
)
from report.figures.frame import Frame, length_panels
from report.figures.marks import hollow_legend, hollow_of
from report.figures.style import steps_colors
from report.answer.pairing.pairs import is_ar

STATUS_MARK = {"oom": "OOM", "error": "error", "crashed": "crashed", "refused": "refused", "skipped": "skipped"}


def throughput_by_batch(df: pl.DataFrame) -> Figure:
    """Median T_gen = B x N_out / L_e2e per batch size: one bar per model setting (each AR model, then each
    diffusion model per step count), error bars the interval of the median over repetitions (as the throughput
    table gives it); a batch a setting could not run is marked with its status
    (OOM, error). One panel per generation length."""
    frame = Frame.of("throughput_by_batch", df, vanilla=True)
    runs, block_note = at_primary_block(frame.runs)
    ok = runs.filter((pl.col("status") == "ok") & pl.col("tokens_per_s_median").is_not_null())
    if not ok.height:
        raise FigureSkipped("no successful runs with throughput samples")
    lengths = length_panels(ok)
    colors = steps_colors(runs)  # a setting none of whose runs succeeded still gets its status marks
    for ax, at in zip(frame.draw(len(lengths), columns=2, panel_size=(6.0, 3.8)), lengths):
        sub = at.of(runs)
        batches = sorted(sub["batch_size"].unique().to_list())
        variants = _variants(sub)
        width = 0.8 / max(len(variants), 1)
        series = []
        for i, (label, arch, model, steps, rows) in enumerate(variants):
            s = _bar_series(label, arch, model, rows, batches)
            good = _goodput_series(label, arch, model, rows, batches)
            series += [s, good]
            positions = np.arange(len(batches)) + (i - (len(variants) - 1) / 2) * width
            color = colors[(arch, steps)]
            heights = np.nan_to_num(np.asarray(s.y), nan=0.0)
            err = [np.nan_to_num(np.asarray(s.y) - np.asarray(s.y_low)), np.nan_to_num(np.asarray(s.y_high) - np.asarray(s.y))]
            faces = ["white" if hollow else color for hollow in s.hollow]
            ax.bar(positions, heights, width=width * 0.95, color=faces, yerr=err, capsize=2,
                   edgecolor=[color if hollow else "white" for hollow in s.hollow], linewidth=1.0,
                   error_kw={"elinewidth": 0.8})
            ax.bar([0], [0], width=0, color=color, label=label)  # the legend's entry, filled whatever the first bar
            ax.scatter(positions, good.y, marker="_", s=120, color="black", linewidths=1.6, zorder=4,
                       label="goodput (tokens before the first EOS)")
            for x, y, flag in zip(positions, good.y, good.markers):
                if flag:
                    ax.annotate(flag, (x, y), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=6,
                                color="#b00020")
            for x, mark in zip(positions, s.markers):
                if mark:
                    ax.annotate(mark, (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                                textcoords="offset points", rotation=90, ha="center", va="bottom", fontsize=7,
                                color="#b00020")
        ax.set_xticks(np.arange(len(batches)), [str(b) for b in batches])
        yscale = value_axis(ax, [y for s in series if s.kind == "bars" for y in s.y], log_above_ratio=20.0)
        ax.grid(False, axis="x")
        frame.panel(ax, at.title, "batch size B (sequences)", "throughput (tokens/s)", "category", yscale, series)
    hollow = hollow_legend(frame.axes[0], [s for p in frame.panels for s in p.series if s.kind == "bars"], "bars")
    notes = ("Bars: median over repetitions of B x N_out / end-to-end latency. " + interval_note(ok, ["tokens_per_s"])
             + " Black ticks: goodput, B x useful tokens (before the first EOS) / latency; 'EOS' marks runs where "
             "under 90% of N_out is useful; 'SUSPECT' marks an extrapolation that failed its check (left out of the "
             "speedups and B*)." + (f" {hollow}" if hollow else ""),)
    notes += (block_note,) if block_note else ()
    return frame.finish("Generation throughput by batch size", notes, ok)


def _variants(sub: pl.DataFrame) -> list[tuple[str, str, str, int | None, pl.DataFrame]]:
    """(label, arch, model, steps, rows) per bar colour: each AR model, then each diffusion setting."""
    out = []
    for model, arch in sorted(sub.filter(is_ar()).select("model", "arch").unique().iter_rows()):
        out.append((model, arch, model, None, sub.filter(pl.col("model") == model)))
    out += [(label, rows["arch"][0], model, steps, rows) for label, model, steps, rows in llada_settings(sub)]
    return out


def _bar_series(label: str, arch: str, model: str, rows: pl.DataFrame, batches: list[int]) -> Series:
    y, low, high, marks, hollow = [], [], [], [], []
    for batch in batches:
        at = rows.filter(pl.col("batch_size") == batch)
        ok = at.filter((pl.col("status") == "ok") & pl.col("tokens_per_s_median").is_not_null())
        if ok.height:
            y.append(ok["tokens_per_s_median"][0])
            low.append(ok["tokens_per_s_interval_low"][0])
            high.append(ok["tokens_per_s_interval_high"][0])
            suspect = "extrapolation_suspect" in ok.columns and bool(ok["extrapolation_suspect"][0])
            marks.append("SUSPECT" if suspect else "")
            hollow.append(hollow_of(ok.head(1))[0])
        else:
            y.append(None)
            low.append(None)
            high.append(None)
            hollow.append(False)
            statuses = at["status"].to_list()
            marks.append(STATUS_MARK.get(statuses[0], statuses[0]) if statuses else "")
    return Series(label, "bars", tuple_of(batches), tuple_of(y), tuple_of(low), tuple_of(high), arch=arch,
                  model=model, markers=tuple(marks), hollow=tuple(hollow))


def _goodput_series(label: str, arch: str, model: str, rows: pl.DataFrame, batches: list[int]) -> Series:
    y, flags = [], []
    for batch in batches:
        ok = rows.filter((pl.col("batch_size") == batch) & (pl.col("status") == "ok"))
        y.append(ok["goodput_tokens_per_s_median"][0] if ok.height else None)
        flags.append("EOS" if ok.height and ok["low_useful"][0] else "")
    return Series(f"{label}: goodput", "points", tuple_of(batches), tuple_of(y), arch=arch, model=model,
                  markers=tuple(flags))
