"""What each run of the GPU round costs, per profile, and whether that time is measured or predicted.

A run whose configuration the committed H200 sweeps ran in full (results/h200: the same model shape, batch,
lengths, steps, block and implementation) is priced from that run: its median measured generation, scaled to
another profile by the roofline's ratio of the two, times its warm-ups and repetitions, plus its measured
compilation. Any other run is priced by the roofline (orchestrator/walltime.py, as `llada-bench plan`). Both are
labelled, so the plan says which of its seconds were measured.

A session is a fresh process with a fresh CUDA context (orchestrator/inline.py), so it pays again what a process
pays: the imports and the context (SESSION_START_S), its model builds, and the compilation of every compiled
shape. The round keeps inductor's FX graph, AOTAutograd and autotune caches on local disk across sessions
(gpu_round.compile_cache_env), so only a call's first compilation of a shape is cold: the sessions after it load
the compiled graph and re-trace it with dynamo (WARM_COMPILE_S). Synthetic weights are rebuilt in each session
rather than kept in host memory: `model_load_s` of the 8B builds on the H200 was 0.17 s and 0.14 s (accel-8b),
less than copying 16 GB over PCIe 5.0 x16 would take at its 64 GB/s peak (0.25 s) even from pinned memory.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from orchestrator.plan import PlannedRun
from orchestrator.walltime import COMPILE_S, SWEEP_START_S, generation_seconds, run_seconds
from roofline.hardware import get_hardware
from specs.loader import PACKAGE_ROOT
from specs.results import RunResult, RunStatus
from specs.schema import RunConfig

PROFILES = ("h100-sxm", "h200")
MEASURED_ON = "h200"  # the profile of the device the committed sweeps ran on
MEASURED_SWEEPS = ("results/h200/accel-8b", "results/h200/campaign-h100")
# A compiled shape's second compilation in a later process, its caches warm: dynamo re-traces the step and the
# compiled graph is loaded from the FX graph cache. Predicted, not measured here: vLLM logs 5.0 s of dynamo and
# 4.2 s of cache load for Meta-Llama-3-8B's warm start (vllm-project/vllm#16848), against the 28-30 s cold
# compilations measured on the H200 (accel-8b, COMPILE_S).
WARM_COMPILE_S = 10.0
# A session's fresh process: its imports and CUDA context. Only the whole start of a sweep command was measured
# (SWEEP_START_S, 13 s on the H200, the driver's own start included), so each later session is charged that much.
SESSION_START_S = SWEEP_START_S
WEIGHTS_BUILD_S = (0.17, 0.14)  # accel-8b's model_load_s on the H200: LLaMA-8B, LLaDA-8B
PCIE_BYTES_PER_S = 64e9  # PCIe 5.0 x16, per direction: the most a host copy of the weights could reach
Compile = Literal["cold", "warm"]


@dataclass(frozen=True)
class Twin:
    """A committed H200 run of the same configuration: its id, its sweep, its median generation and compilation."""

    run_id: str
    sweep: str
    generation_s: float
    compile_s: float | None


@dataclass(frozen=True)
class RunCost:
    """One run as the plan prices it: seconds per profile, the measured run it was priced from (None: the
    roofline's), and whether its compilation is a cold or a warm one (None: nothing compiled)."""

    run_id: str
    session: int | None
    label: str
    seconds: dict[str, float]
    twin: Twin | None
    compile: Compile | None

    @property
    def measured(self) -> bool:
        return self.twin is not None

    @property
    def measured_s(self) -> float:
        """Its seconds on the profile the committed sweeps ran on that rest on a measured run (a warm
        compilation is predicted)."""
        if self.twin is None:
            return 0.0
        return self.seconds[MEASURED_ON] - (WARM_COMPILE_S if self.compile == "warm" else 0.0)


def configuration_key(config: RunConfig) -> str:
    """What makes two runs time the same work: the model's shape, the grid point and the implementation (its
    name aside); never the controls' counts, the session or the prompts."""
    data = config.model_dump(mode="json")
    impls = {}
    for field in ("llada_impl", "llama_impl", "dream_impl"):
        impl = data.get(field)
        impls[field] = {k: v for k, v in impl.items() if k not in ("name", "steps")} if impl else None
    keep = ("batch_size", "prompt_length", "generation_length", "steps", "block_length", "remasking", "cfg_scale",
            "timed_steps", "dream")
    return json.dumps([data["model"]["arch"], data["model"]["source"], data["controls"]["dtype"],
                       data["controls"]["attention"], {k: data.get(k) for k in keep}, impls], sort_keys=True)


@lru_cache(maxsize=1)
def measured_twins() -> dict[str, Twin]:
    """Every full, successful run of the committed H200 sweeps, by configuration."""
    twins: dict[str, Twin] = {}
    for sweep in MEASURED_SWEEPS:
        for path in sorted((PACKAGE_ROOT / sweep / "runs").glob("*.json")):
            result = RunResult.model_validate_json(path.read_bytes())
            samples = result.samples
            if result.status != RunStatus.OK or samples is None or samples.extrapolated is not None:
                continue
            twins[configuration_key(result.config)] = Twin(result.run_id, Path(sweep).name,
                                                           statistics.median(samples.latency_e2e_s),
                                                           result.preparation_s)  # fmt: skip
    return twins


def _compiles(config: RunConfig) -> bool:
    return config.llama_impl is not None and config.llama_impl.compile


def _label(config: RunConfig) -> str:
    steps = f" K={config.steps}" if config.steps is not None else ""
    return f"{config.model.arch} {config.impl_name} B={config.batch_size}{steps}"


def run_costs(planned: Sequence[PlannedRun], done: Iterable[str] = ()) -> list[RunCost]:
    """The runs still to do, in plan order, each priced on every profile. A compiled run's compilation is cold for
    the first run of its shape that this call makes, warm for the later ones (the round's compile caches)."""
    skip, compiled, out = set(done), set(), []
    twins = measured_twins()
    for run in planned:
        if run.run_id in skip:
            continue
        config = run.config
        twin = twins.get(configuration_key(config))
        compile_kind: Compile | None = None
        if _compiles(config):
            shape = (config.model.name, config.batch_size, config.sequence_length)
            compile_kind = "warm" if shape in compiled else "cold"
            compiled.add(shape)
        seconds = {}
        for profile in PROFILES:
            hardware = get_hardware(profile)
            generation = None
            if twin is not None:
                generation = twin.generation_s * generation_seconds(config, hardware) / generation_seconds(
                    config, get_hardware(MEASURED_ON))
            cold = twin.compile_s if twin is not None and twin.compile_s else COMPILE_S
            compile_s = WARM_COMPILE_S if compile_kind == "warm" else cold
            seconds[profile] = run_seconds(config, hardware, generation_s=generation, compile_s=compile_s)
        out.append(RunCost(run.run_id, config.session, _label(config), seconds, twin, compile_kind))
    return out


def sessions_of(costs: Iterable[RunCost]) -> dict[int | None, list[RunCost]]:
    """The costs grouped by session, in order."""
    grouped: dict[int | None, list[RunCost]] = {}
    for cost in costs:
        grouped.setdefault(cost.session, []).append(cost)
    return grouped


def fixed_seconds(sessions: int, loads_s: float) -> float:
    """A sweep command's fixed cost when it runs `sessions` sessions: its start, each later session's fresh
    process, and every session's model builds (`loads_s`, all sessions together)."""
    return (SWEEP_START_S + (sessions - 1) * SESSION_START_S if sessions else 0.0) + loads_s


def host_copy_s(weights_bytes: float) -> float:
    """The least time a copy of the weights from host memory could take: over PCIe at its peak."""
    return weights_bytes / PCIE_BYTES_PER_S
