"""The report's figures as files: each catalogue figure drawn per hardware kind, written as PNG and SVG (atomically,
byte-stable), the stale ones an earlier report drew removed, and each one's block for the document."""

from __future__ import annotations

import io
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import polars as pl
from matplotlib.figure import Figure

from report.catalog import FIGURES, GroupContext, is_catalogue_figure
from report.document import PNG_DPI, FigureBlock
from report.figures.common import FigureSkipped, plotted
from report.figures.quality import METRIC_LABEL
from report.pairs import Sides
from report.predictions import ProfileChoice
from report.quality import QualityData
from report.table import UNKNOWN_HARDWARE, full_where_measured, vanilla_runs
from specs.artifacts import SweepLayout
from specs.results import RunResult
from specs.safefile import atomic_write, lstat_or_none


@dataclass(frozen=True)
class WrittenFigure:
    number: int
    stem: str
    hardware: str
    png: Path
    svg: Path
    figure: Figure  # kept so callers (tests) can read its plotted data


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
    """Every figure of the catalogue for each hardware kind, as PNG and SVG in figures/ (written atomically,
    figures an earlier report drew and this one does not removed), the ones skipped with why, and a note per
    hardware kind on the roofline profile its figures use."""
    figures_dir = layout.figures
    figures_dir.mkdir(exist_ok=True)
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
    _remove_stale_figures(figures_dir, {p.name for w in written for p in (w.png, w.svg)})
    return written, skipped, tuple(notes)


def _remove_stale_figures(figures_dir: Path, drawn: set[str]) -> None:
    """Remove the figures an earlier report drew that this one did not (a figure now skipped must not linger):
    only regular files named as the catalogue names its figures, never through a link, never a file of yours."""
    for path in sorted(figures_dir.iterdir()):
        status = lstat_or_none(path)
        if (path.name not in drawn and status is not None and stat.S_ISREG(status.st_mode)
                and is_catalogue_figure(path.name)):
            path.unlink()


def _save(fig: Figure, directory: Path, stem: str, number: int, hardware: str) -> WrittenFigure:
    png, svg = directory / f"{stem}.png", directory / f"{stem}.svg"
    with matplotlib.rc_context({"svg.hashsalt": "llada-bench", "svg.fonttype": "path"}):
        _atomic_figure(fig, png, "png", {"Software": None})
        _atomic_figure(fig, svg, "svg", {"Date": None, "Creator": None})
    return WrittenFigure(number, stem, hardware, png, svg, fig)


def _atomic_figure(fig: Figure, path: Path, fmt: str, metadata: dict) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=PNG_DPI, metadata=metadata)
    atomic_write(path, buffer.getvalue())


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
