"""The Findings figure: throughput vs batch size for both paradigms (a diffusion model one curve per step count
and alg), the roofline's predicted curves overlaid, and B* (where the AR model overtakes the diffusion model)
marked, one panel per generation length; readable without the rest of the report."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.analysis.extrapolation import trusted
from report.figures.axes import plain_log_axis, power_of_two_axis
from report.figures.common import (
    FigureSkipped,
    Series,
    at_primary_block,
    interval_bounds,
    interval_note,
    tuple_of,
)
from report.figures.frame import Frame, length_panels
from report.figures.marks import draw_points, fitted_note, hollow_legend, hollow_of
from report.figures.style import ARCH_MARKER, steps_colors
from report.answer.findings import VERDICT_COLUMN
from report.answer.pairing.pairs import is_ar, table_sides
from report.table.flat import unlearned_warnings, with_sampler_setting


def findings_throughput(df: pl.DataFrame, predicted: pl.DataFrame, crossovers: pl.DataFrame) -> Figure:
    """Median tokens/s (log) against batch size (log2): each AR model's measured points, and each diffusion model's per
    step count and alg, with the interval of each median as its error bar; between measured batches a thin dotted
    segment, the straight log-log line report.answer.findings.measured_crossover interpolates along (never drawn as if
    measured), so B* (marked X where the AR model overtakes, `crossovers`: report.answer.findings.crossover_table) sits where
    two such segments cross; the faithful roofline's throughput on this device dash-dotted in the same colours
    (`predicted`: report.answer.findings.predicted_throughput). A crossover row with `b_star_low`/`b_star_high` gets that
    interval drawn around its B*."""
    frame = Frame.of("findings_throughput", df, vanilla=True)
    df, hardware = with_sampler_setting(frame.runs), frame.hardware
    sides = table_sides(df)
    predicted, crossovers = with_sampler_setting(predicted), with_sampler_setting(crossovers)
    # The points B* is read from: an extrapolation that failed its check is left out here as there.
    runs, block_note = at_primary_block(trusted(df).filter((pl.col("status") == "ok")
                                                           & pl.col("tokens_per_s_median").is_not_null()))
    if not runs.height or runs["arch"].n_unique() < 2:
        raise FigureSkipped("no autoregressive and diffusion model both ran successfully")
    lengths = length_panels(runs)
    colors = steps_colors(runs)
    arch_of = dict(runs.select("model", "arch").unique().iter_rows())
    # Dream's algs share their step count's colour and differ by marker (the first keeps its family's).
    algs = sorted(runs["sampler_setting"].drop_nulls().unique().to_list())
    several_pairs = crossovers.select("llama_model", "llada_model").unique().height > 1
    axes = frame.draw(len(lengths), columns=2, panel_size=(6.0, 4.4))
    profile = calibration = None
    for ax, at in zip(axes, lengths):
        sub = at.of(runs)
        pred = at.of(predicted.filter(pl.col("hardware") == hardware))
        series = []
        ordered = sub.with_columns((~is_ar()).alias("_later")).sort("_later", "model", "steps", "sampler_setting")
        for (arch, model, steps, alg), rows in ordered.group_by(["arch", "model", "steps", "sampler_setting"],
                                                                maintain_order=True):
            rows = rows.sort("batch_size")
            label = model if steps is None else f"{model}: {steps} step{'' if steps == 1 else 's'}"
            label += f", {alg}" if alg else ""
            color = colors[(arch, steps)]
            marker = ([ARCH_MARKER.get(arch, "o"), "^", "v", "D"][algs.index(alg) % 4] if alg in algs
                      else ARCH_MARKER.get(arch, "o"))
            s = Series(label, "points", tuple_of(rows["batch_size"]), tuple_of(rows["tokens_per_s_median"]),
                       *interval_bounds(rows, "tokens_per_s"), arch=arch, model=model, hollow=hollow_of(rows))
            between = Series(f"{label} (interpolated in log B)", "interpolation", s.x, s.y, arch=arch, model=model)
            series += [s, between]
            draw_points(ax, s, color, marker)
            ax.plot(between.x, between.y, color=color, linestyle=":", linewidth=1.0, alpha=0.8, zorder=3)
            line = pred.filter((pl.col("model") == model) & pl.col("sampler_setting").eq_missing(alg)
                               & (pl.col("steps").is_null() if steps is None
                                  else pl.col("steps") == steps)).sort("batch_size")
            if line.height:
                profile, calibration = line["profile"][0], line["calibration"][0]
                p = Series(f"{label} (roofline)", "line", tuple_of(line["batch_size"]),
                           tuple_of(line["predicted_tokens_per_s"]), arch=arch, model=model)
                series.append(p)
                ax.plot(p.x, p.y, color=color, linestyle="-.", linewidth=0.9, alpha=0.6, zorder=2)
        blocks = sub["block_length"].drop_nulls().unique().to_list()
        cross = at.of(crossovers).filter((pl.col("hardware") == hardware)
                                         & ((pl.col("b_star_bound") == "=") | _spoken(crossovers))
                                         & pl.col("b_star").is_not_null()
                                         & (pl.col("block_length").is_in(blocks) | pl.col("block_length").is_null()))
        power_of_two_axis(ax, "x", sub["batch_size"].unique().to_list())  # before B*: its bar reads the edges
        placed: list[float] = []
        for row in cross.sort("b_star").iter_rows(named=True):
            pair = f" {row['llada_model']} vs {row['llama_model']}" if several_pairs else ""
            near = sum(1 for b in placed if row["b_star"] < b * 1.5)  # labels of B*s this close stack up
            placed.append(row["b_star"])
            series.append(_draw_b_star(ax, row, colors[(arch_of[row["llada_model"]], row["steps"])], pair, near))
        plain_log_axis(ax, "y")
        frame.panel(ax, at.title, "batch size B (sequences)", "throughput (tokens/s)", "log2", "log", series)
    ax0 = axes[0]
    hollow = hollow_legend(ax0, [s for p in frame.panels for s in p.series if s.kind == "points"])
    ax0.plot([], [], color="#555555", linestyle=":", linewidth=1.0,
             label="interpolated in log B between measured batches (not measured)")
    if profile:
        ax0.plot([], [], color="#555555", linestyle="-.", linewidth=0.9, label="roofline prediction (same colour)")
    ax0.scatter([], [], marker="X", color="#999999", edgecolors="black",
                label=f"B*: {sides.ar} overtakes {sides.dllm}")
    if any(s.y_low for p in frame.panels for s in p.series if s.kind == "vline"):
        ax0.plot([], [], color="#999999", linewidth=2.0, marker="|", markersize=8, label="B*'s interval")
    notes = (
        "Markers: median tokens/s (B x N_out / L_e2e) at each batch size. " + interval_note(runs, ["tokens_per_s"])
        + (f" {hollow}" if hollow else "")
        + " Dotted: the straight line in log B and log throughput between two measured batches, along which B* is "
        "interpolated; no batch between them was measured. Dash-dotted: the faithful roofline's prediction"
        + (f" on {profile}" if profile else " (no profile for this device)")
        + f". X: B*, the batch from which {sides.ar} stays ahead of {sides.dllm} at that step count, where its dotted "
        f"segment crosses {sides.dllm}'s (at the edge batch, as ≤ or >, where it lies outside those measured: drawn "
        "only for the step count the verdict speaks of, the large bold X labelled so); the bar through it: its "
        "interval (report.analysis.intervals), to an arrowhead at the panel's edge where it extends past the batches measured.",
    ) + ((block_note,) if block_note else ()) + fitted_note(df, calibration)
    return frame.finish("Throughput vs batch size", notes, runs, warnings=unlearned_warnings(df))


def _draw_b_star(ax, row: dict, color, pair: str, nth: int) -> Series:
    """B* of one crossover row: an X where the two interpolated segments cross, its label stacked above the panel's
    earlier ones (`nth`). Where the row carries B*'s interval (report.analysis.intervals.crossover: `b_star_low`,
    `b_star_high` with their bounds), a bar across it in B*'s colour, capped at a closed end; an end beyond the
    measured batches ('<=' the smallest, '>' the largest) runs to the panel's edge and ends in an arrowhead. Call it
    once the x axis has its scale: the edges are read from it."""
    b_star, y = row["b_star"], row["b_star_tokens_per_s"]
    low, high = row.get("b_star_low"), row.get("b_star_high")
    ranged = low is not None and high is not None
    if ranged:
        left, right = ax.get_xlim()
        ends = ((left, "<") if row.get("b_star_low_bound") == "<=" else (low, "|"),
                (right, ">") if row.get("b_star_high_bound") == ">" else (high, "|"))
        ax.hlines(y, ends[0][0], ends[1][0], color=color, linewidth=2.0, zorder=5)
        for x, marker in ends:
            ax.plot([x], [y], color=color, marker=marker, markersize=8, linestyle="none", zorder=5)
        ax.set_xlim(left, right)
    spoken = bool(row.get(VERDICT_COLUMN))
    ax.scatter([b_star], [y], marker="X", s=140 if spoken else 80, color=color, edgecolors="black",
               linewidths=1.6 if spoken else 1.0, zorder=6)
    value = f"{BOUND_TEXT.get(row['b_star_bound'], '=')} {b_star:.2g}"
    label = f"B* {value}" + (f" at {row['steps']} steps: the verdict's" if spoken else "")
    ax.annotate(label, (b_star, y), xytext=(4, 6 + 9 * nth), textcoords="offset points", fontsize=7,
                fontweight="bold" if spoken else "normal")
    return Series(f"B*{pair} at {row['steps']} steps {value}" + (" (the verdict's)" if spoken else ""), "vline",
                  (b_star,), (y,), (low,) if ranged else None, (high,) if ranged else None)


# How a B* beyond the batches measured reads (report/analysis/intervals.py: at or below the smallest, above the largest).
BOUND_TEXT = {"<=": "≤", ">": ">"}


def _spoken(crossovers: pl.DataFrame) -> pl.Expr:
    """The rows whose step count the verdict speaks of (report.answer.verdict.short.with_verdict_steps), else none."""
    return pl.col(VERDICT_COLUMN) if VERDICT_COLUMN in crossovers.columns else pl.lit(False)
