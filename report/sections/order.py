"""The report's sections in the study's order, each built by its own module, with its figures placed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from itertools import count

import polars as pl

from report.document.content import Block, Document, FigureBlock, Section
from report.analysis.energy import energy_blocks
from report.sections import (
    findings,
    latency,
    memory,
    provenance,
    quality,
    roofline,
    setup,
    throughput,
    variants,
)
from report.sections.inputs import Blocks, ReportInputs
from report.table.flat import UNKNOWN_HARDWARE
from report.table.sessions import disturbed_text
from report.answer.verdict.short import verdict


def _energy(inputs: ReportInputs, multi: bool) -> Blocks:
    """The energy section's text and tables stand before its figures."""
    return Blocks(energy_blocks(inputs.table, multi), [])


# (anchor, title, builder): the document order. A figure goes to the section its catalog entry names.
SECTIONS: tuple[tuple[str, str, Callable[[ReportInputs, bool], Blocks]], ...] = (
    ("findings", "1. Findings", findings.build),
    ("setup", "2. Setup and controls", setup.build),
    ("latency", "3. Latency", latency.build),
    ("throughput", "4. Throughput", throughput.build),
    ("memory", "5. Memory", memory.build),
    ("quality", "6. Quality vs computation", quality.build),
    ("variants", "7. Accelerated variants", variants.build),
    ("roofline", "8. Roofline", roofline.build),
    ("energy", "9. Energy", _energy),
    ("provenance", "10. Environment and provenance", provenance.build),
)


def build_document(inputs: ReportInputs) -> Document:
    """The sections in order, each with its figures; a drawn figure is numbered here, where the reading order is
    decided (a skipped one gets no number)."""
    table = inputs.table
    multi = table.filter(pl.col("hardware") != UNKNOWN_HARDWARE)["hardware"].n_unique() > 1
    figures: dict[str, list[FigureBlock]] = {anchor: [] for anchor, _, _ in SECTIONS}
    for block in inputs.figures:
        figures[inputs.figure_sections[block.number]].append(block)
    numbers = count(1)
    sections = []
    for anchor, title, build in SECTIONS:
        lead, tail = build(inputs, multi)
        placed: list[Block] = [replace(b, display_number=next(numbers)) if b.png is not None else b
                               for b in figures[anchor]]
        sections.append(Section(anchor, title, [*lead, *placed, *tail]))
    return Document(f"llada-bench report: {inputs.sweep}", subtitle(inputs.sweep, table), sections,
                    verdict=verdict(inputs.pairings, inputs.unanswered, disturbed_text(inputs.sessions)))


def subtitle(sweep: str, table: pl.DataFrame) -> str:
    """What the sweep ran. A row of the table pools one configuration's runs over its sessions, so with several
    sessions the count of rows is the count of configurations, not of runs."""
    statuses = ", ".join(f"{n} {s}" for s, n in table.group_by("status").len().sort("status").iter_rows())
    runs = int(table["run_ids"].list.len().sum()) if "run_ids" in table.columns else table.height
    if runs > table.height:
        sessions = int(table["sessions"].max())
        return f"Sweep {sweep!r}: {table.height} configurations ({statuses}), {runs} runs in {sessions} sessions"
    return f"Sweep {sweep!r}: {table.height} runs ({statuses or 'none'})"
