"""Operators as data: FLOPs and bytes of matmuls and elementwise ops, and their roofline time on a GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from roofline.hardware import HardwareProfile

# Bytes per element of the model's tensors: 2 (BF16/FP16) is the study's assumption and the default; a run
# in another dtype passes its own (`element_bytes_of`).
BYTES_PER_ELEMENT = 2
DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}

Unit = Literal["tensor", "vector"]
OpClass = Literal["ffn_linear", "mha_linear", "mha_attention", "nonlinear", "classifier", "sampler"]

# The study's five classes, in the order its breakdown prints them; "sampler" exists in `faithful` only.
STUDY_CLASSES: tuple[OpClass, ...] = ("ffn_linear", "mha_linear", "mha_attention", "nonlinear", "classifier")
LINEAR_CLASSES: tuple[OpClass, ...] = ("ffn_linear", "mha_linear", "classifier")


@dataclass(frozen=True, slots=True)
class Operator:
    """One operator instance and how many identical instances a forward pass runs (layers x heads x batch).

    `flops` is the work of one instance: FLOPs on the tensor cores, or elementwise ops (one per element)
    on the CUDA cores. `bytes_` is the DRAM traffic of one instance. Operators never overlap: each runs on
    its own unit at max(work / peak, bytes / bandwidth), and a pass is the sum of its operators.
    `launches` is how many kernels all `count` instances take together (one per layer for a per-layer op,
    one per layer for fused attention): with a profile's dispatch floor, the operator takes at least
    launches x dispatch_s.
    """

    name: str
    op_class: OpClass
    unit: Unit
    flops: int
    bytes_: int
    count: int = 1
    launches: int = 1

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte; infinite for an operator that touches no DRAM (softmax fused into attention)."""
        return self.flops / self.bytes_ if self.bytes_ else float("inf")

    def peak_work_per_s(self, hardware: HardwareProfile) -> float:
        """The roof of the unit this operator runs on."""
        if self.unit == "tensor":
            return hardware.peak_tensor_flops_per_s
        return hardware.peak_vector_ops_per_s

    def time_s(self, hardware: HardwareProfile) -> float:
        """Roofline time of all `count` instances: the slower of compute and memory, per instance, and never
        less than the dispatch floor of its launches."""
        roof = self.count * instance_time_s(self.flops, self.bytes_, self.peak_work_per_s(hardware), hardware)
        return max(roof, self.launches * hardware.dispatch_s)

    def attainable_flops_per_s(self, hardware: HardwareProfile) -> float:
        """min(peak, intensity x bandwidth): where this operator sits under its roof."""
        return min(
            self.peak_work_per_s(hardware), self.arithmetic_intensity * hardware.memory_bandwidth_bytes_per_s
        )


def instance_time_s(work: float, bytes_: float, peak_work_per_s: float, hardware: HardwareProfile) -> float:
    """max(compute time, memory time); a tie counts as compute (the same number either way)."""
    return max(work / peak_work_per_s, bytes_ / hardware.memory_bandwidth_bytes_per_s)


def element_bytes_of(dtype: str | None) -> int:
    """Bytes per element of a run's dtype ("float32" -> 4); None means the study's BF16."""
    if dtype is None:
        return BYTES_PER_ELEMENT
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPE_BYTES)}") from None


def matmul(name: str, op_class: OpClass, m: int, k: int, n: int, *, write_output: bool = True, load_a: bool = True,
           masked_macs: int = 0, count: int = 1, launches: int | None = None, element_bytes: int = BYTES_PER_ELEMENT,
           bias: bool = False) -> Operator:
    """A[m,k] @ B[k,n] on the tensor cores: 2*m*k*n FLOPs, element_bytes*(mk + kn + mn) bytes.

    `write_output=False` drops the mn output (QK^T kept on chip by a fused attention kernel);
    `load_a=False` drops the mk input (the probabilities that PV consumes on chip). `masked_macs` are
    multiply-accumulates a causal mask skips; the caller decides how many (study rule or exact).
    `launches` defaults to `count` (one kernel per instance).
    `bias`: a bias vector of the m outputs added in the same kernel (F.linear's epilogue: no launch of its own):
    one add per output element (+mn FLOPs) and the vector read once (+m elements).
    """
    elements = (m * k if load_a else 0) + k * n + (m * n if write_output else 0) + (m if bias else 0)
    return Operator(
        name, op_class, "tensor", 2 * (m * k * n - masked_macs) + (m * n if bias else 0), element_bytes * elements,
        count, count if launches is None else launches,
    )


def study_causal_masked_macs(m: int, k: int, n: int) -> int:
    """The study's causal correction: k * t(t-1)/2 MACs with t = min(m, n).

    On its stacked layout (g query heads stacked into the m rows) this removes one triangle of one head for
    QK and almost nothing for PV: the defect `faithful` fixes with `exact_causal_masked_positions`.
    """
    t = min(m, n)
    return k * (t * (t - 1) // 2)


def exact_causal_masked_positions(new_tokens: int) -> int:
    """(query, key) pairs a causal mask hides for one query head when the `new_tokens` queries are the last
    positions of the sequence: each query j (0-based) cannot see the new_tokens - 1 - j later ones."""
    return new_tokens * (new_tokens - 1) // 2


def elementwise(name: str, op_class: OpClass, rows: int, cols: int, *, bytes_per_element: int, extra_bytes: int = 0,
                masked: int = 0, count: int = 1, launches: int | None = None) -> Operator:
    """An elementwise op on X[rows, cols] on the CUDA cores: one op per (unmasked) element.

    `bytes_per_element` is the DRAM traffic each element causes (reads + writes); `extra_bytes` covers
    what does not scale with the elements, such as a norm's parameter vectors.
    """
    elements = rows * cols
    return Operator(
        name, op_class, "vector", elements - masked, bytes_per_element * elements + extra_bytes, count,
        count if launches is None else launches,
    )


def norm(name: str, rows: int, cols: int, *, count: int = 1, element_bytes: int = BYTES_PER_ELEMENT) -> Operator:
    """A norm over X[rows, cols]: unary traffic plus the two parameter vectors the study reads (+4*cols)."""
    return elementwise(
        name,
        "nonlinear",
        rows,
        cols,
        bytes_per_element=2 * element_bytes,
        extra_bytes=2 * element_bytes * cols,
        count=count,
    )
