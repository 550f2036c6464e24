"""The tiny sweep on a simulated multi-node cluster: two nodes with two (fake) GPUs each.

What a real GPU cluster must guarantee, checked from what each actor recorded about itself: every run
executed exactly once, never more runs at a time than GPUs, each actor saw exactly one GPU id (its own), and
each model was loaded at most once per actor. Ray sets CUDA_VISIBLE_DEVICES for the fake GPUs; torch sees no
CUDA here, so the real worker still runs on CPU.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from orchestrator.actor import RunActor
from orchestrator.cluster import capacity
from orchestrator.driver import SweepSummary, run_sweep
from orchestrator.plan import plan_runs
from orchestrator.progress import Progress
from orchestrator.store import ArtifactStore
from specs.artifacts import verify
from specs.results import RunStatus
from tests import fake_actors
from tests.fake_actors import FakeActor
from tests.spec_fixtures import TINY, spec_from, tiny_dict

pytestmark = pytest.mark.ray

NODES, GPUS_PER_NODE, CPUS_PER_NODE = 2, 2, 2
GPUS = NODES * GPUS_PER_NODE
LOOPBACK = "127.0.0.1"


def recording(base: type, record_dir: Path, *, delay_s: float = 0.0, threads: int | None = None) -> type:
    """`base` (the real RunActor or a stand-in), appending one JSON line per run: where and when it ran.

    Defined in a function so Ray pickles the class by value, closure included."""

    class Recording(base):  # type: ignore[misc, valid-type]
        def __init__(self, threads_arg: int | None = None) -> None:
            super().__init__(threads if threads is not None else threads_arg)

        def run(self, config_json: str, sweep: str, run_id: str, attempt: int) -> str:
            import ray

            started = time.time()
            if delay_s:
                time.sleep(delay_s)  # long enough for the runs of different actors to overlap
            result = super().run(config_json, sweep, run_id, attempt)
            context = ray.get_runtime_context()
            line = {
                "run_id": run_id,
                "start": started,
                "end": time.time(),
                "pid": os.getpid(),
                "node_id": context.get_node_id(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "loads": self.load_counts(),
            }
            with open(record_dir / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
            return result

    return Recording


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes on loopback, each declaring GPUS_PER_NODE GPUs, with a driver connected to them."""
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    assert not ray.is_initialized(), "another test left Ray running in this process"
    patch = pytest.MonkeyPatch()
    # Nodes inherit this process's environment: keep auth consistent without writing ~/.ray/auth_token.
    if "RAY_AUTH_MODE" not in os.environ:
        patch.setenv("RAY_AUTH_MODE", "disabled")
    patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    # Loopback only, in the node processes (read at import) and in this one (already imported): otherwise
    # Ray rewrites 127.0.0.1 to the machine's address when the driver connects, and finds nothing there.
    patch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    temp_dir = tempfile.mkdtemp(prefix="llc", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    node = {
        "num_cpus": CPUS_PER_NODE,
        "num_gpus": GPUS_PER_NODE,
        "node_ip_address": LOOPBACK,
        "temp_dir": temp_dir,
    }
    simulated = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        for _ in range(NODES - 1):
            simulated.add_node(**node)
        simulated.wait_for_nodes()
        ray.init(address=simulated.address, _node_ip_address=LOOPBACK, log_to_driver=False)
        ray.cloudpickle.register_pickle_by_value(fake_actors)
        yield simulated
    finally:
        ray.shutdown()
        simulated.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
        patch.undo()


def sweep(
    tmp_path: Path, actor_class: type, spec_data: dict[str, Any] | None = None
) -> tuple[list, ArtifactStore, SweepSummary]:
    spec = spec_from(spec_data or tiny_dict())
    store = ArtifactStore(tmp_path / spec.name)
    store.open(spec, TINY.read_text(), force=True)
    planned = plan_runs(spec)
    summary = run_sweep(
        spec,
        planned,
        store,
        done=set(),
        progress=Progress(len(planned)),
        connect_fn=capacity,
        actor_class=actor_class,
    )
    return planned, store, summary


def read_records(record_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for f in sorted(record_dir.glob("*.jsonl")) for line in f.read_text().splitlines()
    ]


def max_overlap(records: list[dict[str, Any]]) -> int:
    """The most runs in progress at any instant (an end at the same instant as a start frees first)."""
    events = sorted(
        [(r["start"], 1) for r in records] + [(r["end"], -1) for r in records], key=lambda e: (e[0], e[1])
    )
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def check_placement(
    planned: list, store: ArtifactStore, summary: SweepSummary, records: list[dict[str, Any]]
) -> None:
    planned_ids = sorted(r.run_id for r in planned)
    # Every run executed exactly once (by some actor) and written exactly once (by the driver).
    assert sorted(r["run_id"] for r in records) == planned_ids
    assert sorted(r.run_id for r in summary.results) == planned_ids
    assert verify(store.layout) == [] and len(store.layout.run_files()) == len(planned)
    # Never more runs at a time than GPUs.
    assert max_overlap(records) <= GPUS
    # One actor per GPU: each saw one GPU id, always the same one, and no two actors shared a GPU.
    by_actor: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_actor[record["pid"]].append(record)
    assert 1 < len(by_actor) <= GPUS
    placements = set()
    for runs in by_actor.values():
        assert {tuple(r["gpu_ids"]) for r in runs} == {tuple(runs[0]["gpu_ids"])} and len(
            runs[0]["gpu_ids"]
        ) == 1
        assert runs[0]["cuda_visible_devices"] == runs[0]["gpu_ids"][0]
        placements.add((runs[0]["node_id"], runs[0]["gpu_ids"][0]))
        # Each model loaded at most once per actor (the count after its last run covers them all).
        last = max(runs, key=lambda r: r["end"])
        assert all(count <= 1 for count in last["loads"].values()), last["loads"]
    assert len(placements) == len(by_actor), "two actors were given the same GPU"
    assert len({node for node, _ in placements}) == NODES, "runs should spread over both nodes"


def test_cluster_offers_the_declared_gpus(cluster) -> None:
    assert capacity().gpus == GPUS


def test_smoke_sweep_places_one_run_per_gpu_with_stand_in_workers(cluster, tmp_path) -> None:
    record_dir = tmp_path / "records"
    record_dir.mkdir()
    planned, store, summary = sweep(tmp_path, recording(FakeActor, record_dir, delay_s=0.3))
    records = read_records(record_dir)
    check_placement(planned, store, summary, records)
    assert max_overlap(records) > 1, "four actors should have run in parallel"
    assert all(r.status is RunStatus.OK for r in summary.results)


@pytest.mark.slow
def test_smoke_sweep_places_one_run_per_gpu_with_the_real_worker(cluster, tmp_path) -> None:
    """The real RunActor (tiny synthetic models on CPU), one torch thread per actor on this small machine."""
    record_dir = tmp_path / "records"
    record_dir.mkdir()
    planned, store, summary = sweep(tmp_path, recording(RunActor, record_dir, threads=1))
    check_placement(planned, store, summary, read_records(record_dir))
    statuses = {r.run_id: r.status for r in summary.results}
    assert set(statuses.values()) == {RunStatus.OK}, statuses
    assert all(r.environment is not None and r.environment.device == "cpu" for r in summary.results)
