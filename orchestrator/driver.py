"""The sweep driver: planned runs → Ray actors → artifacts, written the moment each result arrives."""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import groupby
from pathlib import Path
from typing import Any

from orchestrator.actor import ActorShape, RunActor, actor_count, actor_shape, start_actor
from orchestrator.cluster import Capacity, connect, disconnect
from orchestrator.plan import PlannedRun
from orchestrator.progress import Progress
from orchestrator.store import ArtifactStore, rescue_result
from specs.results import RunResult, RunStatus, Samples
from specs.schema import ExperimentSpec

WAIT_SLICE_S = 1.0  # how often the loop looks up from ray.wait (for signals)


class Interrupted(Exception):
    """SIGTERM or SIGINT reached the driver (a SLURM wall-time warning, Ctrl-C)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class SweepSummary:
    planned: int
    skipped_done: int
    results: list[RunResult] = field(default_factory=list)
    wall_s: float = 0.0
    model_loads: Counter[str] = field(default_factory=Counter)
    interrupted: str | None = None
    # The sweep directory refused a write: what failed, and where each result it could not take was kept.
    write_error: str | None = None
    rescued: dict[str, str] = field(default_factory=dict)  # run id → path of the kept result

    @property
    def statuses(self) -> Counter[str]:
        return Counter(r.outcome for r in self.results)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if r.status in (RunStatus.ERROR, RunStatus.CRASHED))

    @property
    def unscored(self) -> list[RunResult]:
        """Runs measured whose quality could not be scored (RunResult.unscored)."""
        return [r for r in self.results if r.unscored]

    @property
    def run_seconds(self) -> float:
        """Time the actors spent in runs (load, warm-up, measurement, quality)."""
        return sum(_duration_s(r) for r in self.results)

    @property
    def measured_seconds(self) -> float:
        """Wall time inside measured repetitions only: what the timed generations took, so an extrapolated run
        counts the steps it timed, never the latency extrapolated from them (a part of `run_seconds`)."""
        return sum(_timed_wall_s(r.samples) for r in self.results if r.samples)


def _timed_wall_s(samples: Samples) -> float:
    """Seconds the repetitions of one run ran for: the timed steps of an extrapolated run, else its latencies."""
    if samples.extrapolated is not None:
        return sum(samples.extrapolated.measured_e2e_s)
    return sum(samples.latency_e2e_s)


@dataclass
class _Slot:
    """One live actor, and whether a run is in flight on it."""

    actor: Any
    busy: bool = False


class _Queue:
    """One session's pending runs, handed out in plan order (the models interleaved point by point); a run retried
    after its worker died goes first."""

    def __init__(self, runs: list[PlannedRun]) -> None:
        self._runs = list(runs)
        self.attempts: dict[str, int] = {r.run_id: 1 for r in runs}

    def __bool__(self) -> bool:
        return bool(self._runs)

    def take(self) -> PlannedRun:
        return self._runs.pop(0)

    def retry(self, run: PlannedRun) -> None:
        self.attempts[run.run_id] += 1
        self._runs.insert(0, run)


def by_session(runs: list[PlannedRun]) -> list[tuple[int | None, list[PlannedRun]]]:
    """The runs cut into their sessions, in plan order (the plan lists session 0's runs, then session 1's, ...)."""
    return [(session, list(group)) for session, group in groupby(runs, key=lambda r: r.config.session)]


def session_note(session: int | None, sessions: int, runs: int) -> str | None:
    """The line a multi-session sweep prints as a session starts its fresh workers."""
    if session is None:
        return None
    return f"session {session + 1} of {sessions}: {runs} runs to do, on fresh workers"


def run_sweep(
    spec: ExperimentSpec,
    planned: list[PlannedRun],
    store: ArtifactStore,
    *,
    done: set[str],
    actors: int | None = None,
    progress: Progress | None = None,
    connect_fn: Callable[[], Capacity] = connect,
    actor_class: type = RunActor,
    stop: StopFlag | None = None,
) -> SweepSummary:
    """Run every planned run not already done; failures become artifacts, and the sweep always ends.
    SIGTERM/SIGINT stop it cleanly at any moment, Ray's start included (`stop`: a caller's flag, already
    installed)."""
    todo = [run for run in planned if run.run_id not in done]
    summary = SweepSummary(planned=len(planned), skipped_done=len(planned) - len(todo))
    progress = progress or Progress(total=len(todo))
    started = time.perf_counter()
    if not todo:
        return summary
    try:
        with stop_on_signals(stop) as flag:
            try:
                capacity = _connect(connect_fn, flag)
                flag.check()
                count, note = actor_count(actors, capacity.gpus)
                if note:
                    progress.note(note)
                _drive(spec, todo, store, summary, progress, count, capacity, actor_class, flag)
            finally:
                disconnect()  # no process of a local Ray outlives the sweep, whatever stopped it
    except Interrupted as interrupted:
        summary.interrupted = str(interrupted)
    finally:
        summary.wall_s = time.perf_counter() - started
        progress.close()
    return summary


def _connect(connect_fn: Callable[[], Capacity], flag: StopFlag) -> Capacity:
    """Connect, turning an interrupt while Ray starts into Interrupted: ray.init installs a SIGTERM handler
    of its own that exits at once, so the signals are taken back as soon as it returns."""
    try:
        return connect_fn()
    except KeyboardInterrupt:
        raise Interrupted(signal.SIGINT) from None
    except SystemExit as exc:
        if exc.code == signal.SIGTERM:
            raise Interrupted(signal.SIGTERM) from None
        raise
    except Exception:
        if flag.signum is not None:  # Ctrl-C reaches Ray's own processes too, and ray.init fails for it
            raise Interrupted(flag.signum) from None
        raise
    finally:
        flag.take_signals()


def _drive(
    spec: ExperimentSpec,
    todo: list[PlannedRun],
    store: ArtifactStore,
    summary: SweepSummary,
    progress: Progress,
    count: int,
    capacity: Capacity,
    actor_class: type,
    stop: StopFlag,
) -> None:
    """Each session on actors of its own, started for it and killed after it: a session is a fresh process (on a
    GPU, a fresh CUDA context)."""
    shape = actor_shape(capacity.gpus, capacity.cpus, count)
    for session, runs in by_session(todo):
        if summary.write_error is not None:
            return
        note = session_note(session, spec.controls.sessions, len(runs))
        if note:
            progress.note(note)
        _drive_session(spec, runs, store, summary, progress, shape, count, actor_class, stop)


def _drive_session(
    spec: ExperimentSpec,
    runs: list[PlannedRun],
    store: ArtifactStore,
    summary: SweepSummary,
    progress: Progress,
    shape: ActorShape,
    count: int,
    actor_class: type,
    stop: StopFlag,
) -> None:
    import ray
    from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError, RayTaskError

    slots = [_Slot(start_actor(shape, actor_class)) for _ in range(min(count, len(runs)))]
    queue = _Queue(runs)
    in_flight: dict[Any, tuple[_Slot, PlannedRun]] = {}
    try:
        while (queue and summary.write_error is None) or in_flight:
            stop.check()
            for slot in slots:
                if not slot.busy and queue and summary.write_error is None:  # a refused write: drain only
                    run = queue.take()
                    ref = slot.actor.run.remote(
                        run.config.model_dump_json(), spec.name, run.run_id, queue.attempts[run.run_id]
                    )
                    slot.busy = True
                    in_flight[ref] = (slot, run)
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=WAIT_SLICE_S)
            for ref in ready:
                slot, run = in_flight.pop(ref)
                slot.busy = False
                try:
                    result = RunResult.model_validate_json(ray.get(ref))
                except (ActorDiedError, ActorUnavailableError, RayActorError) as died:
                    _count_loads(summary, slot)
                    slots[slots.index(slot)] = _Slot(start_actor(shape, actor_class))
                    if queue.attempts[run.run_id] <= spec.controls.max_retries:
                        progress.note(f"worker died during {run.run_id}; retrying on a fresh worker")
                        queue.retry(run)
                        continue
                    result = failed_result(spec.name, run, RunStatus.CRASHED, died, queue.attempts[run.run_id])
                except RayTaskError as raised:
                    result = failed_result(spec.name, run, RunStatus.ERROR, raised, queue.attempts[run.run_id])
                _keep(spec.name, store, result, summary, progress)
                summary.results.append(result)
                progress.finished(result)
        for slot in slots:
            _count_loads(summary, slot)
    finally:
        for slot in slots:
            ray.kill(slot.actor, no_restart=True)


def _keep(sweep: str, store: ArtifactStore, result: RunResult, summary: SweepSummary, progress: Progress) -> None:
    """Write a result into the sweep directory; once a write fails (read-only, disk full), keep it and every
    later one elsewhere, and hand out no more runs."""
    if summary.write_error is None:
        try:
            store.write_result(result)
            return
        except OSError as exc:
            summary.write_error = f"{exc.filename or store.root} ({exc.strerror or exc})"
            progress.note(f"error: cannot write into {summary.write_error}; no more runs are started")
    rescued = rescue_result(result, sweep)
    if rescued is None:
        progress.note(f"result of run {result.run_id}, which no directory would take:\n{result.model_dump_json()}")
        summary.rescued[result.run_id] = "standard error, above"
    else:
        summary.rescued[result.run_id] = str(rescued)


def _count_loads(summary: SweepSummary, slot: _Slot) -> None:
    import ray

    try:
        summary.model_loads.update(ray.get(slot.actor.load_counts.remote(), timeout=30))
    except Exception:  # a dead actor's count is lost; its runs' model_load_s still show the loads
        return


def failed_result(sweep: str, run: PlannedRun, status: RunStatus, error: BaseException, attempts: int) -> RunResult:
    """A result for a run whose worker could not report one itself."""
    first_line = str(error).splitlines()[0] if str(error) else ""
    return unrun_result(
        sweep, run, status, f"{error.__class__.__name__}: {first_line}",
        traceback="".join(traceback.format_exception(error)), attempts=attempts,
    )


def unrun_result(
    sweep: str, run: PlannedRun, status: RunStatus, reason: str, *, traceback: str | None = None, attempts: int = 0
) -> RunResult:
    """A result written by the driver itself: the run crashed its worker, or was never started."""
    now = _now()
    return RunResult(
        run_id=run.run_id,
        sweep=sweep,
        config=run.config,
        status=status,
        weights="synthetic" if run.config.model.is_synthetic else "real",
        started_at=now,
        finished_at=now,
        attempts=attempts,
        error=reason,
        traceback=traceback,
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _duration_s(result: RunResult) -> float:
    try:
        start = datetime.fromisoformat(result.started_at)
        end = datetime.fromisoformat(result.finished_at)
    except ValueError:
        return 0.0
    return max(0.0, (end - start).total_seconds())


class StopFlag:
    """Set by a signal; the loop checks it between results, so a result is never cut mid-write."""

    STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.installed = False

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)

    def handle(self, signum: int, _frame: object) -> None:
        self.signum = signum

    def take_signals(self) -> None:
        """(Re)install the handlers, e.g. after ray.init replaced SIGTERM's with one that exits."""
        if self.installed:
            for s in self.STOP_SIGNALS:
                signal.signal(s, self.handle)


@contextmanager
def stop_on_signals(flag: StopFlag | None = None) -> Iterator[StopFlag]:
    """Turn SIGTERM/SIGINT (SLURM's wall-time warning, Ctrl-C) into a clean stop; a flag given is one a
    caller has installed already, and is used as it is."""
    if flag is not None:
        yield flag
        return
    flag = StopFlag()
    previous = {s: signal.getsignal(s) for s in StopFlag.STOP_SIGNALS}
    try:
        for s in previous:
            signal.signal(s, flag.handle)
        flag.installed = True
    except ValueError:  # not the main thread: leave signals alone
        previous = {}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


ARTIFACTS_ENV = "LLADA_BENCH_ARTIFACTS"  # where default sweep directories go (container/accre.sbatch sets it)


def default_out_dir(spec: ExperimentSpec, out: Path | None) -> Path:
    """$LLADA_BENCH_ARTIFACTS/<sweep>/ (default artifacts/<sweep>/) unless --out names the sweep directory itself."""
    return out if out is not None else Path(os.environ.get(ARTIFACTS_ENV) or "artifacts") / spec.name
