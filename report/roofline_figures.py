"""Figures of the analytical roofline: operators under the roofs, and predicted latency vs generation length.

The data comes from `roofline.plotdata`; these functions only draw it (matplotlib, Agg backend).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure

from roofline.hardware import HardwareProfile
from roofline.plotdata import LatencyPoint, OperatorPoint

_PHASE_MARKERS = {"llama prefill": "x", "llama decode": "+", "llada step": "o"}
_GROUP_COLORS = {
    "qkv/o proj": "tab:blue",
    "up/gate/down": "tab:green",
    "qk/pv": "tab:purple",
    "lm head": "tab:orange",
    "nonlinear": "tab:gray",
    "sampler": "tab:brown",
}
_ARCH_STYLE = {"llama": ("LLaMA-3-8B", "tab:blue", "o"), "llada": ("LLaDA-8B", "tab:red", "s")}


def roofline_plot(points: Sequence[OperatorPoint], hardware: HardwareProfile) -> Figure:
    """Log-log roofline: each operator at (intensity, attainable FLOP/s) under the bandwidth roof and the
    tensor-core and CUDA-core compute roofs; colour by operator group, marker by phase."""
    fig = Figure(figsize=(8, 6), layout="constrained")
    ax = fig.add_subplot()
    intensities = [p.arithmetic_intensity for p in points] or [1.0]
    lo, hi = min(intensities) / 4, max(max(intensities) * 4, hardware.ridge_point_flops_per_byte * 10)
    bw = hardware.memory_bandwidth_bytes_per_s
    for peak, label, color in (
        (
            hardware.peak_tensor_flops_per_s,
            f"tensor cores {hardware.peak_tensor_flops_per_s / 1e12:g} TFLOP/s",
            "red",
        ),
        (
            hardware.peak_vector_ops_per_s,
            f"CUDA cores {hardware.peak_vector_ops_per_s / 1e12:g} Top/s",
            "darkorange",
        ),
    ):
        ridge = peak / bw
        ax.plot([lo, ridge, hi], [lo * bw, peak, peak], linestyle="--", color=color, label=label)
    ax.plot([], [], " ", label=f"memory {bw / 1e9:g} GB/s")
    seen: set[tuple[str, str]] = set()
    for p in points:
        key = (p.group, p.phase)
        ax.scatter(
            p.arithmetic_intensity,
            p.attainable_flops_per_s,
            marker=_PHASE_MARKERS[p.phase],
            color=_GROUP_COLORS.get(p.group, "black"),
            facecolors="none" if p.phase == "llada step" else None,
            label=None if key in seen else f"{p.group} · {p.phase}",
        )
        seen.add(key)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("Arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("Attainable performance (FLOP/s)")
    ax.set_title(f"Roofline model ({hardware.name})")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="x-small", loc="lower right", ncols=2)
    return fig


def predicted_latency_figure(points: Sequence[LatencyPoint], hardware: HardwareProfile) -> Figure:
    """Predicted latency vs generation length for both models: the study's model and the faithful one side by
    side, same axes."""
    fidelities = [f for f in ("study", "faithful") if any(p.fidelity == f for p in points)]
    fig = Figure(figsize=(5 * max(len(fidelities), 1), 4.5), layout="constrained")
    axes = fig.subplots(1, max(len(fidelities), 1), sharey=True, squeeze=False)[0]
    for ax, fidelity in zip(axes, fidelities, strict=False):
        for arch, (label, color, marker) in _ARCH_STYLE.items():
            series = sorted(
                (p for p in points if p.fidelity == fidelity and p.arch == arch), key=lambda p: p.gen_len
            )
            if series:
                ax.plot(
                    [p.gen_len for p in series],
                    [p.latency_s for p in series],
                    marker=marker,
                    color=color,
                    label=label,
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("Generation length (tokens)")
        ax.set_title(f"{fidelity} model")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("Predicted latency (s)")
    prompt = sorted({p.prompt_len for p in points})
    fig.suptitle(
        f"Predicted end-to-end latency on {hardware.name}, batch 1, prompt {', '.join(map(str, prompt))}"
    )
    return fig
