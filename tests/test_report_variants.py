"""The Variants section and figures on a fixture sweep with accelerated variants (tests/report_fixtures.VARIANTS):
their numbers come from the raw samples, and the vanilla comparisons do not move when variants are added."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from report_fixtures import A100, COMPILE, DUAL, PREFIX_THRESHOLD, SMOKE_LIKE, VARIANTS, reseal, write_sweep

from report.figures.common import plotted
from report.analysis.intervals import welch_log
from report.analysis.predictions import prediction_table
from report.analysis.quality import quality_long_table
from report.document.render import render_report
from report.table.flat import has_variants, results_table, vanilla_runs
from report.analysis.variants import (
    first_below_one,
    payoff_statement,
    payoff_table,
    quality_delta,
    variant_table,
)
from roofline.hardware import get_hardware
from roofline.predict import predict_run
from specs.results import RunResult

A100_PROFILE = get_hardware("a100-sxm4-80gb")


def _load(root: Path) -> list[RunResult]:
    return [RunResult.model_validate_json(p.read_text()) for p in sorted((root / "runs").glob("*.json"))]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunResult]]:
    root = write_sweep(tmp_path_factory.mktemp("variants"), VARIANTS)
    return root, _load(root)


@pytest.fixture(scope="module")
def variants(sweep) -> pl.DataFrame:
    _, results = sweep
    table = results_table(results)
    return variant_table(table, quality_long_table(results), prediction_table(results, table, A100_PROFILE))


def _run(results: list[RunResult], impl: str, arch: str, batch: int, steps: int | None) -> RunResult:
    (found,) = [r for r in results if r.config.impl_name == impl and r.config.model.arch == arch
                and r.config.batch_size == batch and r.config.steps == steps]
    return found


def _row(variants: pl.DataFrame, impl: str, batch: int, steps: int | None) -> dict:
    return variants.filter((pl.col("impl") == impl) & (pl.col("batch_size") == batch)
                           & pl.col("steps").eq_missing(steps)).row(0, named=True)


def test_the_table_carries_the_variant_columns(sweep) -> None:
    _, results = sweep
    table = results_table(results)
    assert has_variants(table) and set(table["impl"].unique()) == {"vanilla", DUAL.name, PREFIX_THRESHOLD.name,
                                                                    COMPILE.name}
    assert vanilla_runs(table).height == 3 * (1 + 2)  # per batch: LLaMA and LLaDA at two step counts
    fast = table.filter((pl.col("impl") == PREFIX_THRESHOLD.name) & (pl.col("steps") == 16)).row(0, named=True)
    assert fast["forwards_samples"] == [8, 7, 8, 7, 8, 7] and fast["forwards"] == 7.5
    assert fast["tokens_per_forward"] == pytest.approx(64 / 7.5)
    compiled = table.filter(pl.col("impl") == COMPILE.name).row(0, named=True)
    assert compiled["preparation_s"] == 12.0 and compiled["forwards"] == 64 and compiled["tokens_per_forward"] == 1
    dual = table.filter((pl.col("impl") == DUAL.name) & (pl.col("batch_size") == 8)).row(0, named=True)
    # K and V x 32 layers x 8 sequences x 128 positions x 4096 x 2 bytes
    assert dual["cache_bytes"] == 2 * 32 * 8 * 128 * 4096 * 2


def test_speedup_is_the_ratio_of_median_latencies_with_its_interval_from_six_repetitions(sweep, variants) -> None:
    _, results = sweep
    for impl, arch, batch, steps in ((DUAL.name, "llada", 1, 16), (PREFIX_THRESHOLD.name, "llada", 32, 32),
                                     (COMPILE.name, "llama", 8, None)):
        vanilla = _run(results, "vanilla", arch, batch, steps).samples.latency_e2e_s
        variant = _run(results, impl, arch, batch, steps).samples.latency_e2e_s
        row = _row(variants, impl, batch, steps)
        assert row["speedup"] == pytest.approx(np.median(vanilla) / np.median(variant))
        # One session of 6 + 6 repetitions: Welch's t on their log latencies.
        assert row["speedup_interval"].startswith(
            "95% Welch t interval on log latencies over repetitions, 1 session x 6 + 6")
        assert (row["repetitions"], row["vanilla_repetitions"]) == (6, 6)
        assert row["speedup_low"] < row["speedup"] < row["speedup_high"]
    # The fixture's laws: the dual cache's cached step costs 0.2 + 0.03 B of a full one.
    assert _row(variants, DUAL.name, 1, 16)["speedup"] == pytest.approx(16 / (2 + 14 * 0.23), rel=0.05)
    assert _row(variants, DUAL.name, 32, 16)["speedup"] < 1


def test_three_repetitions_give_welch_s_interval_on_their_log_latencies(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, dataclasses.replace(VARIANTS, repetitions=3, llada_impls=(DUAL,), llama_impls=()))
    results = _load(root)
    table = results_table(results)
    frame = variant_table(table, quality_long_table(results), prediction_table(results, table, A100_PROFILE))
    row = _row(frame, DUAL.name, 8, 32)
    vanilla = _run(results, "vanilla", "llada", 8, 32).samples.latency_e2e_s
    variant = _run(results, DUAL.name, "llada", 8, 32).samples.latency_e2e_s
    assert row["speedup_interval"].startswith("95% Welch t interval on log latencies over repetitions, 1 session x 3 + 3")
    centre, half = welch_log(np.log(vanilla), np.log(variant))
    assert (row["speedup_low"], row["speedup_high"]) == pytest.approx((math.exp(centre - half), math.exp(centre + half)))


def test_quality_delta_is_paired_by_prompt(sweep, variants) -> None:
    _, results = sweep
    vanilla = {q.prompt_id: q.gen_ppl for q in _run(results, "vanilla", "llada", 8, 32).quality}
    variant = {q.prompt_id: q.gen_ppl for q in _run(results, PREFIX_THRESHOLD.name, "llada", 8, 32).quality}
    row = _row(variants, PREFIX_THRESHOLD.name, 8, 32)
    assert row["gen_ppl_delta"] == pytest.approx(np.median([variant[p] - vanilla[p] for p in sorted(vanilla)]))
    assert row["gen_ppl_pairs"] == 8 and row["gen_ppl_delta_interval"] == "pct95"
    # The fixture's confidence rule raises perplexity 10% and lowers F1 by 0.04: both intervals exclude 0.
    assert 0 < row["gen_ppl_delta_low"] <= row["gen_ppl_delta"] <= row["gen_ppl_delta_high"]
    assert row["bertscore_f1_delta_high"] < 0


def test_quality_delta_rules() -> None:
    value, interval, pairs = quality_delta({0: 2.0, 1: np.inf, 2: 5.0}, {0: 1.0, 1: np.inf, 2: 3.0})
    assert (value, pairs, interval.kind) == (1.0, 3, "range")  # two empty texts tie at 0
    assert (interval.low, interval.high) == (0.0, 2.0)
    value, interval, pairs = quality_delta({5: 2.0, 6: 4.0}, {0: 1.0})
    assert (value, pairs, interval.kind) == (2.0, 0, None)  # no shared prompt: difference of medians
    assert quality_delta({}, {0: 1.0}) is None


def test_roofline_speedup_costs_the_measured_forwards(sweep, variants) -> None:
    _, results = sweep
    vanilla = _run(results, "vanilla", "llada", 8, 16)
    variant = _run(results, PREFIX_THRESHOLD.name, "llada", 8, 16)
    expected = (predict_run(vanilla.config, A100_PROFILE, shape=vanilla.model_shape).latency_s
                / predict_run(variant.config, A100_PROFILE, shape=variant.model_shape,
                              measured_forwards=7.5).latency_s)
    row = _row(variants, PREFIX_THRESHOLD.name, 8, 16)
    assert row["predicted_speedup"] == pytest.approx(expected) and row["forwards_source"] == "measured"
    assert _row(variants, DUAL.name, 8, 16)["forwards_source"] == "schedule"  # no confidence rule


def test_where_each_variant_stops_paying_off(variants) -> None:
    payoff = {(r["impl"], r["steps"]): r for r in payoff_table(variants).iter_rows(named=True)}
    dual = payoff[DUAL.name, 16]
    assert dual["batch_sizes"] == "1, 8, 32" and dual["stops_at"] == 32 and dual["predicted_stops_at"] is None
    # At B = 1 both the variant and vanilla sit on the A100 profile's host floor: the roofline sees no gain there.
    assert dual["statement"] == ("measured: stops paying off at B = 32; roofline: no change at B = 1 (speedup 1), "
                                 "pays off at B = 8, 32")
    assert payoff[PREFIX_THRESHOLD.name, 32]["stops_at"] is None
    assert payoff[COMPILE.name, None]["stops_at"] == 32  # 0.6 + 0.015 x 32 > 1: slower than eager at B = 32
    assert first_below_one([1, 8], [0.9, 2.0]) == 1
    assert payoff_statement([1, 8], [0.9, 2.0], None) == (
        "measured: slower than vanilla already at B = 1; roofline: no prediction (no profile for the device)")
    # Predictions that both sit on the host floor differ by rounding only: level, not slower.
    assert first_below_one([1, 8], [0.9999999999999999, 3.5]) is None
    assert payoff_statement([1, 8], [1.28, 4.84], [0.9999999999999999, 3.55]) == (
        "measured: pays off at every batch measured (B = 1, 8); roofline: no change at B = 1 (speedup 1), "
        "pays off at B = 8")
    assert payoff_statement([1, 8, 32], [1.0, 0.8, 0.7], None).startswith("measured: slower than vanilla already at B = 8")
    # The A100 profile's host floor binds every eager decode pass; the compiled pass skips it, so the roofline
    # sees compiling LLaMA's decode step pay off at every batch.
    assert payoff[COMPILE.name, None]["statement"] == (
        "measured: stops paying off at B = 32; roofline: pays off at every batch measured (B = 1, 8, 32)")


# ------------------------------------------------------------------ the rendered report


@pytest.fixture(scope="module")
def rendered(sweep, tmp_path_factory: pytest.TempPathFactory):
    root, _ = sweep
    plain = write_sweep(tmp_path_factory.mktemp("plain"),
                        dataclasses.replace(VARIANTS, llada_impls=(), llama_impls=()))
    return render_report(root, echo=False), render_report(plain, echo=False)


def test_adding_variants_leaves_every_vanilla_comparison_unchanged(sweep, rendered) -> None:
    root, _ = sweep
    with_variants, plain = rendered
    # The fixture's vanilla runs are the same artifacts in both sweeps.
    for path in (plain.sweep_dir / "runs").glob("*.json"):
        assert json.loads(path.read_text()) == json.loads((root / "runs" / path.name).read_text())
    # The Findings add a roofline-efficiency row per variant; every other line, vanilla's included, is unchanged
    # (compared word by word: a longer finding name widens the column).
    def words(text: str) -> list[list[str]]:
        return [line.split() for line in text.splitlines()]

    def variant_row(line: list[str]) -> bool:
        return line[:2] == ["roofline", "efficiency:"] and line[3] != "vanilla"

    variant_rows = [line for line in words(with_variants.findings) if variant_row(line)]
    assert {line[3] for line in variant_rows} >= {COMPILE.name, DUAL.name}
    assert [line for line in words(with_variants.findings) if not variant_row(line)] == words(plain.findings)
    assert "S_parity" in plain.findings
    figures = {f.stem: plotted(f.figure) for f in with_variants.figures}
    for f in plain.figures:
        if f.stem in ("roofline", "measured_vs_predicted"):
            continue  # these place every run, variants included, against the roofline
        assert plotted(f.figure).panels == figures[f.stem].panels, f.stem
    measured = figures["measured_vs_predicted"].panel("faithful").series
    assert any("static-compile" in s.label for s in measured)  # the roofline figure covers the variants


def test_the_variants_section_and_its_figures(rendered, variants) -> None:
    with_variants, plain = rendered
    markdown = with_variants.markdown.read_text(encoding="utf-8")
    section = markdown[markdown.index("7. Accelerated variants"):markdown.index("8. Roofline")]
    assert "measured: stops paying off at B = 32; roofline: pays off at every batch measured" in section
    row = _row(variants, DUAL.name, 1, 16)
    assert (f"{row['speedup']:.3g}x [{row['speedup_low']:.3g}, {row['speedup_high']:.3g}] (95% Welch t interval on "
            "log latencies over repetitions, 1 session x 6 + 6 repetitions") in section
    assert "16 → 7.5" in section and "8 prompts paired" in section
    assert "vanilla, dual-cache (cache dual), prefix-t09 (cache prefix, threshold 0.9)" in markdown  # the grid
    speedup = plotted(next(f.figure for f in with_variants.figures if f.stem == "variant_speedup"))
    line = speedup.panel("llada-8b (LLaDA), 16 steps").get("dual-cache")
    assert line.x == (1.0, 8.0, 32.0)
    dual = variants.filter((pl.col("impl") == DUAL.name) & (pl.col("steps") == 16)).sort("batch_size")
    assert line.y == pytest.approx(dual["speedup"].to_list())
    assert speedup.panel("llada-8b (LLaDA), 16 steps").get("dual-cache: roofline").y == pytest.approx(
        dual["predicted_speedup"].to_list())
    per_forward = plotted(next(f.figure for f in with_variants.figures
                               if f.stem == "variant_quality_vs_tokens_per_forward"))
    fast = per_forward.panel("perplexity").get("llada-8b: prefix-t09, N_out = 64")
    assert fast.x == pytest.approx((64 / 15.5, 64 / 7.5))  # 32 and 16 steps, about half the forwards ran
    pareto = plotted(next(f.figure for f in with_variants.figures if f.stem == "variant_pareto_bertscore_f1"))
    labels = {s.label for s in pareto.panel("B = 1").series}
    assert {"llada-8b: vanilla", "llada-8b: dual-cache", "llada-8b: prefix-t09", "llama-8b: vanilla",
            "llama-8b: static-compile", "Pareto frontier"} <= labels
    lines = with_variants.variants.splitlines()
    at = lines.index("  llada-8b dual-cache (N_out 64, 16 steps)")
    assert lines[at + 1].startswith(f"    B = 1: {row['speedup']:.3g}x [") and "KV cache 64 MiB" in lines[at + 1]
    assert lines[at + 2].startswith("    B = 32: ") and lines[at + 3] == (
        "    measured: stops paying off at B = 32; roofline: no change at B = 1 (speedup 1), pays off at B = 8, 32")
    # Without variants: one line, no variant figure.
    plain_md = plain.markdown.read_text(encoding="utf-8")
    assert "No accelerated variants in this sweep" in plain_md
    assert not [f for f in plain.figures + plain.skipped if f.stem.startswith("variant_")] and plain.variants == ""


def test_figures_are_numbered_in_the_order_the_report_shows_them(rendered) -> None:
    markdown = rendered[0].markdown.read_text(encoding="utf-8")
    numbers = [int(n) for n in re.findall(r"^### Figure (\d+)\. ", markdown, re.MULTILINE)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) == len(rendered[0].figures)
    # The variants' figures (section 7) are read before the roofline's (section 8), so numbered before them.
    variant_speedup = int(re.search(r"^### Figure (\d+)\. Speedup of each variant", markdown, re.MULTILINE)[1])
    roofline = int(re.search(r"^### Figure (\d+)\. Roofline with", markdown, re.MULTILINE)[1])
    assert markdown.index("7. Accelerated variants") < markdown.index("8. Roofline")
    assert variant_speedup < roofline
    html = rendered[0].html.read_text(encoding="utf-8")
    assert [int(n) for n in re.findall(r'<figure id="figure-(\d+)">', html)] == numbers


def test_old_artifacts_without_variant_fields_still_render(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, SMOKE_LIKE)
    for path in (root / "runs").glob("*.json"):  # an artifact written before variants existed
        doc = json.loads(path.read_text())
        for key in ("cache_bytes", "preparation_s"):
            doc.pop(key, None)
        for key in ("llada_impl", "llama_impl"):
            doc["config"].pop(key, None)
        if doc.get("samples"):
            doc["samples"].pop("forwards", None)
        path.write_text(json.dumps(doc))
    reseal(root)
    table = results_table(_load(root))
    assert set(table["impl"]) == {"vanilla"} and table["cache_bytes"].null_count() == table.height
    assert not has_variants(table)
    outputs = render_report(root, echo=False)
    assert "No accelerated variants in this sweep" in outputs.markdown.read_text(encoding="utf-8")
    assert "S_parity" in outputs.findings


def test_every_vanilla_analysis_ignores_variant_rows_it_is_handed(sweep) -> None:
    from report.analysis.derived import itl_by_context, memory_grid, step_time_by_length
    from report.answer.findings import crossover_table, predicted_throughput
    from report.analysis.parity import parity_table
    from report.analysis.predictions import model_shapes
    from report.analysis.quality import calibration_table, quality_by_setting

    _, results = sweep
    table = results_table(results)
    base = vanilla_runs(table)
    long = quality_long_table(results)
    vanilla_long = long.filter(pl.col("impl") == "vanilla")
    assert vanilla_long.height < long.height
    profiles, shapes = {A100: A100_PROFILE}, model_shapes(results)
    assert crossover_table(table, profiles, shapes).equals(crossover_table(base, profiles, shapes))
    assert predicted_throughput(table, profiles, shapes).equals(predicted_throughput(base, profiles, shapes))
    assert parity_table(long, table).equals(parity_table(vanilla_long, base))
    assert quality_by_setting(long).equals(quality_by_setting(vanilla_long))
    assert calibration_table(long).equals(calibration_table(vanilla_long))
    for view in (itl_by_context, step_time_by_length, memory_grid):
        assert view(table).equals(view(base)), view.__name__


def test_a_confidence_rule_that_never_fired_is_named(variants) -> None:
    from report.analysis.variants import idle_confidence_rules

    assert idle_confidence_rules(variants) == []  # the fixture's rule halves the forwards
    idle = variants.with_columns(
        pl.when(pl.col("impl") == PREFIX_THRESHOLD.name).then(pl.col("vanilla_forwards")).otherwise(pl.col("forwards"))
        .alias("forwards"))
    assert idle_confidence_rules(idle) == ["llada-8b prefix-t09"]
