"""GPU profiles for the roofline: peak tensor FLOP/s, vector op/s, bandwidth and memory, each with its source."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

_GIB = 1 << 30


class HardwareProfile(BaseModel):
    """What the roofline needs to know about one accelerator.

    `peak_vector_ops_per_s` counts one elementwise op per FP32 lane per cycle (SMs x FP32 lanes x clock),
    the convention of the study's CUDA-core roof; it is half the datasheet's FP32 FLOP/s, which counts an
    FMA as two FLOPs. Memory sizes in NVIDIA datasheets are binary (an "80GB" A100 reports 81920 MiB), so
    `memory_bytes` is the nominal size in GiB; the usable amount is a little less (ECC, driver reserve).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    peak_tensor_flops_per_s: float = Field(gt=0, description="Dense BF16 tensor-core FLOP/s (no sparsity).")
    peak_vector_ops_per_s: float = Field(gt=0, description="Elementwise ops/s on the CUDA cores.")
    memory_bandwidth_bytes_per_s: float = Field(gt=0)
    memory_bytes: int = Field(gt=0)
    source: str
    dispatch_s: float = Field(
        default=0.0, ge=0,
        description="Per-kernel dispatch/launch floor: no kernel finishes sooner. 0 for datasheet profiles; "
        "measured by `llada-bench calibrate` (it dominates small models and batch-1 eager decode).",
    )
    dtype: str | None = Field(default=None, description="The dtype the compute roof was measured in, if measured.")
    host_floor_s: float = Field(
        default=0.0, ge=0,
        description="Host time of one eager forward of a `host_floor_layers`-layer decoder (Python, module calls, "
        "the dispatcher, kernel launches): no eager forward finishes sooner, whatever its work. Scaled by the "
        "layer count of the model costed. 0: no host floor (the study's datasheet profiles).",
    )
    host_floor_layers: int = Field(default=32, gt=0, description="Layers of the forward `host_floor_s` was measured on.")
    floor_origin: str = Field(default="", description="What the floor (host or dispatch) was measured or fitted on.")

    @property
    def has_floor(self) -> bool:
        return bool(self.dispatch_s or self.host_floor_s)

    def roofs_only(self) -> HardwareProfile:
        """This profile without its floors: the roofs alone, under which no run can finish (a lower bound on
        latency). With a floor the model is calibrated to measured host or dispatch time: a model, not a bound."""
        return self.model_copy(update={"dispatch_s": 0.0, "host_floor_s": 0.0})

    def floor_note(self) -> str | None:
        """The floor in words, with what it was measured or fitted on; None without one."""
        origin = f", {self.floor_origin}" if self.floor_origin else ""
        if self.host_floor_s:
            return f"a host floor of {self.host_floor_s * 1e3:.3g} ms per eager {self.host_floor_layers}-layer forward{origin}"
        if self.dispatch_s:
            return f"a dispatch floor of {self.dispatch_s * 1e6:.3g} µs per operator{origin}"
        return None

    def host_floor_of(self, num_layers: int) -> float:
        """The host floor of one eager forward of a `num_layers`-layer decoder: host work is per module, so it
        scales with the layers."""
        return self.host_floor_s * num_layers / self.host_floor_layers

    @property
    def ridge_point_flops_per_byte(self) -> float:
        """Arithmetic intensity above which a tensor-core operator is compute-bound."""
        return self.peak_tensor_flops_per_s / self.memory_bandwidth_bytes_per_s


# Host time of one eager transformers forward of the 32-layer 8B decoder, measured on an NVIDIA H200 node (16
# host cores, torch 2.11, transformers 5.17, sdpa): the floor the host-bound runs sit on whatever the GPU does.
# The nine eager LLaMA runs of the campaign-h100 sweep (batch 1, 8, 64; 256-1024 new tokens) decode at a median
# ITL of 24.0 ms (22.6-29.8); LLaDA's batch-1 256 + 256 step takes 21-31 ms. It is the host's, not the GPU's:
# the H100 and A100 profiles take the same value (a node of that class runs the same Python), and a run that
# measured its own model's (workers/measure/calibrate.py) is costed on that instead.
EAGER_FORWARD_HOST_FLOOR_S = 24e-3
HOST_FLOOR_FITTED_ON = ("fitted to the median inter-token latency of the nine eager LLaMA-3-8B runs of the "
                        "campaign-h100 sweep on an H200 (results/h200/campaign-h100)")
_HOST_FLOOR_SOURCE = (
    " Host floor 24 ms per eager forward of a 32-layer decoder, measured on an H200 node (eager transformers, "
    "torch 2.11): the median ITL of the host-bound eager LLaMA decode."
)

# Datasheet profiles, a row each: name, dense BF16 tensor TFLOPS, FP32 TFLOPS, bandwidth GB/s, memory GiB, host
# floor per eager forward (0: none), source. The vector roof is the FP32 figure / 2 (= SMs x FP32 lanes x boost
# clock), see HardwareProfile.
_DATASHEETS: tuple[tuple[str, float, float, float, int, float, str], ...] = (
    ("a100-sxm4-80gb", 312.0, 19.5, 2039.0, 80, EAGER_FORWARD_HOST_FLOOR_S,
     ("NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM): BF16 312 TFLOPS dense, FP32 19.5 TFLOPS, "
      "HBM2e 2,039 GB/s, 80 GB.")),
    ("a100-pcie-80gb", 312.0, 19.5, 1935.0, 80, 0.0,
     ("NVIDIA A100 Tensor Core GPU datasheet (A100 80GB PCIe): BF16 312 TFLOPS dense, FP32 19.5 TFLOPS, "
      "HBM2e 1,935 GB/s, 80 GB.")),
    ("h100-sxm", 1979.0 / 2, 67.0, 3350.0, 80, EAGER_FORWARD_HOST_FLOOR_S,
     ("NVIDIA H100 Tensor Core GPU datasheet (H100 SXM): BF16 1,979 TFLOPS with sparsity (989.5 dense), "
      "FP32 67 TFLOPS, HBM3 3.35 TB/s, 80 GB.")),
    ("h100-pcie", 1513.0 / 2, 51.0, 2000.0, 80, 0.0,
     ("NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe): BF16 1,513 TFLOPS with sparsity (756.5 dense), "
      "FP32 51 TFLOPS, HBM2e 2 TB/s, 80 GB.")),
    ("h200", 1979.0 / 2, 67.0, 4800.0, 141, EAGER_FORWARD_HOST_FLOOR_S,
     ("NVIDIA H200 Tensor Core GPU datasheet (H200 SXM): BF16 1,979 TFLOPS with sparsity (989.5 dense), "
      "FP32 67 TFLOPS, HBM3e 4.8 TB/s, 141 GB.")),
    ("a40", 149.7, 37.4, 696.0, 48, 0.0,
     ("NVIDIA A40 datasheet: BF16 Tensor Core 149.7 TFLOPS dense (299.4 with sparsity), FP32 37.4 TFLOPS, "
      "GDDR6 696 GB/s, 48 GB.")),
    ("rtx-a6000", 154.8, 38.7, 768.0, 48, 0.0,
     ("NVIDIA RTX A6000 datasheet and Ampere GA102 whitepaper: BF16 tensor (FP32 accumulate) "
      "154.8 TFLOPS dense (309.7 with sparsity), FP32 38.7 TFLOPS, GDDR6 768 GB/s, 48 GB.")),
    ("l40s", 362.05, 91.6, 864.0, 48, 0.0,
     ("NVIDIA L40S datasheet: BF16 Tensor Core 362.05 TFLOPS dense (733 with sparsity), FP32 91.6 TFLOPS, "
      "GDDR6 864 GB/s, 48 GB.")),
    ("rtx-4090", 165.2, 82.6, 1008.0, 24, 0.0,
     ("NVIDIA Ada Lovelace architecture whitepaper (GeForce RTX 4090): BF16 tensor with FP32 accumulate "
      "165.2 TFLOPS dense (330.3 with sparsity), FP32 82.6 TFLOPS, GDDR6X 1,008 GB/s, 24 GB.")),
)


def _datasheet_profile(
    name: str, bf16_tflops: float, fp32_tflops: float, bandwidth_gb_s: float, memory_gib: int, host_floor_s: float,
    source: str,
) -> HardwareProfile:
    """One row of `_DATASHEETS` as a profile; a host floor cites its own source."""
    return HardwareProfile(
        name=name,
        peak_tensor_flops_per_s=bf16_tflops * 1e12,
        peak_vector_ops_per_s=fp32_tflops / 2 * 1e12,
        memory_bandwidth_bytes_per_s=bandwidth_gb_s * 1e9,
        memory_bytes=memory_gib * _GIB,
        source=source + (_HOST_FLOOR_SOURCE if host_floor_s else ""),
        host_floor_s=host_floor_s,
        floor_origin=HOST_FLOOR_FITTED_ON if host_floor_s else "",
    )


_STUDY_PROFILE = HardwareProfile(
    name="study-a6000",
    # 84 SM x 4 TC x 256 MAC/cycle x 1.41 GHz x 2: an A100's MAC rate on an A6000's SM count and clock.
    peak_tensor_flops_per_s=242.56512e12,
    # 84 SM x 128 lanes x 1.41 GHz, one op per element.
    peak_vector_ops_per_s=15.16032e12,
    # 384 B/cycle x 2.0 GHz.
    memory_bandwidth_bytes_per_s=768e9,
    memory_bytes=48 * _GIB,
    source=(
        "The study's constants (run_llama_roofline_model.py / run_llada_roofline_model.py), reconstructed "
        "in shared/study/roofline-model.md: 84 SM x 4 TC x 256 MAC/cycle x 1.41 GHz; 84 SM x 128 x 1.41 GHz; "
        "384 B/cycle x 2.0 GHz; 48 GB (RTX A6000). The tensor roof is A100-class, ~1.57x an A6000's."
    ),
)
_PROFILES: tuple[HardwareProfile, ...] = (_STUDY_PROFILE, *(_datasheet_profile(*row) for row in _DATASHEETS))

HARDWARE: dict[str, HardwareProfile] = {profile.name: profile for profile in _PROFILES}


def get_hardware(name: str) -> HardwareProfile:
    """Look up a profile by name; the error lists every allowed name."""
    try:
        return HARDWARE[name]
    except KeyError:
        raise KeyError(f"unknown hardware {name!r}; allowed: {', '.join(HARDWARE)}") from None


# (pattern on the lower-cased device name, profile). First match wins, so narrower patterns come first;
# variants without a profile (A100 40GB, H100/H200 NVL, RTX 4090 D) map to None rather than a near miss.
_GPU_NAME_PATTERNS: tuple[tuple[str, str | None], ...] = (
    (r"a100.*40\s*gb", None),
    (r"a100.*(sxm|hbm)", "a100-sxm4-80gb"),
    (r"a100.*pcie", "a100-pcie-80gb"),
    (r"h100.*nvl", None),
    (r"h100.*pcie", "h100-pcie"),
    (r"h100.*(sxm|hbm3)", "h100-sxm"),
    (r"h200.*nvl", None),
    (r"h200", "h200"),
    (r"\ba40\b", "a40"),
    (r"rtx a6000", "rtx-a6000"),
    (r"\bl40s\b", "l40s"),
    (r"rtx 4090( laptop|\s*d\b)", None),
    (r"rtx 4090", "rtx-4090"),
)


def hardware_for_gpu_name(gpu_name: str) -> HardwareProfile | None:
    """Map a torch/NVML device name ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3") to a profile.

    Returns None for a device without a profile, so a caller never silently compares against the wrong roof.
    """
    lowered = gpu_name.lower()
    for pattern, profile_name in _GPU_NAME_PATTERNS:
        if re.search(pattern, lowered):
            return None if profile_name is None else HARDWARE[profile_name]
    return None
