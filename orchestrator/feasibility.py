"""Runs no machine could measure: a batch whose predicted memory is far beyond the device's, refused up front.

An out-of-memory wall is a finding (DESIGN "Failures are data"): a run predicted a little over the device's
memory is still measured, and recorded as `oom` if it does not fit. A batch predicted at many times the
device's memory cannot even measure that wall: on a GPU it fails at its first allocation, on a CPU it may
take the machine down with it. `plan` and `sweep` refuse such a spec alike, naming the field and both sizes.
"""

from __future__ import annotations

import os

from orchestrator.plan import PlannedRun, hardware_profile
from specs.loader import SpecError
from specs.schema import ExperimentSpec

# A run predicted above this many times the device's memory is refused rather than measured as an OOM.
MEASURABLE_OVERSHOOT = 4.0
TOKEN_ID_BYTES = 8  # int64 token ids: every run holds its batch's prompt and generation at once


def refuse_unmeasurable_batches(spec: ExperimentSpec, planned: list[PlannedRun], spec_file: str) -> None:
    """Raise SpecError naming the spec file and `grid.batch_sizes` (as every load-time error names its file) for the
    first run predicted beyond MEASURABLE_OVERSHOOT x the device's memory. The device is the spec's roofline
    profile, or this machine's RAM for `device: cpu`; with neither (a GPU not known until run time) nothing is
    checked."""
    device = _device_memory(spec)
    if device is None:
        return
    device_name, device_bytes = device
    for run in planned:
        need_bytes, basis = _predicted_bytes(spec, run)
        if need_bytes > MEASURABLE_OVERSHOOT * device_bytes:
            config = run.config
            raise SpecError(
                f"{spec_file}: grid.batch_sizes: batch {config.batch_size} of {config.model.name} "
                f"({config.prompt_length}+{config.generation_length} tokens) is predicted to need "
                f"{need_bytes / 2**30:,.1f} GiB ({basis}) on {device_name}, which has {device_bytes / 2**30:,.1f} GiB; "
                f"beyond {MEASURABLE_OVERSHOOT:g}x the device's memory a run cannot measure even its out-of-memory "
                "wall: lower the batch size"
            )


def _device_memory(spec: ExperimentSpec) -> tuple[str, int] | None:
    profile = spec.controls.hardware.profile
    if profile is not None:
        hardware = hardware_profile(profile)
        return f"profile {hardware.name}", hardware.memory_bytes
    if spec.controls.device == "cpu":
        return "this machine's RAM", os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return None


def _predicted_bytes(spec: ExperimentSpec, run: PlannedRun) -> tuple[int, str]:
    """The roofline's peak memory where the model's shape is known before loading (a synthetic model, or any
    model on a profile, which costs a checkpoint as the 8B preset), else the batch's token ids alone."""
    config = run.config
    profile = spec.controls.hardware.profile
    if profile is not None or config.model.shape() is not None:
        from roofline.predict import predict_run

        # The memory model does not depend on the profile's speeds: without one, any profile serves.
        hardware = hardware_profile(profile or "a100-sxm4-80gb")
        return predict_run(config, hardware).peak_memory_bytes, "the roofline's memory model"
    tokens = config.batch_size * (config.prompt_length + config.generation_length)
    return tokens * TOKEN_ID_BYTES, "its token ids alone"
