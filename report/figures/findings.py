"""The Findings figure: throughput vs batch size for both paradigms (a diffusion model one curve per step count
and alg), the roofline's predicted curves overlaid, and B* (where the AR model overtakes the diffusion model)
marked, one panel per generation length; readable without the rest of the report."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.figures.common import (
    AR_COLOR,
    AR_MARKER,
    DLLM_MARKER,
    FigureSkipped,
    Series,
    at_primary_block,
    error_bars,
    is_autoregressive,
    plain_log_axis,
    power_of_two_axis,
    steps_colors,
    tuple_of,
)
from report.figures.frame import Frame, length_panels
from report.pairs import is_ar, table_sides
from report.table import unlearned_warnings, with_dream_alg


def findings_throughput(df: pl.DataFrame, predicted: pl.DataFrame, crossovers: pl.DataFrame) -> Figure:
    """Median tokens/s (log) against batch size (log2): each AR model one line, each diffusion model one line per
    step count and alg (IQR error bars), the faithful roofline's throughput on this device dashed in the same
    colours (`predicted`: report.findings.predicted_throughput), and each step count's measured B* marked where the
    AR line overtakes it (`crossovers`: report.findings.crossover_table)."""
    frame = Frame.of("findings_throughput", df, vanilla=True)
    df, hardware = with_dream_alg(frame.runs), frame.hardware
    sides = table_sides(df)
    predicted, crossovers = with_dream_alg(predicted), with_dream_alg(crossovers)
    runs, block_note = at_primary_block(df.filter((pl.col("status") == "ok") & pl.col("tokens_per_s_median").is_not_null()))
    if not runs.height or runs["arch"].n_unique() < 2:
        raise FigureSkipped("no autoregressive and diffusion model both ran successfully")
    lengths = length_panels(runs)
    colors = steps_colors(runs["steps"].drop_nulls().to_list())
    # Dream's algs share their step count's colour and differ by marker.
    alg_markers = dict(zip(sorted(runs["dream_alg"].drop_nulls().unique().to_list()), (DLLM_MARKER, "^", "v", "D")))
    axes = frame.draw(len(lengths), columns=2, panel_size=(6.0, 4.4))
    profile = None
    for ax, at in zip(axes, lengths):
        sub = at.of(runs)
        pred = at.of(predicted.filter(pl.col("hardware") == hardware))
        series = []
        ordered = sub.with_columns((~is_ar()).alias("_later")).sort("_later", "model", "steps", "dream_alg")
        for (arch, model, steps, alg), rows in ordered.group_by(["arch", "model", "steps", "dream_alg"],
                                                                maintain_order=True):
            rows = rows.sort("batch_size")
            label = model if steps is None else f"{model}: {steps} step{'' if steps == 1 else 's'}"
            label += f", {alg}" if alg else ""
            autoregressive = is_autoregressive(arch)
            color = AR_COLOR if autoregressive else colors[steps]
            s = Series(label, "line", tuple_of(rows["batch_size"]), tuple_of(rows["tokens_per_s_median"]),
                       tuple_of(rows["tokens_per_s_p25"]), tuple_of(rows["tokens_per_s_p75"]), arch=arch, model=model)
            series.append(s)
            marker = AR_MARKER if autoregressive else alg_markers.get(alg, DLLM_MARKER)
            ax.errorbar(s.x, s.y, yerr=error_bars(s), color=color, marker=marker,
                        markersize=4, linewidth=2.0 if autoregressive else 1.4, capsize=2, label=label, zorder=3)
            line = pred.filter((pl.col("model") == model) & pl.col("dream_alg").eq_missing(alg)
                               & (pl.col("steps").is_null() if steps is None
                                  else pl.col("steps") == steps)).sort("batch_size")
            if line.height:
                profile = line["profile"][0]
                p = Series(f"{label} (roofline)", "line", tuple_of(line["batch_size"]),
                           tuple_of(line["predicted_tokens_per_s"]), arch=arch, model=model)
                series.append(p)
                ax.plot(p.x, p.y, color=color, linestyle="--", linewidth=1.0, alpha=0.8, zorder=2)
        blocks = sub["block_length"].drop_nulls().unique().to_list()
        cross = at.of(crossovers).filter((pl.col("hardware") == hardware) & (pl.col("b_star_bound") == "=")
                                         & (pl.col("block_length").is_in(blocks) | pl.col("block_length").is_null()))
        for row in cross.iter_rows(named=True):
            y = row["b_star_tokens_per_s"]
            mark = Series(f"B* at {row['steps']} steps = {row['b_star']:.3g}", "vline", (row["b_star"],), (y,))
            series.append(mark)
            ax.scatter([row["b_star"]], [y], marker="X", s=80, color=colors[row["steps"]], edgecolors="black",
                       zorder=5)
            ax.annotate(f"B*={row['b_star']:.2g}", (row["b_star"], y), xytext=(4, 6), textcoords="offset points",
                        fontsize=7)
        power_of_two_axis(ax, "x", sub["batch_size"].unique().to_list())
        plain_log_axis(ax, "y")
        frame.panel(ax, at.title, "batch size B (sequences)", "throughput (tokens/s)", "log2", "log", series)
    ax0 = axes[0]
    if profile:
        ax0.plot([], [], color="#555555", linestyle="--", label="roofline prediction (same colour)")
    ax0.scatter([], [], marker="X", color="#999999", edgecolors="black",
                label=f"B*: {sides.ar} overtakes {sides.dllm}")
    notes = (
        "Solid: measured median tokens/s (B x N_out / L_e2e) with IQR error bars over repetitions. Dashed: the "
        "faithful roofline's prediction" + (f" on {profile}" if profile else " (no profile for this device)")
        + f". X: B*, the batch from which {sides.ar} stays ahead of {sides.dllm} at that step count, interpolated in log B "
        "between measured batch sizes.",
    ) + ((block_note,) if block_note else ())
    return frame.finish("Throughput vs batch size", notes, runs, warnings=unlearned_warnings(df))

