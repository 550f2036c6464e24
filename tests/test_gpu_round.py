"""`just gpu-round`: its plan fits a lease on both profiles and is held to the H200 sweeps' wall time; a call runs
the pieces in order and the next one resumes; the goals are read from the artifacts, met, missed or not measured."""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
from datetime import datetime
from pathlib import Path

import pytest

from orchestrator import gpu_round
from orchestrator.gpu_round import CALL_LIMIT_S, ROUND_LIMIT_S, RoundLayout, plan_round, run_call
from orchestrator.plan import plan_runs, predicted_not_to_fit
from orchestrator.round_goals import HOST_FINDING, evaluate_goals
from orchestrator.walltime import run_seconds
from roofline.hardware import get_hardware
from specs.loader import PACKAGE_ROOT, load_spec
from specs.results import RunResult

DATA = Path(__file__).parent / "data" / "h200"


def _results(name: str) -> list[RunResult]:
    with tarfile.open(DATA / f"{name}.tgz") as archive:
        members = [m for m in archive.getmembers() if m.name.endswith(".json") and "/runs/" in m.name]
        return [RunResult.model_validate_json(archive.extractfile(m).read()) for m in members]  # type: ignore[union-attr]


def test_the_dry_run_plans_the_round_within_30_minutes_on_both_profiles() -> None:
    plan = plan_round()
    assert plan.fits() and plan.profiles == ("h100-sxm", "h200")
    assert [p.kind for p in plan.pieces][:2] == ["tests", "profile"]  # the device tests first, then the profile
    for profile in plan.profiles:
        assert plan.total_s(profile) <= ROUND_LIMIT_S
    for call in plan.calls:
        assert sum(plan.piece(n).predicted_s[plan.split_profile] for n in call) <= CALL_LIMIT_S
    # Every run of the campaign that fits the GPU is in exactly one piece, in plan order.
    spec = load_spec(PACKAGE_ROOT / "specs" / "campaign-graphs.yaml")
    planned = plan_runs(spec)
    skipped = predicted_not_to_fit(spec, planned)
    pieces = [run for piece in plan.pieces for run in piece.runs]
    assert pieces == [r.run_id for r in planned if r.run_id not in skipped]


def test_gpu_round_dry_run_prints_the_pieces_on_both_profiles() -> None:
    done = subprocess.run([str(PACKAGE_ROOT / "container" / "gpu-round.sh"), "--dry-run"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHON": sys.executable})  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "h100-sxm" in lines[0] and "h200" in lines[0]
    assert any("device-tests" in line for line in lines) and any("campaign-1" in line for line in lines)
    assert lines[-1].endswith("the round fits in 30 min of device time on h100-sxm, h200")


@pytest.mark.parametrize("name", ["campaign-h100", "accel-8b"])
def test_the_plan_s_run_times_hold_within_15_percent_on_the_h200_sweeps(name: str) -> None:
    """The plan's costs (orchestrator/walltime.py) against each run's wall time on the H200, once each eager LLaMA
    warm-up's excess over its repetitions is out: cuDNN built an SDPA plan per decode shape in the warm-up
    (workers/models/sdpa_backends.py keeps eager decode off cuDNN since), which the plan does not price. Raw,
    the plan falls 18% (campaign-h100) and 12% (accel-8b) short of the runs' wall time."""
    h200 = get_hardware("h200")
    predicted = measured = excess = 0.0
    for result in _results(name):
        predicted += run_seconds(result.config, h200)
        started, finished = datetime.fromisoformat(result.started_at), datetime.fromisoformat(result.finished_at)
        measured += (finished - started).total_seconds()
        samples, impl = result.samples, result.config.llama_impl
        if result.config.model.arch == "llama" and (impl is None or not impl.compile) and samples is not None:
            median = statistics.median(samples.latency_e2e_s)
            excess += sum(max(0.0, w - median) for w in samples.warmup_latency_s)
    assert excess > 0
    assert abs(predicted / (measured - excess) - 1) <= 0.15
    assert predicted < measured  # the excess is real: raw, the plan is short


def test_the_goals_are_read_from_the_artifacts() -> None:
    host = {"finding": HOST_FINDING, "cache": "none", "replayed_median": 1.5, "eager_median": 20.0, "layers": 4}
    goals = {g.name: g for g in evaluate_goals(_results("accel-8b"), [host])}
    # LLaMA static-compile at B = 1 on the H200: 5.8 ms a step against the roofline's 3.6 ms of bytes.
    b1 = goals["llama graph decode B = 1"]
    assert b1.met is True and 0.6 < b1.figure < 0.65 and b1.detail.startswith("static-compile")
    assert goals["llama graph decode B = 64"].met is None  # accel-8b ran B = 1 and 8 only
    assert goals["llada graph step host overhead"].met is True and goals["llada graph step host overhead"].figure == 1.5
    dual = goals["dual cache over vanilla B = 1"]
    assert dual.met is False and dual.figure == pytest.approx(1.28, abs=0.01)
    bound = goals["roofline a bound"]
    assert bound.met is True and 0.6 < bound.figure < 1 / 0.9
    slow_host = evaluate_goals([], [{**host, "replayed_median": 2.5}])
    assert [g.met for g in slow_host] == [None, None, False, None, None]


def test_a_run_faster_than_its_roofs_misses_the_bound_and_is_named() -> None:
    results = _results("accel-8b")
    fast = results[0]
    assert fast.samples is not None
    quick = fast.model_copy(update={"samples": fast.samples.model_copy(
        update={"latency_e2e_s": [s / 10 for s in fast.samples.latency_e2e_s]})})  # fmt: skip
    bound = evaluate_goals([quick, *results[1:]], [])[-1]
    assert bound.met is False and fast.run_id in bound.detail and bound.figure > 1 / 0.9


@pytest.fixture
def fake_pieces(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """Each piece's command replaced by one that exits with the next code queued for its kind."""
    codes: dict[str, list[int]] = {"tests": [], "profile": [], "campaign": []}
    ran: list[str] = []

    def command(kind: str, *_: object) -> list[str]:
        ran.append(kind)
        return [sys.executable, "-c", f"import sys; print('{kind}'); sys.exit({codes[kind].pop(0)})"]

    monkeypatch.setattr(gpu_round, "_command", command)
    codes["ran"] = ran  # type: ignore[assignment]
    return codes


def test_a_call_runs_the_pieces_in_order_and_the_next_call_resumes(tmp_path: Path, fake_pieces: dict) -> None:
    layout = RoundLayout(tmp_path / "round")
    plan = plan_round()
    fake_pieces["tests"] += [1]  # a failing device test is recorded, and the round goes on
    fake_pieces["profile"] += [0]
    fake_pieces["campaign"] += [3, 0]  # stopped at its budget once, then done
    # Call 1: the tests and the profile; the campaign opens a call of its own.
    assert run_call(layout, bundle=None, plan=plan) == gpu_round.EXIT_AGAIN
    assert fake_pieces["ran"] == ["tests", "profile"]
    state = json.loads(layout.state.read_text())
    assert state["pieces"]["tests"]["status"] == "done" and state["pieces"]["tests"]["exit"] == 1
    document = json.loads(layout.goals.read_text())
    assert document["complete"] is False and len(document["goals"]) == 5
    assert all(goal["met"] is None for goal in document["goals"])  # nothing measured yet: neither met nor missed
    # Call 2: the campaign stops at its budget; call 3 finishes it.
    assert run_call(layout, bundle=None, plan=plan) == gpu_round.EXIT_AGAIN
    assert run_call(layout, bundle=None, plan=plan) == gpu_round.EXIT_OK
    assert fake_pieces["ran"] == ["tests", "profile", "campaign", "campaign"]
    document = json.loads(layout.goals.read_text())
    assert document["complete"] is True and document["calls"] == 3
    assert document["pieces"]["campaign"]["calls"] == 2
    assert "--- call 3" in (layout.root / "campaign.log").read_text()


def test_a_call_starts_no_piece_its_budget_cannot_hold(tmp_path: Path, fake_pieces: dict) -> None:
    layout = RoundLayout(tmp_path / "round")
    fake_pieces["tests"] += [0]
    assert run_call(layout, bundle=None, budget_s=100.0, plan=plan_round()) == gpu_round.EXIT_AGAIN
    assert fake_pieces["ran"] == []  # the device tests are predicted at 300 s


def test_a_round_state_that_is_no_regular_file_is_refused_in_one_line(tmp_path: Path) -> None:
    """The round folder is read like a sweep's: a FIFO as state.json is named, never opened to block."""
    os.mkfifo(tmp_path / "state.json")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = gpu_round.main(["--round", str(tmp_path), "--goals"])
    assert code == gpu_round.EXIT_USAGE
    assert "state.json" in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1


@pytest.mark.parametrize("budget", ["nan", "-5", "abc"])
def test_a_bad_budget_is_refused_at_parse_time(budget: str, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        gpu_round.main(["--round", str(tmp_path), "--budget", budget])
    assert exit_.value.code == 2 and not any(tmp_path.iterdir())
