"""The report's figures as files: each catalogue figure drawn per hardware kind into PNG and SVG bytes (byte-stable;
written with the report's other files through the sweep's record), and each one's block for the document."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import polars as pl
from matplotlib.figure import Figure

from report.document.catalog import FIGURES, GroupContext
from report.document.content import PNG_DPI, FigureBlock
from report.figures.common import FigureSkipped, plotted
from report.figures.quality import METRIC_LABEL
from report.answer.pairing.pairs import Sides
from report.analysis.predictions import ProfileChoice
from report.analysis.quality import QualityData
from report.table.flat import UNKNOWN_HARDWARE, full_where_measured, vanilla_runs
from specs.artifacts import SweepLayout
from specs.results import RunResult


@dataclass(frozen=True)
class WrittenFigure:
    number: int
    stem: str
    hardware: str
    png: Path
    svg: Path
    figure: Figure  # kept so callers (tests) can read its plotted data
    png_data: bytes = b""  # written once every output is drawn and none would replace a file of yours
    svg_data: bytes = b""


@dataclass(frozen=True)
class SkippedFigure:
    number: int
    stem: str
    hardware: str
    reason: str


def hardware_slug(hardware: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", hardware.lower()).strip("-") or "unknown"


def draw_figures(layout: SweepLayout, table: pl.DataFrame, results: list[RunResult], quality: QualityData,
             profiles: dict[str, ProfileChoice], crossovers: pl.DataFrame, predicted: pl.DataFrame,
             predictions: pl.DataFrame, variants: pl.DataFrame, variant_quality: pl.DataFrame,
             ) -> tuple[list[WrittenFigure], list[SkippedFigure], tuple[str, ...]]:
    """Every figure of the catalogue for each hardware kind, drawn as PNG and SVG bytes for figures/, the ones
    skipped with why, and a note per hardware kind on the roofline profile its figures use."""
    figures_dir = layout.figures
    kinds = sorted(profiles)
    written: list[WrittenFigure] = []
    skipped: list[SkippedFigure] = []
    notes: list[str] = []
    if not kinds:
        skipped += [SkippedFigure(e.number, e.slug, "", "no runs with a recorded environment") for e in FIGURES
                    if e.section != "variants"]
    for kind in kinds:
        every = table.filter(pl.col("hardware") == kind)
        ctx = GroupContext(
            hardware=kind, table=full_where_measured(vanilla_runs(every)), all_table=full_where_measured(every),
            results=[r for r in results if (r.environment.device if r.environment else UNKNOWN_HARDWARE) == kind],
            quality=quality, profile=profiles[kind], crossovers=crossovers, predicted_throughput=predicted,
            variants=variants.filter(pl.col("hardware") == kind), variant_quality=variant_quality,
            _predictions=predictions.filter(pl.col("hardware") == kind) if profiles[kind].profile else None,
        )
        if ctx.profile.reason:
            notes.append(f"{kind}: {ctx.profile.reason}.")
        elif ctx.profile.profile is not None:
            how = (" (chosen with --hardware)" if ctx.profile.overridden
                   else " (its worker's measured roofs)" if ctx.profile.measured else " (datasheet)")
            notes.append(f"{kind}: roofline profile {ctx.profile.profile.name}{how}.")
        suffix = "" if len(kinds) == 1 else f"--{hardware_slug(kind)}"
        for entry in FIGURES:
            for stem, made in entry.make(ctx):
                if isinstance(made, FigureSkipped):
                    skipped.append(SkippedFigure(entry.number, stem, kind, made.reason))
                else:
                    written.append(_save(made, figures_dir, stem + suffix, entry.number, kind))
    return written, skipped, tuple(notes)


def _save(fig: Figure, directory: Path, stem: str, number: int, hardware: str) -> WrittenFigure:
    """The figure's PNG and SVG, drawn into memory: written with the report's other files."""
    png, svg = directory / f"{stem}.png", directory / f"{stem}.svg"
    with matplotlib.rc_context({"svg.hashsalt": "llada-bench", "svg.fonttype": "path"}):
        png_data = _figure_bytes(fig, "png", {"Software": None})
        svg_data = _figure_bytes(fig, "svg", {"Date": None, "Creator": None})
    return WrittenFigure(number, stem, hardware, png, svg, fig, png_data, svg_data)


def _figure_bytes(fig: Figure, fmt: str, metadata: dict) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=PNG_DPI, metadata=metadata)
    return buffer.getvalue()


def figure_blocks(layout: SweepLayout, written: list[WrittenFigure], skipped: list[SkippedFigure],
                   sides: Sides) -> list[FigureBlock]:
    """Each figure drawn or skipped, in the catalogue's order, its title and sentence naming `sides`; the document
    numbers them in its reading order (report/sections/order.py)."""
    entries = {e.number: e for e in FIGURES}
    order = {e.number: i for i, e in enumerate(FIGURES)}
    blocks: list[tuple[tuple, FigureBlock]] = []
    for w in written:
        data = plotted(w.figure)
        entry = entries[w.number]
        title, shows = entry.words(sides)
        caption = data.caption  # the notes are drawn under the image's panels
        blocks.append(((order[w.number], w.stem, w.hardware), FigureBlock(
            w.number, _title(title, w.stem, entry.slug), w.hardware, caption, shows, png=w.png,
            relative_png=w.png.relative_to(layout.root).as_posix(), relative_svg=w.svg.relative_to(layout.root).as_posix(),
            png_data=w.png_data,
        )))
    for s in skipped:
        entry = entries[s.number]
        title, shows = entry.words(sides)
        blocks.append(((order[s.number], s.stem, s.hardware), FigureBlock(
            s.number, _title(title, s.stem, entry.slug), s.hardware, "", shows, reason=s.reason)))
    return [block for _, block in sorted(blocks, key=lambda pair: pair[0])]


def _title(title: str, stem: str, slug: str) -> str:
    metric = stem[len(slug) + 1:] if stem.startswith(slug + "_") else ""
    return f"{title} ({METRIC_LABEL.get(metric, metric)})" if metric else title
