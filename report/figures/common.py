"""What every figure shares: the data it plotted (for tests), the caption, the skip and hardware rules, the error
bars. Colours live in style.py, axis scales in axes.py, how a point is drawn (an extrapolated one hollow) in
marks.py."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")

import polars as pl
from matplotlib.figure import Figure

# Figure modules that read these names from here keep them (style.py and axes.py define them).
from report.figures.axes import empty_panel, plain_log_axis, power_of_two_axis, value_axis  # noqa: F401
from report.figures.style import (  # noqa: F401
    ARCH_COLOR,
    ARCH_LABEL,
    ARCH_MARKER,
    impl_styles,
    is_autoregressive,
    sequential_colors,
    shades,
    steps_colors,
)
from report.answer.pairing.pairs import is_dllm
from report.table.sessions import has_interval, interval_count
from report.analysis.stats import INTERVAL_LABEL

PLOT_DATA_ATTR = "_llada_bench_data"
# A diffusion model's knobs that may vary between series; a label names only those that do.
LLADA_AXES = ("steps", "block_length", "remasking", "sampler_setting", "cfg_scale")
AXIS_NAMES = {"steps": "steps", "block_length": "block", "remasking": "remask", "sampler_setting": "setting", "cfg_scale": "cfg"}


def interval_bounds(rows: pl.DataFrame, name: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The low and high ends of each row's interval of the median of `name` (report.table.flat: a range below
    report.analysis.stats.MIN_CI_SAMPLES repetitions, a BCa CI from there): the error bars every table's interval matches."""
    return tuple_of(rows[f"{name}_interval_low"]), tuple_of(rows[f"{name}_interval_high"])


def interval_note(rows: pl.DataFrame, names: Sequence[str], what: str = "Error bars",
                  source: str = "as the tables give it") -> str:
    """What the error bars of `names` are in the plotted `rows`: the interval each table gives for each median
    (`source` says whose), with its kind and what it rests on ('range, n = 5', or over the sessions' medians,
    'n = 3 sessions'): the same intervals as the tables, never one of the figure's own."""
    found: dict[str, set[str]] = {}
    for name in names:
        if f"{name}_interval" in rows.columns:
            for row in rows.filter(pl.col(f"{name}_interval").is_not_null()).iter_rows(named=True):
                if has_interval(row, name):
                    found.setdefault(row[f"{name}_interval"], set()).add(interval_count(row, name))
    if not found:
        return f"{what}: none (fewer than two repetitions)."
    kinds = []
    for kind in sorted(found):
        counts = sorted(found[kind], key=lambda text: int(text.split()[0]))
        kinds.append(f"{INTERVAL_LABEL[kind]}, n = {counts[0] if len(counts) == 1 else f'{counts[0]}–{counts[-1]}'}")
    return f"{what}: the interval of each median, {source} ({'; '.join(kinds)})."


def error_bars(s: Series) -> list[list[float]]:
    """matplotlib's yerr for a series: each point's distance down to its low bound and up to its high bound (none
    below zero); a series without bounds gets bars of zero."""
    low, high = s.y_low or s.y, s.y_high or s.y
    return [[max(y - lo, 0.0) for y, lo in zip(s.y, low)], [max(hi - y, 0.0) for y, hi in zip(s.y, high)]]


class FigureSkipped(Exception):
    """The data this figure needs is absent; the report shows the reason instead of the figure."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MixedHardwareError(ValueError):
    """Runs from different hardware were handed to one figure: they never share a panel."""


@dataclass(frozen=True)
class Series:
    """One plotted series: what a reader sees as one legend entry (or one set of marks)."""

    label: str
    kind: str  # "line", "points", "bars", "frontier", "hline", "vline", "span", "interpolation" (not measured)
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    y_low: tuple[float, ...] | None = None  # error bar / band bounds, same length as y
    y_high: tuple[float, ...] | None = None
    arch: str | None = None
    model: str | None = None
    markers: tuple[str, ...] = ()  # text marks such as "OOM" or "B=8", one per point where used
    hollow: tuple[bool, ...] = ()  # per point: extrapolated, not measured in full (drawn hollow); () none is


@dataclass(frozen=True)
class Cell:
    """One heatmap cell: a value, or why there is none ("oom", "error", "missing")."""

    x: float
    y: float
    value: float | None
    state: str  # "ok", "oom", "error", "missing"


@dataclass(frozen=True)
class Panel:
    title: str
    xlabel: str
    ylabel: str
    xscale: str = "linear"
    yscale: str = "linear"
    series: tuple[Series, ...] = ()
    cells: tuple[Cell, ...] = ()
    note: str | None = None  # drawn inside an empty panel

    def get(self, label: str) -> Series:
        """The series with this label (KeyError lists the labels there are)."""
        for s in self.series:
            if s.label == label:
                return s
        raise KeyError(f"no series {label!r} in panel {self.title!r}; have: {[s.label for s in self.series]}")


@dataclass(frozen=True)
class FigureData:
    """What a figure shows, as data: tests check this, never pixels."""

    name: str
    hardware: str
    caption: str
    panels: tuple[Panel, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    color_range: tuple[float, float] | None = None  # a shared colour scale, where there is one
    warnings: tuple[str, ...] = field(default_factory=tuple)  # drawn across every panel, not only in the caption

    def panel(self, title_part: str) -> Panel:
        matches = [p for p in self.panels if title_part in p.title]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} panels match {title_part!r}; have: {[p.title for p in self.panels]}")
        return matches[0]


def attach(fig: Figure, data: FigureData) -> Figure:
    setattr(fig, PLOT_DATA_ATTR, data)
    add_caption(fig, data.caption, (*data.warnings, *data.notes))
    for ax in fig.axes:
        if data.warnings and ax.get_label() != "<colorbar>":
            warn_panel(ax, data.warnings)
    return fig


def warn_panel(ax, warnings: Sequence[str]) -> None:
    """A red boxed warning across a panel: a curve of a model that learned nothing must not look like a finding."""
    import textwrap

    text = "\n".join(textwrap.fill(w, 48) for w in warnings)
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=8, color="#b00020",
            zorder=10, bbox={"boxstyle": "round", "facecolor": "#fff1f1", "edgecolor": "#b00020", "alpha": 0.9})


def plotted(fig: Figure) -> FigureData:
    """The data a figure function attached to its figure."""
    data = getattr(fig, PLOT_DATA_ATTR, None)
    if not isinstance(data, FigureData):
        raise TypeError("this figure carries no FigureData; was it made by report.figures?")
    return data


# ------------------------------------------------------------------ rules every figure obeys


def one_hardware(df: pl.DataFrame, what: str) -> str:
    """The single hardware of these runs; runs on different hardware never share a figure's panels."""
    kinds = sorted(df["hardware"].unique().to_list()) if df.height else []
    if len(kinds) > 1:
        raise MixedHardwareError(
            f"{what}: runs from {len(kinds)} hardware kinds ({', '.join(kinds)}) cannot share a panel; "
            "split the table by 'hardware' first"
        )
    if not kinds:
        raise FigureSkipped(f"{what}: no runs")
    return kinds[0]


def ok_runs(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(pl.col("status") == "ok")


def caption(df: pl.DataFrame, hardware: str) -> str:
    """Hardware, dtype, attention kernel and weights kind: on every figure."""

    def values(column: str) -> str:
        return ", ".join(sorted(str(v) for v in df[column].drop_nulls().unique().to_list())) or "unknown"

    return (
        f"Hardware: {hardware} · dtype: {values('dtype')} · attention: {values('attention')} · "
        f"weights: {values('weights')}"
    )


def add_caption(fig: Figure, text: str, notes: Sequence[str] = ()) -> None:
    """The caption under the panels, as the figure's x super-label so the layout keeps room for it (the image
    then needs no tight-bbox pass); wrapped to the figure's width."""
    import textwrap

    width = max(60, int(fig.get_figwidth() * 15))  # ~15 characters of 8-point text per inch
    lines = [wrapped for line in (text, *notes) for wrapped in textwrap.wrap(line, width)]
    # The caption gets its own room (8-point lines at 1.3 spacing): the panels keep their height.
    fig.set_figheight(fig.get_figheight() + 0.15 * len(lines))
    fig.supxlabel("\n".join(lines), x=0.005, ha="left", fontsize=8, color="#333333", linespacing=1.3)


def new_figure(panels: int, *, columns: int = 3, panel_size: tuple[float, float] = (4.6, 3.6),
               sharey: bool = False) -> tuple[Figure, list]:
    """A constrained-layout figure with `panels` axes in rows of at most `columns`; unused axes removed."""
    cols = max(1, min(columns, panels))
    rows = max(1, -(-panels // cols))
    fig = Figure(figsize=(panel_size[0] * cols, panel_size[1] * rows), layout="constrained", dpi=110)
    grid = fig.subplots(rows, cols, squeeze=False, sharey=sharey)
    axes = [ax for row in grid for ax in row]
    for ax in axes[panels:]:
        ax.remove()
    for ax in axes[:panels]:
        ax.grid(True, which="major", alpha=0.3)
    return fig, axes[:panels]


LEGEND_LAST = ("S_parity", "no parity", "Pareto frontier", "y = x", "roofline violated")


def figure_legend(fig: Figure, axes: Sequence, *, columns: int = 1) -> None:
    """One legend for the whole figure, right of the panels, each label once; markers (parity, frontier) last."""
    found: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    handles = dict(sorted(found.items(), key=lambda item: item[0].startswith(LEGEND_LAST)))
    if handles:
        # The legend sits outside the panels: widen the figure by its width so the panels keep theirs.
        longest = max(len(label) for label in handles)
        fig.set_figwidth(fig.get_figwidth() + min(6.0, 0.3 + 0.065 * longest) * columns)
        fig.legend(list(handles.values()), list(handles), loc="outside right center", fontsize="small",
                   ncols=columns, frameon=False)


def primary_block_length(df: pl.DataFrame) -> int | None:
    """The LLaDA block length to show where block length is not the subject (figure 6 is): the one with the
    most runs, the smallest on a tie. None without LLaDA runs."""
    llada = df.filter(pl.col("block_length").is_not_null())
    if not llada.height:
        return None
    counts = llada.group_by("block_length").len().sort(["len", "block_length"], descending=[True, False])
    return int(counts["block_length"][0])


def at_primary_block(df: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """LLaMA rows plus the LLaDA rows at the primary block length, and a note when others were left out."""
    block = primary_block_length(df)
    if block is None or df.filter(pl.col("block_length").is_not_null())["block_length"].n_unique() <= 1:
        return df, None
    kept = df.filter(pl.col("block_length").is_null() | (pl.col("block_length") == block))
    return kept, f"LLaDA shown at block length {block}; other block lengths are in the block-length ablation."


def varying(df: pl.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns among `columns` that take more than one value in df."""
    return [c for c in columns if c in df.columns and df[c].n_unique() > 1]


def llada_label(model: str, row: dict, axes: Sequence[str]) -> str:
    """'llada-8b: 32 steps' or 'llada-8b: 32 steps, block 64': only the knobs that vary, and of those only the
    ones the model's family has (a knob it lacks is null: Fast-dLLM v2 has no remasking, LLaDA no sampler
    setting)."""
    parts = []
    for axis in axes:
        value = row.get(axis)
        if value is None:
            continue
        if axis == "sampler_setting":  # it names itself: 'alg entropy', 'sub-block 8, threshold 0.9'
            parts.append(str(value))
        elif axis == "steps":
            parts.append(f"{value} step" if value == 1 else f"{value} steps")
        elif axis == "cfg_scale":
            parts.append(f"cfg {value:g}")
        else:
            parts.append(f"{AXIS_NAMES[axis]} {value}")
    return f"{model}: {', '.join(parts)}" if parts else model


def llada_settings(df: pl.DataFrame) -> list[tuple[str, str, int | None, pl.DataFrame]]:
    """(label, model, steps, rows) of each diffusion setting in df: per model, each of its step counts crossed
    with the other knobs that vary for it (`LLADA_AXES`), sorted; labelled by `llada_label`."""
    out = []
    llada = df.filter(is_dllm())
    for model in sorted(llada["model"].unique().to_list()):
        rows = llada.filter(pl.col("model") == model)
        axes = ["steps", *[a for a in varying(rows, LLADA_AXES) if a != "steps"]]
        for key in rows.select(axes).unique().sort(axes).iter_rows(named=True):
            chosen = rows.filter(pl.all_horizontal(pl.col(a).eq_missing(v) for a, v in key.items()))
            out.append((llada_label(model, key, axes), model, key["steps"], chosen))
    return out


def length_groups(df: pl.DataFrame) -> list[tuple[int, int]]:
    """(prompt_length, generation_length) pairs present, sorted."""
    pairs = df.select("prompt_length", "generation_length").unique().sort(["generation_length", "prompt_length"])
    return [(int(p), int(g)) for p, g in pairs.iter_rows()]


def length_title(prompt: int, generation: int, prompts: Sequence[int]) -> str:
    """'N_out = 64' when one prompt length is swept, else 'prompt 32, N_out = 64'."""
    head = f"N_out = {generation} tokens"
    return head if len(set(prompts)) <= 1 else f"prompt {prompt}, {head}"


def matching(df: pl.DataFrame, key: dict) -> pl.DataFrame:
    """df's rows whose columns equal key's values, a null matching a null."""
    return df.filter(pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in key.items()))


def tuple_of(values: Iterable[object]) -> tuple[float, ...]:
    return tuple(float("nan") if v is None else float(v) for v in values)  # type: ignore[arg-type]


