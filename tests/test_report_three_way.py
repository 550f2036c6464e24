"""A sweep of three families (LLaMA, LLaDA and Fast-dLLM v2 at two thresholds) renders two pairs: each threshold is
its own row, curve, S_parity and B*, with the block-diffusion roofline costed at that threshold's measured forwards;
the verdict and findings.json answer both pairs; the figures draw Fast-dLLM v2 in its own colour and marker."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import polars as pl
import pytest
from report_fixtures import FixtureGrid, HardwareKind, write_sweep

from report.figures.style import FAMILY_STYLES, family_style
from report.document.render import render_report
from report.table.flat import EAGER, GRAPH_CAPTURED, execution_of, roofline_sampling
from specs.registry import FAMILIES
from specs.schema import BlockDiffusionImpl, RunConfig

CPU = HardwareKind("cpu", "any", speed=0.05, capacity_bytes=1 << 62, quality=True, measured_roofs=True)
# Prompt 32 + 64 tokens in blocks of 32, sub-blocks of 8: Fast-dLLM v2's fixed schedule is K = 64 forwards at both
# thresholds. At 0.9 it matches LLaMA's quality and runs most of K; at 0.5 it misses parity and runs a quarter.
THREE = FixtureGrid(
    name="three", batch_sizes=(1, 4, 16), prompt_length=32, generation_lengths=(64,), steps=(16, 32, 64),
    block_lengths=(32,), dtype="float32", device="cpu", repetitions=3, synthetic="tiny", hardware=(CPU,),
    extra_failures=False, families=("llama", "llada", "fast_dllm_v2"), thresholds=(0.5, 0.9),
)
LOOSE, STRICT = "sub-block 8, threshold 0.5", "sub-block 8, threshold 0.9"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_sweep(tmp_path_factory.mktemp("three"), THREE)
    render_report(root)
    return root


@pytest.mark.slow  # renders the sweep once (about 10 s), shared by the module
def test_each_threshold_is_its_own_row_at_the_same_steps(rendered: Path) -> None:
    table = pl.read_parquet(rendered / "results.parquet").filter(pl.col("arch") == "fast_dllm_v2")
    assert table.height == 6  # 3 batches x 2 thresholds, none merged
    assert set(table["sampler_setting"]) == {LOOSE, STRICT}
    assert set(table["steps"]) == {64} and set(table["block_length"]) == {32}
    forwards = {s: rows["forwards"].to_list() for (s,), rows in table.group_by(["sampler_setting"])}
    assert max(forwards[LOOSE]) < min(forwards[STRICT])  # the threshold, not the schedule, sets the forwards
    assert set(table["execution"]) == {EAGER} and set(table["impl"]) == {"vanilla"}
    llada = pl.read_parquet(rendered / "results.parquet").filter(pl.col("arch") == "llada")
    assert llada["sampler_setting"].null_count() == llada.height


@pytest.mark.slow  # renders the sweep once (about 10 s), shared by the module
def test_block_diffusion_impl_sets_the_execution(rendered: Path) -> None:
    config = next(json.loads(p.read_text())["config"] for p in sorted((rendered / "runs").glob("*.json"))
                  if json.loads(p.read_text())["config"]["model"]["arch"] == "fast_dllm_v2")
    base = RunConfig.model_validate(config)
    graphed = base.model_copy(update={"block_diffusion_impl": BlockDiffusionImpl(name="bd-graph", graph=True)})
    cached = base.model_copy(update={"block_diffusion_impl": BlockDiffusionImpl(name="bd-sub", sub_block_cache=True)})
    assert (execution_of(base), execution_of(graphed), execution_of(cached)) == (EAGER, GRAPH_CAPTURED, EAGER)
    assert (graphed.impl_name, cached.impl_name) == ("bd-graph", "bd-sub")


def test_roofline_keywords_of_a_setting() -> None:
    assert roofline_sampling(None) == {} and roofline_sampling("alg entropy") == {"alg": "entropy"}
    assert roofline_sampling(STRICT, 52.5) == {"sub_block_length": 8, "forwards": 52}
    assert roofline_sampling(LOOSE) == {"sub_block_length": 8}


@pytest.mark.slow  # renders the sweep once (about 10 s), shared by the module
def test_verdict_answers_both_pairs_per_threshold(rendered: Path) -> None:
    record = json.loads((rendered / "findings.json").read_text())
    assert record["pairs"] == ["llada-tiny (LLaDA) vs llama-tiny (LLaMA)",
                               "fast_dllm_v2-tiny (Fast-dLLM v2) vs llama-tiny (LLaMA)"]
    bd = [s for s in record["verdict"] if s.startswith("fast_dllm_v2-tiny (Fast-dLLM v2) vs llama-tiny (LLaMA): ")]
    llada = [s for s in record["verdict"] if s.startswith("llada-tiny (LLaDA) vs llama-tiny (LLaMA): ")]
    # each pair's bullets carry its heading; how sure is one bullet for the whole sweep, last
    assert bd and llada and len(bd) + len(llada) + 1 == len(record["verdict"])
    assert record["verdict"][-1].startswith("How sure: ")
    speed = bd[0]
    assert f"at {LOOSE} (64 steps (K = N_out)), where no headline metric reaches parity: Fast-dLLM v2 is" in speed
    assert f"at {STRICT} (64 steps (K = N_out)), at equal quality: LLaMA is" in speed
    quality = next(s for s in bd if "Quality (" in s)
    assert f"at {LOOSE}: BERTScore F1: no parity" in quality and f"at {STRICT}: BERTScore F1: parity" in quality
    assert quality.count("against llama-tiny greedy") == 1  # named once, not per threshold
    # The pair's own titles, never the other pair's, its history included: each pair's runs are said alone.
    assert not any("LLaDA" in s for s in bd) and not any("Fast-dLLM" in s for s in llada)
    assert record["pair_provenance"].keys() == set(record["pairs"])
    # the verdict in full (the report's Findings) ends each pair's how-sure with its own history
    full = (rendered / "report.md").read_text(encoding="utf-8")
    assert all(f"; {record['pair_provenance'][pair]}." in full for pair in record["pairs"])


@pytest.mark.slow  # renders the sweep once (about 10 s), shared by the module
def test_findings_carry_each_threshold(rendered: Path) -> None:
    record = json.loads((rendered / "findings.json").read_text())
    bd = [f for f in record["findings"] if f["dllm_arch"] == "fast_dllm_v2"]
    assert {f["sampler_setting"] for f in bd} == {LOOSE, STRICT}
    assert all("sampler_setting" not in f for f in record["findings"] if f["dllm_arch"] == "llada")
    reached = {f["sampler_setting"]: [s["steps"] for s in f["s_parity"]] for f in bd}
    assert reached == {LOOSE: [None, None], STRICT: [64, 64]}
    markdown = (rendered / "report.md").read_text()
    assert f"S_parity: fast_dllm_v2-tiny ({STRICT}), BERTScore F1 vs llama-tiny greedy" in markdown
    assert "parity at 64 steps, the one step count it ran" in markdown
    assert "no parity at 64 steps, the one step count it ran" in markdown
    for setting in (LOOSE, STRICT):
        assert f"B*: llama-tiny overtakes fast_dllm_v2-tiny at 64 steps ({setting})" in markdown


@pytest.mark.slow  # renders the sweep once (about 10 s), shared by the module
def test_roofline_b_star_follows_the_threshold(rendered: Path) -> None:
    """The threshold's measured forwards reach the block-diffusion roofline: fewer forwards, a later predicted B*."""
    markdown = (rendered / "report.md").read_text()
    lines = {s: next(line for line in markdown.splitlines()
                     if f"B*: llama-tiny overtakes fast_dllm_v2-tiny at 64 steps ({s})" in line) for s in (LOOSE, STRICT)}
    assert "roofs-only model's B* ≤ 1" in lines[STRICT] and "roofs-only model's B* ≤ 1" not in lines[LOOSE]


def test_every_family_has_its_own_style() -> None:
    assert set(FAMILIES) <= set(FAMILY_STYLES)
    styles = [family_style(name) for name in FAMILIES]
    assert len({s.color for s in styles}) == len({s.marker for s in styles}) == len({s.shades for s in styles}) == len(FAMILIES)
    assert family_style("fast_dllm_v2") != family_style("not-a-family")


@pytest.mark.slow  # renders the sweep once (about 10 s), shared by the module
def test_three_way_figures_draw(rendered: Path) -> None:
    figures = {p.stem for p in (rendered / "figures").glob("*.png")}
    assert {"quality_vs_steps_bertscore_f1", "findings_throughput", "pareto_frontier_bertscore_f1"} <= figures


@pytest.mark.slow  # renders a second, smaller sweep (about 5 s)
def test_one_threshold_still_answers_per_setting(tmp_path: Path) -> None:
    """A sweep's only block-diffusion setting still answers parity for that setting, not from a step count."""
    grid = dataclasses.replace(THREE, name="one", batch_sizes=(1, 4), families=("llama", "fast_dllm_v2"),
                               thresholds=(0.9,))
    out = render_report(write_sweep(tmp_path, grid), echo=False)
    found = json.loads(out.findings_json.read_text(encoding="utf-8"))
    assert "pairs" not in found and "pair_provenance" not in found  # one pair: the sweep's provenance is its own
    assert f"at {STRICT} (64 steps (K = N_out)), at equal quality: LLaMA is" in found["verdict"][0]
    quality = next(s for s in found["verdict"] if s.startswith("Quality ("))
    assert quality.startswith("Quality (fast_dllm_v2-tiny; against llama-tiny greedy")
    assert f"): at {STRICT}: BERTScore F1: parity" in quality
    assert "from ≤ 64 steps on" not in quality


@pytest.mark.slow  # renders a second, smaller sweep (about 10 s)
def test_a_model_that_pairs_with_none_is_left_out_of_the_pair_s_history(tmp_path: Path) -> None:
    """LLaMA, LLaDA and a Qwen2.5 that pairs with neither (Dream did not run): one pair, whose history, the verdict's
    last clause, is said of its own two models' runs, never of Qwen2.5's."""
    grid = dataclasses.replace(THREE, name="extra", batch_sizes=(1, 4), families=("llama", "llada", "qwen2"),
                               thresholds=())
    out = render_report(write_sweep(tmp_path, grid), echo=False)
    found = json.loads(out.findings_json.read_text(encoding="utf-8"))
    (heading,) = found["pairs"]
    assert heading == "llada-tiny (LLaDA) vs llama-tiny (LLaMA)" and found["pair_provenance"].keys() == {heading}
    assert "Qwen2.5" in found["provenance"] and "Qwen2.5" not in found["pair_provenance"][heading]
    assert "LLaMA and LLaDA" in found["pair_provenance"][heading]
    # the verdict in full (the report's Findings) ends the pair's how-sure with its own history
    assert f"; {found['pair_provenance'][heading]}." in out.markdown.read_text(encoding="utf-8")
