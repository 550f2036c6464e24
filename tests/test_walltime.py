"""What `plan` predicts a sweep's wall time to be, against the campaign measured on an NVIDIA H200, and the
sweep's closing line, which must add wall time only."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.driver import SweepSummary
from orchestrator.plan import plan_runs, predict_plan
from orchestrator.walltime import COMPILE_S, RUN_OVERHEAD_S, SWEEP_START_S, load_seconds, run_seconds
from roofline.hardware import get_hardware
from specs.loader import PACKAGE_ROOT, load_spec
from specs.results import RunResult
from specs.schema import LlamaImpl

CAMPAIGN = PACKAGE_ROOT / "specs" / "campaign-h100.yaml"
H200_CAMPAIGN_S = 316 + 534 + 495 + 214  # four resumed commands, loads and warm-ups included
DATA = Path(__file__).parent / "data" / "h200"


def test_the_campaign_planned_on_h200_predicts_its_measured_wall_time_within_30_percent() -> None:
    spec = load_spec(CAMPAIGN)
    estimate = predict_plan(spec, plan_runs(spec), "h200")
    assert estimate is not None and estimate.hardware == "h200"
    assert 0.7 * H200_CAMPAIGN_S <= estimate.total_s <= 1.3 * H200_CAMPAIGN_S
    assert estimate.start_s == SWEEP_START_S
    assert set(estimate.loads) == {"llama-8b-synthetic", "llada-8b-synthetic"}  # each model loaded once
    assert estimate.total_s == pytest.approx(estimate.runs_s + sum(estimate.loads.values()) + SWEEP_START_S)


def test_plan_takes_a_profile_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(CAMPAIGN), "--profile", "h200"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("predicted wall time on h200: ") and "model loads" in last
    assert main(["plan", str(CAMPAIGN), "--profile", "no-such-gpu"]) != 0
    assert "--profile: unknown hardware 'no-such-gpu'" in capsys.readouterr().err


def test_a_run_costs_its_warmups_repetitions_overhead_and_compilation() -> None:
    spec = load_spec(CAMPAIGN)
    planned = plan_runs(spec)
    h200 = get_hardware("h200")
    llama = next(r.config for r in planned if r.config.model.arch == "llama")
    eager = run_seconds(llama, h200)
    # Host-bound: every eager forward costs at least the floor, warm-up and repetitions alike.
    forwards = llama.generation_length * (llama.controls.warmup + llama.controls.repetitions)
    assert eager >= forwards * h200.host_floor_s + RUN_OVERHEAD_S
    compiled = llama.model_copy(update={"llama_impl": LlamaImpl(name="static-compile", compile=True)})
    assert run_seconds(compiled, h200) > COMPILE_S
    # A synthetic 8B model is built on the GPU in well under a second; a checkpoint is read from disk.
    assert load_seconds(llama, h200) < 1.0


def test_the_closing_line_adds_wall_time_only() -> None:
    """An extrapolated run counts the steps it timed, not its extrapolated latency."""
    with tarfile.open(DATA / "campaign-h100.tgz") as archive:
        members = [m for m in archive.getmembers() if m.name.endswith(".json") and "/runs/" in m.name]
        results = [RunResult.model_validate_json(archive.extractfile(m).read()) for m in members]  # type: ignore[union-attr]
    summary = SweepSummary(planned=len(results), skipped_done=0, results=results)
    extrapolated = [r for r in results if r.samples and r.samples.extrapolated]
    assert extrapolated
    assert summary.measured_seconds < summary.run_seconds
    assert summary.measured_seconds < sum(sum(r.samples.latency_e2e_s) for r in results if r.samples)
