"""Figures 8 and 9: the roofline of the device that ran with the model's operators and the runs' measured
operating points, and measured vs roofline-predicted latency (study and faithful models, with and without the
dispatch floor); plus the predicted-latency figure of the roofline's own CLI data."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
from matplotlib.figure import Figure

from report.figures.axes import plain_log_axis
from report.figures.common import (
    FigureSkipped,
    Series,
    caption,
    figure_legend,
    tuple_of,
)
from report.figures.frame import Frame
from report.figures.marks import fitted_note, hollow_by_run, hollow_legend, scatter_points
from report.figures.style import ARCH_COLOR, ARCH_LABEL, ARCH_MARKER, impl_styles
from roofline.hardware import HardwareProfile
from roofline.plotdata import LatencyPoint, OperatorPoint
from specs.registry import ARCHS, family

_STAGE_MARKERS = {"prefill": "x", "decode": "+", "step": "o"}
_GROUP_COLORS = {
    "qkv/o proj": "tab:blue",
    "up/gate/down": "tab:green",
    "qk/pv": "tab:purple",
    "lm head": "tab:orange",
    "nonlinear": "tab:gray",
    "sampler": "tab:brown",
}


def _profile_caption(df: pl.DataFrame, hardware: str, profile: HardwareProfile, overridden: bool) -> str:
    text = f"{caption(df, hardware)} · roofline profile: {profile.name}"
    return text + (" (chosen with --hardware for this device)" if overridden else "")


def _profile_notes(profile: HardwareProfile) -> tuple[str, ...]:
    """Where the roofs come from, and the floor when there is one: a calibrated model of host time, not a bound."""
    notes = (f"Roofs: {profile.source}. The roofs alone bound each run's latency from below.",)
    if profile.host_floor_s:
        notes += (f"Host floor {profile.host_floor_s * 1e3:.3g} ms per eager forward of a {profile.host_floor_layers}-"
                  f"layer model{', ' + profile.floor_origin if profile.floor_origin else ''} (scaled by each model's "
                  "layers; a run that measured its own model's is costed on that): a calibrated model of the host "
                  "time an eager forward pays, not a bound (single eager forwards can run faster). It replaces the "
                  "dispatch floor.",)
    elif profile.dispatch_s:
        notes += (f"Dispatch floor {profile.dispatch_s * 1e6:.3g} µs per operator launch (16 per layer, fused attention "
                  "one; measured as a micro eager decoder's forward over the launches counted for it): a calibrated "
                  "model of launch overhead, not a bound.",)
    return notes + ("Tensor bytes follow each run's dtype.",)


def roofline_plot(points: Sequence[OperatorPoint], hardware: HardwareProfile, *, legend: bool = True) -> Figure:
    """Log-log roofline: each operator at (intensity, attainable FLOP/s) under the bandwidth roof and the
    tensor-core (matmul) and CUDA-core (elementwise) compute roofs; colour by operator group, marker by phase. The
    legend (unless `legend` is off, for a caller that adds points first) stands right of the axes, off the data."""
    fig = Figure(figsize=(8, 6), layout="constrained")
    ax = fig.add_subplot()
    intensities = [p.arithmetic_intensity for p in points] or [1.0]
    lo, hi = min(intensities) / 4, max(max(intensities) * 4, hardware.ridge_point_flops_per_byte * 10)
    bw = hardware.memory_bandwidth_bytes_per_s
    for peak, label, color in (
        (hardware.peak_tensor_flops_per_s, f"matmul roof {hardware.peak_tensor_flops_per_s / 1e12:.3g} TFLOP/s", "red"),
        (hardware.peak_vector_ops_per_s, f"elementwise roof {hardware.peak_vector_ops_per_s / 1e12:.3g} Top/s",
         "darkorange"),
    ):
        ridge = peak / bw
        ax.plot([lo, ridge, hi], [lo * bw, peak, peak], linestyle="--", color=color, label=label)
    ax.plot([], [], " ", label=f"memory {bw / 1e9:.3g} GB/s")
    seen: set[tuple[str, str]] = set()
    for p in points:
        key = (p.group, p.phase)
        ax.scatter(
            p.arithmetic_intensity,
            p.attainable_flops_per_s,
            marker=_STAGE_MARKERS[p.stage],
            color=_GROUP_COLORS.get(p.group, "black"),
            facecolors="none" if p.stage == "step" else None,
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
    if legend:
        figure_legend(fig, [ax])
    return fig


def predicted_latency_figure(points: Sequence[LatencyPoint], hardware: HardwareProfile) -> Figure:
    """Predicted latency vs generation length for both models: the study's model and the faithful one side by
    side, same axes."""
    fidelities = [f for f in ("study", "faithful") if any(p.fidelity == f for p in points)]
    fig = Figure(figsize=(5 * max(len(fidelities), 1), 4.5), layout="constrained")
    axes = fig.subplots(1, max(len(fidelities), 1), sharey=True, squeeze=False)[0]
    for ax, fidelity in zip(axes, fidelities, strict=False):
        for arch in ARCHS:  # each family in its colour and marker, as in every figure of the report
            series = sorted((p for p in points if p.fidelity == fidelity and p.arch == arch), key=lambda p: p.gen_len)
            if series:
                ax.plot([p.gen_len for p in series], [p.latency_s for p in series], marker=ARCH_MARKER[arch],
                        color=ARCH_COLOR[arch], label=ARCH_LABEL[arch])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("Generation length (tokens)")
        ax.set_title(f"{fidelity} model")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("Predicted latency (s)")
    prompt = sorted({p.prompt_len for p in points})
    fig.suptitle(f"Predicted end-to-end latency on {hardware.name}, batch 1, prompt {', '.join(map(str, prompt))}")
    return fig


def roofline_figure(
    df: pl.DataFrame,
    predictions: pl.DataFrame,
    profile: HardwareProfile,
    operator_points: Sequence[OperatorPoint],
    *,
    operator_setting: str,
    overridden: bool = False,
) -> Figure:
    """The roofs of `profile` with the model's operators (one pair's: roofline.plotdata.operator_points) and, on
    top, each successful run as one measured operating point: faithful-model FLOPs over its bytes (x) against those
    FLOPs over the run's median latency (y)."""
    frame = Frame.of("roofline", df)
    points = predictions.filter(
        (pl.col("fidelity") == "faithful") & (pl.col("hardware") == frame.hardware)
        & pl.col("measured_flops_per_s").is_not_null() & pl.col("arithmetic_intensity").is_not_null()
    )
    if not points.height:
        raise FigureSkipped("no successful run has a faithful roofline prediction to place on the roofline")
    frame.fig = roofline_plot(list(operator_points), profile, legend=False)
    frame.axes = frame.fig.axes
    ax = frame.axes[0]
    series = [
        Series("matmul roof", "hline", (), (profile.peak_tensor_flops_per_s,)),
        Series("elementwise roof", "hline", (), (profile.peak_vector_ops_per_s,)),
        Series("memory roof", "line", (), (), markers=(f"{profile.memory_bandwidth_bytes_per_s:g} B/s",)),
    ]
    for phase in sorted({p.phase for p in operator_points}):
        chosen = [p for p in operator_points if p.phase == phase]
        series.append(Series(f"operators: {phase}", "points", tuple(p.arithmetic_intensity for p in chosen),
                             tuple(p.attainable_flops_per_s for p in chosen), markers=tuple(p.name for p in chosen)))
    styles = impl_styles(points["impl"].to_list())
    for (arch, model, impl), rows in _by_implementation(points):
        label = f"measured: {_model_label(model, impl)} ({rows.height} runs)"
        s = Series(label, "points", tuple_of(rows["arithmetic_intensity"]), tuple_of(rows["measured_flops_per_s"]),
                   arch=arch, model=model, markers=tuple(rows["run_id"].to_list()),
                   hollow=hollow_by_run(df, rows["run_id"].to_list()))
        series.append(s)
        scatter_points(ax, s, ARCH_COLOR.get(arch, "black"), styles[impl][1] or ARCH_MARKER.get(arch, "o"),
                       edge="black", s=70, zorder=5, linewidths=0.6)
    hollow = hollow_legend(ax, series)
    low, high = ax.get_xlim()
    xs = [x for s in series[3:] for x in s.x if x > 0]
    ax.set_xlim(min(low, min(xs) / 2), max(high, max(xs) * 2))
    frame.panel(ax, f"Roofline of {profile.name} with measured operating points", "arithmetic intensity (FLOP/byte)",
                "performance (FLOP/s)", "log", "log", series)
    ar, dllm = _operator_titles(operator_points)
    notes = (
        (
            f"Operators: one {ar} prefill, its last decode pass and one {dllm} step at {operator_setting} (faithful "
            "model). Measured points: a whole run's predicted FLOPs over its bytes, and over its median latency."
            + (f" {hollow}" if hollow else "")
        ),
        *_profile_notes(profile),
    )
    return frame.finish(None, notes, _profile_caption(df, frame.hardware, profile, overridden))


def _operator_titles(points: Sequence[OperatorPoint]) -> tuple[str, str]:
    """The family titles of the operators' AR model and diffusion model, read from their phases ('<arch> step')."""
    def title(stage: str, paradigm_default: str) -> str:
        arch = next((p.phase.rsplit(" ", 1)[0] for p in points if p.stage == stage), None)
        return family(arch).title if arch in ARCHS else paradigm_default

    return title("prefill", "AR"), title("step", "dLLM")


def _by_implementation(rows: pl.DataFrame) -> list[tuple[tuple, pl.DataFrame]]:
    """Groups of (arch, model, impl): each model's vanilla runs first, then its variants (a distinct marker)."""
    ordered = rows.sort("arch", "model", pl.col("impl") != "vanilla", "impl")
    return list(ordered.group_by(["arch", "model", "impl"], maintain_order=True))


def _model_label(model: str, impl: str) -> str:
    return model if impl == "vanilla" else f"{model} {impl}"


def measured_vs_predicted(
    df: pl.DataFrame, predictions: pl.DataFrame, profile: HardwareProfile, *, overridden: bool = False
) -> Figure:
    """Median measured latency (y) against the roofline's predicted latency (x), one point per successful run,
    one panel per fidelity (study, faithful), log-log with the y = x line: points above it ran slower than the
    roofline allows. With a floor in the profile (host floor per eager forward, or dispatch floor per launch),
    solid marks include it and faint marks are the roofs alone; a run whose latency was extrapolated is hollow. A
    run measured faster than 0.9x its roofs-only prediction is circled in red and named "roofline violated": the
    roofs are a lower bound on time. Where the floor was fitted to this sweep's own runs, the caption says so."""
    frame = Frame.of("measured_vs_predicted", df)
    rows = predictions.filter((pl.col("hardware") == frame.hardware) & pl.col("measured_latency_s").is_not_null())
    fidelities = [f for f in ("study", "faithful") if rows.filter(pl.col("fidelity") == f).height]
    if not rows.filter(pl.col("predicted_latency_s").is_not_null()).height:
        raise FigureSkipped("no successful run has a roofline prediction")
    dispatch = profile.dispatch_s > 0 or profile.host_floor_s > 0
    floor_label = " + host floor" if profile.host_floor_s > 0 else " + dispatch"
    for ax, fidelity in zip(frame.draw(len(fidelities), columns=2, panel_size=(5.0, 4.4)), fidelities):
        sub = rows.filter((pl.col("fidelity") == fidelity) & pl.col("predicted_latency_s").is_not_null())
        series = []
        styles = impl_styles(sub["impl"].to_list())
        for (arch, model, impl), group in _by_implementation(sub):
            marker = styles[impl][1] or ARCH_MARKER.get(arch, "o")
            variants = [("predicted_latency_s", floor_label if dispatch else "", 0.9)]
            if dispatch:
                variants.append(("predicted_latency_roofs_s", ", roofs only", 0.3))
            hollow = hollow_by_run(df, group["run_id"].to_list())
            for column, suffix, alpha in variants:
                s = Series(f"{_model_label(model, impl)} ({ARCH_LABEL.get(arch, arch)}){suffix}", "points",
                           tuple_of(group[column]),
                           tuple_of(group["measured_latency_s"]), arch=arch, model=model,
                           markers=tuple(group["run_id"].to_list()), hollow=hollow)
                series.append(s)
                scatter_points(ax, s, ARCH_COLOR.get(arch, "black"), marker, s=28, alpha=alpha, zorder=3)
        violated = sub.filter(pl.col("roofline_violated").fill_null(False)) if "roofline_violated" in sub.columns \
            else sub.clear()
        if violated.height:
            s = Series(f"roofline violated ({violated.height} runs: faster than 0.9x the roofs alone)", "points",
                       tuple_of(violated["predicted_latency_roofs_s"]), tuple_of(violated["measured_latency_s"]),
                       markers=tuple(violated["run_id"].to_list()))
            series.append(s)
            ax.scatter(s.x, s.y, marker="o", s=140, facecolors="none", edgecolors="red", linewidths=1.5,
                       label=s.label, zorder=4)
        values = [v for s in series for v in (*s.x, *s.y) if v > 0]
        if values:
            lo, hi = min(values) / 1.5, max(values) * 1.5
            ax.plot([lo, hi], [lo, hi], color="black", linestyle="--", linewidth=1.0, label="y = x", zorder=2)
            series.append(Series("y = x", "line", (lo, hi), (lo, hi)))
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
        plain_log_axis(ax, "x")
        plain_log_axis(ax, "y")
        skipped = rows.filter((pl.col("fidelity") == fidelity) & pl.col("out_of_scope").is_not_null()).height
        title = f"{fidelity} model" + (f" ({skipped} runs out of its scope)" if skipped else "")
        frame.panel(ax, title, f"predicted latency on {profile.name} (s)", "measured latency, median (s)", "log",
                    "log", series, title_size=10)
    hollow = hollow_legend(frame.axes[0], [s for p in frame.panels for s in p.series])
    notes = ("The study's model covers batch 1 without classifier-free guidance only." + (f" {hollow}" if hollow
                                                                                         else ""),)
    notes += _profile_notes(profile) + fitted_note(df, profile.floor_note())
    return frame.finish("Measured vs roofline-predicted end-to-end latency", notes,
                        _profile_caption(df, frame.hardware, profile, overridden))
