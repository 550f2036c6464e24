"""One GPU round as one command (`just gpu-round`, container/gpu-round.sh): the device tests, then the decode
profile, then specs/campaign-graphs.yaml, in resumable calls of at most 9 minutes, and gpu-round.json with
every goal met or missed (orchestrator/round_goals.py).

A lease comes as commands of at most 10 minutes on a machine that may be fresh each time, so the round keeps
its state in its own folder (state.json beside the findings, the logs and the campaign's sweep directory):
carried to the next call, it resumes at the first piece not done. A call starts a piece only while the piece's
predicted time fits in what is left of the call's budget (9 minutes by default); the campaign, split by the
sweep's own `--stop-after`, resumes run by run. After every call gpu-round.json holds the goals as far as
the artifacts go.

`plan_round` predicts each piece on a profile with orchestrator/walltime.py, the costs `llada-bench plan`
uses (held within 15% by the H200 sweeps, tests/test_gpu_round.py), and packs the pieces into calls the way
the runner will: `--dry-run` prints them on h100-sxm and h200 and refuses a round above 30 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.plan import hardware_profile, plan_runs, predict_plan, predicted_not_to_fit
from orchestrator.round_goals import Goal, evaluate_goals, read_findings, read_results
from orchestrator.walltime import (
    COMPILE_S,
    SWEEP_START_S,
    SYNTHETIC_BUILD_BYTES_PER_S,
    attained,
    load_seconds,
)
from specs.loader import PACKAGE_ROOT, load_spec
from specs.options import positive_number
from specs.safefile import MIB, UnsafeFileError, atomic_write, lstat_or_none, read_text
from specs.schema import ExperimentSpec

CAMPAIGN_SPEC = "specs/campaign-graphs.yaml"
PROFILES = ("h100-sxm", "h200")
CALL_LIMIT_S = 540.0  # 9 minutes: a lease's command runs 10 at most, and a piece may overrun its prediction
ROUND_LIMIT_S = 1800.0  # the device time of one lease
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_AGAIN = 0, 1, 2, 3

# The device tests (container/gpu-tests.sh): 8 tests took 25.5 s of pytest time on the H200 (2026-11-24); the
# graph and roofs tests added since (the 8B LLaMA's eager warm-up among them) are unmeasured, so the plan takes
# the bound the recipe documents: under 5 minutes.
DEVICE_TESTS_S = 300.0

# The decode profile (tests/gpu/profile_decode.py): LLaMA 8B, P 512, N 256, both decode attentions at each batch;
# 16 steps timed and 16 profiled in a second generation after a first that compiles and records the graphs.
PROFILE_BATCHES = (1, 64)
PROFILE_ARGS = ("--batch", *map(str, PROFILE_BATCHES), "--prompt", "512", "--new", "256", "--steps", "16")
PROFILE_ATTENTIONS = 2
# The profiler's start and its kernel table per profile: an assumption (not measured), a few seconds each.
PROFILER_S = 5.0

PieceKind = Literal["tests", "profile", "campaign"]


@dataclass(frozen=True)
class Piece:
    """A part of the round that one call runs whole: its name, kind, predicted seconds per profile, and (campaign
    pieces) the runs it is predicted to hold."""

    name: str
    kind: PieceKind
    predicted_s: dict[str, float]
    runs: tuple[str, ...] = ()


@dataclass(frozen=True)
class RoundPlan:
    """The pieces in order, and the calls they are packed into on the split profile."""

    pieces: tuple[Piece, ...]
    calls: tuple[tuple[str, ...], ...]
    split_profile: str
    profiles: tuple[str, ...] = PROFILES
    limit_s: float = ROUND_LIMIT_S

    def total_s(self, profile: str) -> float:
        return sum(piece.predicted_s[profile] for piece in self.pieces)

    def fits(self) -> bool:
        return all(self.total_s(p) <= self.limit_s for p in self.profiles) and all(
            sum(self.piece(n).predicted_s[self.split_profile] for n in call) <= CALL_LIMIT_S for call in self.calls
        )

    def piece(self, name: str) -> Piece:
        return next(p for p in self.pieces if p.name == name)


def profile_seconds(profile: str) -> float:
    """The decode profile on `profile`: one process start, the model's build, then per batch and attention one
    compilation, two generations at the attained roofs (the second only partly run) and the profiler."""
    from roofline.predict import predict
    from specs.registry import preset_shape

    hardware = hardware_profile(profile)
    shape = preset_shape("llama", "8b")
    build_s = 2 * shape.parameter_count() / SYNTHETIC_BUILD_BYTES_PER_S  # bf16 weights
    total = SWEEP_START_S + build_s
    for batch in PROFILE_BATCHES:
        generation = predict("llama", shape, batch=batch, prompt_len=512, gen_len=256, hardware=attained(hardware),
                             compiled_decode=True)  # fmt: skip
        total += PROFILE_ATTENTIONS * (COMPILE_S + 2 * generation.latency_s + PROFILER_S)
    return total


def campaign_pieces(spec: ExperimentSpec, profiles: Sequence[str], split_profile: str, budget_s: float) -> list[Piece]:
    """The campaign split as the sweep's `--stop-after budget_s` splits it: in plan order, a run starts while its
    predicted end on the spec's profile lies within the budget. Each piece pays a command's start and the loads
    of the models it uses (a fresh process loads them again)."""
    planned = plan_runs(spec)
    skipped = predicted_not_to_fit(spec, planned)
    todo = [run for run in planned if run.run_id not in skipped]
    estimates = {p: predict_plan(spec, planned, p) for p in (*profiles, split_profile)}
    split = estimates[split_profile]
    assert split is not None
    groups: list[list[str]] = []
    used = budget_s  # forces a first group
    for run in todo:
        seconds = split.seconds[run.run_id]
        if used + seconds > budget_s and (not groups or groups[-1]):
            groups.append([])
            used = 0.0
        groups[-1].append(run.run_id)
        used += seconds
    by_id = {run.run_id: run for run in todo}
    pieces = []
    for index, ids in enumerate(groups, start=1):
        predicted = {}
        for profile in profiles:
            estimate = estimates[profile]
            assert estimate is not None
            hardware = hardware_profile(profile)
            models = {by_id[i].config.model.name: by_id[i].config for i in ids}
            predicted[profile] = (SWEEP_START_S + sum(estimate.seconds[i] for i in ids)
                                  + sum(load_seconds(c, hardware) for c in models.values()))  # fmt: skip
        pieces.append(Piece(f"campaign-{index}", "campaign", predicted, tuple(ids)))
    return pieces


def plan_round(spec_path: str | Path = CAMPAIGN_SPEC, profiles: Sequence[str] = PROFILES) -> RoundPlan:
    """The round's pieces, their predicted seconds on each profile, and the calls they pack into."""
    spec = load_spec(PACKAGE_ROOT / spec_path if not Path(spec_path).is_absolute() else spec_path)
    split_profile = spec.controls.hardware.profile or profiles[0]
    every = tuple(dict.fromkeys((*profiles, split_profile)))
    pieces = [
        Piece("device-tests", "tests", dict.fromkeys(every, DEVICE_TESTS_S)),
        Piece("decode-profile", "profile", {p: profile_seconds(p) for p in every}),
        *campaign_pieces(spec, every, split_profile, CALL_LIMIT_S - SWEEP_START_S),
    ]
    calls: list[list[str]] = []
    used = CALL_LIMIT_S
    for piece in pieces:
        # A campaign piece is a call of its own: the sweep's budget is the whole call's, as the runner gives it.
        if piece.kind == "campaign" or used + piece.predicted_s[split_profile] > CALL_LIMIT_S:
            calls.append([])
            used = 0.0
        calls[-1].append(piece.name)
        used += piece.predicted_s[split_profile]
    return RoundPlan(tuple(pieces), tuple(tuple(c) for c in calls), split_profile, tuple(profiles))


def format_plan(plan: RoundPlan) -> str:
    """The pieces, the calls and the totals, as `just gpu-round --dry-run` prints them."""
    lines = [f"{'call':>4}  {'piece':<16} {'runs':>4}  " + "  ".join(f"{p:>9}" for p in plan.profiles)]
    for number, call in enumerate(plan.calls, start=1):
        for name in call:
            piece = plan.piece(name)
            times = "  ".join(f"{piece.predicted_s[p]:>8.0f}s" for p in plan.profiles)
            lines.append(f"{number:>4}  {name:<16} {len(piece.runs) or '':>4}  {times}")
    totals = "  ".join(f"{plan.total_s(p) / 60:>6.1f}min" for p in plan.profiles)
    lines.append(f"{'':>4}  {'round':<16} {'':>4}  {totals}")
    verdict = "fits" if plan.fits() else "does NOT fit"
    lines.append(
        f"{len(plan.calls)} calls of at most {CALL_LIMIT_S / 60:g} min (split on {plan.split_profile}); the round "
        f"{verdict} in {plan.limit_s / 60:g} min of device time on {', '.join(plan.profiles)}"
    )
    return "\n".join(lines)


# ---------------------------------------------------------------- running a call


class PieceState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["done", "started"] = "started"
    exit: int | None = None
    wall_s: float = 0.0
    calls: int = 0


class RoundState(BaseModel):
    """state.json: what each piece has done, carried with the round folder from call to call."""

    model_config = ConfigDict(extra="forbid")

    spec: str = CAMPAIGN_SPEC
    pieces: dict[str, PieceState] = Field(default_factory=dict)
    calls: int = 0

    def done(self, kind: str) -> bool:
        return kind in self.pieces and self.pieces[kind].status == "done"


STATE_MAX_BYTES = MIB  # a few pieces' status and timings


@dataclass(frozen=True)
class RoundLayout:
    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def findings(self) -> Path:
        return self.root / "gpu-findings.jsonl"

    @property
    def sweep(self) -> Path:
        return self.root / "campaign-graphs"

    @property
    def goals(self) -> Path:
        return self.root / "gpu-round.json"

    def load(self) -> RoundState:
        """The round so far (a fresh one before its first call); a special file or link here is refused."""
        if lstat_or_none(self.state) is None:
            return RoundState()
        return RoundState.model_validate_json(read_text(self.state, STATE_MAX_BYTES))

    def save(self, state: RoundState) -> None:
        atomic_write(self.state, state.model_dump_json(indent=1).encode("utf-8"))


def write_goals(layout: RoundLayout, state: RoundState) -> list[Goal]:
    """gpu-round.json from the artifacts the round holds now."""
    goals = evaluate_goals(read_results(layout.sweep), read_findings(layout.findings))
    document = {
        "goals": [g.model_dump() for g in goals],
        "pieces": {k: v.model_dump() for k, v in state.pieces.items()},
        "calls": state.calls,
        "complete": all(state.done(k) for k in ("tests", "profile", "campaign")),
    }
    atomic_write(layout.goals, (json.dumps(document, indent=1) + "\n").encode("utf-8"))
    return goals


def _command(kind: PieceKind, layout: RoundLayout, python: str, bundle: str | None, budget_s: float) -> list[str]:
    with_bundle = ["--bundle", bundle] if bundle else []
    if kind == "tests":
        return ["container/gpu-tests.sh", *with_bundle, "-q", "-rA"]
    if kind == "profile":
        return [python, "-m", "tests.gpu.profile_decode", *PROFILE_ARGS]
    return ["container/gpu-campaign.sh", CAMPAIGN_SPEC, *with_bundle, "--out", str(layout.sweep),
            "--tarball", str(layout.sweep) + ".tar.gz", "--budget", f"{max(budget_s, 1.0):.0f}"]  # fmt: skip


def run_call(layout: RoundLayout, *, bundle: str | None, budget_s: float = CALL_LIMIT_S, python: str = sys.executable,
             plan: RoundPlan | None = None) -> int:  # fmt: skip
    """Run the next pieces of the round while they fit in `budget_s`; 0 when the round is complete, 3 when a
    further call must continue it, 1 when a piece could not run."""
    layout.root.mkdir(parents=True, exist_ok=True)
    state = layout.load()
    state.calls += 1
    plan = plan or plan_round()
    predicted = {"tests": DEVICE_TESTS_S, "profile": plan.piece("decode-profile").predicted_s[plan.split_profile]}
    started = time.monotonic()
    env = {**os.environ, "LLADA_GPU_FINDINGS": str(layout.findings.resolve()), "PYTHON": python}
    status, ran = EXIT_OK, False
    for kind in ("tests", "profile", "campaign"):
        if state.done(kind):
            continue
        left = budget_s - (time.monotonic() - started)
        # The campaign opens a call (the plan packs it so: its sweep's budget is the call's); the others start
        # while their prediction fits in what is left.
        if (kind == "campaign" and ran) or (kind in predicted and predicted[kind] > left):
            status = EXIT_AGAIN
            break
        piece = state.pieces.setdefault(kind, PieceState())
        piece.calls += 1
        layout.save(state)
        began = time.monotonic()
        with open(layout.root / f"{kind}.log", "a", encoding="utf-8") as log:
            log.write(f"--- call {state.calls}\n")
            log.flush()
            # The sweep's budget starts after its imports: what is left less a command's start.
            code = subprocess.call(_command(kind, layout, python, bundle, left - SWEEP_START_S),
                                   cwd=PACKAGE_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        piece.wall_s += time.monotonic() - began
        piece.exit, ran = code, True
        if kind == "campaign" and code == EXIT_AGAIN:
            status = EXIT_AGAIN  # stopped at its budget: the next call resumes the sweep
            break
        if kind == "campaign" and code not in (EXIT_OK, EXIT_FAILED):
            status = EXIT_FAILED  # the sweep could not run at all (usage, lock, unwritable): say so, stop
            break
        piece.status = "done"  # tests that fail, a profile that crashed: recorded, and the round goes on
    layout.save(state)
    goals = write_goals(layout, state)
    for goal in goals:
        mark = {True: "met", False: "MISSED", None: "not measured"}[goal.met]
        figure = "-" if goal.figure is None else f"{goal.figure:.3g} {goal.unit}"
        print(f"{goal.name}: {mark} ({figure}; {goal.target})")
    print(f"round state in {layout.state}; goals in {layout.goals}")
    if status == EXIT_AGAIN:
        print("the round goes on: run the same command again (with this folder carried)", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-round", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the pieces and their predicted times; run nothing")
    parser.add_argument("--round", default="artifacts/gpu-round", help="the round folder (state, findings, logs, sweep)")
    parser.add_argument("--bundle", help="the offline bundle (container/gpu-bundle.sh)")
    parser.add_argument("--budget", type=positive_number, default=CALL_LIMIT_S, help="seconds this call may take (default 540)")
    parser.add_argument("--goals", action="store_true", help="only rewrite gpu-round.json from the round folder")
    args = parser.parse_args(argv)
    if args.dry_run:
        plan = plan_round()
        print(format_plan(plan))
        return EXIT_OK if plan.fits() else EXIT_FAILED
    layout = RoundLayout(Path(args.round).resolve())
    try:
        if args.goals:
            write_goals(layout, layout.load())
            print(layout.goals.read_text(encoding="utf-8"))
            return EXIT_OK
        return run_call(layout, bundle=args.bundle, budget_s=args.budget)
    except UnsafeFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
