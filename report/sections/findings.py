"""Section 1, Findings: the verdict in full, the answer in one table (each number linked to the table it comes from)
and the pairings."""

from __future__ import annotations

from report.document.content import Paragraph, Table
from report.analysis.history import history_text
from report.answer.pairing.text import pairing_blocks
from report.answer.pairing.pairs import sweep_pairs, table_sides
from report.sections.inputs import Blocks, ReportInputs
from report.sections.quality import judge_note
from report.answer.verdict.full import full_verdict


def build(inputs: ReportInputs, multi: bool) -> Blocks:
    """One table (each number links to the table it comes from) and, in the figures, one figure."""
    findings = inputs.findings
    if not findings.height:
        return Blocks([Paragraph("No finding: no autoregressive and diffusion model both ran successfully at the "
                                 "same lengths.")], [])
    columns = (["hardware"] if multi else []) + ["N_out", "finding", "value"]
    rows, links = [], []
    for r in findings.iter_rows(named=True):
        rows.append(tuple(([r["hardware"]] if multi else []) + [str(r["generation_length"] or "–"), r["finding"], r["value"]]))
        links.append(tuple(([None] if multi else []) + [None, None, r["source"]]))
    t = table_sides(inputs.table)
    caption = (f"The answer: S_parity (the fewest diffusion steps from which {t.dllm} matches the named {t.ar} "
               f"reference at every larger step) with its bootstrap interval over prompts; the speedup L_e2e({t.ar}) / "
               f"L_e2e({t.dllm} at S_parity) at every batch size, conditional on S_parity, with goodput (tokens before "
               f"the first EOS); and B*, the batch size from which {t.ar}'s throughput stays ahead of {t.dllm}'s at "
               "each step count, interpolated between measured batch sizes, beside the roofline's B* for the same "
               "device" + ("; per pair of an AR model and a diffusion model (its peer family where the sweep has it)"
                           if len(sweep_pairs(inputs.table)) > 1 else ""))
    blocks = [*_in_full(inputs), Table(tuple(columns), tuple(rows), caption, fold=False, links=tuple(links)),
              *pairing_blocks(inputs.pairings, multi)]
    judge = judge_note(inputs.quality)
    if judge:
        blocks.append(Paragraph(judge))
    return Blocks(blocks, [])


def _in_full(inputs: ReportInputs) -> list[Paragraph]:
    """The verdict in full (report/answer/verdict/full.py): each pairing's execution and host overhead, the roofline's B*
    and how the runs were taken, which the short verdict above the report leaves here."""
    if not inputs.pairings:
        return []
    context = history_text(inputs.history) if inputs.history else ""
    sentences = full_verdict(inputs.pairings, inputs.unanswered, context, inputs.pair_histories)
    return [Paragraph("The verdict in full:"), *(Paragraph(s) for s in sentences)]
