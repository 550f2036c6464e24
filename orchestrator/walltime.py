"""What a sweep's wall time is made of, for `plan`: each run's generations on the roofline with the host floor,
its warm-ups and compilation, the model loads, and the fixed costs of a run and of a sweep command.

The constants are measured, on the campaign-h100 sweep run on an NVIDIA H200 (results/h200, 42 runs, 1559 s of
wall time over four resumed commands); each says where it comes from. The roofline itself (roofline/predict.py)
never imports this: these are costs of the harness, not of the models.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from specs.registry import is_diffusion

if TYPE_CHECKING:  # imported where used: planning a spec without a profile never loads the roofline
    from roofline.hardware import HardwareProfile
    from specs.schema import RunConfig

# A plan wants the time a run takes, not its bound: it costs a run on the roofs its kernels attain, the profile's
# roofs x this share, and the host floor as it is. On the H200 the device-bound runs (LLaDA vanilla at batch 8
# and 64, 21 runs) took a median 0.526 of the datasheet roofs' time (roofs-only predicted / measured latency on
# profile h200); LLaMA static-compile 0.45-0.54. The roofline's own predictions (the report) keep the full roofs.
ATTAINED_FRACTION = 0.52

# Run wall time (started_at to finished_at) less its warm-ups and timed repetitions: prompt batches, the
# calibration and host floor of a run's first use of a model, memory and energy readings, the artifact write.
# The mean over the 42 H200 runs: 0.65 s (median 0.55 s, at most 1.9 s).
RUN_OVERHEAD_S = 0.65

# One sweep command's start and end outside every run: Python and torch imports, the CUDA context, the lock,
# the report it renders at the end. On the H200: (1559 s of command wall time - 1507 s inside runs) / 4
# commands = 13 s.
SWEEP_START_S = 13.0

# torch.compile of the LLaMA `compile` variant's decode step, once per batch shape in each run's warm-ups
# (specs.schema.LlamaImpl): 28.2 s and 30.1 s at batch 8 and 1 on the H200 (accel-8b sweep, compile_s).
COMPILE_S = 30.0

# Model loads, per byte of weights. A synthetic model is built on the meta device and materialised on the target:
# 16 GB of 8B weights in 0.3 s on the H200 (model_load_s) is ~50 GB/s. A checkpoint is read from disk; 1 GB/s
# is an assumption for a node's local or network filesystem (the package has measured none), so 16 GB in 16 s.
SYNTHETIC_BUILD_BYTES_PER_S = 50e9
CPU_SYNTHETIC_BUILD_BYTES_PER_S = 2e9  # random initialisation on host cores
CHECKPOINT_LOAD_BYTES_PER_S = 1e9


def generation_seconds(config: RunConfig, hardware: HardwareProfile) -> float:
    """One whole generation of the run on `hardware`'s attained roofs, with its host floor."""
    from roofline.predict import predict_run

    return predict_run(config, attained(hardware)).latency_s


def run_seconds(
    config: RunConfig, hardware: HardwareProfile, *, generation_s: float | None = None, compile_s: float = COMPILE_S
) -> float:
    """Wall time of one run on `hardware`: its warm-ups and repetitions (K steps
    each when extrapolated), the untimed generations quality needs (prompt batches no repetition ran; LLaMA's
    sampled reference), compilation, and the per-run overhead. Model loads are counted once per model and session
    (`load_seconds`). `generation_s` (a measured generation) and `compile_s` (a compile cache's warm start) replace
    the predicted ones."""
    if generation_s is None:
        generation_s = generation_seconds(config, hardware)
    timed_s = generation_s * config.timed_steps / config.steps if config.timed_steps and config.steps else generation_s
    controls = config.controls
    # A warm-up is one generation at the run's own shapes: what the repetitions cost (workers/measure/scenario.py).
    total = (warmups(config) + controls.repetitions) * timed_s + RUN_OVERHEAD_S
    if config.quality.enabled:
        batches = math.ceil(len(config.prompt_ids) / config.batch_size)
        untimed = batches - min(controls.repetitions, batches)
        if not is_diffusion(config.model.arch) and config.quality.llama_sampled_temperature is not None:
            untimed += batches
        total += untimed * generation_s
    if config.llama_impl is not None and config.llama_impl.compile:
        total += compile_s
    return total


def warmups(config: RunConfig) -> int:
    """The warm-up generations a run makes (workers/measure/scenario.py `_warmup_batches`): the configured W; a
    compile or graph variant one more where W is 0 (its batch shape, which every batch shares), and LLaDA's graph
    variant one for every prompt batch a repetition uses that the W did not reach (its windows follow the tokens)."""
    controls = config.controls
    batches = math.ceil(len(config.prompt_ids) / config.batch_size)
    llada_graph = config.llada_impl is not None and config.llada_impl.graph
    if llada_graph:
        reached = {w % batches for w in range(controls.warmup)}
        return controls.warmup + len({r % batches for r in range(controls.repetitions)} - reached)
    if config.llama_impl is not None and config.llama_impl.compile:
        return max(controls.warmup, 1)
    return controls.warmup


def attained(hardware: HardwareProfile) -> HardwareProfile:
    """`hardware` with its roofs at ATTAINED_FRACTION, its floors unchanged."""
    return hardware.model_copy(update={
        "peak_tensor_flops_per_s": hardware.peak_tensor_flops_per_s * ATTAINED_FRACTION,
        "peak_vector_ops_per_s": hardware.peak_vector_ops_per_s * ATTAINED_FRACTION,
        "memory_bandwidth_bytes_per_s": hardware.memory_bandwidth_bytes_per_s * ATTAINED_FRACTION,
    })


def load_seconds(config: RunConfig, hardware: HardwareProfile) -> float:
    """Seconds to load or build the run's model: its weights over the build rate (synthetic) or the read rate
    (a checkpoint)."""
    from roofline.predict import predict_run

    weights_bytes = predict_run(config, hardware).weights_bytes
    if getattr(config.model.source, "synthetic", None) is not None:
        rate = CPU_SYNTHETIC_BUILD_BYTES_PER_S if config.controls.device == "cpu" else SYNTHETIC_BUILD_BYTES_PER_S
    else:
        rate = CHECKPOINT_LOAD_BYTES_PER_S
    return weights_bytes / rate
