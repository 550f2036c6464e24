"""Expand a spec's grid into ordered runs with stable ids (spec → plan)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.plan_size import refuse_oversized
from specs.artifacts import canonical_json
from specs.block_diffusion import schedule
from specs.loader import SpecError, resolve_path
from specs.passages import PassageError, count_spans, is_local, local_passages, shortage_message
from specs.schema import (
    VANILLA,
    BlockDiffusionImpl,
    DreamImpl,
    ExperimentSpec,
    LengthPair,
    LladaImpl,
    LlamaImpl,
    ModelSpec,
    ParitySpec,
    QualitySpec,
    RunConfig,
)

if TYPE_CHECKING:  # imported where used: planning a spec without a profile never loads the roofline
    from roofline.hardware import HardwareProfile

RUN_ID_LENGTH = 12
# Fields added after sweeps were first run enter the run id only when set, so those sweeps keep their ids
# (and resume): path in the config's JSON → the default that is left out.
_HASHED_ONLY_WHEN_SET: dict[tuple[str, ...], object] = {
    ("timed_steps",): None,
    ("controls", "extrapolation"): None,
    ("prompts", "join_passages"): False,
    ("llada_impl",): None,
    ("llama_impl",): None,
    ("llada_impl", "graph"): False,
    ("llada_impl", "steps"): None,
    ("llama_impl", "decode_attention"): "static",
    ("llada_impl", "engine"): "pytorch",
    ("llama_impl", "engine"): "pytorch",
    ("dream",): None,
    ("dream_impl",): None,
    ("block_diffusion",): None,
    ("block_diffusion_impl",): None,
    ("model", "dream"): None,
    ("model", "block_diffusion"): None,
    ("evaluator", "block_diffusion"): None,
    ("model", "source", "synthetic", "attention_bias"): False,
    ("evaluator", "dream"): None,
    ("evaluator", "source", "synthetic", "attention_bias"): False,
    ("controls", "sessions"): 1,
    ("session",): None,
    ("quality", "batch_sizes"): None,
    ("quality", "llama_sampled_samples"): 1,
    ("quality", "parity"): ParitySpec().model_dump(mode="json"),  # report-time: runs keep the default
    ("quality", "perplexity", "second_evaluator"): None,
    ("second_evaluator",): None,
    ("second_evaluator", "dream"): None,
    ("second_evaluator", "block_diffusion"): None,
    ("second_evaluator", "source", "synthetic", "attention_bias"): False,
}
# Fields the arch decides (a model's sampler is its family's, or the spec is refused): never part of the id, so
# naming the sampler in a spec changes no run.
_IMPLIED_BY_ARCH: tuple[tuple[str, ...], ...] = (("model", "sampler"), ("evaluator", "sampler"),
                                                  ("second_evaluator", "sampler"))


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    config: RunConfig


def run_id_for(config: RunConfig) -> str:
    """A short hash of the config's canonical JSON: same config, same id, across machines and sessions."""
    data = config.model_dump(mode="json")
    for path, default in _HASHED_ONLY_WHEN_SET.items():
        _drop_default(data, path, default)
    for path in _IMPLIED_BY_ARCH:
        _drop(data, path)
    digest = hashlib.sha256(canonical_json(data).encode("utf-8"))
    return digest.hexdigest()[:RUN_ID_LENGTH]


def _drop_default(data: dict[str, Any], path: tuple[str, ...], default: object) -> None:
    parent, key = _parent(data, path)
    if isinstance(parent, dict) and key in parent and parent[key] == default:
        del parent[key]


def _drop(data: dict[str, Any], path: tuple[str, ...]) -> None:
    parent, key = _parent(data, path)
    if isinstance(parent, dict):
        parent.pop(key, None)


def _parent(data: dict[str, Any], path: tuple[str, ...]) -> tuple[Any, str]:
    """The dict that holds the path's last key (None where the path breaks off), and that key."""
    *parents, key = path
    node: Any = data
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    return node, key


def plan_runs(spec: ExperimentSpec) -> list[PlannedRun]:
    """Every run of the sweep, session after session (`controls.sessions`). Within a session the grid's points
    (batch, prompt length, generation length) go from small to large memory, so an out-of-memory wall is met after
    the runs that fit; at each point the runs of every model, its variants and step counts included, come in an
    order drawn from the seed and the session, so the compared models are measured side by side in time and drift
    falls on both alike."""
    refuse_oversized(spec)  # counted from the axes: a plan over the limit is never expanded
    planned: list[PlannedRun] = []
    for session in session_indices(spec.controls.sessions):
        runs = [PlannedRun(run_id_for(c), c) for c in _session_configs(spec, session)]
        planned.extend(_interleaved(runs, spec.controls.seed, session))
    _check_unique(planned)
    check_prompt_supply(spec)
    return planned


def session_indices(sessions: int) -> list[int | None]:
    """The `session` of each session's runs: None for a sweep of one session (its runs keep their ids)."""
    return [None] if sessions == 1 else list(range(sessions))


def _session_configs(spec: ExperimentSpec, session: int | None) -> list[RunConfig]:
    """One session's runs. Quality is scored in the first session only, and at `quality.batch_sizes` only where the
    spec names them: greedy text of fixed prompts is the same in every session and at every batch, so the other
    runs time only (their configs turn quality off, and say so)."""
    configs = [
        RunConfig(
            model=model,
            batch_size=batch,
            prompt_length=pair.prompt,
            generation_length=pair.generation,
            controls=spec.controls,
            prompts=spec.prompts,
            prompt_ids=list(range(spec.prompts.count)),
            **_quality_of(spec, session, batch),
            session=session,
            **sampler,
        )
        for model in spec.models
        for pair in spec.grid.length_pairs()
        for batch in spec.grid.batch_sizes
        for sampler in _sampler_settings(spec, model, pair)
    ]
    return _with_extrapolation(spec, configs)


def _quality_of(spec: ExperimentSpec, session: int | None, batch: int) -> dict[str, Any]:
    """A run's quality and evaluator: the spec's where it scores quality, else none. The spec's `batch_sizes`
    chose the runs and is not part of a run's config (runs keep the ids they had before the field existed)."""
    only = spec.quality.batch_sizes
    if session not in (None, 0) or (only is not None and batch not in only):
        return {"quality": QualitySpec(), "evaluator": None}
    quality = spec.quality.model_copy(update={"batch_sizes": None, "parity": ParitySpec()})  # report-time settings
    return {"quality": quality, "evaluator": spec.evaluator_model(), "second_evaluator": spec.evaluator_model(second=True)}


def _interleaved(runs: list[PlannedRun], seed: int, session: int | None) -> list[PlannedRun]:
    """The runs point by point, small to large memory, each point's runs in an order drawn from the seed and the
    session (a hash of both with the run id: stable across machines and Python versions, whatever order the spec
    lists its models and axes in)."""
    points: dict[tuple[int, int, int], list[PlannedRun]] = {}
    for run in runs:
        points.setdefault((run.config.batch_size, run.config.prompt_length, run.config.generation_length), []).append(run)
    ordered: list[PlannedRun] = []
    for batch, prompt, generation in sorted(points, key=lambda p: (p[0] * (p[1] + p[2]), p[1] + p[2], p[0])):
        ordered.extend(sorted(points[batch, prompt, generation], key=lambda r: _drawn(seed, session, r.run_id)))
    return ordered


def _drawn(seed: int, session: int | None, run_id: str) -> str:
    return hashlib.sha256(f"llada-bench:order:{seed}:{session}:{run_id}".encode()).hexdigest()


def _with_extrapolation(spec: ExperimentSpec, configs: list[RunConfig]) -> list[RunConfig]:
    """controls.extrapolation: LLaDA runs longer than K steps time K steps; the check points also run in full.

    Accelerated LLaDA variants always run in full: a cached variant's first step of a block costs a full
    forward and its later steps less, and a confidence rule decides how many steps run at all, so the
    first K steps say nothing reliable about the rest."""
    extrapolation = spec.controls.extrapolation
    if extrapolation is None:
        return configs
    k = extrapolation.timed_steps
    checks = set(extrapolation.check_steps)
    check_batches = set(extrapolation.check_batch_sizes or spec.grid.batch_sizes)
    out: list[RunConfig] = []
    for config in configs:
        if config.steps is None or config.steps <= k:
            out.append(config)  # LLaMA, or a LLaDA run no longer than K steps: measured in full anyway
            continue
        if (config.llada_impl is not None and config.llada_impl.is_accelerated) or config.block_diffusion is not None:
            out.append(config)  # steps of unequal cost or number (block diffusion's too): never extrapolated
            continue
        out.append(config.model_copy(update={"timed_steps": k}))
        if config.steps in checks and config.batch_size in check_batches:
            out.append(config)  # the full generation that checks the extrapolation
    return out


def check_prompt_supply(spec: ExperimentSpec) -> None:
    """A local prompt file must hold `prompts.count` passages (or joined spans) as long as the longest grid
    point, checked here so that a sweep never loads a model for runs that cannot get their prompts."""
    prompts = spec.prompts
    if not is_local(prompts.dataset):
        return
    words = max(pair.prompt + pair.generation for pair in spec.grid.length_pairs())
    try:
        found = count_spans(
            local_passages(resolve_path(prompts.dataset), prompts.text_field), words,
            join=prompts.join_passages, enough=prompts.count,
        )  # fmt: skip
    except PassageError as exc:
        raise SpecError(str(exc)) from None
    if found < prompts.count:
        raise SpecError(shortage_message(prompts.dataset, found, words, prompts.count, join=prompts.join_passages))


def _sampler_settings(spec: ExperimentSpec, model: ModelSpec, pair: LengthPair) -> list[dict[str, object]]:
    """Each sampler's own axes (LLaDA's settings and implementation variants, Dream's settings, block diffusion's
    settings and variants, the autoregressive loop's variants): they never multiply another sampler's runs. The
    vanilla variant is stored as None. A block-diffusion run's steps are its schedule's forwards at threshold 1."""
    blocks = spec.block_diffusion_axes(model)
    if blocks is not None:
        return [
            {"steps": schedule(pair.prompt, pair.generation, block, setting.sub_block_length,
                               setting.prefill_one_block_prompt).max_forwards,
             "block_length": block, "block_diffusion": setting, "block_diffusion_impl": _unless_vanilla(impl)}
            for block in blocks.block_lengths
            for setting in blocks.settings()
            for impl in blocks.impl
        ]  # fmt: skip
    dream = spec.dream_axes(model)
    if dream is not None:
        return [
            {"steps": steps, "dream": setting, "dream_impl": _unless_vanilla(impl)}
            for steps in dream.steps
            for setting in dream.settings()
            for impl in dream.impl
        ]
    axes = spec.llada_axes(model)
    if axes is None:
        llama_impls = spec.grid.llama.impl if spec.grid.llama is not None else [None]
        return [{"llama_impl": _unless_vanilla(impl)} for impl in llama_impls]
    return [
        {"steps": steps, "block_length": block, "remasking": remasking, "cfg_scale": cfg, "llada_impl": _unless_vanilla(impl)}
        for block in axes.block_lengths
        for steps in axes.steps
        for remasking in axes.remasking
        for cfg in axes.cfg_scales
        for impl in axes.impl
        if impl.steps is None or steps in impl.steps
    ]


def _unless_vanilla(impl: LladaImpl | LlamaImpl | DreamImpl | BlockDiffusionImpl | None) -> object | None:
    """None for vanilla; a LLaDA variant without its `steps` restriction, which chose where it runs, not how."""
    if impl is None or impl.name == VANILLA:
        return None
    return impl.model_copy(update={"steps": None}) if isinstance(impl, LladaImpl) else impl


def _check_unique(planned: list[PlannedRun]) -> None:
    seen: dict[str, RunConfig] = {}
    for run in planned:
        assert run.run_id not in seen, f"two configs share run id {run.run_id}"
        seen[run.run_id] = run.config


def predicted_not_to_fit(spec: ExperimentSpec, planned: list[PlannedRun]) -> dict[str, str]:
    """Runs the roofline's memory model says exceed the profile's memory, with the reason (run id → reason).
    Only when the spec asks (controls.skip_predicted_oom); otherwise the OOM wall is measured."""
    if not spec.controls.skip_predicted_oom or spec.controls.hardware.profile is None:
        return {}
    from roofline.predict import predict_run

    hardware = hardware_profile(spec.controls.hardware.profile)
    skipped = {}
    for run in planned:
        prediction = predict_run(run.config, hardware)
        if not prediction.fits:
            skipped[run.run_id] = (
                f"predicted peak memory {prediction.peak_memory_bytes / 2**30:.1f} GiB exceeds "
                f"{hardware.name}'s {hardware.memory_bytes / 2**30:.0f} GiB"
            )
    return skipped


# ---------------------------------------------------------------- predicted wall time


@dataclass(frozen=True)
class PlanEstimate:
    """Predicted wall time of the plan on the spec's hardware profile: each run (run id → seconds: its warm-ups,
    repetitions, quality generations and compilation, on the roofline with the profile's host floor, plus the
    per-run overhead), each model's load (model name → seconds) and one sweep command's fixed start
    (orchestrator/walltime.py says where each cost comes from). Scoring models are not modelled."""

    hardware: str
    seconds: dict[str, float]
    loads: dict[str, float] = field(default_factory=dict)
    start_s: float = 0.0

    @property
    def runs_s(self) -> float:
        return sum(self.seconds.values())

    @property
    def total_s(self) -> float:
        return self.runs_s + sum(self.loads.values()) + self.start_s


def predicted_run_seconds(config: RunConfig, hardware: HardwareProfile) -> float:
    """The wall time of one run on `hardware` (orchestrator/walltime.py), its model load aside."""
    from orchestrator.walltime import run_seconds

    return run_seconds(config, hardware)


def predict_plan(spec: ExperimentSpec, planned: list[PlannedRun], profile: str | None = None) -> PlanEstimate | None:
    """The plan's predicted wall time on `profile` (default: `controls.hardware.profile`); None when neither
    names one. Each model is loaded once a session: a worker keeps the models it serves resident, and each session
    starts fresh processes."""
    profile = profile or spec.controls.hardware.profile
    if profile is None:
        return None
    from orchestrator.walltime import SWEEP_START_S, load_seconds

    hardware = hardware_profile(profile)
    loads: dict[str, float] = {}
    for (model, _), config in {(r.config.model.name, r.config.session): r.config for r in planned}.items():
        loads[model] = loads.get(model, 0.0) + load_seconds(config, hardware)
    return PlanEstimate(hardware.name, {run.run_id: predicted_run_seconds(run.config, hardware) for run in planned},
                        loads, SWEEP_START_S if planned else 0.0)


def hardware_profile(name: str) -> HardwareProfile:
    """The roofline profile a spec names; an unknown name is a SpecError on `controls.hardware.profile`."""
    from roofline.hardware import get_hardware

    try:
        return get_hardware(name)
    except KeyError as exc:
        raise SpecError(f"controls.hardware.profile: {exc.args[0]}") from None


def format_duration(seconds: float) -> str:
    """'42 s', '12.5 min', '6.3 h': the unit a person plans a lease in."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
