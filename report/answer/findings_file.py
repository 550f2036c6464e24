"""findings.json: every pairing object (report/answer/pairing/build.py), what the numbers mean, and what a reader must know."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from report.answer.pairing.build import (
    NO_VARIANTS,
    PAIRING_ORDER,
    VANILLA_PAIRING,
    Pairing,
    pairing_meaning,
    pairs_of,
    speedup_meaning,
)
from report.answer.pairing.records import _Record
from report.answer.pairing.pairs import Sides, sides_of


class FindingsFile(_Record):
    """findings.json: every pairing object, what the numbers mean, and what a reader must know."""

    # Only in a report rendered with --allow-unverified, above all else: each verification failure (absent when
    # verified, so the file of a verified sweep is unchanged).
    unverified: list[str] = []
    verdict: list[str] = []  # report/answer/verdict/short.py: the short answer, a bullet a sentence, first in the file
    sweep: str
    pairings: list[str]  # the pairings present
    # Only where a sweep has several pairs, or models beyond its one: each as 'dllm (family) vs ar (family)', in the
    # findings' order.
    pairs: list[str] = []
    # Each pair of the sweep without an answer, with why (every run of one side failed, or nothing to pair with).
    unanswered: list[str] = []
    # How the runs were taken (report/analysis/history.py: commit, worker processes, interleaving, warm-ups): the verdict's
    # last clause; where a sweep has several pairs, or models beyond its one, each pair's own, by its heading as in
    # `pairs`.
    provenance: str = ""
    pair_provenance: dict[str, str] = {}
    # The sessions flagged as disturbed (report.table.sessions.disturbed_text), as the verdict's last bullet names them: ''
    # where none was, absent where none could be judged (no CPU-timed run, or an older artifact).
    disturbed: str | None = None
    meaning: dict[str, str]
    speedup: str
    notes: list[str]
    findings: list[Pairing]


def findings_file(sweep: str, pairings: Sequence[Pairing], unverified: Sequence[str] = (),
                  verdict: Sequence[str] = (), sides: Sides | None = None,
                  missing: Sequence[str] = (), notes: Sequence[str] = (), provenance: str = "",
                  pair_provenance: Mapping[str, str] | None = None, disturbed: str | None = None) -> FindingsFile:
    """findings.json's record. `sides`: how the text names each side (report.answer.pairing.pairs.table_sides of the sweep; by
    default the pairings' own); `missing`: `unanswered` of the sweep; `notes`: what was extrapolated
    (report.analysis.extrapolation), first among the notes; `provenance`: report.analysis.history.history_text."""
    present = [k for k in PAIRING_ORDER if any(p.pairing == k for p in pairings)]
    sides = sides or sides_of([p.pair for p in pairings])
    notes = [*notes, *([NO_VARIANTS] if present == [VANILLA_PAIRING] else [])]
    if any(q.sessions == 1 for p in pairings for q in p.speedups):
        notes.append("an interval over one session's repetitions leaves out the variation between sessions "
                     "(controls.sessions repeats the grid in fresh processes)")
    if any(q.sessions_left_out for p in pairings for q in p.speedups):
        notes.append("sessions_left_out: the planned sessions a speedup could not use (a side's run failed or did not "
                     "run there); its interval, llama_latency_s and llada_latency_s rest on the sessions both sides "
                     "ran, while each side's forward time, share of its roofs and joules per token describe its own "
                     "successful runs")
    if any(p.llada_extrapolated for q in pairings for p in q.speedups):
        notes.append(f"llada_extrapolated: {sides.dllm}'s latency (and its joules per token) timed from its first "
                     "steps and extrapolated to all of them (controls.extrapolation); llada_extrapolation_checked: "
                     "whether a full run at its batch and shape checked it")
    meaning = pairing_meaning(sides, pairs_of(pairings))
    return FindingsFile(verdict=list(verdict), sweep=sweep, pairings=present, provenance=provenance,
                        pair_provenance=dict(pair_provenance or {}), disturbed=disturbed,
                        pairs=[pair.heading for pair in pairs_of(pairings)], unanswered=list(missing),
                        meaning={k: meaning[k] for k in present}, speedup=speedup_meaning(sides), notes=notes,
                        findings=list(pairings), unverified=list(unverified))


def findings_json(record: FindingsFile) -> str:
    """findings.json's text. A field is written only where it says something: `unverified` when verification
    failed, `unanswered` when a pair has no answer, `pairs` and `pair_provenance` when the sweep has several pairs or
    models beyond its one, each finding's families when it has several pairs, `sampler_setting` where a finding has
    one, a speedup's `sessions_left_out` where it left one out, `disturbed` where sessions could be judged."""
    several = len(record.pairs) > 1
    exclude: dict[str, Any] = {} if record.unverified else {"unverified": True}
    if not record.unanswered:
        exclude["unanswered"] = True
    if not (several or record.pair_provenance):
        exclude["pairs"] = True
    if not record.pair_provenance:
        exclude["pair_provenance"] = True
    if record.disturbed is None:
        exclude["disturbed"] = True
    per_finding: dict[int | str, Any] = {}
    for i, finding in enumerate(record.findings):
        drop: dict[str, Any] = dict.fromkeys(
            ({"sampler_setting"} if finding.sampler_setting is None else set()) | (set() if several else {"ar_arch", "dllm_arch"}),
            True)
        whole = {j: {"sessions_left_out": True} for j, q in enumerate(finding.speedups) if not q.sessions_left_out}
        if whole:
            drop["speedups"] = whole
        if drop:
            per_finding[i] = drop
    if per_finding:
        exclude["findings"] = per_finding
    return record.model_dump_json(indent=1, exclude=exclude) + "\n"
