"""gpu-round.json: each goal of orchestrator/gpu_round/goals.py scored on the artifacts of the pieces that answer it
(a compiled Qwen2.5 in another piece never stands in for LLaMA), beside each piece's record and its plan. Written
by every call on the device and by `just gpu-round --goals` on a CPU from what came back."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.gpu_round.goals import evaluate_goals, piece_results, read_findings
from orchestrator.gpu_round.plan import PROFILES, RoundPlan
from orchestrator.gpu_round.state import RoundLayout, RoundState
from specs.safefile import atomic_write

# The pieces whose artifacts answer each goal of orchestrator/gpu_round/goals.py.
GOAL_PIECES: dict[str, tuple[str, ...]] = {
    "llama graph decode B = 1": ("headline",),
    "llama graph decode B = 64": ("headline-b64",),
    "llada graph step host overhead": ("graph-tests",),
    "dual cache over vanilla B = 1": ("headline",),
    "roofline a bound": ("headline", "headline-b8", "headline-b64", "headline-eager-b8", "dream-qwen"),
    "headline over sessions": ("headline",),
}


def goals_document(layout: RoundLayout, plan: RoundPlan, state: RoundState, *, scored: bool = True) -> dict[str, Any]:
    """gpu-round.json: each goal (with the piece that answers it) from the artifacts the round holds, and each
    piece's record beside its plan."""
    goals = []
    if scored:
        folder = layout.piece
        results = {p.name: piece_results(folder(p.name)) for p in plan.pieces}
        findings = {p.name: read_findings(folder(p.name) / "findings.jsonl") for p in plan.pieces}
        for name, pieces in GOAL_PIECES.items():
            every = evaluate_goals([r for p in pieces for r in results.get(p, [])],
                                   [f for p in pieces for f in findings.get(p, [])])
            goal = next(g for g in every if g.name == name)
            goals.append({**goal.model_dump(), "piece": ", ".join(pieces)})
    pieces = {}
    for planned in plan.pieces:
        record = state.pieces.get(planned.name)
        pieces[planned.name] = {
            "answers": planned.piece.answers,
            "planned_s": {p: round(planned.seconds(p), 1) for p in PROFILES},
            **(record.model_dump() if record else {"status": "not started"}),
        }  # fmt: skip
    return {
        "complete": all(state.done(p.name) for p in plan.pieces),
        "calls": state.calls,
        "device": state.device,
        "goals": goals,
        "pieces": pieces,
    }


def write_goals(layout: RoundLayout, plan: RoundPlan, state: RoundState, *, scored: bool = True) -> dict[str, Any]:
    document = goals_document(layout, plan, state, scored=scored)
    atomic_write(layout.goals, (json.dumps(document, indent=1) + "\n").encode("utf-8"))
    return document


def print_goals(layout: RoundLayout, document: dict[str, Any]) -> None:
    for goal in document["goals"]:
        mark = {True: "met", False: "MISSED", None: "not measured"}[goal["met"]]
        figure = "-" if goal["figure"] is None else f"{goal['figure']:.3g} {goal['unit']}"
        print(f"{goal['name']}: {mark} ({figure}; {goal['target']}; {goal['piece']})")
    waiting = [n for n, p in document["pieces"].items() if p["status"] != "done"]
    print(f"round state in {layout.state}; goals in {layout.goals}"
          + (f"; still to run: {', '.join(waiting)}" if waiting else "; the round is complete"))  # fmt: skip
