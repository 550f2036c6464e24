"""The inline executor: a sweep's runs one after another without Ray, each session in a fresh child process.

For one machine with one GPU where Ray is not installed (a short, offline lease): the same plan, the same
store, the same artifacts and the same resume as the Ray driver. Where the driver starts fresh actors for each
session, this starts one child process per session (spawned: a fresh interpreter, on a GPU a fresh CUDA
context) holding one `workers.runner.Worker`, hands it the session's runs in plan order over a pipe and writes
each result here. This process never imports `ray` (tests/test_inline.py checks that), nor torch: only the
child does.

Stopping: SIGTERM or SIGINT abandons the run in progress at once (the child is killed and the run's artifact is
never written, so a rerun repeats it) and keeps everything finished. `stop_after_s` stops before a run whose
roofline prediction would end past the budget, so a campaign can be cut into commands shorter than a lease's
limit. A CUDA error that leaves the context unusable stops the sweep too, without writing that run, and a rerun
retries it in a fresh process. A child that dies (killed for memory, a crash in native code) is replaced by a
fresh one and its run retried, up to `controls.max_retries` times, then recorded as `crashed`, as the driver does.
"""

from __future__ import annotations

import importlib
import multiprocessing
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

from orchestrator.actor import THREADS_ENV, actor_shape
from orchestrator.driver import SweepSummary, by_session, failed_result, session_note
from orchestrator.driver import _keep as keep_result
from orchestrator.plan import PlannedRun
from orchestrator.progress import Progress
from orchestrator.store import ArtifactStore
from specs.results import RunResult, RunStatus
from specs.schema import ExperimentSpec

CLOSE_TIMEOUT_S = 60.0  # a child told to finish frees its models and exits; past this it is killed
WORKER = "workers.runner.Worker"  # the class a session's child runs, by name (tests stand another in)


class _Stop(BaseException):
    """Raised by the signal handler while a run is in progress: a BaseException, so no `except Exception` on its
    way turns an interruption into an error artifact."""

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
    """Run every planned run not already done, in plan order, each session in a fresh child process; write each
    result at once."""
    todo = [run for run in planned if run.run_id not in done]
    summary = SweepSummary(planned=len(planned), skipped_done=len(planned) - len(todo))
    progress = progress or Progress(total=len(todo))
    started = time.perf_counter()

    def over_budget(run: PlannedRun) -> str | None:
        return _over_budget(run, started, stop_after_s, predicted_s)

    try:
        with _handle_signals() as signals:
            for session, runs in by_session(todo):
                note = session_note(session, spec.controls.sessions, len(runs))
                if note:
                    progress.note(note)
                if not _run_session(spec, runs, store, summary, progress, signals, over_budget):
                    break
    finally:
        summary.wall_s = time.perf_counter() - started
        progress.close()
    return summary


def _run_session(
    spec: ExperimentSpec,
    runs: list[PlannedRun],
    store: ArtifactStore,
    summary: SweepSummary,
    progress: Progress,
    signals: _Signals,
    over_budget: Callable[[PlannedRun], str | None],
) -> bool:
    """One session's runs in a child process of its own; False when the sweep must stop."""
    child = _Child(WORKER)
    pending, attempts = list(runs), dict.fromkeys((r.run_id for r in runs), 1)
    try:
        while pending:
            run = pending[0]
            summary.interrupted = _signalled(signals) or over_budget(run)
            if summary.interrupted:
                return False
            try:
                with signals.run():
                    result, broken = child.run(run, spec.name, attempts[run.run_id])
            except _Stop as stop:
                summary.interrupted = str(stop)
                return False
            except (EOFError, OSError) as died:  # the child is gone: its run retried on a fresh one, or crashed
                child.close()
                summary.model_loads.update(child.load_counts)
                child = _Child(WORKER)
                if attempts[run.run_id] <= spec.controls.max_retries:
                    progress.note(f"worker process died during {run.run_id}; retrying in a fresh process")
                    attempts[run.run_id] += 1
                    continue
                result, broken = failed_result(spec.name, run, RunStatus.CRASHED, died, attempts[run.run_id]), None
            if broken is not None:
                failure = result.error or result.quality_error or ""
                print(f"run {run.run_id} failed: {failure}", file=sys.stderr)
                summary.interrupted = (
                    f"a CUDA error that left the GPU unusable in this process ({broken}); run "
                    f"{run.run_id} was not recorded and is retried by the rerun"
                )
                return False
            pending.pop(0)
            keep_result(spec.name, store, result, summary, progress)  # a refused write is kept elsewhere
            summary.results.append(result)
            progress.finished(result)
            if summary.write_error is not None:
                return False  # the directory takes no more results: start no more runs
        return True
    finally:
        child.close(kill=summary.interrupted is not None)
        summary.model_loads.update(child.load_counts)


def _signalled(signals: _Signals) -> str | None:
    return signal.Signals(signals.signum).name if signals.signum is not None else None


class _Child:
    """A session's worker process: spawned (never forked, so it holds no state of this process, and on a GPU
    creates its own CUDA context), it runs the configs it is sent one at a time and sends back each result."""

    def __init__(self, worker: str) -> None:
        self._worker = worker
        self._process: Any = None  # started by the first run: a session stopped before it costs no process
        self._conn: Connection | None = None
        self.load_counts: dict[str, int] = {}

    def run(self, run: PlannedRun, sweep: str, attempt: int) -> tuple[RunResult, str | None]:
        """The run's result, and why the GPU is unusable when the run left it so; EOFError when the child died."""
        if self._conn is None:
            context = multiprocessing.get_context("spawn")
            self._conn, theirs = context.Pipe()
            self._process = context.Process(target=_serve, args=(theirs, self._worker), name="llada-bench-session")
            self._process.start()
            theirs.close()
        self._conn.send((run.config.model_dump_json(), sweep, run.run_id, attempt))
        try:
            result_json, broken, self.load_counts = self._conn.recv()
        except EOFError:
            self._process.join(CLOSE_TIMEOUT_S)
            raise EOFError(f"the worker process died (exit code {self._process.exitcode})") from None
        return RunResult.model_validate_json(result_json), broken

    def close(self, *, kill: bool = False) -> None:
        """Let the child finish (it frees its models as it exits), or kill it where a run was abandoned."""
        if self._conn is None:
            return
        if not kill and self._process.is_alive():
            try:
                self._conn.send(None)
            except OSError:
                pass
            self._process.join(CLOSE_TIMEOUT_S)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()


def _serve(conn: Connection, worker_name: str) -> None:
    """The child's loop: a Worker that keeps its models resident for the session, fed one run at a time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    _cpu_threads_like_an_actor()
    from specs.schema import RunConfig

    module, _, name = worker_name.rpartition(".")
    worker: Any = getattr(importlib.import_module(module), name)()  # torch loads here, in the child only
    while (request := conn.recv()) is not None:
        config_json, sweep, run_id, attempt = request
        result = worker.run(RunConfig.model_validate_json(config_json), sweep=sweep, run_id=run_id, attempt=attempt)
        conn.send((result.model_dump_json(), worker.broken, dict(worker.load_counts)))


def _cpu_threads_like_an_actor() -> None:
    """On a machine without a GPU, give torch the threads a lone Ray CPU actor gets (all cores but one),
    unless LLADA_BENCH_THREADS says otherwise, so both executors measure CPU runs alike."""
    import os

    if THREADS_ENV in os.environ:
        return
    import torch

    if torch.cuda.is_available():
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
