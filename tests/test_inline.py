"""The inline executor: the same plan, store, artifacts and resume as the Ray driver, in one process, no Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator import inline
from orchestrator.cli import EXIT_INTERRUPTED, sweep_command
from orchestrator.plan import plan_runs
from orchestrator.progress import Progress
from orchestrator.store import ArtifactStore
from specs.artifacts import SweepLayout, load_results, verify
from specs.loader import PACKAGE_ROOT, load_spec
from specs.results import RunResult, RunStatus, Samples
from tests.spec_fixtures import spec_from, tiny_spec, write_spec

NO_RAY = """
import importlib.abc, sys

class NoRay(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("ray is not installed on this machine")
        return None

sys.meta_path.insert(0, NoRay())
from orchestrator.cli import main
code = main(sys.argv[1:])
print("ray modules:", sorted(m for m in sys.modules if m == "ray" or m.startswith("ray.")))
sys.exit(code)
"""


def _extrapolating_spec() -> dict:
    """Tiny models on the CPU: one LLaMA run, LLaDA at 8 and 16 steps timed for 4, 16 also in full."""
    data = tiny_spec(batch_sizes=[1], generation_lengths=[32], llada={"steps": [8, 16], "block_lengths": [16]})
    data["controls"].update(warmup=1, repetitions=2, extrapolation={"timed_steps": 4, "check_steps": [16]})
    return data


def _run_without_ray(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", NO_RAY, *args], cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "LLADA_BENCH_THREADS": "1"},
    )  # fmt: skip


@pytest.mark.slow
def test_inline_sweep_writes_verified_artifacts_without_ray_and_resumes(tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path, _extrapolating_spec())
    out = tmp_path / "sweep"
    args = ["sweep", str(spec_path), "--out", str(out), "--executor", "inline", "--no-report"]
    done = _run_without_ray(args)
    assert done.returncode == 0, done.stderr
    assert "ray modules: []" in done.stdout
    # Quiet runs: no deprecation warning per forward, no tokenizer length warning per long prompt.
    assert "FutureWarning" not in done.stdout + done.stderr
    assert "Token indices sequence length" not in done.stdout + done.stderr
    assert verify(SweepLayout(out)) == []
    planned = plan_runs(spec_from(_extrapolating_spec()))
    results = load_results(SweepLayout(out))
    assert sorted(r.run_id for r in results) == sorted(r.run_id for r in planned)  # the ids a Ray sweep writes
    assert all(r.status == RunStatus.OK for r in results)
    extrapolated = [r for r in results if r.samples.extrapolated is not None]
    assert {r.config.steps for r in extrapolated} == {8, 16}
    assert all(len(steps) == 4 for r in extrapolated for steps in r.samples.step_s)
    assert "extrapolated diffusion latency against full generations" in done.stdout
    assert "steps=16 (timed 4)" in done.stdout and "ratio" in done.stdout
    again = _run_without_ray(args)
    assert again.returncode == 0 and "nothing to run" in again.stdout


def _result(run, sweep: str) -> RunResult:
    now = datetime.now(UTC).isoformat()
    return RunResult(
        run_id=run.run_id, sweep=sweep, config=run.config, status=RunStatus.OK, weights="synthetic",
        started_at=now, finished_at=now,
        samples=Samples(timer="perf_counter", latency_e2e_s=[0.1], batch_index=[0]),
    )  # fmt: skip


class FakeWorker:
    """Stands in for workers.runner.Worker in a session's child process: instant results, each naming the process
    in its error field; `break_after` runs leave the GPU unusable, and `die_on` (a run id) kills the process."""

    break_after: int | None = None
    die_on = os.environ.get("LLADA_TEST_DIE_ON")
    sleep_on = os.environ.get("LLADA_TEST_SLEEP_ON")

    def __init__(self) -> None:
        self.broken: str | None = None
        self.load_counts: dict[str, int] = {}
        self.runs = 0

    def run(self, config, *, sweep: str, run_id: str, attempt: int = 1) -> RunResult:
        self.runs += 1
        self.load_counts[config.model.name] = 1
        if run_id == self.die_on and attempt == 1:
            os._exit(9)
        if run_id == self.sleep_on:
            time.sleep(60)
        run = type("Run", (), {"run_id": run_id, "config": config})
        result = _result(run, sweep).model_copy(update={"error": f"pid {os.getpid()}", "attempts": attempt})
        if self.break_after is not None and self.runs > self.break_after:
            self.broken = "RuntimeError: CUDA error: an illegal memory access was encountered"
            return result.model_copy(update={"status": RunStatus.ERROR, "error": self.broken})
        return result


class BreakingWorker(FakeWorker):
    break_after = 1


@pytest.fixture()
def fake_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inline, "WORKER", "tests.test_inline.FakeWorker")
    monkeypatch.setenv("LLADA_BENCH_THREADS", "1")  # the child need not import torch to choose its threads


@pytest.fixture()
def store(tmp_path: Path):
    spec = spec_from(tiny_spec(batch_sizes=[1]))
    store = ArtifactStore(tmp_path / spec.name)
    store.open(spec, "name: tiny\n", force=True)
    return spec, store


@pytest.mark.usefixtures("fake_worker")
def test_inline_starts_no_run_predicted_to_end_past_the_budget(store) -> None:
    spec, artifacts = store
    planned = plan_runs(spec)
    predicted = {run.run_id: 10.0 for run in planned}
    predicted[planned[2].run_id] = 1000.0
    summary = inline.run_inline(
        spec, planned, artifacts, done=set(), progress=Progress(len(planned)), stop_after_s=100, predicted_s=predicted
    )
    assert [r.run_id for r in summary.results] == [r.run_id for r in planned[:2]]
    assert "time budget" in summary.interrupted and planned[2].run_id in summary.interrupted
    rest = inline.run_inline(spec, planned, artifacts, done={r.run_id for r in planned[:2]}, progress=Progress(1))
    assert [r.run_id for r in rest.results] == [r.run_id for r in planned[2:]] and rest.interrupted is None


def test_inline_stops_on_an_unusable_gpu_without_recording_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(inline, "WORKER", "tests.test_inline.BreakingWorker")
    monkeypatch.setenv("LLADA_BENCH_THREADS", "1")
    spec_path = write_spec(tmp_path, tiny_spec(batch_sizes=[1]))
    code = sweep_command(str(spec_path), out=tmp_path / "out", executor="inline", report=False)
    assert code == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert "left the GPU unusable" in err and "rerun the same command" in err
    planned = plan_runs(load_spec(spec_path))
    written = load_results(SweepLayout(tmp_path / "out"))
    assert [r.run_id for r in written] == [planned[0].run_id]  # the failed run is retried by the rerun


def test_a_signal_abandons_the_run_in_progress_and_stops_between_runs() -> None:
    state = inline._Signals()
    state.handler(signal.SIGTERM, None)  # between runs: only noted
    assert state.signum == signal.SIGTERM
    with pytest.raises(inline._Stop), state.run():
        state.handler(signal.SIGINT, None)  # inside a run: abandon it at once
    assert not issubclass(inline._Stop, Exception)  # the worker's `except Exception` cannot swallow it


@pytest.mark.ray
@pytest.mark.slow
def test_inline_and_ray_write_the_same_run_ids(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Same plan, same store: both executors leave one artifact per planned run under the same ids."""
    import ray

    from orchestrator.cluster import capacity
    from orchestrator.driver import run_sweep
    from tests import fake_actors
    from tests.fake_actors import FakeActor

    monkeypatch.setattr(inline, "WORKER", "tests.test_inline.FakeWorker")
    spec = spec_from(_extrapolating_spec())
    planned = plan_runs(spec)
    ids = {}
    for executor in ("inline", "ray"):
        store = ArtifactStore(tmp_path / executor)
        store.open(spec, "name: tiny\n", force=True)
        if executor == "inline":
            inline.run_inline(spec, planned, store, done=set(), progress=Progress(len(planned)))
        else:
            ray.cloudpickle.register_pickle_by_value(fake_actors)
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
            try:
                run_sweep(spec, planned, store, done=set(), progress=Progress(len(planned)), connect_fn=capacity,
                          actor_class=FakeActor)  # fmt: skip
            finally:
                ray.shutdown()
        assert verify(SweepLayout(tmp_path / executor)) == []
        ids[executor] = sorted(r.run_id for r in load_results(SweepLayout(tmp_path / executor)))
    assert ids["inline"] == ids["ray"] == sorted(r.run_id for r in planned)


def _pid(result: RunResult) -> int:
    return int(result.error.removeprefix("pid "))


def _sessions_store(tmp_path: Path, sessions: int):
    data = tiny_spec(batch_sizes=[1], generation_lengths=[32])
    data["controls"]["sessions"] = sessions
    spec = spec_from(data)
    store = ArtifactStore(tmp_path / spec.name)
    store.open(spec, "name: tiny\n", force=True)
    return spec, store, plan_runs(spec)


@pytest.mark.usefixtures("fake_worker")
def test_each_session_runs_in_a_fresh_child_process(tmp_path: Path) -> None:
    spec, store, planned = _sessions_store(tmp_path, 3)
    summary = inline.run_inline(spec, planned, store, done=set(), progress=Progress(len(planned)))
    assert [r.run_id for r in summary.results] == [r.run_id for r in planned]  # plan order
    per_session = [{_pid(r) for r in summary.results if r.config.session == s} for s in range(3)]
    assert all(len(p) == 1 for p in per_session)  # one process keeps a session's models
    pids = set.union(*per_session)
    assert len(pids) == 3 and os.getpid() not in pids
    assert dict(summary.model_loads) == {"llama-tiny": 3, "llada-tiny": 3}


@pytest.mark.usefixtures("fake_worker")
def test_a_resumed_multi_session_inline_sweep_runs_only_what_is_missing(tmp_path: Path) -> None:
    spec, store, planned = _sessions_store(tmp_path, 2)
    cut = len(planned) // 2 + 1  # into the second session
    predicted = {r.run_id: 0.0 for r in planned} | {planned[cut].run_id: 1e9}
    first = inline.run_inline(spec, planned, store, done=set(), progress=Progress(len(planned)), stop_after_s=1e6,
                              predicted_s=predicted)  # fmt: skip
    assert len(first.results) == cut and "time budget" in first.interrupted
    done = store.completed([r.run_id for r in planned])
    rest = inline.run_inline(spec, planned, store, done=done, progress=Progress(len(planned) - cut))
    assert [r.run_id for r in rest.results] == [r.run_id for r in planned[cut:]] and rest.interrupted is None
    assert verify(store.layout) == []


@pytest.mark.usefixtures("fake_worker")
def test_a_dead_child_is_replaced_and_its_run_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec, store, planned = _sessions_store(tmp_path, 1)
    monkeypatch.setenv("LLADA_TEST_DIE_ON", planned[1].run_id)  # the child reads it as it starts
    summary = inline.run_inline(spec, planned, store, done=set(), progress=Progress(len(planned)))
    by_id = {r.run_id: r for r in summary.results}
    assert sorted(by_id) == sorted(r.run_id for r in planned) and all(r.status == RunStatus.OK for r in by_id.values())
    assert by_id[planned[1].run_id].attempts == 2 and _pid(by_id[planned[1].run_id]) != _pid(by_id[planned[0].run_id])


@pytest.mark.usefixtures("fake_worker")
def test_a_signal_during_a_run_kills_the_child_and_keeps_the_finished_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec, store, planned = _sessions_store(tmp_path, 1)
    monkeypatch.setenv("LLADA_TEST_SLEEP_ON", planned[1].run_id)
    first = store.layout.run_file(planned[0].run_id)

    def terminate_once_the_first_run_is_written() -> None:
        while not first.exists():
            time.sleep(0.1)
        time.sleep(1.0)  # the second run is asleep in the child by now
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_once_the_first_run_is_written, daemon=True).start()
    started = time.perf_counter()
    summary = inline.run_inline(spec, planned, store, done=set(), progress=Progress(len(planned)))
    assert summary.interrupted == "SIGTERM" and time.perf_counter() - started < 50  # the child's 60 s sleep cut short
    assert [r.run_id for r in summary.results] == [planned[0].run_id]
    assert store.completed([r.run_id for r in planned]) == {planned[0].run_id}
