"""The pairings: each model at its fastest measured implementation at each point first, the autoregressive model at
its best against the vanilla diffusion model beside it, then vanilla against vanilla (eager against eager), in
findings.json, the Findings and the terminal; on fixture sweeps and on the H200 artifacts (tests/data/h200)."""

from __future__ import annotations

import json
import math
import tarfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from report_fixtures import SMOKE_LIKE, VARIANTS, write_sweep

from report.answer.findings_file import FindingsFile
from report.analysis.intervals import AT_OR_BELOW, WELCH, crossing
from report.answer.pairing.build import AR_BEST_PAIRING, BEST_PAIRING, NO_VARIANTS, VANILLA_PAIRING
from report.document.render import render_report
from report.table.flat import full_where_measured, results_table
from roofline.crossover import crossing_batch
from specs.artifacts import SweepLayout, verify
from specs.results import RunResult

H200_DATA = Path(__file__).parent / "data" / "h200"


def unpack(name: str, into: Path) -> Path:
    """One of the H200 tarballs, unpacked: <into>/<name>/ (the sweep directory)."""
    with tarfile.open(H200_DATA / f"{name}.tgz") as archive:
        archive.extractall(into, filter="data")
    return into / name


def read_findings(root: Path) -> FindingsFile:
    return FindingsFile.model_validate_json((root / "findings.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- fixture sweeps


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory):
    return render_report(write_sweep(tmp_path_factory.mktemp("pairings"), VARIANTS), echo=False)


@pytest.fixture(scope="module")
def vanilla_only(tmp_path_factory: pytest.TempPathFactory):
    return render_report(write_sweep(tmp_path_factory.mktemp("vanilla"), SMOKE_LIKE), echo=False)


def test_the_best_pairing_takes_each_models_fastest_run_at_each_batch(variants) -> None:
    found = read_findings(variants.sweep_dir)
    assert found.pairings == [BEST_PAIRING, AR_BEST_PAIRING, VANILLA_PAIRING]
    results = [RunResult.model_validate_json(p.read_text()) for p in SweepLayout(variants.sweep_dir).run_files().values()]
    table = full_where_measured(results_table(results).filter(pl.col("status") == "ok"))
    best = [p for p in found.findings if p.pairing == BEST_PAIRING]
    assert {p.steps for p in best} == set(VARIANTS.steps)
    for p in best:
        for q in p.speedups:
            at = table.filter(pl.col("batch_size") == q.batch_size)
            llama = at.filter(pl.col("arch") == "llama").sort("latency_e2e_s_median").row(0, named=True)
            llada = at.filter((pl.col("arch") == "llada") & (pl.col("steps") == p.steps)).sort(
                "latency_e2e_s_median").row(0, named=True)
            assert (q.llama_run_id, q.llada_run_id) == (llama["run_id"], llada["run_id"])
            assert (q.llama_impl, q.llada_impl) == (llama["impl"], llada["impl"])
            assert q.speedup == pytest.approx(np.median(llama["latency_e2e_s_samples"])
                                              / np.median(llada["latency_e2e_s_samples"]))
            # Six repetitions a side in one session: Welch's t on log latencies.
            assert q.interval_method == WELCH and (q.llama_repetitions, q.llada_repetitions) == (6, 6)
            assert q.interval_level >= 0.95 and q.sessions == 1 and "one session" in q.interval_label
            assert q.speedup_low <= q.speedup <= q.speedup_high
        # The compiled LLaMA step and the dual cache lose to vanilla at B = 32 (the fixture's cost law): the best
        # pairing names a different implementation there than at B = 1.
        by_batch = {q.batch_size: q for q in p.speedups}
        assert by_batch[1].llama_impl == "static-compile" and by_batch[32].llama_impl == "vanilla"
        assert p.llama_impls == ["static-compile", "vanilla"]
        # B* reads the same speedups the table shows, so the two never disagree on who is ahead at a batch.
        speedups = [q.speedup for q in p.speedups]
        assert (p.b_star_measured, p.b_star_bound) == crossing([q.batch_size for q in p.speedups], speedups)
        assert p.b_star_low <= p.b_star_measured <= p.b_star_high
        assert p.roofline_profile is not None and p.roofline_implementations is not None


def test_the_ar_at_its_best_meets_the_vanilla_diffusion_model(variants) -> None:
    """Beside each at its best: LLaMA's fastest implementation at each batch against the vanilla LLaDA."""
    found = read_findings(variants.sweep_dir)
    ar_best = [p for p in found.findings if p.pairing == AR_BEST_PAIRING]
    best = {(p.steps, q.batch_size): q for p in found.findings if p.pairing == BEST_PAIRING for q in p.speedups}
    assert {p.steps for p in ar_best} == set(VARIANTS.steps)
    for p in ar_best:
        assert p.llada_impls == ["vanilla"]
        for q in p.speedups:
            assert q.llama_run_id == best[(p.steps, q.batch_size)].llama_run_id


def test_the_vanilla_pairing_reads_vanilla_runs_and_agrees_with_the_crossover_table(variants) -> None:
    found = read_findings(variants.sweep_dir)
    vanilla = [p for p in found.findings if p.pairing == VANILLA_PAIRING]
    assert vanilla and all(p.llama_impls == ["vanilla"] and p.llada_impls == ["vanilla"] for p in vanilla)
    crossings = {line for line in variants.findings.splitlines() if "B*:" in line}
    for p in vanilla:
        assert any(f"at {p.steps} steps" in line and f"{p.b_star_measured:.3g}" in line for line in crossings)


def test_s_parity_is_carried_and_marks_its_step_count(variants) -> None:
    found = read_findings(variants.sweep_dir)
    vanilla = [p for p in found.findings if p.pairing == VANILLA_PAIRING]
    parity = vanilla[0].s_parity
    assert {s.metric for s in parity} == {"bertscore_f1", "gen_ppl"}
    for p in vanilla:
        assert p.s_parity == parity  # S_parity does not depend on the step count of the object
        assert p.at_s_parity == [s.metric for s in parity if s.steps == p.steps]
    assert any(p.at_s_parity for p in vanilla)


def test_findings_json_report_md_and_the_terminal_give_both_pairings(variants) -> None:
    raw = json.loads(variants.findings_json.read_text(encoding="utf-8"))
    for obj in raw["findings"]:
        for key in ("pairing", "prompt_length", "generation_length", "steps", "llama_model", "llada_model",
                    "llama_impls", "llada_impls", "b_star_measured", "b_star_low", "b_star_high", "b_star_level",
                    "b_star_roofs", "b_star_roofs_bound", "speedups"):
            assert key in obj
    md = variants.markdown.read_text(encoding="utf-8")
    findings = md[md.index("## 1. Findings"):md.index("## 2. Setup")]
    assert "The answer, each at its best first" in findings
    assert findings.index("| best |") < findings.index("| best-ar |") < findings.index("| vanilla |")
    assert "vanilla pairing (" in variants.pairings and "best pairing (" in variants.pairings
    assert "best-ar pairing (" in variants.pairings
    assert "static-compile (compiled) vs" in variants.pairings
    assert not (variants.sweep_dir / "findings.json.tmp").exists()
    assert not verify(SweepLayout(variants.sweep_dir))  # findings.json is part of a sweep, not a stray


def test_a_vanilla_only_sweep_says_no_other_implementation_ran(vanilla_only) -> None:
    found = read_findings(vanilla_only.sweep_dir)
    assert found.pairings == [VANILLA_PAIRING] and NO_VARIANTS in found.notes
    assert all(p.pairing == VANILLA_PAIRING for p in found.findings) and found.findings
    assert "vanilla pairing (" in vanilla_only.pairings and f"best pairing: {NO_VARIANTS}" in vanilla_only.pairings
    md = vanilla_only.markdown.read_text(encoding="utf-8")
    assert f"Best pairing: {NO_VARIANTS}." in md
    # Three repetitions a side in one session: Welch's t on log latencies, and it says what it leaves out.
    points = [q for p in found.findings for q in p.speedups]
    assert points and all(q.interval_method == WELCH and q.interval_level == pytest.approx(0.95) for q in points)
    assert all(q.interval_label.startswith("95% Welch t interval on log latencies") for q in points)
    assert any("variation between sessions" in note for note in found.notes)


def test_the_crossing_search_interpolates_in_log_batch() -> None:
    assert crossing_batch(lambda b: 0.5) == 1.0
    assert crossing_batch(lambda b: -1.0, max_batch=64) is None
    # log ratio = log(B / 10): crosses at B = 10 exactly, found between the integers around it.
    assert crossing_batch(lambda b: math.log(b / 10)) == pytest.approx(10.0)


# ---------------------------------------------------------------- the H200 artifacts


@pytest.fixture(scope="module")
def accel(tmp_path_factory: pytest.TempPathFactory):
    return render_report(unpack("accel-8b", tmp_path_factory.mktemp("h200")), echo=False)


def test_on_the_h200_the_best_pairing_is_static_compile_against_dual_cache(accel) -> None:
    found = read_findings(accel.sweep_dir)
    assert found.pairings == [BEST_PAIRING, AR_BEST_PAIRING, VANILLA_PAIRING]
    (best,) = [p for p in found.findings if p.pairing == BEST_PAIRING]
    assert (best.prompt_length, best.generation_length, best.steps, best.block_length) == (512, 256, 64, 32)
    assert best.llama_impls == ["static-compile"] and best.llada_impls == ["dual-cache"]
    assert [q.batch_size for q in best.speedups] == [1, 8]
    assert best.b_star_bound == "=" and 1 < best.b_star_measured < 8  # LLaDA ahead at B = 1, LLaMA at B = 8
    assert best.roofline_profile.startswith("NVIDIA H200") and best.b_star_calibrated is not None
    (vanilla,) = [p for p in found.findings if p.pairing == VANILLA_PAIRING]
    assert vanilla.b_star_bound == "=" and vanilla.b_star_measured > best.b_star_measured
    # On the roofs alone LLaMA is ahead already at B = 1: said as "<=", never as a crossing at 1.0; a model's B*.
    assert vanilla.b_star_roofs_bound == AT_OR_BELOW and "the roofs-only model's B* ≤ 1" in accel.pairings
    assert "the floor-calibrated model's" in accel.pairings and "bound" not in accel.pairings
    # The compiled LLaMA against the vanilla LLaDA: LLaMA ahead at every batch measured (median against median).
    (ar_best,) = [p for p in found.findings if p.pairing == AR_BEST_PAIRING]
    assert ar_best.llama_impls == ["static-compile"] and ar_best.llada_impls == ["vanilla"]
    assert [round(q.speedup, 2) for q in ar_best.speedups] == [0.82, 0.16] and ar_best.b_star_bound == AT_OR_BELOW
    # Eager against eager: each side's time per forward and share of its roofs, where the host overhead shows.
    assert 0.019 < vanilla.speedups[0].llama_forward_s < 0.021 and vanilla.speedups[0].llama_roofs_fraction < 0.2
    for q in best.speedups + vanilla.speedups:  # three repetitions a side, one session: Welch's t at 95%
        assert q.interval_level == pytest.approx(0.95) and (q.llama_repetitions, q.llada_repetitions) == (3, 3)
        assert q.llama_joules_per_token is not None and q.llada_joules_per_token is not None
    assert "llama-8b-synthetic vs llada-8b-synthetic" in accel.pairings
    assert "static-compile (compiled) vs dual-cache (eager)" in accel.pairings


@pytest.mark.slow
def test_on_the_h200_campaign_every_point_has_its_vanilla_pairing(tmp_path: Path) -> None:
    outputs = render_report(unpack("campaign-h100", tmp_path), echo=False)
    found = read_findings(outputs.sweep_dir)
    assert found.pairings == [VANILLA_PAIRING] and NO_VARIANTS in found.notes
    assert len(found.findings) == 9  # three lengths x three step counts
    assert all(p.b_star_roofs_bound is not None for p in found.findings)
    # Every batch but one: B = 1 at 256 + 256, 16 steps, failed its extrapolation check (report/analysis/extrapolation.py).
    assert [(p.prompt_length, p.steps) for p in found.findings if len(p.speedups) != 3] == [(256, 16)]
    # Extrapolated LLaDA latencies (and their energy) say so, point by point; none at B = 64 was checked by a run in
    # full at its batch, every other one was.
    extrapolated = [q for p in found.findings for q in p.speedups if q.llada_extrapolated]
    assert extrapolated and all(q.llada_energy_extrapolated for q in extrapolated)
    assert all((q.llada_extrapolation_checked is False) == (q.batch_size == 64) for q in extrapolated)
    assert all(q.llada_timed_steps == 4 for q in extrapolated)
    # 256 + 256 at B = 1: the campaign's first two LLaDA runs stepped at ~31 ms, the rest at ~21.6 ms; the K = N_out
    # speedup is given at both modes.
    (k_out,) = [q for p in found.findings if (p.prompt_length, p.steps) == (256, 256) for q in p.speedups
                if q.batch_size == 1]
    assert [round(s * 1e3) for s in k_out.llada_step_modes_s] == [22, 31]
    assert k_out.speedup_at_modes[0] > 1.25 and 0.85 < k_out.speedup_at_modes[1] < 0.95
    assert "27 of 33 LLaDA runs timed only their first 4 steps and were scaled up to 64x" in found.notes[0]
    assert found.provenance.startswith("measured at commit 966dbce, in 4 worker processes")
    assert "LLaMA and LLaDA not interleaved" in found.provenance
