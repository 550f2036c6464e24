"""How every figure draws a model: each family's colour, marker and shades, each implementation's style, and a
point that was extrapolated rather than measured in full (hollow)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import matplotlib.colors as mcolors
import polars as pl
from matplotlib import colormaps

from report.answer.pairing.pairs import AUTOREGRESSIVE, paradigm_of
from specs.registry import FAMILIES


@dataclass(frozen=True)
class FamilyStyle:
    """How one model family is drawn in every figure: its colour and marker, and the colour map whose shades tell
    a diffusion family's settings apart (step counts, block lengths, sampler settings), from `lo` to `hi` of the
    map."""

    color: str
    marker: str
    shades: str
    lo: float = 0.4
    hi: float = 0.95


# Each family its own colour and marker, the same in every figure, so a sweep of several pairs can be read: LLaMA
# blue squares and LLaDA vermilion circles (how a LLaMA/LLaDA sweep has always looked), Qwen2.5 green pentagons and
# Dream wine hexagons, Fast-dLLM v2 (block diffusion) purple thin diamonds. No family shares a marker with a
# variant (VARIANT_MARKERS); a family of the registry missing here is drawn grey.
FAMILY_STYLES: dict[str, FamilyStyle] = {
    "llama": FamilyStyle("#1f5fa8", "s", "Blues"),
    "llada": FamilyStyle("#c8511c", "o", "YlOrRd"),
    "qwen2": FamilyStyle("#117733", "p", "Greens"),
    "dream": FamilyStyle("#882255", "h", "RdPu"),
    "fast_dllm_v2": FamilyStyle("#5e3c99", "d", "Purples"),
}
_UNSTYLED = FamilyStyle("#6b6b6b", "8", "Greys")


def family_style(arch: str | None) -> FamilyStyle:
    return FAMILY_STYLES.get(arch or "", _UNSTYLED)


ARCH_LABEL = {name: f.title for name, f in FAMILIES.items()}
ARCH_COLOR = {name: family_style(name).color for name in FAMILIES}
ARCH_MARKER = {name: family_style(name).marker for name in FAMILIES}


def is_autoregressive(arch: str | None) -> bool:
    """Whether a series' arch is of the autoregressive paradigm (None: no arch, not autoregressive)."""
    return arch is not None and paradigm_of(arch) == AUTOREGRESSIVE


# Implementation variants (report.analysis.variants): vanilla keeps its arch's colour, each variant one of these, by name.
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
    """One colour per setting of a family (a diffusion family's step counts, blocks or sampler settings): shades of
    its own map,
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
