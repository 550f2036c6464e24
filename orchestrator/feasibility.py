"""Runs no machine could measure, refused up front: a batch or a model predicted far beyond the device's memory.

An out-of-memory wall is a finding (DESIGN "Failures are data"): a run predicted a little over the device's
memory is still measured, and recorded as `oom` if it does not fit. A batch predicted at many times the
device's memory cannot even measure that wall: on a GPU it fails at its first allocation, on a CPU it may
take the machine down with it. `plan` and `sweep` refuse such a spec alike, naming both sizes and the field to
change: the batch size, or the model's shape when its weights alone are that large.
"""

from __future__ import annotations

import os

from orchestrator.plan import PlannedRun, hardware_profile
from specs.loader import SpecError
from specs.schema import ExperimentSpec, ModelSpec, SyntheticSource
from specs.shapes import ModelShape

# A run predicted above this many times the device's memory is refused rather than measured as an OOM.
MEASURABLE_OVERSHOOT = 4.0
TOKEN_ID_BYTES = 8  # int64 token ids: every run holds its batch's prompt and generation at once


def refuse_unmeasurable_batches(spec: ExperimentSpec, planned: list[PlannedRun], spec_file: str) -> None:
    """Raise SpecError naming the spec file and the field to change (as every load-time error names its file) for
    the first run predicted beyond MEASURABLE_OVERSHOOT x the device's memory: `grid.batch_sizes`, or the model's
    own source when its weights alone are that large (then no batch size fits). The device is the spec's roofline
    profile, or this machine's RAM for `device: cpu`; with neither (a GPU not known until run time) nothing is
    checked."""
    device = _device_memory(spec)
    if device is None:
        return
    device_name, device_bytes = device
    limit = MEASURABLE_OVERSHOOT * device_bytes
    for run in planned:
        need_bytes, weights, basis = _predicted_bytes(spec, run)
        if need_bytes <= limit:
            continue
        config = run.config
        device_text = f"on {device_name}, which has {device_bytes / 2**30:,.1f} GiB"
        wall = f"beyond {MEASURABLE_OVERSHOOT:g}x the device's memory a run cannot measure even its out-of-memory wall"
        if weights > limit:
            field, fix = _model_to_blame(spec, config.model)
            raise SpecError(
                f"{spec_file}: {field}: the weights of {config.model.name} alone are predicted to need "
                f"{weights / 2**30:,.1f} GiB ({basis}) {device_text}, so no batch size can run ({wall}); {fix}"
            )
        raise SpecError(
            f"{spec_file}: grid.batch_sizes: batch {config.batch_size} of {config.model.name} "
            f"({config.prompt_length}+{config.generation_length} tokens) is predicted to need "
            f"{need_bytes / 2**30:,.1f} GiB ({basis}) {device_text}; {wall}: lower the batch size"
        )


def _model_to_blame(spec: ExperimentSpec, model: ModelSpec) -> tuple[str, str]:
    """The field of a model too large for the device, and the fix: an explicit shape's vocabulary when its
    embedding and LM head hold most of the weights, else its layers; a preset's or a checkpoint's source."""
    field = f"models.{[m.name for m in spec.models].index(model.name)}.source"
    shape = model.shape()
    if not isinstance(model.source, SyntheticSource) or not isinstance(model.source.synthetic, ModelShape):
        return field, "give a smaller model, or a device with more memory (controls.hardware.profile)"
    assert shape is not None
    tables = shape.vocab_size * shape.hidden_size * (1 if shape.tie_word_embeddings else 2)
    if 2 * tables >= shape.parameter_count():
        return (f"{field}.synthetic.vocab_size", f"its embedding and LM head ({shape.vocab_size:,} x "
                f"{shape.hidden_size}) hold most of them; lower the shape's vocab_size")
    return (f"{field}.synthetic.num_layers", f"its {shape.num_layers} layers hold most of them; lower the shape's "
            "num_layers, hidden_size or intermediate_size")


def _device_memory(spec: ExperimentSpec) -> tuple[str, int] | None:
    profile = spec.controls.hardware.profile
    if profile is not None:
        hardware = hardware_profile(profile)
        return f"profile {hardware.name}", hardware.memory_bytes
    if spec.controls.device == "cpu":
        return "this machine's RAM", os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return None


def _predicted_bytes(spec: ExperimentSpec, run: PlannedRun) -> tuple[int, int, str]:
    """The run's peak memory and its weights' share of it: the roofline's where the model's shape is known before
    loading (a synthetic model, or any model on a profile, which costs a checkpoint as the family's published
    shape), else the batch's token ids alone (and weights unknown: 0)."""
    config = run.config
    profile = spec.controls.hardware.profile
    if profile is not None or config.model.shape() is not None:
        from roofline.predict import predict_run

        # The memory model does not depend on the profile's speeds: without one, any profile serves.
        hardware = hardware_profile(profile or "a100-sxm4-80gb")
        prediction = predict_run(config, hardware)
        return prediction.peak_memory_bytes, prediction.weights_bytes, "the roofline's memory model"
    tokens = config.batch_size * (config.prompt_length + config.generation_length)
    return tokens * TOKEN_ID_BYTES, 0, "its token ids alone"
