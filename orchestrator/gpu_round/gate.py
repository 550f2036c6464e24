"""Which spec each sweep of a round's campaign piece runs in this call: the graph tests' gate, a variant already
begun, and the derived spec file the sweep is given.

A graph-captured timing counts only where its tokens match eager's, which the round's graph tests check on the
device first. A piece gated on them runs its graph-captured variants only when that piece ended with every test
passed; otherwise the variant without them (orchestrator/gpu_round/sweep_specs.py), whose description says why, so the
call still times the eager and compiled pairings. A sweep that a variant already began (a call cut short, a
machine that went back) goes on in that variant, from the spec file it wrote, whatever the plan or the gate says
now: a sweep never changes its spec halfway.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from orchestrator.gpu_round.plan import FALLBACK_SESSIONS, PlannedPiece, Sweep, plan_sweep
from orchestrator.gpu_round.sweep_specs import Variant, graph_impls, shipped_data, variant_name, variant_text
from orchestrator.gpu_round.state import RoundState
from specs.safefile import atomic_write


def gate_reason(state: RoundState, gate: str | None) -> str | None:
    """None where the gate piece (if any) ended with every test passed; else why the graph rows are left out."""
    if gate is None:
        return None
    record = state.pieces.get(gate)
    if record is None:
        return f"{gate} did not run before it"
    if not record.done:
        return f"{gate} ended {record.status}" + (f" ({record.detail})" if record.detail else "")
    if not record.tests:
        return f"{gate} reported no test (no junit.xml)"
    bad = {name.rsplit("::", 1)[-1]: t.outcome for name, t in record.tests.items() if t.outcome != "passed"}
    if bad:
        listed = ", ".join(f"{name} {outcome}" for name, outcome in sorted(bad.items()))
        return f"{gate}: {len(bad)} of {len(record.tests)} tests did not pass ({listed})"
    return None


def _begun(folder: Path, name: str) -> bool:
    runs = folder / name / "runs"
    return runs.is_dir() and any(runs.glob("*.json"))


def _candidates(sweep: Sweep) -> list[Variant]:
    """Every variant of the sweep's spec a call of this round may have begun: the plan's sessions or the
    fallback's, with or without the graph rows."""
    sessions = {sweep.variant.sessions, None, FALLBACK_SESSIONS}
    return [dataclasses.replace(sweep.variant, sessions=s, graphs=g, reason="") for s in sessions for g in (True, False)]


def sweep_in_call(sweep: Sweep, folder: Path, reason: str | None) -> Sweep:
    """The sweep as this call runs it: a variant begun in `folder` goes on; else the plan's, its graph rows left
    out for `reason` (where it has any)."""
    for variant in _candidates(sweep):
        if _begun(folder, variant_name(sweep.path, variant)):
            return sweep if variant == dataclasses.replace(sweep.variant, reason="") else plan_sweep(sweep.path, variant)
    if reason is not None and graph_impls(shipped_data(sweep.path)):
        return plan_sweep(sweep.path, dataclasses.replace(sweep.variant, graphs=False, reason=reason))
    return sweep


def piece_in_call(planned: PlannedPiece, folder: Path, state: RoundState) -> PlannedPiece:
    """The piece as this call runs it (`sweep_in_call` for each of its sweeps)."""
    if not planned.sweeps:
        return planned
    reason = gate_reason(state, planned.piece.gate)
    return dataclasses.replace(planned, sweeps=tuple(sweep_in_call(s, folder, reason) for s in planned.sweeps))


def spec_argument(sweep: Sweep, folder: Path) -> str:
    """What the sweep command is given: the shipped spec's path, or the variant's file in the piece folder,
    written once (a begun variant keeps the file it began with)."""
    if sweep.variant.shipped:
        return sweep.path
    path = folder / f"{sweep.name}.yaml"
    if not path.is_file():
        atomic_write(path, variant_text(sweep.path, sweep.variant).encode("utf-8"))
    return str(path)
