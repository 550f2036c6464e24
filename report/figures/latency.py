"""Figures 5 and 7: end-to-end latency vs generation length; diffusion step time and AR ITL vs length."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.analysis.derived import itl_by_context, step_time_by_length
from report.figures.axes import empty_panel, power_of_two_axis, value_axis
from report.figures.common import (
    FigureSkipped,
    Series,
    at_primary_block,
    interval_bounds,
    interval_note,
    llada_settings,
    ok_runs,
    tuple_of,
)
from report.figures.frame import Frame
from report.figures.marks import draw_points, hollow_legend, hollow_of
from report.figures.style import ARCH_COLOR, ARCH_MARKER, sequential_colors, steps_colors
from report.answer.pairing.pairs import is_ar, table_sides


def latency_vs_generation_length(df: pl.DataFrame) -> Figure:
    """Figure 5: median end-to-end latency vs N_out, one panel per batch size.

    An AR model's latency is drawn whole and split into its prefill (TTFT) and its decode passes; a diffusion model
    has one line per step count (and per other knob of its that varies). When the grid fixes the prompt by the generation
    length (a prompt fraction), each line runs over the (prompt, N_out) pairs; when it crosses several prompt
    lengths with each N_out, each prompt length gets its own line."""
    frame = Frame.of("latency_vs_generation_length", df, vanilla=True)
    runs = ok_runs(frame.runs).filter(pl.col("latency_e2e_s_median").is_not_null())
    if runs.height == 0:
        raise FigureSkipped("no successful runs with latency samples")
    if runs["generation_length"].n_unique() < 2:
        raise FigureSkipped("only one generation length was swept")
    runs, block_note = at_primary_block(runs)
    batches = sorted(runs["batch_size"].unique().to_list())
    crossed = int(runs.group_by("generation_length").agg(pl.col("prompt_length").n_unique())["prompt_length"].max()) > 1
    colors = steps_colors(runs)
    for ax, batch in zip(frame.draw(len(batches), panel_size=(4.2, 3.6)), batches):
        sub = runs.filter(pl.col("batch_size") == batch)
        series = _latency_series(sub, crossed)
        for s, steps in series:
            draw_series(ax, s, colors.get((s.arch, steps), ARCH_COLOR.get(s.arch or "", "black")))
        power_of_two_axis(ax, "x", runs["generation_length"].unique().to_list())
        yscale = value_axis(ax, [y for s, _ in series for y in s.y])
        frame.panel(ax, f"batch {batch}", "generation length N_out (tokens)", "latency (s)", "log2", yscale,
                    (s for s, _ in series))
    pairs = runs.select("prompt_length", "generation_length").unique().sort("generation_length")
    prompts = ("Each line crosses prompt lengths: one line per prompt length." if crossed else
               "Prompt length with each N_out: " + ", ".join(f"{p}+{g}" for p, g in pairs.iter_rows()) + ".")
    hollow = hollow_legend(frame.axes[0], [s for p in frame.panels for s in p.series])
    notes = ("Points: median over repetitions. " + interval_note(runs, ["latency_e2e_s", "ttft_s", "decode_s"])
             + (f" {hollow}" if hollow else ""), prompts) + ((block_note,) if block_note else ())
    return frame.finish("End-to-end latency vs generation length", notes, runs)


def _latency_series(sub: pl.DataFrame, crossed: bool = False) -> list[tuple[Series, int | None]]:
    """Each AR model's three lines, then one line per diffusion setting; each with its step count (colour). With
    `crossed`, every line is also split by prompt length."""
    series: list[tuple[Series, int | None]] = []
    prompts = sorted(sub["prompt_length"].unique().to_list()) if crossed else [None]
    for prompt in prompts:
        part_of = sub if prompt is None else sub.filter(pl.col("prompt_length") == prompt)
        suffix = "" if prompt is None else f", prompt {prompt}"
        for model, arch in sorted(part_of.filter(is_ar()).select("model", "arch").unique().iter_rows()):
            rows = part_of.filter(pl.col("model") == model).sort("generation_length")
            x = tuple_of(rows["generation_length"])
            for part, column in (("end-to-end", "latency_e2e_s"), ("TTFT (prefill)", "ttft_s"), ("decode", "decode_s")):
                series.append((Series(f"{model}{suffix}: {part}", "line", x, tuple_of(rows[f"{column}_median"]),
                                      *interval_bounds(rows, column), arch=arch, model=model), None))
        for label, model, steps, line in llada_settings(part_of):
            line = line.sort("generation_length")
            series.append((Series(
                label + suffix, "line", tuple_of(line["generation_length"]), tuple_of(line["latency_e2e_s_median"]),
                *interval_bounds(line, "latency_e2e_s"), arch=line["arch"][0], model=model, hollow=hollow_of(line),
            ), steps))
    return series


def draw_series(ax, s: Series, color) -> None:
    """A line with its intervals as error bars; an AR model's TTFT dotted and its decode dashed."""
    style = {"TTFT (prefill)": ":", "decode": "--"}
    linestyle = next((v for k, v in style.items() if s.label.endswith(k)), "-")
    draw_points(ax, s, color, ARCH_MARKER.get(s.arch or "", "o"), size=4, linestyle=linestyle, zorder=3)


def step_time_vs_length(df: pl.DataFrame) -> Figure:
    """Figure 7: diffusion time per step vs sequence length (left) and AR inter-token latency vs the context each
    decode pass attends (right), one line per batch size."""
    frame = Frame.of("step_time_vs_length", df, vanilla=True)
    runs = ok_runs(frame.runs)
    sides = table_sides(frame.runs)
    arch_of = dict(runs.select("model", "arch").unique().iter_rows())
    steps = step_time_by_length(runs)
    itl = itl_by_context(runs)
    if not steps.height and not itl.height:
        raise FigureSkipped(f"no {sides.dllm} step timings and no {sides.ar} decode timings")
    batches = sorted(set(steps["batch_size"].to_list()) | set(itl["batch_size"].to_list()))
    colors = sequential_colors(batches)
    left, right = frame.draw(2, panel_size=(5.4, 4.0))
    step_series = []
    for (model, batch), rows in steps.group_by(["model", "batch_size"], maintain_order=True):
        rows = rows.sort("sequence_length")
        s = Series(f"{model}, batch {batch}", "line", tuple_of(rows["sequence_length"]), tuple_of(rows["step_s_median"]),
                   *interval_bounds(rows, "step_s"), arch=arch_of.get(model), model=model)
        step_series.append(s)
        draw_series(left, s, colors[batch])
    _side(frame, left, step_series, f"no {sides.dllm} runs", steps["sequence_length"].unique().to_list(),
          f"{sides.dllm}: time per diffusion step", "sequence length P + N_out (tokens)", "time per step (s)")

    itl_series = []
    for (model, batch, prompt), rows in itl.group_by(["model", "batch_size", "prompt_length"], maintain_order=True):
        label = f"{model}, batch {batch}" + (f", prompt {prompt}" if itl["prompt_length"].n_unique() > 1 else "")
        s = Series(label, "line", tuple_of(rows["context_length"]), tuple_of(rows["itl_s_median"]),
                   arch=arch_of.get(model), model=model)
        itl_series.append(s)
        right.plot(s.x, s.y, color=colors[batch], label=label, linewidth=1.2)
    _side(frame, right, itl_series, f"no {sides.ar} decode timings", None, f"{sides.ar}: inter-token latency",
          "context length attended (tokens)", "inter-token latency (s)")
    notes = (
        (
            f"{sides.dllm}: the median of the runs' median step times, over every run sharing batch and length (an "
            "extrapolated run's timed steps are measured, so they count), its bar the range of those runs' medians "
            "(n = runs)."
            + f" {sides.ar}: each decode pass of the longest run per batch, median "
            "over repetitions."
        ),
    )
    return frame.finish("Per-step cost vs length", notes, runs, legend=False)


def _side(frame: Frame, ax, series: list[Series], missing: str, x_powers: list | None, title: str, xlabel: str,
          ylabel: str) -> None:
    """One side of figure 7: its own legend (x on a power-of-two axis where `x_powers` are given), or `missing`
    when it has no series."""
    yscale = value_axis(ax, [y for s in series for y in s.y])
    if series:
        if x_powers is not None:
            power_of_two_axis(ax, "x", x_powers)
        ax.legend(fontsize="x-small")
    else:
        empty_panel(ax, missing)
    frame.panel(ax, title, xlabel, ylabel, "linear" if x_powers is None else "log2", yscale, series)
