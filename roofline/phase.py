"""Summing operators into the cost of a phase: time, FLOPs and bytes per operator class, and their intensities."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from roofline.hardware import HardwareProfile
from roofline.operators import LINEAR_CLASSES, OpClass, Operator

ALL_CLASSES: tuple[OpClass, ...] = (
    "ffn_linear",
    "mha_linear",
    "mha_attention",
    "nonlinear",
    "classifier",
    "sampler",
)


@dataclass(frozen=True, slots=True)
class PhaseCost:
    """Totals of one phase (a prefill, all decode passes, one diffusion step, ...), by operator class."""

    time_s: dict[OpClass, float]
    flops: dict[OpClass, int]
    bytes_: dict[OpClass, int]

    @property
    def total_time_s(self) -> float:
        return sum(self.time_s.values())

    @property
    def total_flops(self) -> int:
        return sum(self.flops.values())

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_.values())

    @property
    def linear_ai(self) -> float:
        """(FFN + MHA linear + classifier) FLOPs over their bytes."""
        return _ratio(sum(self.flops[c] for c in LINEAR_CLASSES), sum(self.bytes_[c] for c in LINEAR_CLASSES))

    @property
    def attention_ai(self) -> float:
        """(QK + PV) FLOPs over their bytes; the fused softmax is a nonlinear op."""
        return _ratio(self.flops["mha_attention"], self.bytes_["mha_attention"])

    @property
    def aggregate_ai(self) -> float:
        """Every op (elementwise ops counted as FLOPs) over every byte."""
        return _ratio(self.total_flops, self.total_bytes)

    def __add__(self, other: PhaseCost) -> PhaseCost:
        return PhaseCost(
            {c: self.time_s[c] + other.time_s[c] for c in ALL_CLASSES},
            {c: self.flops[c] + other.flops[c] for c in ALL_CLASSES},
            {c: self.bytes_[c] + other.bytes_[c] for c in ALL_CLASSES},
        )

    def repeated(self, times: int) -> PhaseCost:
        """The same phase run `times` times (identical diffusion steps)."""
        return PhaseCost(
            {c: self.time_s[c] * times for c in ALL_CLASSES},
            {c: self.flops[c] * times for c in ALL_CLASSES},
            {c: self.bytes_[c] * times for c in ALL_CLASSES},
        )


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def empty_cost() -> PhaseCost:
    return PhaseCost(
        dict.fromkeys(ALL_CLASSES, 0.0), dict.fromkeys(ALL_CLASSES, 0), dict.fromkeys(ALL_CLASSES, 0)
    )


def cost_of(ops: Iterable[Operator], hardware: HardwareProfile) -> PhaseCost:
    """Sum operators: time = max(count x max(work / peak, bytes / bandwidth), launches x dispatch) per operator,
    no overlap (the dispatch floor is 0 on datasheet profiles)."""
    time_s = dict.fromkeys(ALL_CLASSES, 0.0)
    flops = dict.fromkeys(ALL_CLASSES, 0)
    bytes_ = dict.fromkeys(ALL_CLASSES, 0)
    # Operator.time_s inlined: this loop is the hot path of every evaluation.
    tensor, vector = hardware.peak_tensor_flops_per_s, hardware.peak_vector_ops_per_s
    bw = hardware.memory_bandwidth_bytes_per_s
    dispatch = hardware.dispatch_s
    for op in ops:
        c = op.op_class
        work_s = op.flops / (tensor if op.unit == "tensor" else vector)
        memory_s = op.bytes_ / bw
        time_s[c] += max(op.count * max(work_s, memory_s), op.launches * dispatch)
        flops[c] += op.count * op.flops
        bytes_[c] += op.count * op.bytes_
    return PhaseCost(time_s, flops, bytes_)


def cost_of_affine_passes(
    first: Sequence[Operator], last: Sequence[Operator], passes: int, hardware: HardwareProfile
) -> PhaseCost:
    """Cost of `passes` forward passes whose operators change linearly from `first` to `last`.

    Decode pass i attends P + i cached positions, so each operator's FLOPs and bytes are affine in i. Summing
    in closed form keeps a 2048-token decode as cheap to evaluate as one pass: the sum of max(two affine
    functions) splits at the one pass where the operator turns from memory- to compute-bound (or back). A
    dispatch floor adds a third (constant) line to the max.
    """
    if passes == 1:
        return cost_of(first, hardware)
    time_s = dict.fromkeys(ALL_CLASSES, 0.0)
    flops = dict.fromkeys(ALL_CLASSES, 0)
    bytes_ = dict.fromkeys(ALL_CLASSES, 0)
    for a, z in zip(first, last, strict=True):
        assert a.name == z.name and a.count == z.count and a.unit == z.unit, "passes must share one layout"
        # Exact integer sums of arithmetic series: (first + last) * n / 2.
        flops[a.op_class] += a.count * (a.flops + z.flops) * passes // 2
        bytes_[a.op_class] += a.count * (a.bytes_ + z.bytes_) * passes // 2
        peak = a.peak_work_per_s(hardware)
        bw = hardware.memory_bandwidth_bytes_per_s
        floor = a.launches * hardware.dispatch_s
        if floor == 0.0:
            time_s[a.op_class] += a.count * _sum_max_affine(
                a.flops / peak, z.flops / peak, a.bytes_ / bw, z.bytes_ / bw, passes
            )
        else:
            lines = [(a.count * a.flops / peak, a.count * z.flops / peak),
                     (a.count * a.bytes_ / bw, a.count * z.bytes_ / bw), (floor, floor)]
            time_s[a.op_class] += sum_max_lines(lines, passes)
    return PhaseCost(time_s, flops, bytes_)


def sum_max_lines(lines: Sequence[tuple[float, float]], n: int) -> float:
    """sum_{j=0}^{n-1} max_i line_i(j), each line affine in j from (value at 0, value at n - 1).

    The max of lines is convex and piecewise linear: between consecutive crossings one line wins, so each
    stretch of passes sums in closed form."""
    if n == 1:
        return max(v0 for v0, _ in lines)
    slopes = [(v1 - v0) / (n - 1) for v0, v1 in lines]
    cuts = {0, n}
    for i in range(len(lines)):
        for k in range(i + 1, len(lines)):
            if slopes[i] != slopes[k]:
                x = (lines[k][0] - lines[i][0]) / (slopes[i] - slopes[k])
                if 0 < x < n:
                    cuts.add(math.ceil(x))
    total = 0.0
    bounds = sorted(cuts)
    for lo, hi in zip(bounds, bounds[1:]):
        if hi <= lo:
            continue
        mid = (lo + hi - 1) / 2
        best = max(range(len(lines)), key=lambda i: lines[i][0] + slopes[i] * mid)
        start, step = lines[best][0], slopes[best]
        total += (hi - lo) * start + step * (hi * (hi - 1) - lo * (lo - 1)) / 2
    return total


def _sum_max_affine(c0: float, c1: float, m0: float, m1: float, n: int) -> float:
    """sum_{j=0}^{n-1} max(c_j, m_j), c and m affine in j from (c0, m0) at j = 0 to (c1, m1) at j = n - 1."""
    dc = (c1 - c0) / (n - 1)
    dm = (m1 - m0) / (n - 1)

    def series(start: float, step: float, lo: int, hi: int) -> float:  # sum over j in [lo, hi)
        return (hi - lo) * start + step * (hi * (hi - 1) - lo * (lo - 1)) / 2

    def compute_wins(j: int) -> bool:
        return c0 + dc * j >= m0 + dm * j

    first_side = compute_wins(0)
    if compute_wins(n - 1) == first_side:
        # Convexity: the same side at both ends means the same side throughout.
        return series(c0, dc, 0, n) if first_side else series(m0, dm, 0, n)
    # One crossing: j* = first index on the other side; solve, then settle rounding by direct comparison.
    j = int((c0 - m0) / (dm - dc)) if dm != dc else n
    j = min(max(j, 1), n - 1)
    while j > 1 and compute_wins(j - 1) != first_side:
        j -= 1
    while j < n - 1 and compute_wins(j) == first_side:
        j += 1
    if first_side:
        return series(c0, dc, 0, j) + series(m0, dm, j, n)
    return series(m0, dm, 0, j) + series(c0, dc, j, n)
