"""What every figure shares: the data it plotted (for tests), the caption, the skip and hardware rules, styling."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as mcolors
import polars as pl
from matplotlib import colormaps
from matplotlib.figure import Figure

from report.pairs import AUTOREGRESSIVE, is_dllm, paradigm_of
from report.stats import INTERVAL_LABEL
from specs.registry import FAMILIES

PLOT_DATA_ATTR = "_llada_bench_data"

@dataclass(frozen=True)
class FamilyStyle:
    """How one model family is drawn in every figure: its colour and marker, and the colour map whose shades tell
    a diffusion family's settings apart (step counts, block lengths, algs), from `lo` to `hi` of the map."""

    color: str
    marker: str
    shades: str
    lo: float = 0.4
    hi: float = 0.95


# Each family its own colour and marker, the same in every figure, so a sweep of several pairs can be read: LLaMA
# blue squares and LLaDA vermilion circles (how a LLaMA/LLaDA sweep has always looked), Qwen2.5 green pentagons and
# Dream wine hexagons. No family shares a marker with a variant (VARIANT_MARKERS); a family of the registry missing
# here is drawn grey.
FAMILY_STYLES: dict[str, FamilyStyle] = {
    "llama": FamilyStyle("#1f5fa8", "s", "Blues"),
    "llada": FamilyStyle("#c8511c", "o", "YlOrRd"),
    "qwen2": FamilyStyle("#117733", "p", "Greens"),
    "dream": FamilyStyle("#882255", "h", "RdPu"),
}
_UNSTYLED = FamilyStyle("#6b6b6b", "8", "Greys")


def family_style(arch: str | None) -> FamilyStyle:
    return FAMILY_STYLES.get(arch or "", _UNSTYLED)


ARCH_LABEL = {name: f.title for name, f in FAMILIES.items()}
ARCH_COLOR = {name: family_style(name).color for name in FAMILIES}
ARCH_MARKER = {name: family_style(name).marker for name in FAMILIES}
# A diffusion model's knobs that may vary between series; a label names only those that do.
LLADA_AXES = ("steps", "block_length", "remasking", "dream_alg", "cfg_scale")
AXIS_NAMES = {"steps": "steps", "block_length": "block", "remasking": "remask", "dream_alg": "alg", "cfg_scale": "cfg"}


def is_autoregressive(arch: str | None) -> bool:
    """Whether a series' arch is of the autoregressive paradigm (None: no arch, not autoregressive)."""
    return arch is not None and paradigm_of(arch) == AUTOREGRESSIVE


# Implementation variants (report.variants): vanilla keeps its arch's colour, each variant one of these, by name.
VARIANT_PALETTE = ("#2a9d8f", "#9b5de5", "#e9c46a", "#d62828", "#6a994e", "#f15bb5", "#577590", "#8d6e63")
VARIANT_MARKERS = ("D", "^", "v", "P", "X", "*", "<", ">")


def impl_styles(impls: Iterable[str], vanilla: str = "vanilla") -> dict[str, tuple[str | None, str]]:
    """(colour, marker) of each implementation name: vanilla (None: its arch's colour and marker) first, then the
    variants in sorted order, so one variant looks the same in every variant figure."""
    names = sorted({name for name in impls if name != vanilla})
    styles: dict[str, tuple[str | None, str]] = {vanilla: (None, "")}
    for i, name in enumerate(names):
        styles[name] = (VARIANT_PALETTE[i % len(VARIANT_PALETTE)], VARIANT_MARKERS[i % len(VARIANT_MARKERS)])
    return styles


def draw_impl_series(ax, s: Series, style: tuple[str | None, str], *, annotate: bool = True) -> None:
    """One series of a variant figure: its points with their intervals as error bars, joined when it is a line,
    in its implementation's colour and marker (`impl_styles`; vanilla: its arch's), each point labelled with its
    text mark (LLaDA's step count) when `annotate`."""
    color, marker = style
    arch = s.arch or ""
    ax.errorbar(s.x, s.y, yerr=error_bars(s), label=s.label, color=color or ARCH_COLOR.get(arch, "black"),
                marker=marker or ARCH_MARKER.get(arch, "o"), linestyle="-" if s.kind == "line" else "none",
                markersize=6, capsize=2, zorder=3)
    if annotate:
        for x, y, mark in zip(s.x, s.y, s.markers):
            if mark:
                ax.annotate(mark, (x, y), xytext=(4, -9), textcoords="offset points", fontsize=6, color="#333333")


def interval_bounds(rows: pl.DataFrame, name: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The low and high ends of each row's interval of the median of `name` (report.table: a range below
    report.stats.MIN_CI_SAMPLES repetitions, a BCa CI from there): the error bars every table's interval matches."""
    return tuple_of(rows[f"{name}_interval_low"]), tuple_of(rows[f"{name}_interval_high"])


def interval_note(rows: pl.DataFrame, names: Sequence[str], what: str = "Error bars",
                  source: str = "as the tables give it") -> str:
    """What the error bars of `names` are in the plotted `rows`: the interval of each median over its repetitions
    (`source` says whose), with its kind and the repetitions it rests on ('range, n = 5' or '95% BCa CI, n = 6–10')."""
    found: dict[str, set[int]] = {}
    for name in names:
        if f"{name}_interval" in rows.columns:
            for kind, n in rows.select(f"{name}_interval", f"{name}_n").drop_nulls().iter_rows():
                found.setdefault(kind, set()).add(int(n))
    if not found:
        return f"{what}: none (no repetitions)."
    kinds = []
    for kind in sorted(found):
        low, high = min(found[kind]), max(found[kind])
        kinds.append(f"{INTERVAL_LABEL[kind]}, n = {low if low == high else f'{low}–{high}'}")
    return f"{what}: the interval of each median over its repetitions, {source} ({'; '.join(kinds)})."


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


def sequential_colors(
    values: Iterable[object], cmap: str = "viridis", lo: float = 0.05, hi: float = 0.85
) -> dict[object, tuple]:
    """One colour per distinct value, in sorted order, from a perceptual map between `lo` and `hi`."""
    ordered = sorted(set(values), key=lambda v: (v is None, v))
    mapper = colormaps[cmap]
    if len(ordered) == 1:
        return {ordered[0]: mcolors.to_rgba(mapper((lo + hi) / 2))}
    return {v: mcolors.to_rgba(mapper(lo + (hi - lo) * i / (len(ordered) - 1))) for i, v in enumerate(ordered)}


def shades(arch: str | None, values: Iterable[object]) -> dict[object, tuple]:
    """One colour per setting of a family (a diffusion family's step counts, blocks or algs): shades of its own map,
    darkening with the value; an autoregressive family's settings all take its colour."""
    style = family_style(arch)
    if is_autoregressive(arch):
        return {v: mcolors.to_rgba(style.color) for v in values}
    return sequential_colors(values, style.shades, style.lo, style.hi)


def steps_colors(df: pl.DataFrame) -> dict[tuple[str, object], tuple]:
    """The colour of each (arch, step count) in df's rows: each family's shades (`shades`), so two diffusion
    families never share a colour; an autoregressive model's key is (arch, None)."""
    colors: dict[tuple[str, object], tuple] = {}
    for arch in sorted(df["arch"].drop_nulls().unique().to_list()):
        steps = df.filter(pl.col("arch") == arch)["steps"].to_list()
        colors.update({(arch, k): c for k, c in shades(arch, steps).items()})
    return colors


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
    """'llada-8b: 32 steps' or 'llada-8b: 32 steps, block 64' — only the knobs that vary."""
    parts = []
    for axis in axes:
        value = row.get(axis)
        if axis == "steps":
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


def power_of_two_axis(ax, axis: str, values: Sequence[float]) -> None:
    """Log base-2 scale with a tick at each swept value (the grids are powers of two)."""
    ticks = sorted({float(v) for v in values})
    if axis == "x":
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    else:
        ax.set_yscale("log", base=2)
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])


def empty_panel(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#666666",
            wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def plain_log_axis(ax, axis: str = "y") -> None:
    """Log scale labelled in plain numbers (0.05, not 5 x 10^-2); over a short range the 2s and 5s too."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target.set_major_locator(LogLocator(base=10))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
    target.set_minor_formatter(_MinorLogLabels(target))


class _MinorLogLabels:
    """Labels 2 and 5 x 10^k (and 3 on a range under a decade and a half); nothing on long ranges."""

    def __init__(self, axis) -> None:
        self.axis = axis

    def __call__(self, value: float, pos=None) -> str:
        import math

        low, high = sorted(self.axis.get_view_interval())
        if value <= 0 or low <= 0:
            return ""
        decades = math.log10(high / low)
        mantissa = round(value / 10 ** math.floor(math.log10(value) + 1e-9))
        if (decades < 1.5 and mantissa in (2, 3, 5)) or (decades < 3 and mantissa in (2, 5)):
            return f"{value:g}"
        return ""


def value_axis(ax, values: Iterable[float | None], axis: str = "y", *, log_above_ratio: float = 10.0) -> str:
    """Log (plain labels) when the values span more than `log_above_ratio`, else linear; returns the scale.

    A log axis over a narrow range can show no labelled tick at all (0.0011-0.0013 s), and bars on a log axis
    exaggerate small differences; a wide range on a linear axis hides the small values."""
    positive = [float(v) for v in values if v is not None and not math.isnan(v) and v > 0]
    if positive and max(positive) / min(positive) > log_above_ratio:
        plain_log_axis(ax, axis)
        return "log"
    target = ax.yaxis if axis == "y" else ax.xaxis
    from matplotlib.ticker import ScalarFormatter

    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)
    target.set_major_formatter(formatter)
    if axis == "y":
        ax.set_ylim(bottom=0)
    return "linear"
