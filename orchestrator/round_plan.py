"""The GPU round's plan: its pieces in order of value per device-second, each predicted on h100-sxm and h200,
packed into the calls of one lease.

A lease (docs/gpu-leases.md) is 900 s of device time, the machine's start (1-3 min) and the 30 s it stays
warm after each call included; one command runs at most 10 minutes. So the round is one call with a 540 s
deadline that answers the open questions first, then, where the lease leaves time, a second of at most 240 s,
with time kept to rerun the shortest piece once.

A campaign piece's seconds are `llada-bench plan`'s (orchestrator/walltime.py: its runs, model loads and a
command's start); a device-test piece's are its files' (TEST_FILES). A piece starts only when its seconds on
the slower profile, x START_MARGIN, fit before the call's deadline: `fits` packs the plan here and decides
at run time (orchestrator/gpu_round.py), on the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.plan import plan_runs, predict_plan
from orchestrator.round_args import FIRST_CALL_S
from orchestrator.walltime import COMPILE_S, SWEEP_START_S
from specs.loader import PACKAGE_ROOT, load_spec

PROFILES = ("h100-sxm", "h200")
LEASE_S = 900.0  # a lease's device time, all of it
MACHINE_START_S = (60.0, 180.0)  # a fresh machine's start, 1-3 minutes
IDLE_S = 30.0  # a machine stays warm, and counted, this long after each call
SECOND_CALL_S = 240.0
# The plan's run costs fell 18% short of campaign-h100's wall time on the H200 and 12% of accel-8b's (raw, with
# the eager warm-ups' cuDNN excess since removed; tests/test_gpu_round.py): x1.25 covers both.
START_MARGIN = 1.25
# A call's own start: the bundle check's imports and the CUDA probe, the imports and CUDA context a sweep
# command's start pays (SWEEP_START_S, measured on the H200).
CALL_START_S = SWEEP_START_S
EXPORT_FILES = 7  # what a call may bring back: one tarball per piece and gpu-round.json

PieceKind = Literal["campaign", "tests"]


@dataclass(frozen=True)
class Piece:
    """A part of the round that runs whole in one call: spec files (campaign) or device-test files (tests)."""

    name: str
    kind: PieceKind
    sources: tuple[str, ...]
    answers: str


PIECES: tuple[Piece, ...] = (
    Piece("llada-b1", "campaign", ("specs/campaign-round-llada-b1.yaml",),
          "LLaDA-8B B = 1 (512 + 256, 64 steps, block 32): vanilla, dual cache, graph, dual-cache-graph"),
    Piece("graph-tests", "tests", ("tests/gpu/test_gpu_graphs.py",),
          "LLaDA's graph steps token-exact on CUDA, nothing captured in a timed step"),
    Piece("llama-compile", "campaign", ("specs/campaign-round-llama-compile.yaml",),
          "LLaMA-3-8B static-compile at B = 1 and 64 against the memory roof"),
    Piece("dream-qwen", "campaign",
          ("specs/campaign-round-dream-qwen.yaml", "specs/campaign-round-dream-qwen-best.yaml"),
          "Dream-7B against Qwen2.5-7B at B = 1, 8, 64, each at its best at B = 1"),
    Piece("device-tests", "tests", ("tests/gpu/test_gpu_device.py", "tests/gpu/test_gpu_roofs.py"),
          "event timing, memory, OOM, no sync in a timed step, bf16 logits, roofs, eager warm-up"),
    Piece("compiled-tests", "tests", ("tests/gpu/test_gpu_compiled.py",),
          "LLaMA's live compiled decode token-exact, nothing recorded in a timed step"),
)  # fmt: skip


@dataclass(frozen=True)
class TestFile:
    """A device-test file as the plan prices it: its tests (held to pytest's collection by
    tests/test_round_plan.py, so the set is fixed), the shapes they compile, and its measured seconds if any."""

    tests: int
    compiles: int = 0
    measured_s: float | None = None

    @property
    def seconds(self) -> float:
        if self.measured_s is not None:
            return self.measured_s
        return self.tests * DEVICE_TEST_MEAN_S + self.compiles * COMPILE_S


# test_gpu_device.py's 8 tests took 25.5 s of pytest time on the H200 (2026-11-24), CUDA's start included. The
# other files are not measured yet: each test at that file's mean (the same kind of work: `small`-preset models,
# a few captures), plus COMPILE_S per shape it compiles (the 8B decode step's measured compile: the `small`
# preset's 4 layers take less). Each test's own time comes back in the piece's junit.xml and gpu-round.json.
DEVICE_TEST_MEAN_S = 25.5 / 8
TEST_FILES: dict[str, TestFile] = {
    "tests/gpu/test_gpu_graphs.py": TestFile(tests=6),
    "tests/gpu/test_gpu_device.py": TestFile(tests=8, measured_s=25.5),
    "tests/gpu/test_gpu_roofs.py": TestFile(tests=2),
    "tests/gpu/test_gpu_compiled.py": TestFile(tests=2, compiles=4),
}


@dataclass(frozen=True)
class Sweep:
    """One spec of a campaign piece as planned: its name (the sweep's folder in the piece's), a command's start
    with the model loads, and each run's seconds, per profile."""

    spec: str
    name: str
    fixed_s: dict[str, float]
    run_s: dict[str, dict[str, float]]

    @property
    def runs(self) -> tuple[str, ...]:
        return tuple(self.run_s[PROFILES[0]])

    def seconds(self, profile: str, done: Iterable[str] = ()) -> float:
        skip = set(done)
        return self.fixed_s[profile] + sum(s for run, s in self.run_s[profile].items() if run not in skip)


def plan_sweep(spec_path: str) -> Sweep:
    spec = load_spec(PACKAGE_ROOT / spec_path)
    planned = plan_runs(spec)
    fixed, runs = {}, {}
    for profile in PROFILES:
        estimate = predict_plan(spec, planned, profile)
        assert estimate is not None
        fixed[profile] = estimate.start_s + sum(estimate.loads.values())
        runs[profile] = dict(estimate.seconds)
    return Sweep(spec_path, spec.name, fixed, runs)


@dataclass(frozen=True)
class PlannedPiece:
    piece: Piece
    sweeps: tuple[Sweep, ...] = ()
    tests: int = 0
    tests_s: float = 0.0

    @property
    def name(self) -> str:
        return self.piece.name

    @property
    def count(self) -> int:
        """Its runs (campaign) or tests."""
        return sum(len(s.runs) for s in self.sweeps) or self.tests

    def seconds(self, profile: str, done: Iterable[str] = ()) -> float:
        """Predicted on `profile`, the runs in `done` left out (a campaign resumes run by run)."""
        if self.piece.kind == "tests":
            return self.tests_s
        done = set(done)
        return sum(sweep.seconds(profile, done) for sweep in self.sweeps)

    def need_s(self, done: Iterable[str] = ()) -> float:
        """What must be left before a deadline for it to start: the slower profile's seconds x START_MARGIN."""
        done = set(done)
        return START_MARGIN * max(self.seconds(p, done) for p in PROFILES)


def plan_piece(piece: Piece) -> PlannedPiece:
    if piece.kind == "campaign":
        return PlannedPiece(piece, sweeps=tuple(plan_sweep(s) for s in piece.sources))
    files = [TEST_FILES[path] for path in piece.sources]
    return PlannedPiece(piece, tests=sum(f.tests for f in files), tests_s=sum(f.seconds for f in files))


def fits(now: float, need_s: float, deadline: float) -> bool:
    """Whether a piece that needs `need_s` may start at `now` before `deadline`: the plan's rule and the runner's."""
    return now + need_s <= deadline


def pack_call(pieces: Sequence[PlannedPiece], budget_s: float) -> tuple[list[PlannedPiece], list[PlannedPiece]]:
    """The pieces a call with this deadline starts, in order (a piece that does not fit leaves room for a later,
    smaller one), and the rest."""
    used, chosen, rest = CALL_START_S, [], []
    for piece in pieces:
        if fits(used, piece.need_s(), budget_s):
            chosen.append(piece)
            used += piece.need_s()
        else:
            rest.append(piece)
    return chosen, rest


@dataclass(frozen=True)
class RoundPlan:
    """The pieces in order; the first call's, the second's (within what the lease leaves) and those left out."""

    pieces: tuple[PlannedPiece, ...]
    budget_s: float
    first: tuple[str, ...]
    second_s: float
    second: tuple[str, ...]
    left: tuple[str, ...] = ()

    def piece(self, name: str) -> PlannedPiece:
        return next(p for p in self.pieces if p.name == name)

    def call_s(self, names: Sequence[str], profile: str | None = None, *, margin: bool = True) -> float:
        """A call's start and its pieces: each piece's need (profile None), or its seconds on `profile`, x
        START_MARGIN unless `margin` is false."""
        pieces = [self.piece(n) for n in names]
        if profile is None:
            return CALL_START_S + sum(p.need_s() for p in pieces)
        return CALL_START_S + (START_MARGIN if margin else 1.0) * sum(p.seconds(profile) for p in pieces)

    @property
    def shortest(self) -> PlannedPiece:
        return min(self.pieces, key=lambda p: p.need_s())

    @property
    def rerun_s(self) -> float:
        """The time kept to rerun the shortest piece once: the idle before it, a call's start, its need."""
        return IDLE_S + CALL_START_S + self.shortest.need_s()

    def lease_s(self, machine_start_s: float) -> float:
        """The lease's device time on the plan: start, call 1, call 2 with the idle before it, the rerun."""
        second = IDLE_S + self.call_s(self.second) if self.second else 0.0
        return machine_start_s + self.call_s(self.first) + second + self.rerun_s

    def second_budget(self, lease_left_s: float) -> float:
        """The second call's deadline when `lease_left_s` is left after the first: at most SECOND_CALL_S, and
        the idle before it and the rerun kept."""
        return min(SECOND_CALL_S, lease_left_s - IDLE_S - self.rerun_s)

    def latest_start(self, second: Sequence[str]) -> float:
        """The longest machine start after which a second call holding `second` still fits the lease."""
        if self.call_s(second) > SECOND_CALL_S:
            return -1.0
        return LEASE_S - self.call_s(self.first) - IDLE_S - self.rerun_s - self.call_s(second)


def plan_round(budget_s: float = FIRST_CALL_S) -> RoundPlan:
    """The round's pieces, predicted, and the calls they pack into when the first call's deadline is `budget_s`
    and the machine took its longest start."""
    pieces = tuple(plan_piece(p) for p in PIECES)
    first, rest = pack_call(pieces, budget_s)
    draft = RoundPlan(pieces, budget_s, tuple(p.name for p in first), 0.0, ())
    second_s = draft.second_budget(LEASE_S - MACHINE_START_S[1] - draft.call_s(draft.first))
    second, left = pack_call(rest, second_s)
    return RoundPlan(pieces, budget_s, draft.first, second_s, tuple(p.name for p in second),
                     tuple(p.name for p in left))  # fmt: skip


def format_plan(plan: RoundPlan) -> str:
    """The plan as `just gpu-round --dry-run` prints it."""
    call_of = {**dict.fromkeys(plan.first, "1"), **dict.fromkeys(plan.second, "2")}
    lines = [f"{'piece':<15} {'call':>4} {'runs/tests':>10}  " + "  ".join(f"{p:>8}" for p in PROFILES) + "  answers"]
    for piece in plan.pieces:
        times = "  ".join(f"{piece.seconds(p):>6.0f} s" for p in PROFILES)
        call = call_of.get(piece.name, "-")
        lines.append(f"{piece.name:<15} {call:>4} {piece.count:>10}  {times}  {piece.piece.answers}")
    for number, (names, deadline) in enumerate(((plan.first, plan.budget_s), (plan.second, plan.second_s)), start=1):
        if not names:
            lines.append(f"call {number}: none (no piece fits its {max(deadline, 0):.0f} s deadline)")
            continue
        predicted = ", ".join(f"{plan.call_s(names, p, margin=False):.0f} s on {p}" for p in PROFILES)
        needed = ", ".join(f"{plan.call_s(names, p):.0f} s" for p in PROFILES)
        lines.append(f"call {number}: {predicted} with the call's {CALL_START_S:.0f} s start; x{START_MARGIN:g} to "
                     f"start each piece: {needed}, of its {deadline:.0f} s deadline")  # fmt: skip
    lines.append(f"  (call 2's deadline: what the lease leaves after call 1 and a {MACHINE_START_S[1]:.0f} s machine "
                 f"start, at most {SECOND_CALL_S:.0f} s)")  # fmt: skip
    for name in plan.left:
        start = plan.latest_start([*plan.second, name])
        when = (f"call 2 holds it when the machine starts in under {start:.0f} s" if start >= MACHINE_START_S[0]
                else "no call of this lease holds it")  # fmt: skip
        lines.append(f"not planned: {name} (needs {plan.piece(name).need_s():.0f} s; {when})")
    low, high = (plan.lease_s(s) for s in MACHINE_START_S)
    lines.append(
        f"lease: machine start {MACHINE_START_S[0]:.0f}-{MACHINE_START_S[1]:.0f} s + the calls + "
        f"{IDLE_S:.0f} s idle after each + a rerun of {plan.shortest.name} ({plan.rerun_s:.0f} s) = "
        f"{low:.0f}-{high:.0f} s of {LEASE_S:.0f} s; after call 1, call 2's --budget is "
        f"min({SECOND_CALL_S:.0f}, budget_left_s - {IDLE_S + plan.rerun_s:.0f})"
    )
    return "\n".join(lines)
