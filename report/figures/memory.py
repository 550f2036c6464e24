"""Figure 4: peak memory over sequence length x batch size, one heatmap per model, OOM cells marked."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from report.analysis.derived import memory_grid
from report.figures.common import Cell, FigureSkipped
from report.figures.frame import Frame
from report.figures.style import ARCH_LABEL
from report.answer.pairing.pairs import is_ar

GIB, MIB = float(1 << 30), float(1 << 20)
KIND_LABEL = {"reserved": "peak reserved memory", "tensors": "peak live tensors above weights"}
KIND_TITLE = {"reserved": "Peak reserved memory", "tensors": "Peak bytes of live tensors (CPU, untimed pass)"}
# Why a CPU sweep that recorded only the process's RSS growth gets no heatmap: it does not measure the model.
RSS_ONLY = ("these CPU runs recorded only the process's RSS growth, which follows what malloc keeps or returns "
            "(identical shapes differ by tens of MiB from run to run), not the model's memory; runs measured with "
            "the tensors' peak (an untimed profiled generation, workers/measure/memory.py) draw it: rerun them")
STATE_TEXT = {"oom": "OOM", "error": "failed", "missing": ""}


def memory_heatmap(df: pl.DataFrame) -> Figure:
    """Peak reserved memory (on CPU: the peak bytes of live tensors above the weights, from an untimed profiled
    generation) per (sequence length, batch size) cell, one panel per model on one shared colour scale. OOM cells
    are hatched and labelled; cells never run are blank. A cell is the largest peak of its runs (LLaDA's step counts
    and block lengths share a cell). Skipped where CPU runs recorded only the process's RSS growth (`RSS_ONLY`)."""
    frame = Frame.of("memory_heatmap", df, vanilla=True)
    df = frame.runs
    grid = memory_grid(df)
    if not grid.filter(pl.col("state").is_in(["ok", "oom"])).height:
        raise FigureSkipped("no run measured its peak memory or ran out of memory")
    kinds = grid["peak_memory_kind"].drop_nulls().unique().to_list()
    if len(kinds) > 1:
        raise FigureSkipped(f"runs measured different kinds of memory ({', '.join(sorted(kinds))}); not one scale")
    kind = kinds[0] if kinds else "reserved"
    if kind == "rss_delta":
        raise FigureSkipped(RSS_ONLY)
    values = grid["peak_memory_bytes"].drop_nulls()
    scale, unit = (GIB, "GiB") if values.len() and values.max() >= GIB else (MIB, "MiB")
    vmin = float(values.min()) / scale if values.len() else 0.0
    vmax = float(values.max()) / scale if values.len() else 1.0
    norm = Normalize(vmin=min(vmin, vmax - 1e-9), vmax=vmax)
    cmap = colormaps["viridis"]
    seqs = sorted(grid["sequence_length"].unique().to_list())
    batches = sorted(grid["batch_size"].unique().to_list())
    # Autoregressive models first, as the flat table orders them.
    models = grid.select("arch", "model").unique().sort([~is_ar(), "arch", "model"],
                                                       descending=[False, True, False]).rows()
    axes = frame.draw(len(models), panel_size=(1.6 + 1.0 * len(batches), max(3.6, 1.4 + 0.7 * len(seqs))))
    label = f"{KIND_LABEL.get(kind, kind)} ({unit})"
    for ax, (arch, model) in zip(axes, models):
        cells = _cells(grid.filter(pl.col("model") == model), seqs, batches, scale)
        for cell in cells:
            _draw_cell(ax, cell, batches, seqs, cmap, norm)
        ax.set_xlim(-0.5, len(batches) - 0.5)
        ax.set_ylim(-0.5, len(seqs) - 0.5)
        ax.set_xticks(range(len(batches)), [str(b) for b in batches])
        ax.set_yticks(range(len(seqs)), [str(s) for s in seqs])
        ax.grid(False)
        ax.set_aspect("auto")
        frame.panel(ax, f"{model} ({ARCH_LABEL.get(arch, arch)})", "batch size B (sequences)",
                    "sequence length (tokens)", "category", "category", cells=cells)
    mappable = frame.fig.colorbar(_scalar_mappable(cmap, norm), ax=axes, shrink=0.9)
    mappable.set_label(label)
    notes = ("Each cell: the largest peak among its runs; hatched: out of memory; 'failed': no measurement.",)
    if kind == "tensors":
        notes += ("CPU: the most bytes of tensors alive at once in one more generation of the first prompt batch after "
                  "the timed repetitions, as torch's allocator reported them (weights excluded); it repeats exactly "
                  "for the same shapes, where the process's RSS growth does not.",)
    if kind == "reserved":  # reserved counts CUDA graphs' pools, which the allocated peak misses (the memory table)
        notes += ("Reserved memory includes CUDA graph pools; the memory table lists them per run.",)
    return frame.finish(f"{KIND_TITLE.get(kind, kind)} by sequence length and batch size", notes,
                        df.filter(pl.col("hardware") == frame.hardware), legend=False, color_range=(vmin, vmax))


def _cells(grid: pl.DataFrame, seqs: list[int], batches: list[int], scale: float) -> list[Cell]:
    present = {(r["batch_size"], r["sequence_length"]): r for r in grid.iter_rows(named=True)}
    cells = []
    for seq in seqs:
        for batch in batches:
            row = present.get((batch, seq))
            if row is None:
                cells.append(Cell(batch, seq, None, "missing"))
            else:
                value = row["peak_memory_bytes"]
                cells.append(Cell(batch, seq, None if value is None or row["state"] == "oom" else value / scale,
                                  row["state"]))
    return cells


def _draw_cell(ax, cell: Cell, batches: list[int], seqs: list[int], cmap, norm) -> None:
    x, y = batches.index(int(cell.x)), seqs.index(int(cell.y))
    if cell.state == "ok" and cell.value is not None:
        color = cmap(norm(cell.value))
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=color, edgecolor="white"))
        luminance = 0.299 * color[0] + 0.587 * color[1] + 0.114 * color[2]
        ax.text(x, y, f"{cell.value:.3g}", ha="center", va="center", fontsize=8,
                color="black" if luminance > 0.5 else "white")
    elif cell.state in ("oom", "error"):
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor="#f4f4f4", edgecolor="#b00020",
                               hatch="///" if cell.state == "oom" else "..", linewidth=0.8))
        ax.text(x, y, STATE_TEXT[cell.state], ha="center", va="center", fontsize=9, fontweight="bold",
                color="#b00020", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    else:
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor="white", edgecolor="#dddddd"))


def _scalar_mappable(cmap, norm):
    from matplotlib.cm import ScalarMappable

    mappable = ScalarMappable(norm=norm, cmap=cmap)
    mappable.set_array(np.asarray([]))
    return mappable
