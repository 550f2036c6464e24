"""The report's sections in the study's order, built from the flat table, the figures and the manifest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from report.document import (
    Document,
    FigureBlock,
    Paragraph,
    Preformatted,
    Section,
    Table,
    fmt_bytes,
    fmt_float,
    fmt_interval,
    fmt_rate,
    fmt_seconds,
    fmt_value,
)
from report.quality import FIGURE_METRICS, QualityData
from report.table import UNKNOWN_HARDWARE, quality_notes
from specs.artifacts import Manifest
from specs.schema import ExperimentSpec

SECTIONS = (
    ("setup", "1. Setup and controls"),
    ("latency", "2. Latency"),
    ("throughput", "3. Throughput"),
    ("memory", "4. Memory"),
    ("quality", "5. Quality vs computation"),
    ("roofline", "6. Roofline"),
    ("provenance", "7. Environment and provenance"),
)


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


def build_document(inputs: ReportInputs) -> Document:
    sections = {anchor: Section(anchor, title) for anchor, title in SECTIONS}
    table = inputs.table
    multi = table.filter(pl.col("hardware") != UNKNOWN_HARDWARE)["hardware"].n_unique() > 1
    _setup(sections["setup"], inputs)
    sections["quality"].blocks += [Paragraph(note, warning=True) for note in inputs.quality.notes]
    sections["quality"].blocks += [
        Paragraph(f"Quality note from the runs: {note}", warning=True) for note in quality_notes(table)
    ]
    sections["roofline"].blocks += [Paragraph(note) for note in inputs.roofline_notes]
    for block in inputs.figures:
        sections[inputs.figure_sections[block.number]].blocks.append(block)
    ok = table.filter(pl.col("status") == "ok")
    sections["latency"].blocks.append(_latency_table(ok, multi))
    sections["throughput"].blocks.append(_throughput_table(ok, multi))
    sections["memory"].blocks.append(_memory_table(table, multi))
    _quality(sections["quality"], inputs, multi)
    _roofline(sections["roofline"], inputs)
    _provenance(sections["provenance"], inputs)
    statuses = ", ".join(f"{n} {s}" for s, n in table.group_by("status").len().sort("status").iter_rows())
    subtitle = f"Sweep {inputs.sweep!r}: {table.height} runs ({statuses or 'none'})"
    return Document(f"llada-bench report: {inputs.sweep}", subtitle, list(sections.values()))


def _key_columns(multi: bool) -> list[tuple[str, str]]:
    cols = [("hardware", "hardware")] if multi else []
    return cols + [("model", "model"), ("batch_size", "B"), ("prompt_length", "P"), ("generation_length", "N_out"),
                   ("steps", "steps"), ("block_length", "block")]


def _rows(df: pl.DataFrame, columns: Sequence[tuple[str, object]]) -> tuple[tuple[str, ...], ...]:
    out = []
    for row in df.iter_rows(named=True):
        out.append(tuple(fmt(row) if callable(fmt) else fmt_value(row[fmt]) for _, fmt in columns))
    return tuple(out)


def _simple(keys: list[tuple[str, str]]) -> list[tuple[str, object]]:
    return [(label, column) for column, label in keys]


# ------------------------------------------------------------------ 1. setup


def _setup(section: Section, inputs: ReportInputs) -> None:
    blocks = section.blocks
    if inputs.problems:
        blocks.append(Paragraph(
            "These artifacts FAILED verification and were rendered only because --allow-unverified was given: "
            + "; ".join(inputs.problems), warning=True))
    spec = inputs.spec
    if spec is not None and spec.description:
        blocks.append(Paragraph(spec.description))
    table = inputs.table
    models = table.select("model", "arch", "weights").unique().sort(["arch", "model"])
    blocks.append(Table(("model", "arch", "weights", "source"), tuple(
        (m, a, w, _source(spec, m)) for m, a, w in models.iter_rows()), "Models"))
    if spec is not None:
        blocks.append(_grid_table(spec))
        c = spec.controls
        blocks.append(Table(("control", "value"), (
            ("dtype", c.dtype), ("attention kernel", c.attention), ("device", c.device),
            ("warm-up passes", str(c.warmup)), ("measured repetitions", str(c.repetitions)),
            ("temperature", f"{c.temperature:g}"), ("seed", str(c.seed)),
            ("hardware requirement", f"gpu={c.hardware.gpu}, exclusive={c.hardware.exclusive}"),
        ), "Controls (identical across runs)"))
    counts = table.group_by("hardware", "status").len().sort(["hardware", "status"])
    blocks.append(Table(("hardware", "status", "runs"), tuple((h, s, str(n)) for h, s, n in counts.iter_rows()),
                        "Runs by hardware and status (figures never mix hardware)"))
    failed = table.filter(pl.col("status") != "ok")
    if failed.height:
        columns = [("run", "run_id"), *_simple(_key_columns(True)), ("status", "status"),
                   ("error", lambda r: (r["error"] or "").splitlines()[0][:160] if r["error"] else "–")]
        blocks.append(Table(tuple(c for c, _ in columns), _rows(failed, columns), "Runs that did not succeed"))
    if table.filter(pl.col("hardware") == UNKNOWN_HARDWARE).height:
        blocks.append(Paragraph("Runs without an environment record (hardware 'unknown') appear in the tables "
                                "only, never in a figure."))
    if inputs.spec_text is not None:
        blocks.append(Preformatted(inputs.spec_text, "The frozen spec (spec.yaml)"))


def _source(spec: ExperimentSpec | None, model: str) -> str:
    m = spec.model(model) if spec else None
    if m is None:
        return "–"
    source = m.source
    if hasattr(source, "checkpoint"):
        return f"checkpoint {source.checkpoint}"
    synthetic = source.synthetic
    return f"synthetic {synthetic if isinstance(synthetic, str) else 'custom shape'}"


def _grid_table(spec: ExperimentSpec) -> Table:
    grid = spec.grid
    pairs = ", ".join(f"{p.prompt}+{p.generation}" for p in grid.length_pairs())
    rows = [("batch sizes", ", ".join(map(str, grid.batch_sizes))), ("prompt + generation lengths", pairs)]
    for model in spec.models:
        axes = spec.llada_axes(model)
        if axes is not None:
            rows += [
                (f"{model.name}: diffusion steps", ", ".join(map(str, axes.steps))),
                (f"{model.name}: block lengths", ", ".join(map(str, axes.block_lengths))),
                (f"{model.name}: remasking", ", ".join(axes.remasking)),
                (f"{model.name}: cfg scales", ", ".join(f"{v:g}" for v in axes.cfg_scales)),
            ]
    rows.append(("prompts", f"{spec.prompts.count} from {spec.prompts.dataset}"))
    return Table(("axis", "values"), tuple(rows), "Grid")


# ------------------------------------------------------------------ 2-4. latency, throughput, memory


def _latency_table(ok: pl.DataFrame, multi: bool) -> Table:
    columns = [
        *_simple(_key_columns(multi)),
        ("latency median", lambda r: fmt_seconds(r["latency_e2e_s_median"])),
        ("IQR", lambda r: fmt_interval(r["latency_e2e_s_p25"], r["latency_e2e_s_p75"])),
        ("95% CI", lambda r: fmt_interval(r["latency_e2e_s_ci_low"], r["latency_e2e_s_ci_high"])),
        ("TTFT", lambda r: fmt_seconds(r["ttft_s_median"])),
        ("ITL", lambda r: fmt_seconds(r["itl_s_median"])),
        ("step", lambda r: fmt_seconds(r["step_s_median"])),
        ("reps", lambda r: str(r["latency_e2e_s_n"])),
    ]
    return Table(tuple(c for c, _ in columns), _rows(ok, columns),
                 "Latency per run: medians over repetitions, interquartile range and 95% bootstrap CI of the median")


def _throughput_table(ok: pl.DataFrame, multi: bool) -> Table:
    columns = [
        *_simple(_key_columns(multi)),
        ("tokens/s median", lambda r: fmt_rate(r["tokens_per_s_median"])),
        ("IQR", lambda r: f"[{fmt_rate(r['tokens_per_s_p25'])}, {fmt_rate(r['tokens_per_s_p75'])}]"),
        ("95% CI", lambda r: f"[{fmt_rate(r['tokens_per_s_ci_low'])}, {fmt_rate(r['tokens_per_s_ci_high'])}]"),
        ("useful tokens / seq", lambda r: fmt_float(r["useful_tokens_mean"])),
    ]
    return Table(tuple(c for c, _ in columns), _rows(ok, columns), "Throughput per run (B x N_out / latency)")


def _memory_table(table: pl.DataFrame, multi: bool) -> Table:
    rows = table.filter(pl.col("status").is_in(["ok", "oom"]))
    columns = [
        *_simple(_key_columns(multi)), ("status", "status"),
        ("peak allocated", lambda r: fmt_bytes(r["peak_allocated_bytes"])),
        ("peak reserved", lambda r: fmt_bytes(r["peak_reserved_bytes"])),
        ("RSS growth", lambda r: fmt_bytes(r["peak_rss_delta_bytes"])),
        ("weights", lambda r: fmt_bytes(r["weights_bytes"])),
        ("held at OOM", lambda r: fmt_bytes(r["at_failure_allocated_bytes"])),
    ]
    return Table(tuple(c for c, _ in columns), _rows(rows, columns), "Peak memory per run")


# ------------------------------------------------------------------ 5. quality


def _quality(section: Section, inputs: ReportInputs, multi: bool) -> None:
    quality = inputs.quality
    if quality.parity is not None:
        section.blocks += _parity_tables(quality.parity, multi)
    setting = quality.by_setting
    if setting.height:
        columns = [("hardware", "hardware")] if multi else []
        columns += [("model", "model"), ("P", "prompt_length"), ("N_out", "generation_length"), ("steps", "steps"),
                    ("block", "block_length"), ("continuation", "continuation"), ("metric", "metric"),
                    ("median", lambda r: fmt_float(r["value"], 4)),
                    ("95% CI", lambda r: f"[{fmt_float(r['ci_low'], 4)}, {fmt_float(r['ci_high'], 4)}]"),
                    ("prompts", "n")]
        section.blocks.append(Table(tuple(c for c, _ in columns), _rows(setting, columns),
                                    f"Quality per setting at its smallest batch size (source: {quality.source})"))
    else:
        section.blocks.append(Paragraph("No run recorded quality metrics."))


def _ci(row: dict, value: str, low: str, high: str, digits: int = 4) -> str:
    if row[value] is None:
        return "–"
    text = fmt_float(row[value], digits)
    if row[low] is None and row[high] is None:
        return text
    return f"{text} [{fmt_float(row[low], digits)}, {fmt_float(row[high], digits) if row[high] is not None else '>'}]"


def _flag(rows: pl.DataFrame) -> str:
    """The runs' quality notes (e.g. synthetic weights) on the table itself, so it is never read without them."""
    notes = sorted({p.strip() for n in rows["quality_note"].drop_nulls().to_list() for p in n.split(";") if p.strip()})
    return f". {'; '.join(notes).capitalize()}." if notes else ""


def _parity_tables(parity: pl.DataFrame, multi: bool) -> list[Table]:
    """The parity rows (S_parity, speedup at parity, each with its CI) and the calibration rows."""
    hw = [("hardware", "hardware")] if multi else []
    rows = parity.filter(pl.col("row_kind") == "parity")
    tables = []
    headline = rows.filter(pl.col("metric").is_in(list(FIGURE_METRICS)) & (pl.col("reference") == "llama greedy"))
    if headline.height:
        columns = [*hw, ("metric", "metric_label"), ("P", "prompt_length"), ("N_out", "generation_length"),
                   ("block", "block_length"), ("B", "batch_size"), ("LLaDA", "llada_model"),
                   ("S_parity steps [95% CI]", lambda r: _ci(r, "s_parity_steps", "s_parity_ci_low_steps",
                                                             "s_parity_ci_high_steps", 6)),
                   ("speedup [95% CI]", lambda r: _ci(r, "speedup", "speedup_ci_low", "speedup_ci_high", 3)),
                   ("statement", "statement")]
        tables.append(Table(tuple(c for c, _ in columns), _rows(headline, columns),
                            "Steps to quality parity with LLaMA's greedy output, and the speedup at parity "
                            "(speedup > 1: LLaDA is faster at equal quality)" + _flag(headline), fold=False))
    if rows.height:
        columns = [*hw, ("metric", "metric_label"), ("P", "prompt_length"), ("N_out", "generation_length"),
                   ("block", "block_length"), ("B", "batch_size"), ("LLaDA", "llada_model"), ("reference", "reference"),
                   ("reference quality [95% CI]", lambda r: _ci(r, "reference_value", "reference_ci_low", "reference_ci_high")),
                   ("S_parity steps [95% CI]", lambda r: _ci(r, "s_parity_steps", "s_parity_ci_low_steps",
                                                             "s_parity_ci_high_steps", 6)),
                   ("speedup [95% CI]", lambda r: _ci(r, "speedup", "speedup_ci_low", "speedup_ci_high", 3)),
                   ("statement", "statement")]
        tables.append(Table(tuple(c for c, _ in columns), _rows(rows, columns),
                            "Every parity row: S_parity and the speedup L_e2e(LLaMA) / L_e2e(LLaDA at S_parity) for "
                            "each metric and reference; '>' marks a CI reaching beyond the swept steps" + _flag(rows)))
    calibration = parity.filter(pl.col("row_kind") == "calibration")
    if calibration.height:
        columns = [*hw, ("metric", "metric_label"), ("P", "prompt_length"), ("N_out", "generation_length"),
                   ("scored by", "reference_model"), ("text", "reference"),
                   ("median [95% CI]", lambda r: _ci(r, "reference_value", "reference_ci_low", "reference_ci_high")),
                   ("meaning", "statement")]
        tables.append(Table(tuple(c for c, _ in columns), _rows(calibration, columns),
                            "Calibration: what each metric gives the real continuation and an unrelated passage"))
    return tables


# ------------------------------------------------------------------ 6. roofline


def _roofline(section: Section, inputs: ReportInputs) -> None:
    pred = inputs.predictions.filter(pl.col("predicted_latency_s").is_not_null())
    if not pred.height:
        return
    ratios = (
        pred.with_columns((pl.col("measured_latency_s") / pl.col("predicted_latency_s")).alias("ratio"))
        .group_by(["hardware", "profile", "fidelity", "model"])
        .agg(pl.col("ratio").median().alias("median"), pl.col("ratio").min().alias("min"),
             pl.col("ratio").max().alias("max"), pl.len().alias("runs"))
        .sort(["hardware", "fidelity", "model"])
    )
    section.blocks.append(Table(
        ("hardware", "profile", "fidelity", "model", "measured / predicted (median)", "min", "max", "runs"),
        tuple((h, p, f, m, fmt_float(md), fmt_float(lo), fmt_float(hi), str(n)) for h, p, f, m, md, lo, hi, n in ratios.iter_rows()),
        "How far each model runs from its roofline (1 = at the roof)",
    ))


# ------------------------------------------------------------------ 7. provenance


def _provenance(section: Section, inputs: ReportInputs) -> None:
    table = inputs.table
    env = table.filter(pl.col("hardware") != UNKNOWN_HARDWARE).group_by(
        "hardware", "device_kind", "dtype", "attention", "torch_version", "cuda_version", "driver", "git_commit",
        "image_digest", "hostname", "other_gpu_processes",
    ).len().sort("hardware")
    section.blocks.append(Table(
        ("hardware", "device", "dtype", "attention", "torch", "CUDA", "driver", "git commit", "image digest", "host",
         "shared GPU", "runs"),
        tuple(tuple(fmt_value(v) for v in row) for row in env.iter_rows()),
        "Environments the runs recorded"))
    if inputs.problems:
        section.blocks.append(Paragraph("Verification FAILED: " + "; ".join(inputs.problems), warning=True))
    else:
        section.blocks.append(Paragraph("Verification passed: every run file and the frozen spec match the "
                                        "manifest's sha256 checksums."))
    manifest = inputs.manifest
    if manifest is None:
        section.blocks.append(Paragraph("No readable manifest.json.", warning=True))
        return
    section.blocks.append(Paragraph(f"spec.yaml sha256: {manifest.spec_sha256}"))
    status = dict(table.select("run_id", "status").iter_rows())
    model = dict(table.select("run_id", "model").iter_rows())
    section.blocks.append(Table(
        ("run file", "model", "status", "sha256"),
        tuple((f"runs/{rid}.json", model.get(rid, "–"), status.get(rid, "missing"), digest)
              for rid, digest in sorted(manifest.runs.items())),
        "Manifest checksums"))
