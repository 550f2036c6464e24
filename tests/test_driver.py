"""The driver over a real local Ray: every run once, written as it arrives, dead workers replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cluster import capacity
from orchestrator.driver import run_sweep
from orchestrator.plan import plan_runs
from orchestrator.progress import Progress
from orchestrator.store import ArtifactStore
from specs.artifacts import verify
from specs.results import RunStatus
from tests import fake_actors
from tests.fake_actors import FAULT_DIR_ENV, FakeActor
from tests.spec_fixtures import TINY, mutated, spec_from, tiny_dict

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    import ray

    fault_dir = tmp_path_factory.mktemp("faults")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(FAULT_DIR_ENV, str(fault_dir))
        ray.cloudpickle.register_pickle_by_value(fake_actors)
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        yield fault_dir
        ray.shutdown()


def sweep(tmp_path: Path, spec, **kwargs):
    store = ArtifactStore(tmp_path / spec.name)
    store.open(spec, TINY.read_text(), force=True)
    planned = plan_runs(spec)
    done = store.completed([r.run_id for r in planned])
    summary = run_sweep(
        spec, planned, store, done=done, progress=Progress(len(planned) - len(done)),
        connect_fn=capacity, actor_class=FakeActor, **kwargs,
    )
    return store, planned, summary


@pytest.mark.parametrize("actors", [1, 2])
def test_every_run_once_and_models_loaded_once_per_actor(local_ray, tmp_path, actors: int) -> None:
    spec = spec_from(tiny_dict())
    store, planned, summary = sweep(tmp_path, spec, actors=actors)
    assert sorted(r.run_id for r in summary.results) == sorted(r.run_id for r in planned)
    assert verify(store.layout) == []
    # An actor keeps its model while runs of it remain, so no actor loads a model twice.
    assert set(summary.model_loads) == {"llama-tiny", "llada-tiny"}
    assert all(count <= actors for count in summary.model_loads.values())
    if actors == 1:
        assert dict(summary.model_loads) == {"llama-tiny": 1, "llada-tiny": 1}


def test_resume_skips_done_runs(local_ray, tmp_path) -> None:
    spec = spec_from(tiny_dict())
    store, planned, first = sweep(tmp_path, spec)
    _, _, second = sweep(tmp_path, spec)
    assert len(first.results) == len(planned)
    assert second.results == [] and second.skipped_done == len(planned)


def test_dead_worker_retried_then_crashed(local_ray, tmp_path) -> None:
    spec = spec_from(mutated(lambda d: d["controls"].update(max_retries=1)))
    planned = plan_runs(spec)
    once, always = planned[1].run_id, planned[2].run_id
    (local_ray / f"die-{once}").touch()
    (local_ray / f"die-always-{always}").touch()
    try:
        store, _, summary = sweep(tmp_path, spec)
    finally:
        (local_ray / f"die-always-{always}").unlink()
    by_id = {r.run_id: r for r in summary.results}
    assert len(by_id) == len(planned)
    assert by_id[once].status is RunStatus.OK and by_id[once].attempts == 2
    assert by_id[always].status is RunStatus.CRASHED and by_id[always].attempts == 2
    assert "ActorDiedError" in by_id[always].error or "RayActorError" in by_id[always].error
    saved = json.loads(store.layout.run_file(always).read_text())
    assert saved["status"] == "crashed" and saved["traceback"]
    assert summary.failed == 1


def test_raising_call_becomes_an_error_artifact(local_ray, tmp_path) -> None:
    spec = spec_from(tiny_dict())
    target = plan_runs(spec)[0].run_id
    (local_ray / f"raise-{target}").touch()
    try:
        _, _, summary = sweep(tmp_path, spec)
    finally:
        (local_ray / f"raise-{target}").unlink()
    failed = [r for r in summary.results if r.status is RunStatus.ERROR]
    assert [r.run_id for r in failed] == [target]
    assert "injected failure" in failed[0].traceback


def test_ray_kill_mid_run_is_retried_on_a_fresh_actor(local_ray, tmp_path) -> None:
    spec = spec_from(tiny_dict())
    target = plan_runs(spec)[3].run_id
    (local_ray / f"ray-kill-{target}").touch()
    _, planned, summary = sweep(tmp_path, spec)
    by_id = {r.run_id: r for r in summary.results}
    assert len(by_id) == len(planned)
    assert by_id[target].status is RunStatus.OK and by_id[target].attempts == 2


def _ran(fault_dir: Path) -> list[tuple[str, int]]:
    """(run id, actor pid) of every run started since the log was last cleared, in order."""
    log = fault_dir / "pids.log"
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return [(run_id, int(pid)) for run_id, pid in (line.split() for line in lines)]


def test_runs_are_handed_out_in_plan_order_with_both_models_resident(local_ray, tmp_path) -> None:
    _ran(local_ray)
    _, planned, summary = sweep(tmp_path, spec_from(tiny_dict()), actors=1)
    assert [run_id for run_id, _ in _ran(local_ray)] == [r.run_id for r in planned]
    models = [r.config.model.name for r in planned]
    assert sum(a != b for a, b in zip(models, models[1:])) > 2  # the models alternate, point by point
    assert dict(summary.model_loads) == {"llama-tiny": 1, "llada-tiny": 1}


def _sessions(n: int):
    return spec_from(mutated(lambda d: d["controls"].update(sessions=n)))


def test_each_session_runs_on_fresh_actors(local_ray, tmp_path) -> None:
    _ran(local_ray)
    _, planned, summary = sweep(tmp_path, _sessions(3), actors=1)
    pids = dict(_ran(local_ray))
    assert sorted(pids) == sorted(r.run_id for r in planned)
    per_session = [{pids[r.run_id] for r in planned if r.config.session == s} for s in range(3)]
    assert all(len(p) == 1 for p in per_session) and len(set.union(*per_session)) == 3
    assert dict(summary.model_loads) == {"llama-tiny": 3, "llada-tiny": 3}  # once a session


def test_a_resumed_multi_session_sweep_runs_only_what_is_missing(local_ray, tmp_path) -> None:
    spec = _sessions(2)
    planned = plan_runs(spec)
    cut = len(planned) // 2 + 3  # into the second session
    store = ArtifactStore(tmp_path / spec.name)
    store.open(spec, TINY.read_text(), force=True)
    run_sweep(spec, planned[:cut], store, done=set(), progress=Progress(cut), connect_fn=capacity,
              actor_class=FakeActor)  # fmt: skip
    _ran(local_ray)
    _, _, resumed = sweep(tmp_path, spec, actors=1)
    assert resumed.skipped_done == cut
    assert [run_id for run_id, _ in _ran(local_ray)] == [r.run_id for r in planned[cut:]]
    assert verify(store.layout) == [] and len(store.layout.run_files()) == len(planned)
