"""A roofline profile from the roofs a worker measured on its device, and each run's prediction on it: what the
report (report/analysis/predictions.py) and the GPU round's goals (orchestrator/gpu_round/goals.py) both cost runs on. Pure
Python, so the offline GPU machine (no polars) evaluates its own runs."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from roofline.fidelity import Fidelity
from roofline.hardware import HardwareProfile, hardware_for_gpu_name
from roofline.predict import Prediction, predict_run

if TYPE_CHECKING:
    from specs.results import MeasuredRoofs, RunResult

# A run is flagged "roofline violated" when it ran faster than this share of its roofs-only prediction (the roofs
# are a lower bound on time; the margin covers the noise of the roofs' own measurement).
VIOLATION_FRACTION = 0.9


def profile_from_roofs(roofs: MeasuredRoofs) -> HardwareProfile:
    """A roofline profile from a device's measured roofs: the matmul peak (in the run's dtype) as the compute
    roof, the copy bandwidth, the per-op dispatch floor, the host floor per eager forward, and a vector roof
    that charges no byte (`vector_roof`). A GPU run without a measured host floor takes its datasheet profile's
    (roofline/hardware.py), where one matches its name."""
    threads = f", {roofs.threads} threads" if roofs.threads else ""
    vector, notes = vector_roof(roofs)
    gpu = roofs.device not in ("cpu", "unknown")
    floor_s, floor_layers = roofs.host_floor_s, roofs.host_floor_layers
    origin = "measured on the device that ran (workers/measure/calibrate.py)"
    if floor_s is None and gpu:
        named = hardware_for_gpu_name(roofs.device)
        if named is not None and named.host_floor_s:
            floor_s, floor_layers, origin = named.host_floor_s, named.host_floor_layers, named.floor_origin
            notes += f"; host floor {floor_s * 1e3:.3g} ms per {floor_layers}-layer eager forward from profile {named.name}"
    return HardwareProfile(
        name=f"{roofs.device} (measured, {roofs.dtype}{threads})",
        peak_tensor_flops_per_s=roofs.matmul_flops_per_s,
        peak_vector_ops_per_s=vector,
        memory_bandwidth_bytes_per_s=roofs.memory_bandwidth_bytes_per_s,
        memory_bytes=roofs.memory_bytes,
        dispatch_s=roofs.dispatch_s,
        dtype=roofs.dtype,
        host_floor_s=floor_s or 0.0,
        host_floor_layers=floor_layers or 32,
        floor_origin=origin,
        source=f"measured by workers/measure/calibrate.py in the sweep's worker: {roofs.method}{notes}",
    )


def vector_roof(roofs: MeasuredRoofs) -> tuple[float, str]:
    """The elementwise (CUDA-core) roof the roofline charges work at, and a note for the profile's source.

    The roofline costs an operator at max(work / roof, bytes / bandwidth) (roofline/phase.py): its DRAM traffic
    is charged through the measured bandwidth, so the vector roof must be an arithmetic rate that moves no
    byte, or every elementwise op pays for its bytes a second time and the softmax fused into attention (no DRAM
    traffic, roofline/forward.py) pays a bandwidth-bound rate for work done in registers.

    On a GPU the calibration's elementwise multiply streams its operands from DRAM (256 MiB each;
    workers/measure/calibrate.py): its rate is the bandwidth over 3 x element bytes, ~0.7 Top/s on an H200,
    a second measurement of the bandwidth. The vector roof is the datasheet's CUDA-core rate instead (SMs x FP32
    lanes x boost clock, roofline/hardware.py: 33.5 Top/s on an H100 or H200), not a kernel timed here: measuring
    an arithmetic-bound rate takes a fused kernel (a Triton FMA chain through torch.compile, which needs a C
    compiler the offline lease may lack, and seconds of compilation in every worker), and a peak above what a
    kernel attains only makes the roofs a safer lower bound. No elementwise op of either model comes near it
    (their intensity is at most 1 op per 4 bytes, the CUDA cores' ridge 7-8 ops per byte on an H200), so it decides only
    the fused softmax and nothing else. A GPU without a datasheet profile takes its measured matmul peak: no
    GPU's CUDA cores outrun its tensor cores, so the bound holds and no byte is charged twice.

    On a CPU the multiply's 65,536-element operands stay in cache, as the tiny models' tensors do: its time is
    arithmetic and cache traffic, while DRAM traffic is charged through the 128 MiB copy's bandwidth."""
    if roofs.device in ("cpu", "unknown"):
        return roofs.vector_ops_per_s, ""
    named = hardware_for_gpu_name(roofs.device)
    if named is not None:
        return named.peak_vector_ops_per_s, (
            f"; vector roof {named.peak_vector_ops_per_s / 1e12:.3g} Top/s, the CUDA cores' datasheet rate from profile "
            f"{named.name} (the calibration's streamed multiply, {roofs.vector_ops_per_s / 1e9:.3g} Gop/s, is "
            "bandwidth-bound: its bytes are charged through the bandwidth)"
        )
    return roofs.matmul_flops_per_s, (
        f"; vector roof = the measured matmul peak (no datasheet profile for {roofs.device}; the calibration's "
        f"streamed multiply, {roofs.vector_ops_per_s / 1e9:.3g} Gop/s, is bandwidth-bound)"
    )


def run_profile(profile: HardwareProfile, result: RunResult) -> HardwareProfile:
    """The profile one run is costed on: the sweep's, with the host floor measured on the run's own model where
    the run recorded one (each model has its own)."""
    env = result.environment
    roofs = env.measured_roofs if env is not None else None
    if roofs is None or roofs.host_floor_s is None or roofs.host_floor_layers is None:
        return profile
    return profile.model_copy(update={"host_floor_s": roofs.host_floor_s, "host_floor_layers": roofs.host_floor_layers})


def predict_result(result: RunResult, profile: HardwareProfile, fidelity: Fidelity = "faithful") -> Prediction:
    """The prediction of one run on `profile` (already the run's own, `run_profile`): the shape its worker loaded,
    and a confidence rule's forwards at the run's measured median."""
    forwards = result.samples.forwards if result.samples else None
    median_forwards = statistics.median([float(f) for f in forwards]) if forwards else None
    return predict_run(result.config, profile, fidelity, shape=result.model_shape, measured_forwards=median_forwards)
