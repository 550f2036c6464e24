"""The report per pair: a Dream/Qwen2.5 sweep gets that pair's B*, S_parity and verdict; a sweep of all four
families gives two pairings (LLaDA/LLaMA and Dream/Qwen2.5), each with its own B*; a diffusion model whose peer
family did not run pairs with every autoregressive model. Every B* is checked against the one computed here from
the fixture's latencies (tests/report_fixtures.py)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from report_fixtures import COMPILE, CPU_ROOFS, FixtureGrid, HardwareKind, write_sweep

from report.answer.findings import crossover_table
from report.answer.findings_file import findings_file, findings_json
from report.answer.pairing.text import pairings_text
from report.answer.pairing.build import pairing_table
from report.answer.pairing.pairs import Pair, pairs_from, sides_of
from report.analysis.parity import parity_table
from report.analysis.predictions import model_shapes, profile_from_roofs
from report.analysis.quality import quality_long_table
from report.document.render import _load, render_report
from report.table.flat import results_table
from report.answer.verdict.short import verdict
from specs.artifacts import SweepLayout
from specs.results import RunResult
from specs.schema import DreamImpl

CPU = HardwareKind("cpu", "any", speed=0.05, capacity_bytes=1 << 62, quality=False, measured_roofs=True)
# Tiny synthetic models on a CPU, three batch sizes, three step counts: the crossover falls between measured
# batches at 16 steps and Qwen2.5 runs 0.7x LLaMA's time, so the two pairs' B* differ.
PAIRS = FixtureGrid(
    name="pairs", batch_sizes=(1, 4, 16), prompt_length=32, generation_lengths=(64,), steps=(16, 32, 64),
    block_lengths=(32,), dtype="float32", device="cpu", repetitions=3, synthetic="tiny", hardware=(CPU,),
    extra_failures=False, families=("qwen2", "dream"), family_speed=(("qwen2", 0.7),),
)
FOUR = dataclasses.replace(PAIRS, name="four", families=("llama", "llada", "qwen2", "dream"))
NO_PEER = dataclasses.replace(PAIRS, name="nopeer", families=("qwen2", "qwen2#b", "llada"),
                              family_speed=(("qwen2#b", 1.4),))
WITH_QUALITY = (dataclasses.replace(CPU, quality=True),)


def _results(root: Path) -> list[RunResult]:
    return _load(SweepLayout(root), strict=True)[0]


def _tokens_per_s(results: list[RunResult]) -> dict[tuple[str, int | None], dict[int, float]]:
    """Median tokens/s over repetitions of every ok run: (model, steps) -> batch -> tokens/s."""
    out: dict[tuple[str, int | None], dict[int, float]] = defaultdict(dict)
    for r in results:
        c = r.config
        out[(c.model.name, c.steps)][c.batch_size] = float(np.median(
            [c.batch_size * c.generation_length / s for s in r.samples.latency_e2e_s]))
    return out


def _expected_b_star(ar: dict[int, float], dllm: dict[int, float]) -> tuple[float, str]:
    """B* from the throughputs: the batch from which the AR model stays ahead, log-log between measured batches."""
    batches = sorted(set(ar) & set(dllm))
    ahead = [ar[b] >= dllm[b] for b in batches]
    first = next((i for i in range(len(batches)) if all(ahead[i:])), None)
    if first is None:
        return float(batches[-1]), ">"
    if first == 0:
        return float(batches[0]), "<="
    (b0, b1), (r0, r1) = batches[first - 1:first + 1], (math.log(ar[b] / dllm[b]) for b in batches[first - 1:first + 1])
    return math.exp(math.log(b0) + -r0 / (r1 - r0) * (math.log(b1) - math.log(b0))), "="


def _analyses(root: Path) -> tuple[list[RunResult], list]:
    results = _results(root)
    table = results_table(results)
    profiles = {"cpu": profile_from_roofs(CPU_ROOFS)}
    crossovers = crossover_table(table, profiles, model_shapes(results))
    parity = parity_table(quality_long_table(results), table)
    return results, pairing_table(table, results, parity, crossovers, profiles), crossovers


def test_pairs_follow_the_registry_peer_else_every_autoregressive_model() -> None:
    assert pairs_from([("llama-x", "llama"), ("qwen-y", "qwen2"), ("llada-z", "llada"), ("dream-w", "dream")]) == [
        Pair("llama-x", "llama", "llada-z", "llada"), Pair("qwen-y", "qwen2", "dream-w", "dream")]
    assert pairs_from([("qwen-a", "qwen2"), ("qwen-b", "qwen2"), ("llada-z", "llada")]) == [
        Pair("qwen-a", "qwen2", "llada-z", "llada"), Pair("qwen-b", "qwen2", "llada-z", "llada")]
    assert pairs_from([("llada-z", "llada")]) == []
    one = sides_of([Pair("qwen-y", "qwen2", "dream-w", "dream")])
    assert (one.ar, one.dllm) == ("Qwen2.5", "Dream")
    both = sides_of(pairs_from([("llama-x", "llama"), ("qwen-y", "qwen2"), ("llada-z", "llada"), ("dream-w", "dream")]))
    assert (both.ar, both.dllm) == ("AR", "dLLM")


def test_a_dream_and_qwen_sweep_gets_that_pairs_b_star_and_verdict(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, PAIRS)
    results, pairings, crossovers = _analyses(root)
    tps = _tokens_per_s(results)
    assert {(p.llama_model, p.llada_model) for p in pairings} == {("qwen2-tiny", "dream-tiny")}
    assert {p.pairing for p in pairings} == {"vanilla"} and len(pairings) == 3  # one per step count
    for p in pairings:
        assert p.block_length is None and p.sampler_setting == "alg entropy" and (p.ar_arch, p.dllm_arch) == ("qwen2", "dream")
        b_star, bound = _expected_b_star(tps[("qwen2-tiny", None)], tps[("dream-tiny", p.steps)])
        assert (p.b_star_measured, p.b_star_bound) == (pytest.approx(b_star), bound)
        assert p.b_star_roofs_bound is not None or p.roofline_note  # the roofline costs Dream too
    at16 = next(p for p in pairings if p.steps == 16)
    assert at16.b_star_bound == "=" and 4 < at16.b_star_measured < 16  # a crossing between measured batches
    row = crossovers.filter(crossovers["steps"] == 16).row(0, named=True)
    assert (row["llama_model"], row["llada_model"], row["sampler_setting"]) == ("qwen2-tiny", "dream-tiny", "alg entropy")
    assert row["b_star"] == pytest.approx(at16.b_star_measured)
    sentences = verdict(pairings)
    assert "Qwen2.5 stays ahead from B" in sentences[0] and "Dream" in sentences[0] and "LLaMA" not in sentences[0]
    assert f"= {at16.b_star_measured:.3g}" in sentences[0]
    assert sentences[-1].startswith("How sure: ") and "Dream" in sentences[-2]  # the quality sentence
    assert "speedup = L_e2e(Qwen2.5) / L_e2e(Dream)" in pairings_text(pairings)


def test_a_sweep_of_all_four_families_gives_two_pairs_each_with_its_own_b_star(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, FOUR)
    results, pairings, _ = _analyses(root)
    tps = _tokens_per_s(results)
    pairs = {(p.llama_model, p.llada_model) for p in pairings}
    assert pairs == {("llama-tiny", "llada-tiny"), ("qwen2-tiny", "dream-tiny")}  # each dLLM with its peer only
    at16 = {p.pair: p for p in pairings if p.steps == 16}
    for pair, p in at16.items():
        expected, bound = _expected_b_star(tps[(pair.ar_model, None)], tps[(pair.dllm_model, 16)])
        assert bound == "=" and p.b_star_measured == pytest.approx(expected)
    llada, dream = (at16[next(q for q in at16 if q.dllm_arch == arch)] for arch in ("llada", "dream"))
    # Qwen2.5 runs 0.7x LLaMA's time: it overtakes its diffusion model at a smaller batch.
    assert dream.b_star_measured < 0.95 * llada.b_star_measured
    sentences = verdict(pairings)
    assert sentences[0].startswith("llada-tiny (LLaDA) vs llama-tiny (LLaMA): ") and "LLaMA stays ahead" in sentences[0]
    dream_first = next(s for s in sentences if s.startswith("dream-tiny (Dream) vs qwen2-tiny (Qwen2.5): "))
    assert "Qwen2.5 stays ahead" in dream_first
    # Every sentence belongs to one pair and says so.
    # each pair's bullets carry its heading; how sure is one bullet for the whole sweep, last
    assert sentences[-1].startswith("How sure: ")
    assert all(s.startswith(("llada-tiny (LLaDA) vs llama-tiny (LLaMA): ", "dream-tiny (Dream) vs qwen2-tiny"))
               for s in sentences[:-1])
    text = pairings_text(pairings)
    assert "    llada-tiny (LLaDA) vs llama-tiny (LLaMA)" in text and "    dream-tiny (Dream) vs qwen2-tiny (Qwen2.5)" in text
    # findings.json lists the pairs, and each finding's families, where a sweep has several.
    record = json.loads(findings_json(findings_file("four", pairings)))
    assert record["pairs"] == ["llada-tiny (LLaDA) vs llama-tiny (LLaMA)", "dream-tiny (Dream) vs qwen2-tiny (Qwen2.5)"]
    assert record["speedup"].startswith("speedup = L_e2e(AR) / L_e2e(dLLM)")
    families = {(f["llama_model"], f["ar_arch"], f["llada_model"], f["dllm_arch"]) for f in record["findings"]}
    assert families == {("llama-tiny", "llama", "llada-tiny", "llada"), ("qwen2-tiny", "qwen2", "dream-tiny", "dream")}
    assert all(("sampler_setting" in f) == (f["dllm_arch"] == "dream") for f in record["findings"])


def test_a_diffusion_model_without_its_peer_pairs_with_every_autoregressive_model(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, NO_PEER)
    results, pairings, crossovers = _analyses(root)
    tps = _tokens_per_s(results)
    assert {(p.llama_model, p.llada_model) for p in pairings} == {("qwen2-tiny", "llada-tiny"),
                                                                   ("qwen2-b-tiny", "llada-tiny")}
    for p in pairings:
        expected, bound = _expected_b_star(tps[(p.llama_model, None)], tps[("llada-tiny", p.steps)])
        assert (p.b_star_measured, p.b_star_bound) == (pytest.approx(expected), bound)
    at16 = {p.llama_model: p.b_star_measured for p in pairings if p.steps == 16}
    assert at16["qwen2-tiny"] < at16["qwen2-b-tiny"]  # the slower AR model overtakes later
    assert crossovers["llama_model"].n_unique() == 2


def test_the_best_pairing_takes_each_models_fastest_implementation_dream_graph_included(tmp_path: Path) -> None:
    """Dream's captured step (fixture: 0.5 + 0.05 B of vanilla's time) wins at small batches and loses from
    B = 11; the best pairing takes, at each batch, each side's fastest measured run."""
    grid = dataclasses.replace(PAIRS, name="dreambest", dream_impls=(DreamImpl(name="graph", graph=True),),
                               llama_impls=(COMPILE,))
    root = write_sweep(tmp_path, grid)
    results, pairings, _ = _analyses(root)
    latency = {r.run_id: float(np.median(r.samples.latency_e2e_s)) for r in results}
    by_point: dict[tuple, dict[str, str]] = defaultdict(dict)
    for r in results:
        c = r.config
        by_point[(c.model.name, c.steps, c.batch_size)][c.impl_name] = r.run_id
    best = [p for p in pairings if p.pairing == "best"]
    assert {p.steps for p in best} == {16, 32, 64} and all(p.llada_model == "dream-tiny" for p in best)
    for p in best:
        for q in p.speedups:
            ar = by_point[("qwen2-tiny", None, q.batch_size)]
            dllm = by_point[("dream-tiny", p.steps, q.batch_size)]
            assert q.llama_run_id == min(ar.values(), key=latency.get)
            assert q.llada_run_id == min(dllm.values(), key=latency.get)
            assert q.speedup == pytest.approx(latency[q.llama_run_id] / latency[q.llada_run_id])
    at16 = next(p for p in best if p.steps == 16)
    assert at16.llada_impls == ["graph", "vanilla"]  # graph at B = 1 and 4 (0.55x, 0.7x), vanilla at 16 (1.3x)
    sentences = verdict(pairings)
    assert sentences[0].startswith("Each at its best (Qwen2.5 ")
    assert sentences[1].startswith("Qwen2.5 at its best against vanilla Dream (Qwen2.5 static-compile (compiled)")


def test_a_dream_report_renders_its_pair_with_steps_to_parity(tmp_path: Path) -> None:
    """End to end with quality: Dream's BERTScore is within the 0.02 margin of Qwen2.5's greedy level from 32 steps
    (fixture: F1 0.85 against 0.90 - 0.25 exp(-steps / 20), 0.8495 at 32), and the report, findings.json and the
    verdict name the pair."""
    grid = dataclasses.replace(PAIRS, name="dreamq", hardware=WITH_QUALITY)
    root = write_sweep(tmp_path, grid)
    out = render_report(root, echo=False)
    found = json.loads(out.findings_json.read_text(encoding="utf-8"))
    assert found["speedup"].startswith("speedup = L_e2e(Qwen2.5) / L_e2e(Dream)") and "pairs" not in found
    vanilla = [f for f in found["findings"] if f["pairing"] == "vanilla"]
    assert {f["sampler_setting"] for f in vanilla} == {"alg entropy"} and all(f["block_length"] is None for f in vanilla)
    f1 = {f["steps"]: s for f in vanilla for s in f["s_parity"] if s["metric"] == "bertscore_f1"}
    assert f1 and all(s["steps"] == 32 and s["reference"] == "qwen2-tiny greedy" for s in f1.values())
    md = out.markdown.read_text(encoding="utf-8")
    assert "B*: qwen2-tiny overtakes dream-tiny at 16 steps (alg entropy)" in md
    assert "Throughput vs batch size, and where Qwen2.5 overtakes Dream" in md and "LLaMA" not in md
    assert "vanilla Qwen2.5 against vanilla Dream, both eager (the protocol's pair)" in md
    assert "vanilla Dream: the official algorithm with logits for the generated window only" in md
    assert "BERTScore F1 as good as qwen2-tiny greedy from 32 steps" in found["verdict"][0]


def test_a_report_of_two_pairs_renders_a_pairings_table_per_pair(tmp_path: Path) -> None:
    """All four families with quality: every figure draws (the diffusion curves of both families in one panel),
    the Findings hold one pairings table per pair headed by its two models, findings.json lists the pairs."""
    grid = dataclasses.replace(FOUR, hardware=WITH_QUALITY)
    out = render_report(write_sweep(tmp_path, grid), echo=False)
    # One N_out, one block, and synthetic weights (no training log).
    assert {s.stem for s in out.skipped} == {"latency_vs_generation_length", "block_length_ablation", "training_loss"}
    found = json.loads(out.findings_json.read_text(encoding="utf-8"))
    assert found["pairs"] == ["llada-tiny (LLaDA) vs llama-tiny (LLaMA)", "dream-tiny (Dream) vs qwen2-tiny (Qwen2.5)"]
    md = out.markdown.read_text(encoding="utf-8")
    assert ("*llada-tiny (LLaDA) vs llama-tiny (LLaMA): The answer, each at its best first (speedup = L_e2e(LLaMA) / "
            "L_e2e(LLaDA)") in md
    assert "*dream-tiny (Dream) vs qwen2-tiny (Qwen2.5): The answer, each at its best first (speedup = L_e2e(Qwen2.5)" in md
    assert "Throughput vs batch size, and where AR overtakes dLLM" in md
    # Each diffusion model's S_parity is against its own pair's AR model.
    parity_rows = {(f["llama_model"], s["reference"]) for f in found["findings"] for s in f["s_parity"]}
    assert {ar for ar, _ in parity_rows} == {"llama-tiny", "qwen2-tiny"}
    assert all(ref.startswith(f"{ar} ") for ar, ref in parity_rows), parity_rows


def test_a_pair_whose_diffusion_runs_all_failed_is_named_in_the_verdict_findings_and_findings_json(
        tmp_path: Path) -> None:
    grid = dataclasses.replace(FOUR, name="dreamfails", failing_families=("dream",))
    out = render_report(write_sweep(tmp_path, grid), echo=False)
    found = json.loads(out.findings_json.read_text(encoding="utf-8"))
    (reason,) = found["unanswered"]
    assert reason.startswith("dream-tiny (Dream) vs qwen2-tiny (Qwen2.5): no answer: every dream-tiny run failed (")
    assert "error)" in reason
    # The answered pair keeps its heading: the verdict does not read as the sweep's whole answer.
    assert found["verdict"][-1] == f"{reason}."
    assert found["verdict"][-2].startswith("How sure: ")  # the sweep's, before the unanswered pair
    assert all(v.startswith("llada-tiny (LLaDA) vs llama-tiny (LLaMA): ") for v in found["verdict"][:-2])
    assert "NO ANSWER" in out.findings and reason in out.findings
    assert reason in out.markdown.read_text(encoding="utf-8")


def test_a_sweep_of_one_paradigm_says_there_is_nothing_to_pair(tmp_path: Path) -> None:
    grid = dataclasses.replace(PAIRS, name="dreamonly", families=("dream",))
    out = render_report(write_sweep(tmp_path, grid), echo=False)
    found = json.loads(out.findings_json.read_text(encoding="utf-8"))
    assert found["verdict"] == ["No verdict: nothing to compare: the sweep has no autoregressive model to pair with "
                                "dream-tiny."]
    assert "no successful runs of both models" not in out.markdown.read_text(encoding="utf-8")
