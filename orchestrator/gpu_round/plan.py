"""The GPU round's plan: its pieces in order of value per device-second, each priced on h100-sxm and h200, packed
into the calls of one lease, and what waits for a later one.

A lease (docs/gpu-leases.md) is 900 s of device time, the machine's start (1-3 min) and the 30 s it stays
warm after each call included; one command runs at most 10 minutes. So the round's first call, with a 540 s
deadline, measures the headline: the graph tests first (a graph-captured timing counts only where its tokens match
eager's), then the 8B answer at batch 1 in three interleaved sessions. A second call of at most 240 s takes
what the lease leaves, with time kept to rerun the shortest piece once; the rest waits for a next lease, in the
order printed.

A campaign piece's seconds are its runs' (orchestrator/gpu_round/times.py: measured on the H200 where the committed
sweeps ran the configuration, the roofline's elsewhere), each session's fresh start and model builds, and a
command's start; a device-test piece's are its files' (TEST_FILES). A piece starts only when its seconds on the
slower profile, x START_MARGIN, fit before the call's deadline: `fits` packs the plan here and decides at run time
(orchestrator/gpu_round/run.py), on the clock. Where the first call cannot hold a piece's sessions, the plan takes
it with FALLBACK_SESSIONS (a derived spec, orchestrator/gpu_round/sweep_specs.py) and says why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from orchestrator.plan import PlannedRun, plan_runs, predict_plan
from orchestrator.gpu_round.args import FIRST_CALL_S
from orchestrator.gpu_round.sweep_specs import SHIPPED, Variant, variant_spec
from orchestrator.gpu_round.times import PROFILES, RunCost, fixed_seconds, run_costs
from orchestrator.walltime import COMPILE_S, SWEEP_START_S
from specs.loader import PACKAGE_ROOT, load_spec
from specs.schema import ExperimentSpec

__all__ = ["PROFILES"]
LEASE_S = 900.0  # a lease's device time, all of it
MACHINE_START_S = (60.0, 180.0)  # a fresh machine's start, 1-3 minutes
IDLE_S = 30.0  # a machine stays warm, and counted, this long after each call
SECOND_CALL_S = 240.0
# The plan's run costs fell 18% short of campaign-h100's wall time on the H200 and 12% of accel-8b's (raw, with
# the eager warm-ups' cuDNN excess since removed; tests/test_round_goals.py): x1.25 covers both.
START_MARGIN = 1.25
# A call's own start: the bundle check's imports and the CUDA probe, the imports and CUDA context a sweep
# command's start pays (SWEEP_START_S, measured on the H200).
CALL_START_S = SWEEP_START_S
EXPORT_FILES = 8  # what a call may bring back (the device tool's limit): one tarball per piece and gpu-round.json
FALLBACK_SESSIONS = 2  # the fewest sessions a t interval over sessions has (one degree of freedom)

PieceKind = Literal["campaign", "tests"]


@dataclass(frozen=True)
class Piece:
    """A part of the round that runs whole in one call: spec files (campaign) or device-test files (tests).
    `gate`: the tests piece that admits its graph-captured runs (left out, with why, unless every test passed);
    `fallback`: whether the plan may run it with FALLBACK_SESSIONS when the first call cannot hold its sessions;
    `headline`: its sweeps go into results/<gpu>/headline/ (orchestrator/gpu_round/results.py)."""

    name: str
    kind: PieceKind
    sources: tuple[str, ...]
    answers: str
    gate: str | None = None
    fallback: bool = False
    headline: bool = False


GRAPH_TESTS = "graph-tests"
PIECES: tuple[Piece, ...] = (
    Piece(GRAPH_TESTS, "tests", ("tests/gpu/test_gpu_graphs.py",),
          "LLaDA's graph steps token-exact on CUDA, nothing captured in a timed step: the gate of every graph row"),
    Piece("headline", "campaign", ("specs/campaign-headline.yaml",),
          "the 8B answer at B = 1: compiled LLaMA against graph-captured LLaDA (K = 64, 256), eager against eager",
          gate=GRAPH_TESTS, fallback=True, headline=True),
    Piece("headline-b8", "campaign", ("specs/campaign-headline-b8.yaml",),
          "the fast pairing at B = 8: with B = 1, its crossing B*", gate=GRAPH_TESTS, headline=True),
    Piece("headline-b64", "campaign", ("specs/campaign-headline-b64.yaml",),
          "one full B = 64 point of each side, against the 4-step extrapolation campaign-h100 used", gate=GRAPH_TESTS,
          headline=True),
    Piece("headline-eager-b8", "campaign", ("specs/campaign-headline-eager-b8.yaml",),
          "eager against eager at B = 8 (the host-overhead pairing)", headline=True),
    Piece("dream-qwen", "campaign",
          ("specs/campaign-round-dream-qwen.yaml", "specs/campaign-round-dream-qwen-best.yaml"),
          "Dream-7B against Qwen2.5-7B at B = 1, 8, 64, each at its best at B = 1"),
    Piece("device-tests", "tests",
          ("tests/gpu/test_gpu_device.py", "tests/gpu/test_gpu_roofs.py", "tests/gpu/test_gpu_compiled.py"),
          "event timing, memory, OOM, no sync, bf16 logits, roofs, eager warm-up; LLaMA's live compiled decode"),
)  # fmt: skip
# Asked for and not in any piece, with why: the dry run prints them after the pieces.
NOT_PLANNED = (
    ("the fast pairing at B = 2 and 4: two more compiled shapes (a cold compile and two warm ones each) over 3 "
     "sessions; B = 1 and 8 bracket the crossing, so fewer batches, not fewer sessions"),
    "K = N_out (256 steps) beyond dual-cache-graph at B = 1: vanilla or graph LLaDA at K = 256 costs 4x its K = 64",
)


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
    """One spec of a campaign piece as planned: the shipped file and the variant run (orchestrator/gpu_round/sweep_specs.py),
    its runs in order, and every session's model builds per profile."""

    path: str
    variant: Variant
    spec: ExperimentSpec
    planned: tuple[PlannedRun, ...]
    loads_s: dict[str, float]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def runs(self) -> tuple[str, ...]:
        return tuple(r.run_id for r in self.planned)

    @cached_property
    def all_costs(self) -> tuple[RunCost, ...]:
        return tuple(run_costs(self.planned))

    def costs(self, done: Iterable[str] = ()) -> list[RunCost]:
        """The runs still to do, priced as this call would run them."""
        done = set(done)
        return list(self.all_costs) if not done else run_costs(self.planned, done)

    def seconds(self, profile: str, done: Iterable[str] = ()) -> float:
        costs = self.costs(done)
        sessions = len({c.session for c in costs})
        loads = self.loads_s[profile] * sessions / self.spec.controls.sessions
        return fixed_seconds(sessions, loads) + sum(c.seconds[profile] for c in costs)


def plan_sweep(path: str, variant: Variant = SHIPPED) -> Sweep:
    spec = load_spec(PACKAGE_ROOT / path) if variant.shipped else variant_spec(path, variant)
    planned = plan_runs(spec)
    loads = {}
    for profile in PROFILES:
        estimate = predict_plan(spec, planned, profile)
        loads[profile] = sum(estimate.loads.values()) if estimate is not None else 0.0
    return Sweep(path, variant, spec, tuple(planned), loads)


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

    def with_variant(self, variant: Variant) -> PlannedPiece:
        """The same piece, each of its sweeps the given variant."""
        return dataclasses.replace(self, sweeps=tuple(plan_sweep(s.path, variant) for s in self.sweeps))


def plan_piece(piece: Piece, variant: Variant = SHIPPED) -> PlannedPiece:
    if piece.kind == "campaign":
        return PlannedPiece(piece, sweeps=tuple(plan_sweep(s, variant) for s in piece.sources))
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
    """The pieces in order; the first call's, the second's (within what the lease leaves) and those left out, and
    why a piece runs fewer sessions than its spec's (`notes`)."""

    pieces: tuple[PlannedPiece, ...]
    budget_s: float
    first: tuple[str, ...]
    second_s: float
    second: tuple[str, ...]
    left: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

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


def _with_fallback(pieces: list[PlannedPiece], budget_s: float) -> tuple[list[PlannedPiece], list[str]]:
    """Each fallback piece the first call cannot hold with its spec's sessions, planned with FALLBACK_SESSIONS
    where that fits, with why."""
    notes = []
    for i, planned in enumerate(pieces):
        first = {p.name for p in pack_call(pieces, budget_s)[0]}
        sessions = max((s.spec.controls.sessions for s in planned.sweeps), default=1)
        if not planned.piece.fallback or planned.name in first or sessions <= FALLBACK_SESSIONS:
            continue
        fewer = planned.with_variant(Variant(sessions=FALLBACK_SESSIONS))
        trial = [*pieces[:i], fewer, *pieces[i + 1:]]
        if fewer.name not in {p.name for p in pack_call(trial, budget_s)[0]}:
            notes.append(f"{planned.name}: {sessions} sessions need {planned.need_s():.0f} s and even "
                         f"{FALLBACK_SESSIONS} need {fewer.need_s():.0f} s: the first call cannot hold it")
            continue
        pieces[i] = fewer
        notes.append(f"{planned.name}: {sessions} sessions need {planned.need_s():.0f} s, more than the first call's "
                     f"{budget_s:.0f} s deadline leaves, so it runs {FALLBACK_SESSIONS} ({fewer.need_s():.0f} s); "
                     f"{t_width_note(FALLBACK_SESSIONS, sessions)}")  # fmt: skip
    return pieces, notes


# Student's t at 97.5% (a two-sided 95% interval) by degrees of freedom: the table's values.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}


def t_width_note(fewer: int, planned: int) -> str:
    """How much wider a 95% t interval over `fewer` sessions is than over `planned`, at the same spread between
    sessions (its half-width is t x s / sqrt(n))."""
    ratio = (T_975[fewer - 1] / fewer**0.5) / (T_975[planned - 1] / planned**0.5)
    return (f"its 95% t interval over {fewer} sessions takes t = {T_975[fewer - 1]:g} ({fewer - 1} degree"
            f"{'s' if fewer > 2 else ''} of freedom) against {T_975[planned - 1]:g} over {planned}: {ratio:.1f}x as "
            "wide for the same spread between sessions")


def plan_round(budget_s: float = FIRST_CALL_S, pieces: Sequence[Piece] = PIECES) -> RoundPlan:
    """The round's pieces, priced, and the calls they pack into when the first call's deadline is `budget_s`
    and the machine took its longest start."""
    planned, notes = _with_fallback([plan_piece(p) for p in pieces], budget_s)
    first, rest = pack_call(planned, budget_s)
    draft = RoundPlan(tuple(planned), budget_s, tuple(p.name for p in first), 0.0, ())
    second_s = draft.second_budget(LEASE_S - MACHINE_START_S[1] - draft.call_s(draft.first))
    second, left = pack_call(rest, second_s)
    return RoundPlan(tuple(planned), budget_s, draft.first, second_s, tuple(p.name for p in second),
                     tuple(p.name for p in left), tuple(notes))  # fmt: skip
