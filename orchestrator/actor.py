"""The Ray actor that owns one accelerator (or a share of the CPUs) and runs configs on it."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

THREADS_ENV = "LLADA_BENCH_THREADS"
# Exit status of an actor whose CUDA context a sticky error left unusable (the driver sees a dead actor).
EXIT_DEVICE_BROKEN = 70


class RunActor:
    """One per GPU and session: keeps its Worker (and so its resident models) across the session's runs. Imports
    torch only in its own process, so the driver never does."""

    def __init__(self, threads: int | None = None) -> None:
        if threads:
            os.environ[THREADS_ENV] = str(threads)
        from workers.runner import Worker

        self._worker = Worker()

    def run(self, config_json: str, sweep: str, run_id: str, attempt: int) -> str:
        from specs.schema import RunConfig

        config = RunConfig.model_validate_json(config_json)
        result = self._worker.run(config, sweep=sweep, run_id=run_id, attempt=attempt)
        if self._worker.broken is not None:
            # Every later CUDA call in this process would fail: die, so the driver retries the run on a
            # fresh actor (and records `crashed` after controls.max_retries), instead of failing every run.
            failure = (result.error or result.quality_error or "").splitlines()[0] if (result.error or result.quality_error) else ""
            print(
                f"llada-bench actor {os.getpid()}: run {run_id} left the GPU unusable ({self._worker.broken}; "
                f"the run failed with: {failure}); exiting so the run is retried on a fresh worker",
                file=sys.stderr, flush=True,
            )  # fmt: skip
            os._exit(EXIT_DEVICE_BROKEN)
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


def actor_count(requested: int | None, gpus: int) -> tuple[int, str | None]:
    """How many actors to start, and a note when the request was cut: each actor holds a whole GPU, so more
    actors than GPUs would wait forever for one (Ray never places an actor that asks for a GPU it lacks)."""
    count = requested or max(1, gpus)
    if gpus > 0 and count > gpus:
        return gpus, f"--actors {count} exceeds the {gpus} GPU(s) Ray sees; starting {gpus}, one per GPU"
    return count, None


def start_actor(shape: ActorShape, actor_class: type = RunActor) -> Any:
    """Start one actor; `actor_class` lets fault-injection tests stand in a worker that misbehaves."""
    import ray

    remote = ray.remote(actor_class).options(**shape.options())
    return remote.remote(shape.threads)
