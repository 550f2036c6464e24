"""Figures 1, 2 and 6: the latency-quality Pareto frontier, quality vs diffusion steps with parity, and the
LLaDA block-length ablation."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from report.analysis import pareto_front
from report.figures.common import (
    ARCH_COLOR,
    ARCH_MARKER,
    LLADA_AXES,
    FigureData,
    FigureSkipped,
    Panel,
    Series,
    at_primary_block,
    attach,
    caption,
    empty_panel,
    figure_legend,
    length_groups,
    length_title,
    llada_label,
    new_figure,
    ok_runs,
    one_hardware,
    plain_log_axis,
    power_of_two_axis,
    sequential_colors,
    steps_colors,
    tuple_of,
    value_axis,
    varying,
)
from report.table import HIGHER_IS_BETTER, provenance_notes, quality_notes, unlearned_warnings, vanilla_runs

METRIC_LABEL = {
    "bertscore_f1": "BERTScore F1", "bertscore_precision": "BERTScore precision",
    "bertscore_recall": "BERTScore recall", "gen_ppl": "generative perplexity",
    "nll_per_token": "NLL per token (nats)", "elbo_nll_per_token": "ELBO NLL bound per token (nats)",
    "repeated_bigram_rate": "repeated-bigram rate", "distinct_1": "distinct-1", "distinct_2": "distinct-2",
}
CI_NOTE = ("Quality: median over prompts, error bars its interval (95% BCa bootstrap CI from six prompts up, else "
           "the range); a continuation too short for the metric ranks worst.")


def metric_label(metric: str) -> str:
    better = "higher" if HIGHER_IS_BETTER.get(metric, True) else "lower"
    return f"{METRIC_LABEL.get(metric, metric)} ({better} is better)"


def _quality_notes(df: pl.DataFrame) -> tuple[str, ...]:
    """The runs' quality notes and the models' provenance: on every quality figure."""
    return (tuple(f"Quality note from the runs: {n}" for n in quality_notes(df))
            + tuple(f"Model: {n}" for n in provenance_notes(df)))


def _warnings(df: pl.DataFrame) -> tuple[str, ...]:
    return tuple(unlearned_warnings(df))


# ------------------------------------------------------------------ figure 1


def pareto_frontier(df: pl.DataFrame, quality_by_run: pl.DataFrame, metric: str) -> Figure:
    """Median end-to-end latency (x, log) vs quality (y): LLaMA a point per batch size, LLaDA a curve over
    diffusion steps per batch size, and the Pareto frontier of all of them; one panel per generation length."""
    name = f"pareto_frontier_{metric}"
    df = vanilla_runs(df)  # LLaMA against LLaDA: vanilla runs only (variants have figures 12-14)
    hardware = one_hardware(df, name)
    quality = quality_by_run.filter(pl.col("metric") == metric).select(
        "run_id", pl.col("value").alias("quality"), pl.col("interval_low").alias("quality_low"),
        pl.col("interval_high").alias("quality_high"),
    )
    points = ok_runs(df).join(quality, on="run_id").filter(pl.col("latency_e2e_s_median").is_not_null())
    if not points.height:
        raise FigureSkipped(f"no run has both a latency and a {METRIC_LABEL.get(metric, metric)} value")
    higher = HIGHER_IS_BETTER.get(metric, True)
    groups = length_groups(points)
    prompts = [p for p, _ in groups]
    colors = sequential_colors(points["batch_size"].to_list(), "viridis", 0.0, 0.8)
    fig, axes = new_figure(len(groups), columns=2, panel_size=(5.6, 4.2))
    panels = []
    for ax, (prompt, gen) in zip(axes, groups):
        sub = points.filter((pl.col("prompt_length") == prompt) & (pl.col("generation_length") == gen))
        series = _pareto_series(sub)
        for s, batch, style in series:
            _draw_quality_series(ax, s, colors[batch], LINESTYLES[style % len(LINESTYLES)])
        front = pareto_front(sub, x="latency_e2e_s_median", y="quality", higher_is_better=higher)
        frontier = Series("Pareto frontier", "frontier", tuple_of(front["latency_e2e_s_median"]),
                          tuple_of(front["quality"]), markers=tuple(front["run_id"].to_list()))
        ax.step(frontier.x, frontier.y, where="post", color="#444444", linestyle="--",
                linewidth=1.0, label=frontier.label, zorder=1)
        ax.scatter(frontier.x, frontier.y, s=90, facecolors="none", edgecolors="#444444", linewidths=1.0, zorder=4)
        plain_log_axis(ax, "x")
        title = length_title(prompt, gen, prompts)
        ax.set_title(title)
        ax.set_xlabel("end-to-end latency, median (s)")
        ax.set_ylabel(metric_label(metric))
        panels.append(Panel(title, "end-to-end latency, median (s)", metric_label(metric), "log", "linear",
                            tuple(s for s, _, _ in series) + (frontier,)))
    figure_legend(fig, axes)
    fig.suptitle(f"Latency vs quality ({METRIC_LABEL.get(metric, metric)}): the Pareto frontier")
    notes = (CI_NOTE + " LLaDA points are labelled with their step count; circled points are on the frontier.",)
    return attach(fig, FigureData(name, hardware, caption(points, hardware), tuple(panels),
                                  notes + _quality_notes(df), warnings=_warnings(df)))


def _pareto_series(sub: pl.DataFrame) -> list[tuple[Series, int, int]]:
    """(series, batch size for its colour, index of its line style) for each LLaMA point set and LLaDA curve."""
    out: list[tuple[Series, int, int]] = []
    llama = sub.filter(pl.col("arch") == "llama").sort(["model", "batch_size"])
    for (model, batch), rows in llama.group_by(["model", "batch_size"], maintain_order=True):
        out.append((_quality_points(f"{model}, batch {batch}", "points", "llama", model, rows), batch, 0))
    llada = sub.filter(pl.col("arch") == "llada")
    extra = [a for a in varying(llada, LLADA_AXES) if a != "steps"]
    styles = {k: i for i, k in enumerate(llada.select(extra).unique().sort(extra).rows())} if extra else {}
    for key in llada.select("model", "batch_size", *extra).unique().sort(["model", "batch_size", *extra]).iter_rows(named=True):
        rows = llada.filter(pl.all_horizontal(pl.col(a) == v for a, v in key.items())).sort("steps")
        label = llada_label(key["model"], key, extra).replace(f"{key['model']}: ", f"{key['model']}, ")
        label = f"{key['model']}, batch {key['batch_size']}" + (label[len(key["model"]):] if extra else "")
        style = styles.get(tuple(key[a] for a in extra), 0)
        out.append((_quality_points(label + " (over steps)", "line", "llada", key["model"], rows,
                                    marks=[str(s) for s in rows["steps"].to_list()]), key["batch_size"], style))
    return out


def _quality_points(label: str, kind: str, arch: str, model: str, rows: pl.DataFrame, marks=()) -> Series:
    return Series(label, kind, tuple_of(rows["latency_e2e_s_median"]), tuple_of(rows["quality"]),
                  tuple_of(rows["quality_low"]), tuple_of(rows["quality_high"]), arch=arch, model=model,
                  markers=tuple(marks))


LINESTYLES = ("-", "--", ":", "-.")


def _draw_quality_series(ax, s: Series, color, linestyle: str = "-") -> None:
    yerr = [[max(y - lo, 0.0) for y, lo in zip(s.y, s.y_low or s.y)],
            [max(hi - y, 0.0) for y, hi in zip(s.y, s.y_high or s.y)]]
    if s.kind == "points":
        ax.errorbar(s.x, s.y, yerr=yerr, label=s.label, color=color, marker=ARCH_MARKER["llama"], markersize=8,
                    markeredgecolor="black", linestyle="none", capsize=2, zorder=3)
        return
    ax.errorbar(s.x, s.y, yerr=yerr, label=s.label, color=color, marker=ARCH_MARKER["llada"], markersize=5,
                linestyle=linestyle, linewidth=1.3, capsize=2, zorder=2)
    for x, y, mark in zip(s.x, s.y, s.markers):
        ax.annotate(mark, (x, y), xytext=(4, -9), textcoords="offset points", fontsize=7, color="#333333")


# ------------------------------------------------------------------ figure 2


def quality_vs_steps(df: pl.DataFrame, quality_by_setting: pl.DataFrame, metric: str,
                     parity: pl.DataFrame | None = None) -> Figure:
    """LLaDA quality vs diffusion steps (x, log2) with its interval, one line per block length; LLaMA's greedy
    level as a line with its band (its sampled level dotted, where measured); S_parity against the metric's
    headline reference as a dashed vertical line with its CI shaded. One panel per generation length.
    `parity`: report.parity.parity_markers."""
    name = f"quality_vs_steps_{metric}"
    df = vanilla_runs(df)  # LLaMA against LLaDA: vanilla runs only (variants have figures 12-14)
    hardware = one_hardware(df, name)
    setting = quality_by_setting.filter((pl.col("metric") == metric) & (pl.col("hardware") == hardware))
    llada = setting.filter((pl.col("arch") == "llada") & (pl.col("continuation") == "generated"))
    if not llada.height:
        raise FigureSkipped(f"no LLaDA run has a {METRIC_LABEL.get(metric, metric)} value")
    groups = length_groups(llada)
    prompts = [p for p, _ in groups]
    block_colors = sequential_colors(llada["block_length"].to_list(), "YlOrRd", 0.45, 0.95)
    fig, axes = new_figure(len(groups), columns=2, panel_size=(5.4, 4.0))
    panels = []
    for ax, (prompt, gen) in zip(axes, groups):
        sub = setting.filter((pl.col("prompt_length") == prompt) & (pl.col("generation_length") == gen))
        series = _llama_levels(ax, sub)
        sub_llada = sub.filter((pl.col("arch") == "llada") & (pl.col("continuation") == "generated"))
        extra = [a for a in varying(sub_llada, LLADA_AXES) if a != "steps"]
        for key in sub_llada.select("model", *extra).unique().sort(["model", *extra]).iter_rows(named=True):
            rows = sub_llada.filter(pl.all_horizontal(pl.col(a) == v for a, v in key.items())).sort("steps")
            s = Series(llada_label(key["model"], key, extra), "line", tuple_of(rows["steps"]),
                       tuple_of(rows["value"]), tuple_of(rows["interval_low"]), tuple_of(rows["interval_high"]),
                       arch="llada", model=key["model"])
            series.append(s)
            _draw_quality_series(ax, s, block_colors.get(rows["block_length"][0], ARCH_COLOR["llada"]))
        multi_block = sub_llada["block_length"].n_unique() > 1
        series += _draw_parity(ax, parity, hardware, (prompt, gen), metric, block_colors if multi_block else None,
                               max(sub_llada["steps"].to_list()))
        power_of_two_axis(ax, "x", sub_llada["steps"].unique().to_list())
        title = length_title(prompt, gen, prompts)
        ax.set_title(title)
        ax.set_xlabel("diffusion steps K")
        ax.set_ylabel(metric_label(metric))
        panels.append(Panel(title, "diffusion steps K", metric_label(metric), "log2", "linear", tuple(series)))
    figure_legend(fig, axes)
    fig.suptitle(f"LLaDA quality vs diffusion steps ({METRIC_LABEL.get(metric, metric)})")
    notes = (CI_NOTE + " Each setting at its smallest batch size. S_parity: the fewest steps from which LLaDA "
             "matches the reference at every larger step, against the metric's headline reference.",)
    return attach(fig, FigureData(name, hardware, caption(df, hardware), tuple(panels), notes + _quality_notes(df),
                                  warnings=_warnings(df)))


def _llama_levels(ax, sub: pl.DataFrame) -> list[Series]:
    """LLaMA's greedy quality as a line with its CI band; its sampled quality (if measured) dotted."""
    out = []
    for row in sub.filter(pl.col("arch") == "llama").sort("model", "continuation").iter_rows(named=True):
        sampled = row["continuation"] != "generated"
        label = (f"{row['model']} sampled, T = {row['temperature']:g}" if sampled
                 else f"{row['model']} (LLaMA level)")
        s = Series(label, "hline", (), (row["value"],), (row["interval_low"],), (row["interval_high"],),
                   arch="llama", model=row["model"])
        out.append(s)
        ax.axhline(row["value"], color=ARCH_COLOR["llama"], linewidth=1.5, linestyle=":" if sampled else "-",
                   label=label)
        if not sampled and row["interval_low"] is not None and row["interval_high"] is not None:
            ax.axhspan(row["interval_low"], row["interval_high"], color=ARCH_COLOR["llama"], alpha=0.15, linewidth=0)
    return out


def _draw_parity(ax, parity: pl.DataFrame | None, hardware: str, lengths: tuple[int, int], metric: str,
                 block_colors: dict | None, max_steps: int) -> list[Series]:
    """S_parity as a dashed vertical line with its CI shaded (to past the last swept step when the CI's upper
    end lies beyond them), or a note that the swept steps never reach parity. `block_colors` is given when
    several block lengths share the panel: each marker then names and takes its block's colour."""
    if parity is None or not parity.height:
        return []
    prompt, gen = lengths
    rows = parity.filter(
        (pl.col("metric") == metric) & (pl.col("generation_length") == gen) & (pl.col("prompt_length") == prompt)
        & (pl.col("hardware") == hardware)
    ).sort("block_length")
    out = []
    for i, row in enumerate(rows.iter_rows(named=True)):
        block = f" (block {row['block_length']})" if block_colors else ""
        color = block_colors.get(row["block_length"], "black") if block_colors else "black"
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
        ci = f"95% CI {low:g}–{f'{high:g}' if high is not None else f'>{max_steps}'}"
        label = f"S_parity{block} {bound}{s_parity:g}{against} ({ci})"
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
    name = "block_length_ablation"
    df = vanilla_runs(df)  # LLaMA against LLaDA: vanilla runs only (variants have figures 12-14)
    hardware = one_hardware(df, name)
    llada = ok_runs(df).filter((pl.col("arch") == "llada") & pl.col("latency_e2e_s_median").is_not_null())
    if not llada.height:
        raise FigureSkipped("no successful LLaDA runs")
    swept = llada.group_by(["model", "prompt_length", "generation_length"]).agg(pl.col("block_length").n_unique().alias("blocks"))
    swept = swept.filter(pl.col("blocks") >= 2).sort(["model", "generation_length", "prompt_length"])
    if not swept.height:
        blocks = ", ".join(str(b) for b in sorted(llada["block_length"].unique().to_list()))
        raise FigureSkipped(f"only one block length per generation length was swept (block length {blocks})")
    quality = quality_by_setting.filter((pl.col("arch") == "llada") & (pl.col("hardware") == hardware)
                                        & (pl.col("continuation") == "generated"))
    if metric is not None:
        quality = quality.filter(pl.col("metric") == metric)
    colors = steps_colors(llada["steps"].to_list())
    fig, axes = new_figure(2 * swept.height, columns=2, panel_size=(5.0, 3.6))
    panels = []
    for i, (model, prompt, gen, _) in enumerate(swept.iter_rows()):
        left, right = axes[2 * i], axes[2 * i + 1]
        runs = llada.filter((pl.col("model") == model) & (pl.col("prompt_length") == prompt)
                            & (pl.col("generation_length") == gen))
        batch = int(runs["batch_size"].min())
        runs = runs.filter(pl.col("batch_size") == batch)
        lat_series = []
        for steps, rows in runs.sort("block_length").group_by("steps", maintain_order=True):
            s = Series(f"{steps[0]} steps", "line", tuple_of(rows["block_length"]), tuple_of(rows["latency_e2e_s_median"]),
                       tuple_of(rows["latency_e2e_s_p25"]), tuple_of(rows["latency_e2e_s_p75"]), arch="llada", model=model)
            lat_series.append((s, steps[0]))
        lat_series.sort(key=lambda pair: pair[1])
        for s, steps in lat_series:
            left.errorbar(s.x, s.y, yerr=_err(s), color=colors[steps], marker="o", markersize=4, capsize=2, label=s.label)
        power_of_two_axis(left, "x", runs["block_length"].unique().to_list())
        left_scale = value_axis(left, [y for s, _ in lat_series for y in s.y])
        left_title = f"{model}: latency, N_out = {gen}, batch {batch}"
        left.set_title(left_title, fontsize=10)
        left.set_xlabel("block length (tokens)")
        left.set_ylabel("end-to-end latency, median (s)")
        panels.append(Panel(left_title, "block length (tokens)", "end-to-end latency, median (s)", "log2", left_scale,
                            tuple(s for s, _ in lat_series)))
        q = quality.filter((pl.col("model") == model) & (pl.col("prompt_length") == prompt)
                           & (pl.col("generation_length") == gen)).sort("block_length")
        q_series = []
        label_metric = metric_label(metric) if metric else "quality"
        right_title = f"{model}: {METRIC_LABEL.get(metric or '', 'quality')}, N_out = {gen}"
        if q.height:
            for steps, rows in q.group_by("steps", maintain_order=True):
                s = Series(f"{steps[0]} steps", "line", tuple_of(rows["block_length"]), tuple_of(rows["value"]),
                           tuple_of(rows["interval_low"]), tuple_of(rows["interval_high"]), arch="llada", model=model)
                q_series.append((s, steps[0]))
            q_series.sort(key=lambda pair: pair[1])
            for s, steps in q_series:
                right.errorbar(s.x, s.y, yerr=_err(s), color=colors[steps], marker="o", markersize=4, capsize=2, label=s.label)
            power_of_two_axis(right, "x", q["block_length"].unique().to_list())
            note = None
        else:
            note = "no quality data for these runs"
            empty_panel(right, note)
        right.set_title(right_title, fontsize=10)
        right.set_xlabel("block length (tokens)")
        right.set_ylabel(label_metric)
        panels.append(Panel(right_title, "block length (tokens)", label_metric, "log2", "linear",
                            tuple(s for s, _ in q_series), note=note))
    figure_legend(fig, axes)
    fig.suptitle("LLaDA block-length ablation at fixed step counts")
    notes = ("Latency: median over repetitions, error bars IQR. " + CI_NOTE,)
    return attach(fig, FigureData(name, hardware, caption(llada, hardware), tuple(panels), notes + _quality_notes(df),
                                  warnings=_warnings(df)))


def _err(s: Series) -> list[list[float]]:
    return [[max(y - lo, 0.0) for y, lo in zip(s.y, s.y_low or s.y)],
            [max(hi - y, 0.0) for y, hi in zip(s.y, s.y_high or s.y)]]


# ------------------------------------------------------------------ figure 11


def quality_vs_tokens_per_forward(df: pl.DataFrame, quality_by_setting: pl.DataFrame, metrics: list[str]) -> Figure:
    """Quality (y) against tokens per forward pass (x, log2): N_out over the model forward passes per sequence.
    LLaMA sits at 1 (one token per forward), LLaDA at N_out / steps (a CFG step counts two forwards). One panel
    per metric, one line per LLaDA model and generation length; the view the dLLM literature uses to compare
    samplers independently of the hardware."""
    name = "quality_vs_tokens_per_forward"
    df = vanilla_runs(df)  # LLaMA against LLaDA: vanilla runs only (variants have figures 12-14)
    hardware = one_hardware(df, name)
    setting = quality_by_setting.filter((pl.col("hardware") == hardware) & (pl.col("continuation") == "generated")
                                        & pl.col("metric").is_in(metrics) & pl.col("tokens_per_forward").is_not_null())
    if not setting.filter(pl.col("arch") == "llada").height:
        raise FigureSkipped("no LLaDA run has a quality value")
    setting, block_note = at_primary_block(setting)
    gen_colors = sequential_colors(setting["generation_length"].to_list(), "YlOrRd", 0.45, 0.95)
    fig, axes = new_figure(len(metrics), columns=2, panel_size=(5.2, 4.0))
    panels = []
    for ax, metric in zip(axes, metrics):
        sub = setting.filter(pl.col("metric") == metric)
        series = []
        for key in sub.select("arch", "model", "generation_length").unique().sort(["arch", "model", "generation_length"]).iter_rows(named=True):
            rows = sub.filter(pl.all_horizontal(pl.col(a) == v for a, v in key.items())).sort("tokens_per_forward")
            label = f"{key['model']}, N_out = {key['generation_length']}"
            s = Series(label, "points" if key["arch"] == "llama" else "line", tuple_of(rows["tokens_per_forward"]),
                       tuple_of(rows["value"]), tuple_of(rows["interval_low"]), tuple_of(rows["interval_high"]),
                       arch=key["arch"], model=key["model"],
                       markers=tuple("" if st is None else str(st) for st in rows["steps"].to_list()))
            series.append(s)
            color = ARCH_COLOR["llama"] if key["arch"] == "llama" else gen_colors[key["generation_length"]]
            _draw_quality_series(ax, s, color)
        values = sorted({x for s in series for x in s.x})
        power_of_two_axis(ax, "x", values)
        ax.set_title(METRIC_LABEL.get(metric, metric))
        ax.set_xlabel("tokens per forward pass (N_out / forwards)")
        ax.set_ylabel(metric_label(metric))
        panels.append(Panel(ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), "log2", "linear", tuple(series)))
    figure_legend(fig, axes)
    fig.suptitle("Quality vs tokens per forward pass")
    notes = (CI_NOTE + " LLaDA points are labelled with their step count; LLaMA generates one token per forward.",)
    notes += (block_note,) if block_note else ()
    return attach(fig, FigureData(name, hardware, caption(df, hardware), tuple(panels), notes + _quality_notes(df),
                                  warnings=_warnings(df)))
