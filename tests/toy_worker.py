"""A stand-in for workers.runner.Worker in an inline sweep's session process (orchestrator.inline.WORKER): no model,
no torch, a whole run result at once, with latencies set by implementation so that the report's pairings have
something to find: compiled LLaMA faster than eager, dual-cache-graph the fastest LLaDA. Each run it makes is
appended to the file $TOY_WORKER_LOG names, with its session."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime

from specs.results import Environment, RunResult, RunStatus, Samples
from specs.schema import RunConfig

LOG_ENV = "TOY_WORKER_LOG"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
# Seconds per generation at 8 steps (LLaDA) or in all (LLaMA), by (arch, implementation).
SECONDS = {("llama", "vanilla"): 0.30, ("llama", "static-compile"): 0.12, ("llada", "vanilla"): 0.20,
           ("llada", "graph"): 0.15, ("llada", "dual-cache-graph"): 0.06}  # fmt: skip


class ToyWorker:
    def __init__(self) -> None:
        self.broken: str | None = None
        self.load_counts: dict[str, int] = {}

    def run(self, config: RunConfig, *, sweep: str, run_id: str, attempt: int = 1) -> RunResult:
        self.load_counts[config.model.name] = 1
        log = os.environ.get(LOG_ENV)
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"{run_id} {config.session}\n")
        base = SECONDS[config.model.arch, config.impl_name] * (config.steps or 8) / 8 * (1 + 0.03 * (config.session or 0))
        latencies = [base * (1 + 0.01 * r) for r in range(config.controls.repetitions)]
        steps = [[s / config.steps] * config.steps for s in latencies] if config.steps else None
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        return RunResult(
            run_id=run_id, sweep=sweep, config=config, status=RunStatus.OK, weights="synthetic", started_at=now,
            finished_at=now, attempts=attempt,
            samples=Samples(timer="perf_counter", warmup_latency_s=[base] * config.controls.warmup,
                            latency_e2e_s=latencies, batch_index=list(range(len(latencies))), step_s=steps),
            environment=Environment(hostname="toy", platform=platform.platform(), python=platform.python_version(),
                                    device="cpu", git_commit=COMMIT, dtype=config.controls.dtype),
        )  # fmt: skip
