"""What every section reads (the flat table, the analyses, the figures and the manifest of one sweep) and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import polars as pl

from report.document.content import Block, FigureBlock
from report.analysis.history import History
from report.answer.pairing.build import Pairing
from report.analysis.quality import QualityData
from report.table.sessions import SessionLoad
from specs.artifacts import Manifest
from specs.schema import ExperimentSpec


@dataclass(frozen=True)
class ReportInputs:
    sweep: str
    spec_text: str | None
    spec: ExperimentSpec | None
    manifest: Manifest | None
    problems: tuple[str, ...]
    table: pl.DataFrame
    quality: QualityData
    figures: tuple[FigureBlock, ...]
    figure_sections: dict[int, str]  # figure number → section anchor
    predictions: pl.DataFrame  # every hardware's predictions (may be empty)
    roofline_notes: tuple[str, ...]
    findings: pl.DataFrame  # report.answer.findings.FINDINGS_SCHEMA
    crossovers: pl.DataFrame  # report.answer.findings.CROSSOVER_SCHEMA
    variants: pl.DataFrame  # report.analysis.variants.VARIANT_SCHEMA (empty without variant runs)
    pairings: tuple[Pairing, ...] = ()  # report.answer.pairing.build.pairing_table: the answer both ways
    unanswered: tuple[str, ...] = ()  # report.answer.pairing.build.unanswered: each pair without an answer, and why
    history: History | None = None  # report.analysis.history: commit, processes, interleaving, warm-ups of the runs
    pair_histories: dict[str, str] = field(default_factory=dict)  # report.analysis.history.pair_histories
    extrapolation: str | None = None  # report.analysis.extrapolation.extrapolation_summary of the runs
    sessions: tuple[SessionLoad, ...] = ()  # report.table.sessions.session_loads: which sessions ran disturbed



class Blocks(NamedTuple):
    """A section's own blocks: the lead stands before the section's figures, the tail after them."""

    lead: list[Block]
    tail: list[Block]
