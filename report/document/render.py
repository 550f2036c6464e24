"""`render_report`: verify a sweep's artifacts, then write results.parquet, every figure (PNG + SVG),
report.html (self-contained) and report.md, and print a short results table."""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import yaml
from pydantic import ValidationError

from report.document.catalog import FIGURES
from report.analysis.energy import energy_findings
from report.analysis.extrapolation import extrapolation_summary, with_extrapolation_check
from report.document.figure_files import SkippedFigure, WrittenFigure, draw_figures, figure_blocks
from report.answer.findings import (
    crossover_table,
    findings_table,
    findings_text,
    predicted_throughput,
    roofline_findings,
)
from report.answer.findings_file import findings_file, findings_json
from report.analysis.history import history, history_text, pair_histories
from report.document.html import render_html
from report.document.markdown import render_markdown
from report.document.outputs import ReportError, ReportWriter, refuse_occupied_outputs
from report.answer.pairing.text import pairings_text
from report.answer.pairing.build import pairing_table, pairs_of, unanswered
from report.answer.pairing.pairs import table_sides
from report.analysis.parity import parity_markers, parity_table
from report.analysis.predictions import (
    UnknownHardwareError,
    choose_profile,
    measured_roofs_of,
    model_shapes,
    sweep_predictions,
    with_roofline_columns,
)
from report.analysis.quality import (
    QualityData,
    calibration_table,
    elbo_precision,
    quality_by_run,
    quality_by_setting,
    quality_long_table,
)
from report.sections import ReportInputs, build_document
from report.table.sessions import disturbed_finding, disturbed_text, pool_sessions, session_loads
from report.document.summary import summary_table
from report.table.flat import (
    UNKNOWN_HARDWARE,
    full_where_measured,
    has_variants,
    results_table,
    unlearned_warnings,
    vanilla_runs,
)
from report.analysis.variants import VARIANT_SCHEMA, variant_table, variants_text
from report.answer.verdict.short import verdict_text, with_verdict_steps
from roofline.hardware import HARDWARE
from specs.artifacts import (
    RESULTS_FILE,
    Manifest,
    SweepLayout,
    not_run_note,
    planned_without_result,
    read_manifest,
    verify,
)
from specs.results import RunResult
from specs.safefile import RUN_MAX_BYTES, SPEC_MAX_BYTES, UnsafeFileError, read_bytes, read_text
from specs.schema import VANILLA, ExperimentSpec, ParitySpec

HTML_FILE = "report.html"
MARKDOWN_FILE = "report.md"
FINDINGS_FILE = "findings.json"


__all__ = ["ReportError", "UnverifiedArtifactsError", "render_report"]


class UnverifiedArtifactsError(ReportError):
    """The artifacts fail verification; each failing file is named."""


@dataclass(frozen=True)
class ReportOutputs:
    sweep_dir: Path
    results_parquet: Path
    html: Path
    markdown: Path
    figures: tuple[WrittenFigure, ...]
    skipped: tuple[SkippedFigure, ...]
    problems: tuple[str, ...]  # verification failures (only with allow_unverified)
    summary: str
    findings: str  # the Findings as text (the terminal prints the verdict; the Findings are in the report)
    variants: str = ""  # the variants against vanilla as text (empty without variants)
    findings_json: Path | None = None  # findings.json: both pairings as data (report/answer/pairing/build.py)
    pairings: str = ""  # both pairings as text (report/answer/pairing/build.py)


def render_report(
    sweep_dir: Path | str,
    *,
    allow_unverified: bool = False,
    hardware: str | None = None,
    echo: bool = True,
) -> ReportOutputs:
    """Render everything from `sweep_dir` (artifacts/<sweep>/) alone: no model, no GPU, no network.

    Refuses (UnverifiedArtifactsError) when a checksum fails unless `allow_unverified`; then the report
    carries the failures in a warning. Runs are predicted against the roofs their worker measured, else their
    GPU's datasheet profile; `hardware` names a datasheet profile for a GPU whose name matches none (a run is
    never predicted against another device). Prints a short results table, the verdict
    (report/answer/verdict/short.py) and where the full Findings are, and last the report's path.

    Accelerated variants (runs whose `impl_name` is not vanilla) appear in the per-run tables, the roofline's
    predictions and their own section and figures; every analysis that sets an autoregressive model beside a
    diffusion model (per pair, report/answer/pairing/pairs.py) reads the vanilla runs only.
    """
    layout = SweepLayout(Path(sweep_dir))
    if not layout.root.is_dir():
        raise ReportError(f"{layout.root}: no such sweep directory")
    try:
        problems = tuple(str(p) for p in verify(layout))  # a FIFO, device or link in the folder: refused here
    except UnsafeFileError as exc:
        raise ReportError(str(exc)) from None
    if problems and not allow_unverified:
        raise UnverifiedArtifactsError(
            f"{layout.root}: artifacts fail verification ({len(problems)} problem(s)): " + "; ".join(problems)
            + ". Rerun the sweep to recompute damaged runs, or pass --allow-unverified to render anyway."
        )
    refuse_occupied_outputs(layout)
    writer = ReportWriter(layout, _sweep_name(layout, []))  # what it writes goes through the sweep's record
    writer.refuse_unowned(layout.root / name for name in (RESULTS_FILE, HTML_FILE, MARKDOWN_FILE, FINDINGS_FILE))
    if problems and echo:
        print(f"warning: {unverified_warning(problems)}", file=sys.stderr)
    if hardware is not None and hardware not in HARDWARE:
        raise UnknownHardwareError(f"--hardware: unknown roofline profile {hardware!r}; allowed: {', '.join(HARDWARE)}")
    results, unreadable = _load(layout, strict=not problems)
    problems += unreadable
    runs = with_extrapolation_check(results_table(results))  # one row per run: results.parquet
    # one row per configuration, its sessions pooled: what every analysis reads
    table = with_extrapolation_check(pool_sessions(runs))
    kinds = sorted(h for h in table["hardware"].unique().to_list() if h != UNKNOWN_HARDWARE)
    profiles = {kind: choose_profile(kind, measured_roofs_of(results, kind), hardware) for kind in kinds}
    # AR against diffusion, per pair: vanilla against vanilla, whatever variants the sweep also ran.
    # One row per grid point: a point timed in full and by extrapolation reads the full measurement.
    base = full_where_measured(vanilla_runs(table))
    spec_text = _spec_text(layout)
    spec = _parse_spec(spec_text)
    settings = spec.quality.parity if spec is not None else ParitySpec()
    quality = analyse_quality([r for r in results if r.config.impl_name == VANILLA], base, settings)
    shapes = model_shapes(results)
    available = {kind: choice.profile for kind, choice in profiles.items() if choice.profile is not None}
    predictions = sweep_predictions(results, runs, available)
    table = with_roofline_columns(table, predictions)
    base = with_roofline_columns(base, predictions)
    parquet = _parquet_bytes(with_roofline_columns(runs, predictions))
    crossovers = crossover_table(base, available, shapes)
    predicted = predicted_throughput(base, available, shapes)
    pairings = pairing_table(table, results, quality.parity, crossovers, available)
    missing = unanswered(table, pairings)
    loads = session_loads(results)
    disturbed = disturbed_finding(loads)
    warnings = [*unlearned_warnings(base), *([disturbed] if disturbed else [])]
    findings = pl.concat([findings_table(quality.parity, crossovers, warnings, missing),
                          energy_findings(pairings, table), roofline_findings(table)]).sort(
        ["hardware", "generation_length", "prompt_length"], maintain_order=True)
    if has_variants(table):
        every_long = quality_long_table(results)
        variants, variant_quality = variant_table(table, every_long, predictions), quality_by_run(every_long)
    else:
        variants, variant_quality = pl.DataFrame(schema=VARIANT_SCHEMA), quality.by_run
    written, skipped, roofline_notes = draw_figures(layout, table, results, quality, profiles,
                                                    with_verdict_steps(crossovers, pairings), predicted,
                                                    predictions, variants, variant_quality)
    blocks = figure_blocks(layout, written, skipped, table_sides(table))
    taken = history(results, runs)
    taken_by_pair = pair_histories(results, runs, pairs_of(pairings))
    inputs = ReportInputs(
        sweep=_sweep_name(layout, results), spec_text=spec_text, spec=spec,
        manifest=_manifest(layout), problems=problems, table=table, quality=quality, figures=tuple(blocks),
        figure_sections={e.number: e.section for e in FIGURES}, predictions=predictions,
        roofline_notes=roofline_notes, findings=findings, crossovers=crossovers, variants=variants,
        pairings=tuple(pairings), unanswered=tuple(missing), history=taken, pair_histories=taken_by_pair,
        extrapolation=extrapolation_summary(runs, table_sides(table).dllm), sessions=tuple(loads),
    )
    document = build_document(inputs)
    if problems:  # above everything else in the report: these numbers may not be what was measured
        document.warnings.insert(0, unverified_warning(problems))
    never_ran, planned = planned_without_result(layout, writer.record)
    if never_ran:  # an interrupted sweep's report says what it lacks
        document.warnings.append(not_run_note(never_ran, planned))
        if echo:
            print(f"warning: {not_run_note(never_ran, planned)}", file=sys.stderr)
    html_path, md_path = layout.root / HTML_FILE, layout.root / MARKDOWN_FILE
    json_path = layout.root / FINDINGS_FILE
    findings_record = findings_file(inputs.sweep, pairings, unverified=problems, verdict=document.verdict,
                                    sides=table_sides(table), missing=missing,
                                    notes=[inputs.extrapolation] if inputs.extrapolation else [],
                                    provenance=history_text(taken), pair_provenance=taken_by_pair,
                                    disturbed=disturbed_text(loads))
    files = [(layout.results, parquet), (html_path, render_html(document).encode("utf-8")),
             (md_path, render_markdown(document).encode("utf-8")),
             (json_path, findings_json(findings_record).encode("utf-8"))]
    files += [(p, data) for w in written for p, data in ((w.png, w.png_data), (w.svg, w.svg_data))]
    writer.write_all(files, {p.name for w in written for p in (w.png, w.svg)})
    summary = summary_table(table, html_path, len(written), len(skipped))
    answer = findings_text(findings)
    both_ways = pairings_text(pairings)
    versus = variants_text(variants)
    if echo:  # the runs, the verdict, where the rest is; the report's path last
        runs, report_line = summary.rsplit("\n", 1)
        print(runs)
        print(verdict_text(document.verdict, md_path, json_path, report_line))
    return ReportOutputs(layout.root, layout.results, html_path, md_path, tuple(written), tuple(skipped), problems,
                         summary, answer, versus, json_path, both_ways)


def unverified_warning(problems: tuple[str, ...]) -> str:
    """The line at the top of an unverified report, in the terminal, and (as a list) in findings.json."""
    return (f"UNVERIFIED: these artifacts FAILED verification ({len(problems)} problem(s)) and were rendered only "
            "because --allow-unverified was given; every number below may differ from what was measured: "
            + "; ".join(problems))


def analyse_quality(results: list[RunResult], table: pl.DataFrame, settings: ParitySpec = ParitySpec()) -> QualityData:
    """Every quality frame the figures and sections read (`settings`: the spec's quality.parity); an analysis
    that fails raises (never a silent gap)."""
    long = quality_long_table(results)
    by_setting = quality_by_setting(long, settings.diversity_margin)
    parity = parity_table(long, table, settings)
    samples = {r.config.model.name: r.config.quality.elbo.samples for r in results if r.config.quality.elbo}
    return QualityData(long, quality_by_run(long), by_setting, calibration_table(long), parity,
                       parity_markers(parity), elbo_precision(by_setting, samples))


# ------------------------------------------------------------------ inputs


def _load(layout: SweepLayout, *, strict: bool) -> tuple[list[RunResult], tuple[str, ...]]:
    """Parse every run file; a file that does not parse is an error, or (unverified) a problem to report."""
    results, problems = [], []
    for path in layout.run_files().values():
        try:
            results.append(RunResult.model_validate_json(read_bytes(path, RUN_MAX_BYTES)))
        except UnsafeFileError as exc:  # too large to read whole: never read, named
            if strict:
                raise ReportError(str(exc)) from None
            problems.append(str(exc))
        except (ValidationError, ValueError, OSError) as exc:
            message = f"{path}: unreadable run artifact ({exc.__class__.__name__})"
            if strict:
                raise ReportError(message + "; it matches the manifest, so the artifact schema has changed") from None
            problems.append(message)
    return results, tuple(problems)


def _spec_text(layout: SweepLayout) -> str | None:
    """The frozen spec's text, None when it is absent or unreadable (verify has named why)."""
    try:
        return read_text(layout.spec, SPEC_MAX_BYTES)
    except (OSError, ValueError):
        return None


def _parse_spec(text: str | None) -> ExperimentSpec | None:
    if text is None:
        return None
    try:
        return ExperimentSpec.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError, TypeError):
        return None


def _manifest(layout: SweepLayout) -> Manifest | None:
    try:
        return read_manifest(layout)
    except (ValueError, OSError):
        return None


def _sweep_name(layout: SweepLayout, results: list[RunResult]) -> str:
    """The manifest's name for the sweep (a run copied in from another sweep never renames the report)."""
    manifest = _manifest(layout)
    return manifest.sweep if manifest else results[0].sweep if results else layout.root.name


# ------------------------------------------------------------------ outputs


def _parquet_bytes(table: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    table.write_parquet(buffer)
    return buffer.getvalue()
