"""Figures 8 and 9: the roofline of the sweep's hardware with the runs' measured operating points, and
measured vs roofline-predicted latency (study and faithful models)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import polars as pl
from matplotlib.figure import Figure

from report.figures.common import (
    ARCH_COLOR,
    ARCH_LABEL,
    FigureData,
    FigureSkipped,
    Panel,
    Series,
    attach,
    caption,
    new_figure,
    one_hardware,
    plain_log_axis,
    tuple_of,
)
from roofline.hardware import HardwareProfile
from roofline.plotdata import OperatorPoint

ROOFLINE_FIGURES = "report.roofline_figures"
MEASURED_MARKER = {"llama": "D", "llada": "*"}


def _profile_caption(df: pl.DataFrame, hardware: str, profile: HardwareProfile, overridden: bool) -> str:
    text = f"{caption(df, hardware)} · roofline profile: {profile.name}"
    return text + (" (chosen with --hardware, not the measured device)" if overridden else "")


def _dtype_note(df: pl.DataFrame) -> tuple[str, ...]:
    wide = sorted(set(df["dtype"].drop_nulls().to_list()) - {"bfloat16", "float16"})
    if not wide:
        return ()
    return (f"The roofline assumes 2-byte (BF16) tensors; these runs used {', '.join(wide)}.",)


def roofline_figure(
    df: pl.DataFrame,
    predictions: pl.DataFrame,
    profile: HardwareProfile,
    operator_points: Sequence[OperatorPoint],
    *,
    operator_setting: str,
    overridden: bool = False,
) -> Figure:
    """The roofs of `profile` with the model's operators (report/roofline_figures.py draws those) and, on top,
    each successful run as one measured operating point: faithful-model FLOPs over its bytes (x) against those
    FLOPs over the run's median latency (y)."""
    name = "roofline"
    hardware = one_hardware(df, name)
    try:
        draw = importlib.import_module(ROOFLINE_FIGURES).roofline_plot
    except (ImportError, AttributeError):
        raise FigureSkipped("the roofline drawing (report/roofline_figures.py: roofline_plot) is not available") from None
    points = predictions.filter(
        (pl.col("fidelity") == "faithful") & (pl.col("hardware") == hardware)
        & pl.col("measured_flops_per_s").is_not_null() & pl.col("arithmetic_intensity").is_not_null()
    )
    if not points.height:
        raise FigureSkipped("no successful run has a faithful roofline prediction to place on the roofline")
    fig = draw(list(operator_points), profile)
    ax = fig.axes[0]
    series = [
        Series("tensor-core roof", "hline", (), (profile.peak_tensor_flops_per_s,)),
        Series("CUDA-core roof", "hline", (), (profile.peak_vector_ops_per_s,)),
        Series("memory roof", "line", (), (), markers=(f"{profile.memory_bandwidth_bytes_per_s:g} B/s",)),
    ]
    for phase in sorted({p.phase for p in operator_points}):
        chosen = [p for p in operator_points if p.phase == phase]
        series.append(Series(f"operators: {phase}", "points", tuple(p.arithmetic_intensity for p in chosen),
                             tuple(p.attainable_flops_per_s for p in chosen), markers=tuple(p.name for p in chosen)))
    for (arch, model), rows in points.sort("arch", "model").group_by(["arch", "model"], maintain_order=True):
        label = f"measured: {model} ({rows.height} runs)"
        s = Series(label, "points", tuple_of(rows["arithmetic_intensity"]), tuple_of(rows["measured_flops_per_s"]),
                   arch=arch, model=model, markers=tuple(rows["run_id"].to_list()))
        series.append(s)
        ax.scatter(s.x, s.y, marker=MEASURED_MARKER.get(arch, "o"), s=70, color=ARCH_COLOR.get(arch, "black"),
                   edgecolors="black", linewidths=0.6, label=label, zorder=5)
    low, high = ax.get_xlim()
    xs = [x for s in series[3:] for x in s.x if x > 0]
    ax.set_xlim(min(low, min(xs) / 2), max(high, max(xs) * 2))
    ax.legend(fontsize="x-small", loc="lower right", ncols=2)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(f"Roofline of {profile.name} with measured operating points")
    panel = Panel(ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), "log", "log", tuple(series))
    notes = (
        (
            f"Operators: one LLaMA prefill, its last decode pass and one LLaDA step at {operator_setting} (faithful "
            "model). Measured points: a whole run's predicted FLOPs over its bytes, and over its median latency."
        ),
        *_dtype_note(df),
    )
    return attach(fig, FigureData(name, hardware, _profile_caption(df, hardware, profile, overridden), (panel,), notes))


def measured_vs_predicted(
    df: pl.DataFrame, predictions: pl.DataFrame, profile: HardwareProfile, *, overridden: bool = False
) -> Figure:
    """Median measured latency (y) against the roofline's predicted latency (x), one point per successful run,
    one panel per fidelity (study, faithful), log-log with the y = x line: points above it ran slower than the
    roofline allows."""
    name = "measured_vs_predicted"
    hardware = one_hardware(df, name)
    rows = predictions.filter((pl.col("hardware") == hardware) & pl.col("measured_latency_s").is_not_null())
    fidelities = [f for f in ("study", "faithful") if rows.filter(pl.col("fidelity") == f).height]
    if not rows.filter(pl.col("predicted_latency_s").is_not_null()).height:
        raise FigureSkipped("no successful run has a roofline prediction")
    fig, axes = new_figure(len(fidelities), columns=2, panel_size=(5.0, 4.4))
    panels = []
    for ax, fidelity in zip(axes, fidelities):
        sub = rows.filter((pl.col("fidelity") == fidelity) & pl.col("predicted_latency_s").is_not_null())
        series = []
        for (arch, model), group in sub.sort("arch", "model").group_by(["arch", "model"], maintain_order=True):
            s = Series(f"{model} ({ARCH_LABEL.get(arch, arch)})", "points", tuple_of(group["predicted_latency_s"]),
                       tuple_of(group["measured_latency_s"]), arch=arch, model=model,
                       markers=tuple(group["run_id"].to_list()))
            series.append(s)
            ax.scatter(s.x, s.y, color=ARCH_COLOR.get(arch, "black"), marker="s" if arch == "llama" else "o", s=28,
                       alpha=0.85, label=s.label, zorder=3)
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
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"predicted latency on {profile.name} (s)")
        ax.set_ylabel("measured latency, median (s)")
        ax.legend(fontsize="x-small", loc="upper left")
        panels.append(Panel(title, ax.get_xlabel(), ax.get_ylabel(), "log", "log", tuple(series)))
    fig.suptitle("Measured vs roofline-predicted end-to-end latency")
    notes = ("The study's model covers batch 1 without classifier-free guidance only.",) + _dtype_note(df)
    return attach(fig, FigureData(name, hardware, _profile_caption(df, hardware, profile, overridden),
                                  tuple(panels), notes))
