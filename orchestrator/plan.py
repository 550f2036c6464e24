"""Expand a spec's grid into ordered runs with stable ids (spec → plan)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from specs.artifacts import canonical_json
from specs.loader import SpecError
from specs.schema import ExperimentSpec, ModelSpec, RunConfig

RUN_ID_LENGTH = 12


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    config: RunConfig


def run_id_for(config: RunConfig) -> str:
    """A short hash of the config's canonical JSON: same config, same id, across machines and sessions."""
    digest = hashlib.sha256(canonical_json(config.model_dump(mode="json")).encode("utf-8"))
    return digest.hexdigest()[:RUN_ID_LENGTH]


def plan_runs(spec: ExperimentSpec) -> list[PlannedRun]:
    """Every run of the sweep, grouped by model (one load per worker), each model's runs small to large."""
    evaluator = spec.evaluator_model()
    prompt_ids = list(range(spec.prompts.count))
    planned: list[PlannedRun] = []
    for model in spec.models:
        configs = [
            RunConfig(
                model=model,
                batch_size=batch,
                prompt_length=pair.prompt,
                generation_length=pair.generation,
                controls=spec.controls,
                prompts=spec.prompts,
                prompt_ids=prompt_ids,
                quality=spec.quality,
                evaluator=evaluator if spec.quality.perplexity is not None else None,
                **sampler,
            )
            for pair in spec.grid.length_pairs()
            for batch in spec.grid.batch_sizes
            for sampler in _sampler_settings(spec, model)
        ]
        configs.sort(key=_memory_order)
        planned.extend(PlannedRun(run_id_for(c), c) for c in configs)
    _check_unique(planned)
    return planned


def _sampler_settings(spec: ExperimentSpec, model: ModelSpec) -> list[dict[str, object]]:
    """LLaDA's own axes; a LLaMA model gets exactly one setting, so these never multiply its runs."""
    axes = spec.llada_axes(model)
    if axes is None:
        return [{}]
    return [
        {"steps": steps, "block_length": block, "remasking": remasking, "cfg_scale": cfg}
        for block in axes.block_lengths
        for steps in axes.steps
        for remasking in axes.remasking
        for cfg in axes.cfg_scales
    ]


def _memory_order(config: RunConfig) -> tuple[int, int, int, int, int]:
    """Tokens resident at once grow the footprint (CFG doubles the batch): an OOM wall is met last."""
    rows = config.batch_size * (2 if config.cfg_scale > 0 else 1)
    return (
        rows * config.sequence_length,
        config.sequence_length,
        config.batch_size,
        config.block_length or 0,
        config.steps or 0,
    )


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
    from roofline.hardware import get_hardware
    from roofline.predict import predict_run

    try:
        hardware = get_hardware(spec.controls.hardware.profile)
    except KeyError as exc:
        raise SpecError(f"controls.hardware.profile: {exc.args[0]}") from None
    skipped = {}
    for run in planned:
        prediction = predict_run(run.config, hardware)
        if not prediction.fits:
            skipped[run.run_id] = (
                f"predicted peak memory {prediction.peak_memory_bytes / 2**30:.1f} GiB exceeds "
                f"{hardware.name}'s {hardware.memory_bytes / 2**30:.0f} GiB"
            )
    return skipped
