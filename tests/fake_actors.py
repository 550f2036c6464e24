"""Stand-in actors for orchestration tests: the driver's real protocol, no model, scripted faults.

Faults are scripted through files in $LLADA_TEST_FAULT_DIR, so a test decides at run time which run
misbehaves: `die-<run_id>` kills the actor's process once (the file is consumed), `die-always-<run_id>`
kills it every time, `ray-kill-<run_id>` has Ray kill the actor mid-run, `raise-<run_id>` makes the
call itself raise; every run start appends `<run_id> <pid>` to `pids.log` there. With $LLADA_TEST_EXEC_LOG set,
every run start is appended to that file. Like a Worker, an actor keeps every model it has loaded.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

from specs.results import RunResult, RunStatus, Samples
from specs.schema import RunConfig

FAULT_DIR_ENV = "LLADA_TEST_FAULT_DIR"


class FakeActor:
    def __init__(self, threads: int | None = None) -> None:
        self._loads: Counter[str] = Counter()
        self._resident: set[str] = set()

    def run(self, config_json: str, sweep: str, run_id: str, attempt: int) -> str:
        config = RunConfig.model_validate_json(config_json)
        log = os.environ.get("LLADA_TEST_EXEC_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(run_id + "\n")
        self._fault(run_id)
        if config.model.name not in self._resident:
            self._loads[config.model.name] += 1
            self._resident.add(config.model.name)
        delay_s = float(os.environ.get("LLADA_TEST_RUN_DELAY_S", "0"))
        time.sleep(delay_s)
        return RunResult(
            run_id=run_id, sweep=sweep, config=config, status=RunStatus.OK, weights="synthetic",
            started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00", attempts=attempt,
            samples=Samples(timer="perf_counter", latency_e2e_s=[0.01] * config.controls.repetitions,
                            batch_index=list(range(config.controls.repetitions))),
        ).model_dump_json()

    def load_counts(self) -> dict[str, int]:
        return dict(self._loads)

    def identity(self) -> dict[str, object]:
        import ray

        return {"pid": os.getpid(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}

    @staticmethod
    def _fault(run_id: str) -> None:
        directory = os.environ.get(FAULT_DIR_ENV)
        if not directory:
            return
        with open(Path(directory) / "pids.log", "a", encoding="utf-8") as handle:
            handle.write(f"{run_id} {os.getpid()}\n")
        once = Path(directory) / f"die-{run_id}"
        if once.exists():
            once.unlink()
            os._exit(1)
        if (Path(directory) / f"die-always-{run_id}").exists():
            os._exit(1)
        if (Path(directory) / f"ray-kill-{run_id}").exists():
            (Path(directory) / f"ray-kill-{run_id}").unlink()
            import ray

            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
            time.sleep(30)  # the kill lands while the run is in progress
        if (Path(directory) / f"raise-{run_id}").exists():
            raise RuntimeError(f"injected failure in {run_id}")
