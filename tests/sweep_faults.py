"""Sweep directories in known states for the output-directory, lock and write-failure tests, and a stand-in
actor that fills the disk on cue.

`python -m tests.sweep_faults SPEC OUT` runs `llada-bench sweep` with that actor (no report): a file
`fill-<run_id>` in $LLADA_TEST_FAULT_DIR makes the actor fill the filesystem of $LLADA_TEST_FILL during
that run, so the driver's next write meets a full disk.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from orchestrator.plan import PlannedRun, plan_runs
from orchestrator.store import ArtifactStore
from specs.loader import load_spec
from specs.results import RunResult, RunStatus, Samples
from tests.fake_actors import FAULT_DIR_ENV, FakeActor
from tests.spec_fixtures import tiny_spec, write_spec

FILL_ENV = "LLADA_TEST_FILL"


def small_spec(directory: Path, **grid: object) -> Path:
    """The tiny spec cut to 2 runs per model (quality off): a sweep of it is quick."""
    data = tiny_spec(batch_sizes=[1], generation_lengths=[32], **grid)
    data["grid"]["llada"]["steps"] = [16, 32]
    return write_spec(directory, data, "small.yaml")


def ok_result(run: PlannedRun, sweep: str) -> RunResult:
    reps = run.config.controls.repetitions
    return RunResult(
        run_id=run.run_id, sweep=sweep, config=run.config, status=RunStatus.OK, weights="synthetic",
        started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00", attempts=1,
        samples=Samples(timer="perf_counter", latency_e2e_s=[0.01] * reps, batch_index=list(range(reps))),
    )  # fmt: skip


def finished_sweep(spec_path: Path, out: Path, *, leave_out: int = 0) -> list[PlannedRun]:
    """A sweep directory as a finished sweep leaves it (all but `leave_out` runs done); so a `sweep` of it
    starts no Ray unless runs were left out."""
    spec = load_spec(spec_path)
    planned = plan_runs(spec)
    store = ArtifactStore(out)
    store.open(spec, spec_path.read_text(encoding="utf-8"), planned=[r.run_id for r in planned])
    for run in planned[: len(planned) - leave_out]:
        store.write_result(ok_result(run, spec.name))
    return planned


class FillingActor(FakeActor):
    """FakeActor that, on cue, fills the disk the sweep writes to before returning its result."""

    def run(self, config_json: str, sweep: str, run_id: str, attempt: int) -> str:
        result = super().run(config_json, sweep, run_id, attempt)
        cue = Path(os.environ.get(FAULT_DIR_ENV, "/nonexistent")) / f"fill-{run_id}"
        if cue.exists():
            cue.unlink()
            _fill(Path(os.environ[FILL_ENV]))
        return result


def _fill(path: Path) -> None:
    try:
        with path.open("ab") as handle:
            while True:
                handle.write(b"\0" * (1 << 16))
                handle.flush()
    except OSError:
        pass


def main() -> int:
    import ray

    from orchestrator.cli import EXIT_USAGE, sweep_command
    from orchestrator.sweepdir import SweepDirError
    from specs.loader import SpecError
    from specs.lock import LockHeldError
    from tests import fake_actors, sweep_faults

    ray.cloudpickle.register_pickle_by_value(fake_actors)
    ray.cloudpickle.register_pickle_by_value(sweep_faults)
    spec, out = sys.argv[1], Path(sys.argv[2])
    try:
        actors = int(os.environ["LLADA_TEST_ACTORS"]) if os.environ.get("LLADA_TEST_ACTORS") else None
        return sweep_command(spec, out=out, report=False, actor_class=FillingActor, actors=actors)
    except (SpecError, SweepDirError, LockHeldError) as exc:  # as `llada-bench sweep` reports them
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    from orchestrator.cluster import exit_process

    exit_process(main())  # as the `llada-bench` command ends
