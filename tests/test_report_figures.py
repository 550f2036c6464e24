"""Every figure from a generated artifact set, checked on the data it plots (series, points, markers), never
on pixels; and the rule that runs on different hardware never share a panel."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from report_fixtures import A100, CPU_ROOFS, H100, SMOKE_LIKE, write_sweep

from report.figures.common import FigureSkipped, MixedHardwareError, plotted
from report.figures.findings import findings_throughput
from report.figures.latency import latency_vs_generation_length, step_time_vs_length
from report.figures.memory import memory_heatmap
from report.figures.quality import (
    block_length_ablation,
    pareto_frontier,
    quality_vs_steps,
    quality_vs_tokens_per_forward,
)
from report.figures.roofline import measured_vs_predicted, roofline_figure
from report.figures.throughput import throughput_by_batch
from report.answer.findings import crossover_table, predicted_throughput
from report.analysis.predictions import UnknownHardwareError, choose_profile, model_shapes, prediction_table
from report.document.render import analyse_quality
from report.table.flat import results_table
from roofline.hardware import get_hardware
from roofline.plotdata import operator_points
from specs.artifacts import SweepLayout, load_results

A100_PROFILE = get_hardware("a100-sxm4-80gb")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory):
    results = load_results(SweepLayout(write_sweep(tmp_path_factory.mktemp("sweep"))))
    table = results_table(results)
    return results, table, analyse_quality(results, table)


@pytest.fixture(scope="module")
def a100(sweep) -> pl.DataFrame:
    return sweep[1].filter(pl.col("hardware") == A100)


@pytest.fixture(scope="module")
def h100(sweep) -> pl.DataFrame:
    return sweep[1].filter(pl.col("hardware") == H100)


def medians(df: pl.DataFrame, column: str, **where) -> list[float]:
    rows = df.filter(pl.col("status") == "ok")
    for key, value in where.items():
        rows = rows.filter(pl.col(key).is_null() if value is None else pl.col(key) == value)
    return rows.sort("generation_length", "steps", "block_length", nulls_last=True)[column].to_list()


# ------------------------------------------------------------------ every figure's caption and the hardware rule


def all_figures(sweep, table):
    results, _, quality = sweep
    pred = prediction_table(results, table, A100_PROFILE) if table["hardware"].n_unique() == 1 else None
    ops = operator_points(A100_PROFILE, prompt_len=64, gen_len=128)
    profiles = {A100: A100_PROFILE}
    shapes = model_shapes(results)
    return {
        "findings": lambda: findings_throughput(table, predicted_throughput(table, profiles, shapes),
                                                crossover_table(table, profiles, shapes)),
        "tokens_per_forward": lambda: quality_vs_tokens_per_forward(table, quality.by_setting, ["bertscore_f1"]),
        "latency": lambda: latency_vs_generation_length(table),
        "step_time": lambda: step_time_vs_length(table),
        "throughput": lambda: throughput_by_batch(table),
        "memory": lambda: memory_heatmap(table),
        "pareto": lambda: pareto_frontier(table, quality.by_run, "bertscore_f1"),
        "quality_vs_steps": lambda: quality_vs_steps(table, quality.by_setting, "bertscore_f1", quality.parity_markers),
        "ablation": lambda: block_length_ablation(table, quality.by_setting, "bertscore_f1"),
        "roofline": lambda: roofline_figure(table, pred, A100_PROFILE, ops, operator_setting="x"),
        "measured_vs_predicted": lambda: measured_vs_predicted(table, pred, A100_PROFILE),
    }


FIGURE_NAMES = ["findings", "latency", "step_time", "throughput", "memory", "pareto", "quality_vs_steps",
                "tokens_per_forward", "ablation", "roofline", "measured_vs_predicted"]


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_no_figure_mixes_hardware(sweep, name) -> None:
    both = sweep[1].filter(pl.col("hardware").is_in([A100, H100]))
    with pytest.raises(MixedHardwareError, match="cannot share a panel"):
        all_figures(sweep, both)[name]()


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_every_figure_names_its_hardware_dtype_kernel_and_weights(sweep, a100, name) -> None:
    fig = all_figures(sweep, a100)[name]()
    data = plotted(fig)
    assert data.hardware == A100
    for part in (f"Hardware: {A100}", "dtype: bfloat16", "attention: sdpa", "weights: real"):
        assert part in data.caption
    drawn = fig.get_supxlabel().replace("\n", " ")
    assert data.caption in drawn, "the caption is drawn into the image too"
    for panel in data.panels:
        assert panel.xlabel and panel.ylabel
        assert "(" in panel.xlabel or panel.xlabel in {"diffusion steps K"}  # units in parentheses


# ------------------------------------------------------------------ 5, 7: latency


def test_latency_vs_generation_length(a100) -> None:
    data = plotted(latency_vs_generation_length(a100))
    assert [p.title for p in data.panels] == ["batch 1", "batch 8", "batch 32"]
    panel = data.panel("batch 1")
    labels = [s.label for s in panel.series]
    assert labels == ["llama-8b: end-to-end", "llama-8b: TTFT (prefill)", "llama-8b: decode",
                      "llada-8b: 16 steps", "llada-8b: 32 steps", "llada-8b: 64 steps"]
    e2e = panel.get("llama-8b: end-to-end")
    assert e2e.x == (64.0, 128.0)
    assert list(e2e.y) == pytest.approx(medians(a100, "latency_e2e_s_median", arch="llama", batch_size=1))
    ttft, decode = panel.get("llama-8b: TTFT (prefill)"), panel.get("llama-8b: decode")
    assert all(t + d <= e * 1.001 for t, d, e in zip(ttft.y, decode.y, e2e.y))
    # LLaDA at the primary block length (32); batch 32 ran out of memory at N_out 128.
    assert data.panel("batch 32").get("llada-8b: 16 steps").x == (64.0,)
    assert any("block length 32" in n for n in data.notes)
    assert panel.xscale == "log2" and panel.yscale == "log"


def test_step_time_and_itl(a100) -> None:
    data = plotted(step_time_vs_length(a100))
    left, right = data.panels
    assert [s.label for s in left.series] == ["llada-8b, batch 1", "llada-8b, batch 8", "llada-8b, batch 32"]
    assert left.get("llada-8b, batch 1").x == (128.0, 192.0)
    assert left.get("llada-8b, batch 32").x == (128.0,)
    itl = right.get("llama-8b, batch 8")
    assert itl.x[0] == 65.0 and itl.x[-1] == 64 + 127 and len(itl.x) == 127
    assert right.xlabel == "context length attended (tokens)"


def test_latency_is_skipped_with_one_generation_length(a100) -> None:
    with pytest.raises(FigureSkipped, match="one generation length"):
        latency_vs_generation_length(a100.filter(pl.col("generation_length") == 64))


# ------------------------------------------------------------------ 3: throughput


def test_throughput_bars_and_oom_marks(a100) -> None:
    data = plotted(throughput_by_batch(a100))
    assert [p.title for p in data.panels] == ["N_out = 64 tokens", "N_out = 128 tokens"]
    long = data.panel("N_out = 128")
    bars = [s.label for s in long.series if s.kind == "bars"]
    assert bars == ["llama-8b", "llada-8b: 16 steps", "llada-8b: 32 steps", "llada-8b: 64 steps"]
    llada = long.get("llada-8b: 32 steps")
    goodput = long.get("llada-8b: 32 steps: goodput")  # B x useful tokens / latency, beside throughput
    useful = medians(a100, "goodput_tokens_per_s_median", arch="llada", batch_size=1, generation_length=128,
                     steps=32, block_length=32)[0]
    assert goodput.y[0] == pytest.approx(useful) and goodput.y[0] < llada.y[0]
    assert llada.x == (1.0, 8.0, 32.0)
    assert llada.markers == ("", "", "OOM")
    assert llada.y[0] == pytest.approx(medians(a100, "tokens_per_s_median", arch="llada", batch_size=1,
                                               generation_length=128, steps=32, block_length=32)[0])
    assert long.get("llama-8b").markers == ("", "", "")
    short = data.panel("N_out = 64")
    assert short.get("llama-8b").x == (1.0, 2.0, 8.0, 32.0)
    assert short.get("llama-8b").markers[1] == "error"  # batch 2 raised
    bars = short.get("llama-8b")
    assert all(lo <= y <= hi for lo, y, hi in zip(bars.y_low, bars.y, bars.y_high) if not math.isnan(y))


# ------------------------------------------------------------------ 4: memory


def test_memory_heatmap_cells_and_shared_scale(a100) -> None:
    fig = memory_heatmap(a100)
    data = plotted(fig)
    llama, llada = data.panel("LLaMA"), data.panel("LLaDA")
    cell = {(c.x, c.y): c for c in llada.cells}
    assert cell[(32, 192)].state == "oom" and cell[(32, 192)].value is None
    assert cell[(2, 128)].state == "missing"
    assert {(c.x, c.y): c for c in llama.cells}[(2, 128)].state == "error"
    values = [c.value for p in data.panels for c in p.cells if c.value is not None]
    assert data.color_range == pytest.approx((min(values), max(values)))
    expected = a100.filter((pl.col("arch") == "llada") & (pl.col("batch_size") == 8) & (pl.col("sequence_length") == 128))
    assert cell[(8, 128)].value == pytest.approx(expected["peak_reserved_bytes"].max() / 2**30)
    assert "reserved" in fig.axes[-1].get_ylabel()  # the one colour bar


def test_memory_heatmap_on_cpu_draws_the_tensors_peak_never_the_rss(tmp_path: Path) -> None:
    results = load_results(SweepLayout(write_sweep(tmp_path, SMOKE_LIKE)))
    table = results_table(results)
    fig = memory_heatmap(table)
    assert "live tensors" in fig.axes[-1].get_ylabel() and "MiB" in fig.axes[-1].get_ylabel()
    # One LLaDA cell holds every step count: the tensors' peak is the same for all of them, the RSS growth is not.
    cell_runs = table.filter((pl.col("arch") == "llada") & (pl.col("batch_size") == 4)
                             & (pl.col("sequence_length") == 64))
    assert cell_runs["steps"].n_unique() == 3
    assert cell_runs["peak_tensor_bytes"].n_unique() == 1 and cell_runs["peak_rss_delta_bytes"].n_unique() == 3
    cell = {(c.x, c.y): c for c in plotted(fig).panel("LLaDA").cells}[(4, 64)]
    assert cell.value == pytest.approx(cell_runs["peak_tensor_bytes"][0] / 2**20)
    assert any("repeats" in n for n in plotted(fig).notes)
    # Artifacts that recorded only the RSS growth: no heatmap, and the report says why.
    rss_only = results_table([r.model_copy(update={"memory": r.memory.model_copy(update={"peak_tensor_bytes": None})})
                              for r in results])
    with pytest.raises(FigureSkipped, match="only the process's RSS growth.*not the model's memory"):
        memory_heatmap(rss_only)


# ------------------------------------------------------------------ 1, 2, 6: quality


def test_pareto_frontier_points_curves_and_frontier(sweep, a100) -> None:
    quality = sweep[2]
    data = plotted(pareto_frontier(a100, quality.by_run, "bertscore_f1"))
    panel = data.panel("N_out = 64")
    llama = [s for s in panel.series if s.arch == "llama"]
    assert [s.label for s in llama] == ["llama-8b, batch 1", "llama-8b, batch 8", "llama-8b, batch 32"]
    assert all(s.kind == "points" and len(s.x) == 1 for s in llama)
    curve = panel.get("llada-8b, batch 1, block 32 (over steps)")
    assert curve.kind == "line" and curve.markers == ("16", "32", "64")
    assert list(curve.x) == sorted(curve.x)  # more steps, more latency
    frontier = panel.get("Pareto frontier")
    everything = [(x, y) for s in panel.series if s.kind != "frontier" for x, y in zip(s.x, s.y)]
    fastest = min(everything)
    assert (frontier.x[0], frontier.y[0]) == pytest.approx(fastest)
    for fx, fy in zip(frontier.x, frontier.y):
        assert not any(x <= fx and y >= fy and (x, y) != (fx, fy) for x, y in everything)
    assert panel.xscale == "log"


def test_pareto_for_lower_is_better_metric(sweep, a100) -> None:
    data = plotted(pareto_frontier(a100, sweep[2].by_run, "gen_ppl"))
    frontier = data.panel("N_out = 128").get("Pareto frontier")
    assert list(frontier.y) == sorted(frontier.y, reverse=True)  # slower must mean lower perplexity
    assert "lower is better" in data.panels[0].ylabel


def test_perplexity_is_drawn_on_a_log_axis_wherever_it_is_plotted(sweep, a100) -> None:
    quality = sweep[2]
    figures = {
        "pareto": pareto_frontier(a100, quality.by_run, "gen_ppl"),
        "steps": quality_vs_steps(a100, quality.by_setting, "gen_ppl", quality.parity_markers),
        "per forward": quality_vs_tokens_per_forward(a100, quality.by_setting, ["bertscore_f1", "gen_ppl"]),
        "ablation": block_length_ablation(a100, quality.by_setting, "gen_ppl"),
    }
    for name, fig in figures.items():
        panels = [p for p in plotted(fig).panels if "perplexity" in p.ylabel]
        assert panels, name
        assert all(p.yscale == "log" for p in panels), name
        drawn = [ax for ax in fig.axes if "perplexity" in ax.get_ylabel()]
        assert drawn and all(ax.get_yscale() == "log" for ax in drawn), name
    # BERTScore F1 stays linear (a bounded score).
    f1 = plotted(figures["per forward"]).panel("BERTScore F1")
    assert f1.yscale == "linear"


def test_quality_figures_are_skipped_without_quality(sweep, h100) -> None:
    quality = sweep[2]
    with pytest.raises(FigureSkipped, match="BERTScore F1"):
        pareto_frontier(h100, quality.by_run, "bertscore_f1")
    with pytest.raises(FigureSkipped, match="BERTScore F1"):
        quality_vs_steps(h100, quality.by_setting, "bertscore_f1", quality.parity_markers)


def test_quality_vs_steps_with_llama_level_and_parity(sweep, a100) -> None:
    quality = sweep[2]
    data = plotted(quality_vs_steps(a100, quality.by_setting, "bertscore_f1", quality.parity_markers))
    panel = data.panel("N_out = 64")
    level = panel.get("llama-8b (LLaMA level)")
    assert level.kind == "hline" and level.y_low[0] <= level.y[0] <= level.y_high[0]
    curve = panel.get("llada-8b: block 32")
    assert curve.x == (16.0, 32.0, 64.0)
    assert curve.y[0] < level.y[0] < curve.y[-1]  # the fixture crosses LLaMA's level between 16 and 64 steps
    markers = [s for s in panel.series if s.kind == "vline"]
    assert len(markers) == 2 and all(s.label.startswith("S_parity (block") for s in markers)
    parity = quality.parity_markers.filter(
        (pl.col("hardware") == A100) & (pl.col("generation_length") == 64) & (pl.col("metric") == "bertscore_f1")
        & (pl.col("block_length") == 32))
    marker = next(s for s in markers if "block 32" in s.label)
    assert marker.x == (parity["s_parity"][0],)
    assert marker.y_low[0] <= marker.x[0] <= marker.y_high[0]


def test_block_length_ablation(sweep, a100, h100) -> None:
    data = plotted(block_length_ablation(a100, sweep[2].by_setting, "bertscore_f1"))
    assert len(data.panels) == 4  # latency and quality for N_out 64 and 128
    latency = data.panel("latency, N_out = 64")
    assert [s.label for s in latency.series] == ["16 steps", "32 steps", "64 steps"]
    assert latency.get("32 steps").x == (32.0, 64.0)
    quality = data.panel("BERTScore F1, N_out = 64")
    assert quality.get("64 steps").y[0] > quality.get("64 steps").y[1]  # smaller blocks help in the fixture
    missing = plotted(block_length_ablation(h100, sweep[2].by_setting, None))
    assert missing.panel("quality, N_out = 64").note == "no quality data for these runs"


def test_block_length_ablation_skipped_with_one_block(tmp_path: Path) -> None:
    table = results_table(load_results(SweepLayout(write_sweep(tmp_path, SMOKE_LIKE))))
    with pytest.raises(FigureSkipped, match="only one block length"):
        block_length_ablation(table, analyse_quality([], table).by_setting, "bertscore_f1")


# ------------------------------------------------------------------ 8, 9: roofline


def test_profiles_are_the_device_that_ran() -> None:
    assert choose_profile(A100).profile.name == "a100-sxm4-80gb"
    assert choose_profile(H100).profile.name == "h100-sxm"
    cpu = choose_profile("cpu")
    assert cpu.profile is None and "no roofline profile for hardware cpu" in cpu.reason
    # A CPU run is never drawn against a GPU's roofs (the old --hardware override did exactly that).
    with pytest.raises(UnknownHardwareError, match="ran on cpu"):
        choose_profile("cpu", None, "a100-sxm4-80gb")
    with pytest.raises(UnknownHardwareError, match="ran on NVIDIA A100"):
        choose_profile(A100, None, "h200")
    assert choose_profile("NVIDIA A100 80GB (unlisted variant)", None, "a100-sxm4-80gb").overridden
    measured = choose_profile("cpu", CPU_ROOFS)
    assert measured.measured and measured.profile.dispatch_s == CPU_ROOFS.dispatch_s
    assert measured.profile.peak_tensor_flops_per_s == CPU_ROOFS.matmul_flops_per_s


def test_roofline_operating_points(sweep, a100) -> None:
    results = sweep[0]
    pred = prediction_table(results, a100, A100_PROFILE)
    shapes = model_shapes(results)
    ops = operator_points(A100_PROFILE, prompt_len=64, gen_len=128, llama_shape=shapes["llama"],
                          llada_shape=shapes["llada"])
    data = plotted(roofline_figure(a100, pred, A100_PROFILE, ops, operator_setting="prompt 64, N_out 128, batch 1"))
    panel = data.panels[0]
    assert panel.get("matmul roof").y == (A100_PROFILE.peak_tensor_flops_per_s,)
    llama = panel.get("measured: llama-8b (6 runs)")
    faithful = pred.filter((pl.col("fidelity") == "faithful") & (pl.col("arch") == "llama")).sort("arch", "model")
    assert sorted(llama.x) == pytest.approx(sorted((faithful["predicted_flops"] / faithful["predicted_bytes"]).to_list()))
    assert sorted(llama.y) == pytest.approx(sorted((faithful["predicted_flops"] / faithful["measured_latency_s"]).to_list()))
    assert panel.get("measured: llada-8b (30 runs)").arch == "llada"
    assert {s.label for s in panel.series} >= {"operators: llama prefill", "operators: llama decode",
                                                "operators: llada step"}
    assert "roofline profile: a100-sxm4-80gb" in data.caption


def test_measured_vs_predicted(sweep, a100) -> None:
    pred = prediction_table(sweep[0], a100, A100_PROFILE)
    data = plotted(measured_vs_predicted(a100, pred, A100_PROFILE))
    study, faithful = data.panels
    assert study.title.startswith("study model") and faithful.title == "faithful model"
    assert faithful.get("y = x").x == faithful.get("y = x").y
    n_ok = a100.filter(pl.col("status") == "ok").height
    # The A100 profile has a host floor: each run is drawn with it (filled) and on the roofs alone (hollow).
    floored = [s for s in faithful.series if s.kind == "points" and "+ host floor" in s.label]
    assert sum(len(s.x) for s in floored) == n_ok
    assert sum(len(s.x) for s in faithful.series if s.kind == "points" and "roofs only" in s.label) == n_ok
    # The study's model is batch 1 only: its panel has just the batch-1 runs.
    batch1 = a100.filter((pl.col("status") == "ok") & (pl.col("batch_size") == 1)).height
    assert sum(len(s.x) for s in study.series if s.kind == "points" and "+ host floor" in s.label) == batch1
    ids = {i for s in faithful.series for i in s.markers}
    row = pred.filter((pl.col("fidelity") == "faithful") & pl.col("run_id").is_in(list(ids))).row(0, named=True)
    series = next(s for s in floored if row["run_id"] in s.markers)
    index = series.markers.index(row["run_id"])
    assert (series.x[index], series.y[index]) == pytest.approx((row["predicted_latency_s"], row["measured_latency_s"]))




def drawn_points(fig) -> list[tuple[float, float]]:
    """Every marker and line vertex of every panel, in display pixels (the figure drawn once)."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    points = []
    for ax in fig.axes:
        for collection in ax.collections:
            offsets = np.asarray(collection.get_offsets())
            if offsets.size:
                points += [tuple(p) for p in collection.get_offset_transform().transform(offsets)]
        for line in ax.lines:
            xy = np.asarray(line.get_xydata(), dtype=float)
            xy = xy[np.isfinite(xy).all(axis=1)] if xy.size else xy
            if xy.size:
                points += [tuple(p) for p in line.get_transform().transform(xy)]
    return points


def legends(fig) -> list:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


@pytest.mark.parametrize("name", ["roofline", "measured_vs_predicted"])
def test_roofline_legends_cover_no_data(sweep, a100, name) -> None:
    fig = all_figures(sweep, a100)[name]()
    points = drawn_points(fig)
    assert points and legends(fig)
    renderer = fig.canvas.get_renderer()  # the Agg canvas drawn_points attached
    for legend in legends(fig):
        box = legend.get_window_extent(renderer)
        assert not [p for p in points if box.contains(*p)], f"{name}: the legend covers plotted points"
        # Outside every panel, so no run of another sweep can fall under it either.
        assert not [ax for ax in fig.axes if box.overlaps(ax.get_window_extent(renderer))]


# ------------------------------------------------------------------ figures added with the Findings


def test_latency_on_a_prompt_fraction_grid_keeps_one_panel_per_batch(a100) -> None:
    # The paper grid ties the prompt to N_out (fraction 0.5). Panels by (prompt, batch) held one point each.
    paper = a100.with_columns(pl.col("generation_length").alias("prompt_length"))
    data = plotted(latency_vs_generation_length(paper))
    assert [p.title for p in data.panels] == ["batch 1", "batch 8", "batch 32"]
    assert data.panel("batch 1").get("llama-8b: end-to-end").x == (64.0, 128.0)
    assert data.panel("batch 8").get("llada-8b: 32 steps").x == (64.0, 128.0)
    assert any("64+64, 128+128" in n for n in data.notes)


def test_findings_figure_overlays_the_roofline_and_marks_the_crossover(sweep, a100) -> None:
    results = sweep[0]
    profiles, shapes = {A100: A100_PROFILE}, model_shapes(results)
    crossovers = crossover_table(a100, profiles, shapes)
    data = plotted(findings_throughput(a100, predicted_throughput(a100, profiles, shapes), crossovers))
    panel = data.panel("N_out = 64")
    measured = panel.get("llada-8b: 16 steps")
    assert measured.x == (1.0, 8.0, 32.0)
    assert list(measured.y) == pytest.approx(medians(a100, "tokens_per_s_median", arch="llada", generation_length=64,
                                                     steps=16, block_length=32))
    predicted = panel.get("llada-8b: 16 steps (roofline)")
    assert predicted.x[0] == 1.0 and predicted.x[-1] == 32.0
    crossings = crossovers.filter((pl.col("generation_length") == 64) & (pl.col("b_star_bound") == "=")
                                  & (pl.col("block_length") == 32))  # the primary block length
    assert crossings.height  # the fixture's LLaMA overtakes LLaDA between batch 1 and 32
    marks = {s.label: s for s in panel.series if s.kind == "vline"}
    for row in crossings.iter_rows(named=True):
        mark = marks[f"B* at {row['steps']} steps = {row['b_star']:.2g}"]
        assert mark.x == (row["b_star"],) and 1 < row["b_star"] < 32


def test_b_star_is_read_off_interpolated_segments_never_drawn_as_measured(sweep, a100) -> None:
    import math

    results = sweep[0]
    profiles, shapes = {A100: A100_PROFILE}, model_shapes(results)
    crossovers = crossover_table(a100, profiles, shapes)
    fig = findings_throughput(a100, predicted_throughput(a100, profiles, shapes), crossovers)
    panel = plotted(fig).panel("N_out = 64")
    # Measured medians are points with the interval the tables give, and nothing solid joins them.
    measured = panel.get("llada-8b: 16 steps")
    assert measured.kind == "points"
    rows = a100.filter((pl.col("arch") == "llada") & (pl.col("generation_length") == 64) & (pl.col("steps") == 16)
                       & (pl.col("block_length") == 32) & (pl.col("status") == "ok")).sort("batch_size")
    assert list(measured.y_low) == pytest.approx(rows["tokens_per_s_interval_low"].to_list())
    assert list(measured.y_high) == pytest.approx(rows["tokens_per_s_interval_high"].to_list())
    for ax in fig.axes:
        for line in ax.lines:
            if len(line.get_xdata()) > 1:
                assert line.get_linestyle() != "-", f"a solid line joins measured points: {line.get_label()}"
    # B* lies where the two interpolated segments cross, in log B and log throughput (as measured_crossover reads it).
    def at(series, x: float) -> float:
        logs = [(math.log(a), math.log(b)) for a, b in zip(series.x, series.y)]
        return math.exp(float(np.interp(math.log(x), *zip(*logs))))

    row = crossovers.filter((pl.col("generation_length") == 64) & (pl.col("b_star_bound") == "=")
                            & (pl.col("block_length") == 32)).row(0, named=True)
    ar = panel.get("llama-8b (interpolated in log B)")
    dllm = panel.get(f"llada-8b: {row['steps']} steps (interpolated in log B)")
    assert ar.kind == dllm.kind == "interpolation"
    assert at(ar, row["b_star"]) == pytest.approx(at(dllm, row["b_star"]), rel=1e-6)
    assert any("not measured" in t for t in fig.axes[0].get_legend_handles_labels()[1])
    assert any("Dotted" in n and "interpolated" in n for n in plotted(fig).notes)
    # B*'s interval (report.analysis.intervals) is drawn with it: a bar, running to the panel's edge past the measured batches.
    def bars(ax) -> list[tuple[float, float]]:
        from matplotlib.collections import LineCollection

        return [tuple(sorted((seg[0][0], seg[1][0]))) for c in ax.collections if isinstance(c, LineCollection)
                for seg in c.get_segments() if len(seg) == 2 and seg[0][1] == seg[1][1] and seg[0][0] != seg[1][0]]

    mark = panel.get(f"B* at {row['steps']} steps = {row['b_star']:.2g}")
    assert row["b_star_low"] is not None and row["b_star_high"] is not None
    assert (*mark.y_low, *mark.y_high) == pytest.approx((row["b_star_low"], row["b_star_high"]))
    assert (row["b_star_low"], row["b_star_high"]) in [pytest.approx(b) for b in bars(fig.axes[0])]
    open_low = crossovers.with_columns(pl.lit("<=").alias("b_star_low_bound"))
    ax = findings_throughput(a100, predicted_throughput(a100, profiles, shapes), open_low).axes[0]
    assert min(low for low, _ in bars(ax)) == pytest.approx(ax.get_xlim()[0])


def test_error_bars_are_the_tables_intervals_with_their_kind_in_the_caption(sweep, a100) -> None:
    throughput = plotted(throughput_by_batch(a100))
    bars = throughput.panel("N_out = 128").get("llama-8b")
    rows = a100.filter((pl.col("arch") == "llama") & (pl.col("generation_length") == 128)).sort("batch_size")
    assert list(bars.y_low) == pytest.approx(rows["tokens_per_s_interval_low"].to_list())
    assert list(bars.y_high) == pytest.approx(rows["tokens_per_s_interval_high"].to_list())
    assert set(rows["tokens_per_s_interval"].to_list()) == {"range"}  # five repetitions: a range, not a CI
    assert any("range, n = 5" in n for n in throughput.notes)
    latency = plotted(latency_vs_generation_length(a100))
    ttft = latency.panel("batch 1").get("llama-8b: TTFT (prefill)")
    llama = a100.filter((pl.col("arch") == "llama") & (pl.col("batch_size") == 1)).sort("generation_length")
    assert list(ttft.y_low) == pytest.approx(llama["ttft_s_interval_low"].to_list())
    assert any("range, n = 5" in n and "IQR" not in n for n in latency.notes)
    steps = plotted(step_time_vs_length(a100)).panels[0].get("llada-8b, batch 1")
    assert all(lo <= y <= hi for lo, y, hi in zip(steps.y_low, steps.y, steps.y_high))


def test_six_repetitions_give_ci_error_bars_and_say_so(tmp_path: Path) -> None:
    from dataclasses import replace

    grid = replace(SMOKE_LIKE, repetitions=6)
    table = results_table(load_results(SweepLayout(write_sweep(tmp_path, grid))))
    data = plotted(throughput_by_batch(table))
    assert any("95% BCa CI, n = 6" in n for n in data.notes)
    assert not any("range" in n for n in data.notes)


def test_quality_vs_tokens_per_forward(sweep, a100) -> None:
    data = plotted(quality_vs_tokens_per_forward(a100, sweep[2].by_setting, ["bertscore_f1", "gen_ppl"]))
    panel = data.panel("BERTScore F1")
    assert panel.get("llama-8b, N_out = 64").x == (1.0,)
    llada = panel.get("llada-8b, N_out = 64")
    assert llada.x == (1.0, 2.0, 4.0) and llada.markers == ("64", "32", "16")  # 64 tokens / k steps
    assert [p.title for p in data.panels] == ["BERTScore F1", "generative perplexity"]


def test_measured_vs_predicted_with_and_without_the_dispatch_floor(tmp_path: Path) -> None:
    results = load_results(SweepLayout(write_sweep(tmp_path, SMOKE_LIKE)))
    table = results_table(results)
    profile = choose_profile("cpu", CPU_ROOFS).profile
    pred = prediction_table(results, table, profile)
    data = plotted(measured_vs_predicted(table, pred, profile))
    faithful = data.panel("faithful")
    both = faithful.get("llama-tiny (LLaMA) + dispatch"), faithful.get("llama-tiny (LLaMA), roofs only")
    assert all(a >= b for a, b in zip(*(s.x for s in both)))  # the floor only adds time
    assert any("Dispatch floor" in n for n in data.notes) and any("dtype" in n for n in data.notes)
    assert "measured, float32" in data.caption


def test_an_unlearned_llada_model_gets_a_warning_on_every_quality_figure(tmp_path: Path) -> None:
    from dataclasses import replace

    results = load_results(SweepLayout(write_sweep(tmp_path, replace(SMOKE_LIKE, unlearned_llada=True))))
    table = results_table(results)
    quality = analyse_quality(results, table)
    figures = [
        pareto_frontier(table, quality.by_run, "gen_ppl"),
        quality_vs_steps(table, quality.by_setting, "gen_ppl", quality.parity_markers),
        quality_vs_tokens_per_forward(table, quality.by_setting, ["gen_ppl"]),
    ]
    for fig in figures:
        data = plotted(fig)
        assert data.warnings and "llada-tiny has not learned beyond unigram statistics" in data.warnings[0]
        drawn = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert any("WARNING" in t for t in drawn), "the warning is drawn across the panels"
        assert any("trained here" in n and "tokens seen" in n for n in data.notes)  # provenance in the caption
    # Both members' loss curves, each shipped evaluation circled, under the rule the logs record.
    from report.figures.training import training_curves_table, training_loss

    curves = training_loss(table, training_curves_table(results))
    data = plotted(curves)
    lines = {s.model: s for panel in data.panels for s in panel.series}
    assert set(lines) == {"llama-tiny", "llada-tiny"} and lines["llada-tiny"].y == (7.0, 6.5)
    assert lines["llada-tiny"].markers == ("", "shipped")
    assert any("Training rule: every member sees the same 1,230,000 training tokens" in n for n in data.notes)


# ------------------------------------------------------------------ each family its own colour and marker


def drawn_styles(fig) -> dict[str, tuple[str, str]]:
    """Each legend label's (colour, marker shape) as drawn: a line's, an error-bar plot's data line, a scatter's;
    a marker is known by its path's vertices, so a scatter's and a line's compare ('None': no marker)."""
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_hex
    from matplotlib.container import ErrorbarContainer
    from matplotlib.markers import MarkerStyle

    def shape(path) -> str:
        return path.vertices.round(3).tobytes().hex()

    styles = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if isinstance(handle, ErrorbarContainer):
                handle = handle.lines[0]
            if isinstance(handle, PathCollection):
                colors = handle.get_facecolor() if len(handle.get_facecolor()) else handle.get_edgecolor()
                styles[label] = (to_hex(colors[0]), shape(handle.get_paths()[0]))
            elif hasattr(handle, "get_marker"):
                marker = MarkerStyle(handle.get_marker())
                drawn = "None" if handle.get_marker() in ("None", None, "") else shape(
                    marker.get_path().transformed(marker.get_transform()))
                styles[label] = (to_hex(handle.get_color()), drawn)
    return styles


@pytest.fixture(scope="module")
def four_families(tmp_path_factory: pytest.TempPathFactory):
    from dataclasses import replace

    from report_fixtures import HardwareKind

    cpu = HardwareKind("cpu", "any", speed=0.05, capacity_bytes=1 << 62, quality=True, measured_roofs=True)
    grid = replace(SMOKE_LIKE, name="four", batch_sizes=(1, 4, 16), generation_lengths=(64,), hardware=(cpu,),
                   families=("llama", "llada", "qwen2", "dream"), family_speed=(("qwen2", 0.7),))
    results = load_results(SweepLayout(write_sweep(tmp_path_factory.mktemp("four"), grid)))
    table = results_table(results)
    return results, table, analyse_quality(results, table)


def test_four_families_get_four_colours_and_markers_in_every_figure(four_families) -> None:
    results, table, quality = four_families
    profile = choose_profile("cpu", CPU_ROOFS).profile
    shapes = model_shapes(results)
    pred = prediction_table(results, table, profile)
    figures = {
        "findings": findings_throughput(table, predicted_throughput(table, {"cpu": profile}, shapes),
                                        crossover_table(table, {"cpu": profile}, shapes)),
        "measured_vs_predicted": measured_vs_predicted(table, pred, profile),
        "quality_vs_steps": quality_vs_steps(table, quality.by_setting, "bertscore_f1", quality.parity_markers),
        "pareto": pareto_frontier(table, quality.by_run, "bertscore_f1"),
    }
    models = {"llama": "llama-tiny", "llada": "llada-tiny", "qwen2": "qwen2-tiny", "dream": "dream-tiny"}
    for name, fig in figures.items():
        styles = drawn_styles(fig)
        by_family = {arch: {style for label, style in styles.items() if label.startswith(model)}
                     for arch, model in models.items()}
        assert all(by_family.values()), (name, styles)
        # No two families share a marker (a level drawn as a plain line has none: its colour tells it).
        markers = {arch: {m for _, m in found} - {"None"} for arch, found in by_family.items()}
        for a in models:
            for b in models:
                if a < b:
                    assert not markers[a] & markers[b], (name, a, b, markers)
        if name != "pareto":  # the Pareto frontier colours by batch size; its families differ by marker
            colors = {arch: {c for c, _ in found} for arch, found in by_family.items()}
            for a in models:
                for b in models:
                    if a < b:
                        assert not colors[a] & colors[b], (name, a, b, colors)
    # Each figure draws a family the same way: its AR models' measured points in one colour and marker.
    throughput = drawn_styles(figures["findings"])
    latency = drawn_styles(figures["measured_vs_predicted"])
    assert throughput["qwen2-tiny"] == latency["qwen2-tiny (Qwen2.5) + dispatch"]
    assert throughput["llama-tiny"] == latency["llama-tiny (LLaMA) + dispatch"]
