"""Figures 1, 2 and 6: the latency-quality Pareto frontier, quality vs diffusion steps with parity, and the
block-length ablation of a blockwise diffusion model (LLaDA). Each paradigm is drawn its own way: an AR model a
point or a level, a diffusion model a curve over its steps."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.analysis.derived import pareto_front
from report.figures.common import (
    ARCH_COLOR,
    ARCH_LABEL,
    ARCH_MARKER,
    LLADA_AXES,
    FigureSkipped,
    Series,
    at_primary_block,
    empty_panel,
    error_bars,
    interval_note,
    is_autoregressive,
    llada_label,
    ok_runs,
    plain_log_axis,
    power_of_two_axis,
    sequential_colors,
    shades,
    steps_colors,
    tuple_of,
    value_axis,
    varying,
)
from report.figures.frame import Frame, length_panels
from report.answer.pairing.pairs import is_ar, is_dllm, table_sides
from report.table.flat import (
    HIGHER_IS_BETTER,
    provenance_notes,
    quality_notes,
    unlearned_warnings,
    with_sampler_setting,
)

METRIC_LABEL = {
    "bertscore_f1": "BERTScore F1", "bertscore_precision": "BERTScore precision",
    "bertscore_recall": "BERTScore recall", "gen_ppl": "generative perplexity",
    "nll_per_token": "NLL per token (nats)", "elbo_nll_per_token": "ELBO NLL bound per token (nats)",
    "repeated_bigram_rate": "repeated-bigram rate", "distinct_1": "distinct-1", "distinct_2": "distinct-2",
}
TOKENS_PER_FORWARD = "tokens per forward pass (N_out / forwards)"
CI_NOTE = ("Quality: median over prompts, error bars its interval (95% BCa bootstrap CI from six prompts up, else "
           "the range); a continuation too short for the metric ranks worst.")


# Metrics drawn on a log axis: perplexity is the exponential of a loss, so a linear axis squeezes every point near
# the good end (where parity is decided) under the few-step points hundreds above them.
LOG_METRICS = frozenset({"gen_ppl"})


def quality_axis(ax, metric: str | None, axis: str = "y") -> str:
    """Scale a quality axis for `metric` (log with plain labels for LOG_METRICS, else linear); returns the scale
    name the Panel records."""
    if metric in LOG_METRICS:
        plain_log_axis(ax, axis)
        return "log"
    return "linear"


def metric_label(metric: str) -> str:
    better = "higher" if HIGHER_IS_BETTER.get(metric, True) else "lower"
    return f"{METRIC_LABEL.get(metric, metric)} ({better} is better)"


def _quality_notes(df: pl.DataFrame) -> tuple[str, ...]:
    """The runs' quality notes and the models' provenance: on every quality figure."""
    return (tuple(f"Quality note from the runs: {n}" for n in quality_notes(df))
            + tuple(f"Model: {n}" for n in provenance_notes(df)))


def _warnings(df: pl.DataFrame) -> tuple[str, ...]:
    return tuple(unlearned_warnings(df))


def step_marks(rows: pl.DataFrame) -> tuple[str, ...]:
    """Each row's step count as its point's text mark (none for an AR model)."""
    return tuple("" if k is None else str(k) for k in rows["steps"].to_list())


# The quality columns of report.analysis.variants.variant_points (value, interval low, interval high).
VARIANT_QUALITY = ("quality", "quality_low", "quality_high")


def quality_series(label: str, arch: str, model: str, rows: pl.DataFrame, x: str, value: str = "value",
                   low: str = "interval_low", high: str = "interval_high") -> Series:
    """Quality (`value`, bounded by `low` and `high`) against column `x` of rows: a diffusion model a line over its
    steps, an AR model points, each point marked with its step count."""
    return Series(label, "points" if is_autoregressive(arch) else "line", tuple_of(rows[x]), tuple_of(rows[value]),
                  tuple_of(rows[low]), tuple_of(rows[high]), arch=arch, model=model, markers=step_marks(rows))


# ------------------------------------------------------------------ figure 1


def pareto_frontier(df: pl.DataFrame, quality_by_run: pl.DataFrame, metric: str) -> Figure:
    """Median end-to-end latency (x, log) vs quality (y): an AR model a point per batch size, a diffusion model a
    curve over its steps per batch size, and the Pareto frontier of all of them; one panel per generation length."""
    frame = Frame.of(f"pareto_frontier_{metric}", df, vanilla=True)
    df = frame.runs
    sides = table_sides(df)
    quality = quality_by_run.filter(pl.col("metric") == metric).select(
        "run_id", pl.col("value").alias("quality"), pl.col("interval_low").alias("quality_low"),
        pl.col("interval_high").alias("quality_high"),
    )
    points = ok_runs(df).join(quality, on="run_id").filter(pl.col("latency_e2e_s_median").is_not_null())
    if not points.height:
        raise FigureSkipped(f"no run has both a latency and a {METRIC_LABEL.get(metric, metric)} value")
    higher = HIGHER_IS_BETTER.get(metric, True)
    lengths = length_panels(points)
    colors = sequential_colors(points["batch_size"].to_list(), "viridis", 0.0, 0.8)
    for ax, at in zip(frame.draw(len(lengths), columns=2, panel_size=(5.6, 4.2)), lengths):
        sub = at.of(points)
        series = _pareto_series(sub)
        for s, batch, style in series:
            _draw_quality_series(ax, s, colors[batch], LINESTYLES[style % len(LINESTYLES)])
        frontier = draw_frontier(ax, sub, "latency_e2e_s_median", higher)
        plain_log_axis(ax, "x")
        frame.panel(ax, at.title, "end-to-end latency, median (s)", metric_label(metric), "log",
                    quality_axis(ax, metric), (*(s for s, _, _ in series), frontier))
    notes = (CI_NOTE + f" {sides.dllm} points are labelled with their step count; circled points are on the "
             "frontier.",)
    return frame.finish(f"Latency vs quality ({METRIC_LABEL.get(metric, metric)}): the Pareto frontier",
                        notes + _quality_notes(df), points, warnings=_warnings(df))


def draw_frontier(ax, points: pl.DataFrame, x: str, higher_is_better: bool) -> Series:
    """The Pareto frontier of points' latency (column `x`) against their quality, dashed, each point on it circled."""
    front = pareto_front(points, x=x, y="quality", higher_is_better=higher_is_better)
    frontier = Series("Pareto frontier", "frontier", tuple_of(front[x]), tuple_of(front["quality"]),
                      markers=tuple(front["run_id"].to_list()))
    ax.step(frontier.x, frontier.y, where="post", color="#444444", linestyle="--", linewidth=1.0,
            label=frontier.label, zorder=1)
    ax.scatter(frontier.x, frontier.y, s=90, facecolors="none", edgecolors="#444444", linewidths=1.0, zorder=4)
    return frontier


def _pareto_series(sub: pl.DataFrame) -> list[tuple[Series, int, int]]:
    """(series, batch size for its colour, index of its line style) for each AR point set and diffusion curve."""
    out: list[tuple[Series, int, int]] = []
    llama = sub.filter(is_ar()).sort(["model", "batch_size"])
    for (model, batch, arch), rows in llama.group_by(["model", "batch_size", "arch"], maintain_order=True):
        out.append((_quality_points(f"{model}, batch {batch}", "points", arch, model, rows), batch, 0))
    llada = with_sampler_setting(sub.filter(is_dllm()))
    extra = [a for a in varying(llada, LLADA_AXES) if a != "steps"]
    styles = {k: i for i, k in enumerate(llada.select(extra).unique().sort(extra).rows())} if extra else {}
    for key in llada.select("model", "batch_size", *extra).unique().sort(["model", "batch_size", *extra]).iter_rows(named=True):
        rows = llada.filter(pl.all_horizontal(pl.col(a).eq_missing(v) for a, v in key.items())).sort("steps")
        label = llada_label(key["model"], key, extra).replace(f"{key['model']}: ", f"{key['model']}, ")
        label = f"{key['model']}, batch {key['batch_size']}" + (label[len(key["model"]):] if extra else "")
        style = styles.get(tuple(key[a] for a in extra), 0)
        out.append((_quality_points(label + " (over steps)", "line", rows["arch"][0], key["model"], rows,
                                    marks=[str(s) for s in rows["steps"].to_list()]), key["batch_size"], style))
    return out


def _quality_points(label: str, kind: str, arch: str, model: str, rows: pl.DataFrame, marks=()) -> Series:
    return Series(label, kind, tuple_of(rows["latency_e2e_s_median"]), tuple_of(rows["quality"]),
                  tuple_of(rows["quality_low"]), tuple_of(rows["quality_high"]), arch=arch, model=model,
                  markers=tuple(marks))


LINESTYLES = ("-", "--", ":", "-.")


def _draw_quality_series(ax, s: Series, color, linestyle: str = "-") -> None:
    yerr = error_bars(s)
    if s.kind == "points":
        ax.errorbar(s.x, s.y, yerr=yerr, label=s.label, color=color, marker=ARCH_MARKER.get(s.arch or "", "s"),
                    markersize=8,
                    markeredgecolor="black", linestyle="none", capsize=2, zorder=3)
        return
    ax.errorbar(s.x, s.y, yerr=yerr, label=s.label, color=color, marker=ARCH_MARKER.get(s.arch or "", "o"), markersize=5,
                linestyle=linestyle, linewidth=1.3, capsize=2, zorder=2)
    for x, y, mark in zip(s.x, s.y, s.markers):
        ax.annotate(mark, (x, y), xytext=(4, -9), textcoords="offset points", fontsize=7, color="#333333")


# ------------------------------------------------------------------ figure 2


def quality_vs_steps(df: pl.DataFrame, quality_by_setting: pl.DataFrame, metric: str,
                     parity: pl.DataFrame | None = None) -> Figure:
    """Diffusion quality vs diffusion steps (x, log2) with its interval, one line per block or sampler setting; each
    AR model's greedy level as a line with its band (its sampled level dotted, where measured); S_parity against the
    metric's headline reference as a dashed vertical line with its replicates' span shaded. One panel per generation length.
    `parity`: report.analysis.parity.parity_markers."""
    frame = Frame.of(f"quality_vs_steps_{metric}", df, vanilla=True)
    df, hardware = frame.runs, frame.hardware
    sides = table_sides(df)
    setting = with_sampler_setting(quality_by_setting).filter((pl.col("metric") == metric) & (pl.col("hardware") == hardware))
    llada = setting.filter(is_dllm() & (pl.col("continuation") == "generated"))
    if not llada.height:
        raise FigureSkipped(f"no {sides.dllm} run has a {METRIC_LABEL.get(metric, metric)} value")
    lengths = length_panels(llada)
    # Blocks in the blockwise family's shades; sampler settings (Dream's algs, block diffusion's thresholds) in
    # their own family's.
    named = pl.col("sampler_setting").is_not_null()
    blockwise, dream = llada.filter(pl.col("block_length").is_not_null() & ~named), llada.filter(named)
    block_colors = shades(blockwise["arch"][0], blockwise["block_length"].to_list()) if blockwise.height else {}
    algs = dream["sampler_setting"].unique().to_list()
    alg_colors = {k: c for (arch,), rows in dream.group_by(["arch"])
                  for k, c in shades(arch, rows["sampler_setting"].to_list()).items()}
    for ax, at in zip(frame.draw(len(lengths), columns=2, panel_size=(5.4, 4.0)), lengths):
        sub = at.of(setting)
        series = _llama_levels(ax, sub)
        sub_llada = sub.filter(is_dllm() & (pl.col("continuation") == "generated"))
        extra = [a for a in varying(sub_llada, LLADA_AXES) if a != "steps"]
        for key in sub_llada.select("model", *extra).unique().sort(["model", *extra]).iter_rows(named=True):
            rows = sub_llada.filter(pl.all_horizontal(pl.col(a).eq_missing(v) for a, v in key.items())).sort("steps")
            s = Series(llada_label(key["model"], key, extra), "line", tuple_of(rows["steps"]),
                       tuple_of(rows["value"]), tuple_of(rows["interval_low"]), tuple_of(rows["interval_high"]),
                       arch=rows["arch"][0], model=key["model"])
            series.append(s)
            _draw_quality_series(ax, s, alg_colors.get(rows["sampler_setting"][0])
                                 or block_colors.get(rows["block_length"][0], ARCH_COLOR.get(s.arch or "", "black")))
        multi_block = sub_llada["block_length"].n_unique() > 1
        series += _draw_parity(ax, parity, hardware, (at.prompt, at.generation), metric,
                               block_colors if multi_block else None, max(sub_llada["steps"].to_list()),
                               alg_colors if len(algs) > 1 else None)
        power_of_two_axis(ax, "x", sub_llada["steps"].unique().to_list())
        frame.panel(ax, at.title, "diffusion steps K", metric_label(metric), "log2", quality_axis(ax, metric), series)
    # The caption names only what is drawn: the replicates' span is shaded only where S_parity was reached.
    placed = any(s.kind == "vline" and s.x for p in frame.panels for s in p.series)
    notes = (CI_NOTE + f" Each setting at its smallest batch size. S_parity: the fewest steps from which {sides.dllm} "
             "is equivalent to the metric's headline reference or better (a two one-sided test against the spec's "
             "margin) at that and every larger step; "
             + ("its dashed line marks it, and the shaded span is where bootstrap replicates over prompts put it (the "
                "grid's resolution, not a confidence interval)." if placed else
                "no setting reaches it within the swept steps, so no line or span marks it (the panel says so)."),)
    return frame.finish(f"{sides.dllm} quality vs diffusion steps ({METRIC_LABEL.get(metric, metric)})",
                        notes + _quality_notes(df), df, warnings=_warnings(df))


def _llama_levels(ax, sub: pl.DataFrame) -> list[Series]:
    """Each AR model's greedy quality as a line with its CI band; its sampled quality (if measured) dotted."""
    out = []
    for row in sub.filter(is_ar()).sort("model", "continuation").iter_rows(named=True):
        sampled = row["continuation"] != "generated"
        label = (f"{row['model']} sampled, T = {row['temperature']:g}" if sampled
                 else f"{row['model']} ({ARCH_LABEL.get(row['arch'], row['arch'])} level)")
        s = Series(label, "hline", (), (row["value"],), (row["interval_low"],), (row["interval_high"],),
                   arch=row["arch"], model=row["model"])
        out.append(s)
        color = ARCH_COLOR.get(row["arch"], "black")
        ax.axhline(row["value"], color=color, linewidth=1.5, linestyle=":" if sampled else "-",
                   label=label)
        if not sampled and row["interval_low"] is not None and row["interval_high"] is not None:
            ax.axhspan(row["interval_low"], row["interval_high"], color=color, alpha=0.15, linewidth=0)
    return out


def _draw_parity(ax, parity: pl.DataFrame | None, hardware: str, lengths: tuple[int, int], metric: str,
                 block_colors: dict | None, max_steps: int, alg_colors: dict | None = None) -> list[Series]:
    """S_parity as a dashed vertical line with the span of its bootstrap replicates shaded (the grid's resolution,
    not a confidence interval; to past the last swept step when the replicates' upper end lies beyond them), or a note that the swept steps never reach parity. `block_colors` is given when
    several block lengths share the panel, `alg_colors` when several of Dream's algs do: each marker then names
    and takes its block's (alg's) colour."""
    if parity is None or not parity.height:
        return []
    prompt, gen = lengths
    rows = parity.filter(
        (pl.col("metric") == metric) & (pl.col("generation_length") == gen) & (pl.col("prompt_length") == prompt)
        & (pl.col("hardware") == hardware)
    ).sort("block_length")
    out = []
    for i, row in enumerate(rows.iter_rows(named=True)):
        block = f" (block {row['block_length']})" if block_colors and row["block_length"] is not None else ""
        color = block_colors.get(row["block_length"], "black") if block_colors else "black"
        if alg_colors and row.get("sampler_setting") in alg_colors:
            block, color = f" ({row['sampler_setting']})", alg_colors[row["sampler_setting"]]
        s_parity = row["s_parity"]
        against = f" vs {row['reference_label']}"
        if s_parity is None:
            label = f"no parity within the swept steps{block}{against}"
            ax.text(0.02, 0.03 + 0.07 * i, label, transform=ax.transAxes, fontsize=8, color="#b00020")
            out.append(Series(label, "vline"))
            continue
        low = row["s_parity_low"] if row["s_parity_low"] is not None else s_parity
        high = row["s_parity_high"]
        bound = "<= " if row["s_parity_bound"] == "<=" else "= "
        span = f"{low:g}–{f'{high:g}' if high is not None else f'>{max_steps}'}"
        label = f"S_parity{block} {bound}{s_parity:g}{against} (bootstrap replicates {span}, not a CI)"
        ax.axvline(s_parity, color=color, linestyle="--", linewidth=1.2, label=label)
        right = high if high is not None else max_steps * 1.4
        if right > low:
            ax.axvspan(low, right, color=color, alpha=0.08, linewidth=0)
        out.append(Series(label, "vline", (float(s_parity),), (), (float(low),),
                          (float(high) if high is not None else float("inf"),)))
    return out


# ------------------------------------------------------------------ figure 6


def block_length_ablation(df: pl.DataFrame, quality_by_setting: pl.DataFrame, metric: str | None) -> Figure:
    """LLaDA latency (left, at the smallest batch size) and quality (right) vs block length, one line per step
    count (fixed steps); one row per generation length that swept two or more block lengths."""
    frame = Frame.of("block_length_ablation", df, vanilla=True)
    df = frame.runs
    # The blockwise diffusion runs: only they have a block length to ablate.
    llada = ok_runs(df).filter(is_dllm() & pl.col("block_length").is_not_null()
                               & pl.col("latency_e2e_s_median").is_not_null())
    if not llada.height:
        raise FigureSkipped("no successful runs of a blockwise diffusion model (LLaDA's sampler)")
    swept = llada.group_by(["model", "prompt_length", "generation_length"]).agg(pl.col("block_length").n_unique().alias("blocks"))
    swept = swept.filter(pl.col("blocks") >= 2).sort(["model", "generation_length", "prompt_length"])
    if not swept.height:
        blocks = ", ".join(str(b) for b in sorted(llada["block_length"].unique().to_list()))
        raise FigureSkipped(f"only one block length per generation length was swept (block length {blocks})")
    quality = quality_by_setting.filter(is_dllm() & (pl.col("hardware") == frame.hardware)
                                        & (pl.col("continuation") == "generated"))
    if metric is not None:
        quality = quality.filter(pl.col("metric") == metric)
    colors = steps_colors(llada)
    axes = frame.draw(2 * swept.height, columns=2, panel_size=(5.0, 3.6))
    for i, (model, prompt, gen, _) in enumerate(swept.iter_rows()):
        left, right = axes[2 * i], axes[2 * i + 1]
        runs = llada.filter((pl.col("model") == model) & (pl.col("prompt_length") == prompt)
                            & (pl.col("generation_length") == gen))
        batch = int(runs["batch_size"].min())
        runs = runs.filter(pl.col("batch_size") == batch)
        lat_series = _over_blocks(left, runs.sort("block_length"), model, colors, "latency_e2e_s_median",
                                  "latency_e2e_s_interval_low", "latency_e2e_s_interval_high")
        left_scale = value_axis(left, [y for s in lat_series for y in s.y])
        frame.panel(left, f"{model}: latency, N_out = {gen}, batch {batch}", "block length (tokens)",
                    "end-to-end latency, median (s)", "log2", left_scale, lat_series, title_size=10)
        q = quality.filter((pl.col("model") == model) & (pl.col("prompt_length") == prompt)
                           & (pl.col("generation_length") == gen)).sort("block_length")
        q_series: list[Series] = []
        label_metric = metric_label(metric) if metric else "quality"
        right_title = f"{model}: {METRIC_LABEL.get(metric or '', 'quality')}, N_out = {gen}"
        right_scale = "linear"
        if q.height:
            q_series = _over_blocks(right, q, model, colors, "value", "interval_low", "interval_high")
            note = None
            right_scale = quality_axis(right, metric)
        else:
            note = "no quality data for these runs"
            empty_panel(right, note)
        frame.panel(right, right_title, "block length (tokens)", label_metric, "log2", right_scale, q_series,
                    title_size=10, note=note)
    notes = ("Latency: median over repetitions. " + interval_note(llada, ["latency_e2e_s"]) + " " + CI_NOTE,)
    return frame.finish("LLaDA block-length ablation at fixed step counts", notes + _quality_notes(df), llada,
                        warnings=_warnings(df))


def _over_blocks(ax, rows: pl.DataFrame, model: str, colors: dict, value: str, low: str, high: str) -> list[Series]:
    """Figure 6's lines: `value` (bounded by `low` and `high`) against block length, one per step count in its
    colour, fewest steps first; x on a power-of-two axis. `rows`: one LLaDA model's, sorted by block length."""
    lines = []
    for steps, group in rows.group_by("steps", maintain_order=True):
        lines.append((steps[0], Series(f"{steps[0]} steps", "line", tuple_of(group["block_length"]),
                                       tuple_of(group[value]), tuple_of(group[low]), tuple_of(group[high]),
                                       arch=rows["arch"][0] if "arch" in rows.columns else None, model=model)))
    lines.sort(key=lambda pair: pair[0])
    for steps, s in lines:
        ax.errorbar(s.x, s.y, yerr=error_bars(s), color=colors[(s.arch, steps)],
                    marker=ARCH_MARKER.get(s.arch or "", "o"), markersize=4, capsize=2, label=s.label)
    power_of_two_axis(ax, "x", rows["block_length"].unique().to_list())
    return [s for _, s in lines]


# ------------------------------------------------------------------ figure 11


def quality_vs_tokens_per_forward(df: pl.DataFrame, quality_by_setting: pl.DataFrame, metrics: list[str]) -> Figure:
    """Quality (y) against tokens per forward pass (x, log2): N_out over the model forward passes per sequence.
    An AR model sits at 1 (one token per forward), a diffusion model at N_out / steps (a CFG step counts two
    forwards). One panel per metric, one line per model and generation length; the view the dLLM literature uses
    to compare samplers independently of the hardware."""
    frame = Frame.of("quality_vs_tokens_per_forward", df, vanilla=True)
    df = frame.runs
    sides = table_sides(df)
    setting = quality_by_setting.filter((pl.col("hardware") == frame.hardware)
                                        & (pl.col("continuation") == "generated")
                                        & pl.col("metric").is_in(metrics) & pl.col("tokens_per_forward").is_not_null())
    if not setting.filter(is_dllm()).height:
        raise FigureSkipped(f"no {sides.dllm} run has a quality value")
    setting, block_note = at_primary_block(setting)
    gen_colors = {(arch, gen): color for arch in setting["arch"].unique().to_list() for gen, color in
                  shades(arch, setting.filter(pl.col("arch") == arch)["generation_length"].to_list()).items()}
    for ax, metric in zip(frame.draw(len(metrics), columns=2, panel_size=(5.2, 4.0)), metrics):
        sub = setting.filter(pl.col("metric") == metric)
        series = []
        for key in sub.select("arch", "model", "generation_length").unique().sort(["arch", "model", "generation_length"]).iter_rows(named=True):
            rows = sub.filter(pl.all_horizontal(pl.col(a).eq_missing(v) for a, v in key.items())).sort("tokens_per_forward")
            s = quality_series(f"{key['model']}, N_out = {key['generation_length']}", key["arch"], key["model"], rows,
                               "tokens_per_forward")
            series.append(s)
            color = gen_colors[(key["arch"], key["generation_length"])]
            _draw_quality_series(ax, s, color)
        values = sorted({x for s in series for x in s.x})
        power_of_two_axis(ax, "x", values)
        frame.panel(ax, METRIC_LABEL.get(metric, metric), TOKENS_PER_FORWARD, metric_label(metric), "log2",
                    quality_axis(ax, metric), series)
    notes = (CI_NOTE + f" {sides.dllm} points are labelled with their step count; {sides.ar} generates one token "
             "per forward.",)
    notes += (block_note,) if block_note else ()
    return frame.finish("Quality vs tokens per forward pass", notes + _quality_notes(df), df, warnings=_warnings(df))
