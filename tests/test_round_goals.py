"""The GPU round's goals, read from the artifacts (the H200 sweeps, synthetic findings) and scored on the pieces
that answer them; the plan's run costs held to the H200 sweeps' wall times."""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import tarfile
from datetime import datetime
from pathlib import Path

import pytest

from orchestrator.gpu_round import goals_file as round_report
from orchestrator.gpu_round.run import EXIT_OK, EXIT_USAGE, main
from orchestrator.gpu_round.goals import HOST_FINDING, evaluate_goals
from orchestrator.gpu_round.state import RoundLayout, RoundState
from orchestrator.walltime import run_seconds
from roofline.hardware import get_hardware
from specs.results import RunResult

DATA = Path(__file__).parent / "data" / "h200"


def _results(name: str) -> list[RunResult]:
    with tarfile.open(DATA / f"{name}.tgz") as archive:
        members = [m for m in archive.getmembers() if m.name.endswith(".json") and "/runs/" in m.name]
        return [RunResult.model_validate_json(archive.extractfile(m).read()) for m in members]  # type: ignore[union-attr]


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
    sessions = goals["headline over sessions"]  # accel-8b ran one session
    assert sessions.met is False and sessions.figure == 1 and "B = 1: 1, B = 8: 1" in sessions.detail
    slow_host = evaluate_goals([], [{**host, "replayed_median": 2.5}])
    assert [g.met for g in slow_host] == [None, None, False, None, None, None]
    assert set(round_report.GOAL_PIECES) == set(goals)  # each goal names the piece that answers it


def test_three_sessions_with_both_models_meet_the_sessions_goal() -> None:
    base = [r for r in _results("accel-8b") if r.config.batch_size == 1]
    runs = [r.model_copy(update={"config": r.config.model_copy(update={"session": s, "controls": r.config.controls.model_copy(
        update={"sessions": 3})})}) for r in base for s in range(3)]  # fmt: skip
    goal = next(g for g in evaluate_goals(runs, []) if g.name == "headline over sessions")
    assert goal.met is True and goal.figure == 3
    one_sided = [r for r in runs if r.config.model.arch == "llama" or r.config.session != 2]
    goal = next(g for g in evaluate_goals(one_sided, []) if g.name == "headline over sessions")
    assert goal.met is False and goal.figure == 2


def _round_with(tmp_path: Path, piece: str) -> RoundLayout:
    layout = RoundLayout(tmp_path)
    layout.save(RoundState())
    with tarfile.open(DATA / "accel-8b.tgz") as archive:
        archive.extractall(tmp_path / piece, filter="data")
    return layout


def test_each_goal_is_scored_on_its_piece_s_artifacts(tmp_path: Path) -> None:
    """gpu-round.json scores the LLaMA goals on the headline's sweeps alone: a compiled Qwen2.5 or LLaMA in
    another piece never stands in; whichever variant of a piece's spec ran is read."""
    layout = _round_with(tmp_path / "a", "headline")
    assert main(["--round", str(layout.root), "--goals"]) == EXIT_OK
    goals = {g["name"]: g for g in json.loads(layout.goals.read_text())["goals"]}
    assert goals["llama graph decode B = 1"]["met"] is True and goals["llama graph decode B = 1"]["piece"] == "headline"
    assert goals["dual cache over vanilla B = 1"]["met"] is False
    elsewhere = _round_with(tmp_path / "b", "dream-qwen")
    assert main(["--round", str(elsewhere.root), "--goals"]) == EXIT_OK
    goals = {g["name"]: g for g in json.loads(elsewhere.goals.read_text())["goals"]}
    assert goals["llama graph decode B = 1"]["met"] is None and goals["roofline a bound"]["met"] is True


def test_a_run_faster_than_its_roofs_misses_the_bound_and_is_named() -> None:
    results = _results("accel-8b")
    fast = results[0]
    assert fast.samples is not None
    quick = fast.model_copy(update={"samples": fast.samples.model_copy(
        update={"latency_e2e_s": [s / 10 for s in fast.samples.latency_e2e_s]})})  # fmt: skip
    bound = next(g for g in evaluate_goals([quick, *results[1:]], []) if g.name == "roofline a bound")
    assert bound.met is False and fast.run_id in bound.detail and bound.figure > 1 / 0.9


def test_goals_only_needs_no_device(tmp_path: Path) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["--round", str(tmp_path / "round"), "--goals"]) == EXIT_OK
    assert json.loads((tmp_path / "round" / "gpu-round.json").read_text())["complete"] is False
    assert main(["--round", str(tmp_path / "round"), "--goals"]) == EXIT_OK  # the folder is a round's now


def test_goals_on_a_folder_that_is_no_round_s_refuse_by_name_and_touch_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "gpu-round.json").write_text("my own notes\n")
    (mine / "data.csv").write_text("1,2\n")
    before = {p.name: p.read_bytes() for p in mine.iterdir()}
    for extra in (["--goals"], []):
        assert main(["--round", str(mine), *extra]) == EXIT_USAGE
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(mine) in err and "not a GPU round's folder" in err
        assert {p.name: p.read_bytes() for p in mine.iterdir()} == before
