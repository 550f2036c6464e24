"""The inline executor: a sweep's runs one after another in this process, without Ray.

For one machine with one GPU where Ray is not installed (a short, offline lease): the same plan, the same
store, the same artifacts and the same resume as the Ray driver, with one `workers.runner.Worker` in this
process instead of one actor per GPU. It never imports `ray` (tests/test_inline.py checks that); torch and
the workers are imported only when a run starts, so `orchestrator.cli` stays light.

Stopping: SIGTERM or SIGINT abandons the run in progress at once (its artifact is never written, so a
rerun repeats it) and keeps everything finished. `stop_after_s` stops before a run whose roofline
prediction would end past the budget, so a campaign can be cut into commands shorter than a lease's
limit. A CUDA error that leaves the context unusable stops the sweep too, without writing that run:
only a fresh process can use the GPU again, and a rerun retries the run there.
"""

from __future__ import annotations

import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from orchestrator.actor import THREADS_ENV, actor_shape
from orchestrator.driver import SweepSummary
from orchestrator.driver import _keep as keep_result
from orchestrator.plan import PlannedRun
from orchestrator.progress import Progress
from orchestrator.store import ArtifactStore
from specs.schema import ExperimentSpec


class _Stop(BaseException):
    """Raised by the signal handler inside a run: a BaseException, so the worker's `except Exception`
    (failures are data) does not turn an interruption into an error artifact."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)


class _Signals:
    """SIGTERM/SIGINT: raise inside a run (abandon it), set a flag between runs (stop before the next)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.in_run = False

    def handler(self, signum: int, _frame: object) -> None:
        self.signum = signum
        if self.in_run:
            self.in_run = False
            raise _Stop(signum)

    @contextmanager
    def run(self) -> Iterator[None]:
        self.in_run = True
        try:
            yield
        finally:
            self.in_run = False


@contextmanager
def _handle_signals() -> Iterator[_Signals]:
    state = _Signals()
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for s in previous:
            signal.signal(s, state.handler)
    except ValueError:  # not the main thread: leave signals alone
        previous = {}
    try:
        yield state
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run_inline(
    spec: ExperimentSpec,
    planned: list[PlannedRun],
    store: ArtifactStore,
    *,
    done: set[str],
    progress: Progress | None = None,
    stop_after_s: float | None = None,
    predicted_s: dict[str, float] | None = None,
) -> SweepSummary:
    """Run every planned run not already done, in plan order, in this process; write each result at once."""
    todo = [run for run in planned if run.run_id not in done]
    summary = SweepSummary(planned=len(planned), skipped_done=len(planned) - len(todo))
    progress = progress or Progress(total=len(todo))
    started = time.perf_counter()
    if not todo:
        progress.close()
        return summary
    from workers.runner import Worker  # torch and transformers load here, never at import

    _cpu_threads_like_an_actor()
    worker = Worker()
    try:
        with _handle_signals() as signals:
            for run in todo:
                if signals.signum is not None:
                    summary.interrupted = signal.Signals(signals.signum).name
                    break
                budget = _over_budget(run, started, stop_after_s, predicted_s)
                if budget is not None:
                    summary.interrupted = budget
                    break
                try:
                    with signals.run():
                        result = worker.run(run.config, sweep=spec.name, run_id=run.run_id)
                except _Stop as stop:
                    summary.interrupted = str(stop)
                    break
                if worker.broken is not None:
                    failure = result.error or result.quality_error or ""
                    print(f"run {run.run_id} failed: {failure}", file=sys.stderr)
                    summary.interrupted = (
                        f"a CUDA error that left the GPU unusable in this process ({worker.broken}); run "
                        f"{run.run_id} was not recorded and is retried by the rerun"
                    )
                    break
                keep_result(spec.name, store, result, summary, progress)  # a refused write is kept elsewhere
                summary.results.append(result)
                progress.finished(result)
                if summary.write_error is not None:
                    break  # the directory takes no more results: start no more runs
    finally:
        summary.model_loads = Counter(worker.load_counts)
        summary.wall_s = time.perf_counter() - started
        progress.close()
    return summary


def _cpu_threads_like_an_actor() -> None:
    """On a machine without a GPU, give torch the threads a lone Ray CPU actor gets (all cores but one),
    unless LLADA_BENCH_THREADS says otherwise, so both executors measure CPU runs alike."""
    import os

    import torch

    if THREADS_ENV in os.environ or torch.cuda.is_available():
        return
    threads = actor_shape(gpus=0, cpus=os.cpu_count() or 1, actors=1).threads
    if threads:
        os.environ[THREADS_ENV] = str(threads)


def _over_budget(
    run: PlannedRun, started: float, stop_after_s: float | None, predicted_s: dict[str, float] | None
) -> str | None:
    """Why the next run must not start, or None: its predicted end lies past the time budget."""
    if stop_after_s is None:
        return None
    elapsed = time.perf_counter() - started
    predicted = (predicted_s or {}).get(run.run_id, 0.0)
    if elapsed + predicted <= stop_after_s:
        return None
    return (
        f"the time budget (--stop-after {stop_after_s:g} s): {elapsed:.0f} s used, and the next run "
        f"({run.run_id}) is predicted to take {predicted:.0f} s"
    )
