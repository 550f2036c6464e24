"""The Ray actor that owns one accelerator (or a share of the CPUs) and runs configs on it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

THREADS_ENV = "LLADA_BENCH_THREADS"


class RunActor:
    """One per GPU: keeps its Worker (and so its loaded model) across runs. Imports torch only in its own
    process, so the driver never does."""

    def __init__(self, threads: int | None = None) -> None:
        if threads:
            os.environ[THREADS_ENV] = str(threads)
        from workers.runner import Worker

        self._worker = Worker()

    def run(self, config_json: str, sweep: str, run_id: str, attempt: int) -> str:
        from specs.schema import RunConfig

        config = RunConfig.model_validate_json(config_json)
        result = self._worker.run(config, sweep=sweep, run_id=run_id, attempt=attempt)
        return result.model_dump_json()

    def load_counts(self) -> dict[str, int]:
        return dict(self._worker.load_counts)

    def identity(self) -> dict[str, Any]:
        """Process id, node and accelerator ids: lets tests check one GPU per actor."""
        import ray

        context = ray.get_runtime_context()
        return {
            "pid": os.getpid(),
            "node_id": context.get_node_id(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        }


@dataclass(frozen=True)
class ActorShape:
    """Resources each actor asks Ray for: one GPU, or a fixed share of CPUs."""

    num_gpus: int
    num_cpus: int
    threads: int | None

    def options(self) -> dict[str, Any]:
        return {"num_gpus": self.num_gpus, "num_cpus": self.num_cpus, "max_restarts": 0}


def actor_shape(gpus: int, cpus: int, actors: int) -> ActorShape:
    """GPU clusters: one GPU per actor. CPU only: the CPUs split evenly, and torch gets one thread fewer
    than the share when it can, leaving a core to Ray and the driver: torch's spinning OpenMP threads
    slow down by an order of magnitude when anything else wants their core."""
    if gpus > 0:
        return ActorShape(num_gpus=1, num_cpus=1, threads=None)
    share = max(1, cpus // max(1, actors))
    threads = share - 1 if actors == 1 and share > 1 else share
    return ActorShape(num_gpus=0, num_cpus=share, threads=threads)


def start_actor(shape: ActorShape, actor_class: type = RunActor) -> Any:
    """Start one actor; `actor_class` lets fault-injection tests stand in a worker that misbehaves."""
    import ray

    remote = ray.remote(actor_class).options(**shape.options())
    return remote.remote(shape.threads)
