"""Section 10, Environment and provenance: how the runs were taken (commit, worker processes, interleaving,
warm-ups: report/analysis/history.py), the environments they recorded, the verification, any edit of the frozen spec after
its runs, and the manifest's checksums."""

from __future__ import annotations

import polars as pl

from report.document.content import Block, Paragraph, Table, fmt_value
from report.analysis.history import history_text
from report.sections.inputs import Blocks, ReportInputs
from report.table.flat import UNKNOWN_HARDWARE


def build(inputs: ReportInputs, multi: bool) -> Blocks:
    table = inputs.table
    env = table.filter(pl.col("hardware") != UNKNOWN_HARDWARE).group_by(
        "hardware", "device_kind", "dtype", "attention", "torch_version", "cuda_version", "driver", "git_commit",
        "image_digest", "hostname", "other_gpu_processes",
    ).len().sort("hardware")
    blocks: list[Block] = [Paragraph(f"How these runs were taken: {history_text(inputs.history)}.",
                                     warning=inputs.history.interleaved is False or bool(inputs.history.cold))
                           ] if inputs.history else []
    blocks.append(Table(
        ("hardware", "device", "dtype", "attention", "torch", "CUDA", "driver", "git commit", "image digest", "host",
         "shared GPU", "runs"),
        tuple(tuple(fmt_value(v) for v in row) for row in env.iter_rows()),
        "Environments the runs recorded"))
    if inputs.problems:
        blocks.append(Paragraph("Verification FAILED: " + "; ".join(inputs.problems), warning=True))
    else:
        blocks.append(Paragraph("Verification passed: every run file and the frozen spec match the "
                                "manifest's sha256 checksums."))
    if inputs.spec is not None and inputs.spec.amendments:
        blocks.append(Paragraph(
            "spec.yaml was edited after its runs and frozen again (the manifest holds the new sha256, "
            "checksums.jsonl every one it had); its amendments say what changed and why: "
            + " ".join(inputs.spec.amendments), warning=True))
    manifest = inputs.manifest
    if manifest is None:
        blocks.append(Paragraph("No readable manifest.json.", warning=True))
        return Blocks([], blocks)
    blocks.append(Paragraph(f"spec.yaml sha256: {manifest.spec_sha256}"))
    runs = runs_read(table)
    blocks.append(Table(
        ("run file", "model", "session", "status", "sha256"),
        tuple((f"runs/{rid}.json", *runs.get(rid, ("–", "–", _not_read(rid, inputs.problems))), digest)
              for rid, digest in sorted(manifest.runs.items())),
        "Manifest checksums: every run file with its model, session and status (the other tables pool a "
        "configuration's sessions into one row)"))
    return Blocks([], blocks)


def runs_read(table: pl.DataFrame) -> dict[str, tuple[str, str, str]]:
    """(model, session, status) of every run the report read, by run id: each run of a row that pools several
    sessions (report/table/sessions.py) under its own id and session, counted from 1."""
    out: dict[str, tuple[str, str, str]] = {}
    for row in table.select("model", "status", "run_ids", "session_ids", "planned_sessions").iter_rows(named=True):
        for run_id, session in zip(row["run_ids"], row["session_ids"]):
            out[run_id] = (row["model"], f"{session + 1} of {row['planned_sessions'] or 1}", row["status"])
    return out


def _not_read(run_id: str, problems: tuple[str, ...]) -> str:
    """Why a manifest's run is in no row: what verification said of its file, else that it was not read."""
    said = [p.split(": ", 1)[1] for p in problems if f"runs/{run_id}.json: " in p]
    return f"not read: {said[0]}" if said else "not read"
