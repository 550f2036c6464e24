"""One GPU round as one command (`just gpu-round`, container/gpu-round.sh): the pieces of
orchestrator/gpu_round/plan.py in order, each within the call's deadline, each packed into the export folder the
moment it ends, and gpu-round.json with every goal met or missed (orchestrator/gpu_round/goals.py), each naming
the piece that answers it.

The deadline is the wrapper's start plus `--budget`. A piece starts only when what it needs
(round_plan.fits) is left before it; one that is not waits for the next call, and a later, smaller one may
start. Each piece has its own timeout, never past the deadline: a sweep is told to stop (its --stop-after)
before it, and at it the piece's processes are stopped (SIGTERM, on which a sweep saves its finished runs,
then SIGKILL); each device test has its own too (pytest-timeout, shipped in the bundle). So a call cut short,
or killed, still brings back every piece that ended, and the next call, on this machine or a fresh one given
that export (`--resume`), goes on without redoing them (orchestrator/gpu_round/state.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from orchestrator.gpu_round.args import OUT_NAMED, parse
from orchestrator.gpu_round.plan_text import format_plan
from orchestrator.gpu_round.gate import piece_in_call, spec_argument
from orchestrator.gpu_round.goals import read_results
from orchestrator.gpu_round.plan import (
    PIECES,
    START_MARGIN,
    PlannedPiece,
    RoundPlan,
    fits,
    plan_round,
)
from orchestrator.gpu_round.goals_file import print_goals, write_goals
from orchestrator.gpu_round.sweep_specs import Variant
from orchestrator.gpu_round.state import (
    PieceRecord,
    RoundError,
    RoundLayout,
    RoundState,
    TestTime,
    pack,
    take_in,
)
from orchestrator.store import already_done
from orchestrator.walltime import SWEEP_START_S
from specs.loader import PACKAGE_ROOT
from specs.results import RunStatus
from specs.safefile import UnsafeFileError, atomic_write

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_AGAIN = 0, 1, 2, 3
TEST_TIMEOUT_S = 120  # one device test: the slowest compiles two shapes, about 60 s at COMPILE_S
TERM_GRACE_S = 15.0  # between a piece's SIGTERM and its SIGKILL
PACK_S = 5.0  # kept before the deadline to pack the last piece and score the goals
FINDINGS_ENV = "LLADA_GPU_FINDINGS"  # where the device tests append their findings (tests/gpu/findings.py)
PR_SET_PDEATHSIG = 1  # prctl(2)
TOY_DEVICE = "cpu (toy shapes)"
PROBE = "import torch\nif torch.cuda.is_available(): print(torch.cuda.get_device_name(0))"

class Machine:
    """Where a call runs its pieces: the clock, the CUDA probe and the pieces' commands (tests give a fake one)."""

    def clock(self) -> float:
        return time.time()

    def device(self, python: str) -> str | None:
        """The CUDA device's name, or None without one."""
        probe = subprocess.run([python, "-c", PROBE], cwd=PACKAGE_ROOT, capture_output=True, text=True, check=False)
        return (probe.stdout.strip() or None) if probe.returncode == 0 else None

    def execute(
        self, command: list[str], *, label: str, env: dict[str, str], log: Path, timeout_s: float
    ) -> int | None:
        """Run `command` in a process group of its own, its output appended to `log`: its exit status, or None
        when it was stopped at `timeout_s`."""
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"--- {label}: {shlex.join(command)}\n")
            out.flush()
            # preexec_fn: the runner starts no thread, so the fork it runs in is safe.
            process = subprocess.Popen(command, cwd=PACKAGE_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True, preexec_fn=_end_with_parent)  # noqa: PLW1509
            try:
                return process.wait(timeout=max(timeout_s, 0.0))
            except subprocess.TimeoutExpired:
                return None
            finally:
                _stop(process)


def compile_cache_env(root: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """Inductor's FX graph, AOTAutograd and autotune caches and Triton's kernels on the round's local disk, on for
    every piece: a session's fresh process loads what an earlier one compiled (orchestrator/gpu_round/times.py,
    WARM_COMPILE_S) instead of compiling it again. Cache folders the caller set stay theirs."""
    cache = root / "compile-cache"
    return {"TORCHINDUCTOR_CACHE_DIR": environ.get("TORCHINDUCTOR_CACHE_DIR") or str(cache / "inductor"),
            "TRITON_CACHE_DIR": environ.get("TRITON_CACHE_DIR") or str(cache / "triton"),
            "TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}


def _end_with_parent() -> None:
    """In a piece's process, before it runs: SIGTERM when the call's process dies, so a call killed outright
    (SIGKILL) leaves no sweep on the GPU holding its lock for the next call (Linux's PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to a process group still running, SIGKILL after TERM_GRACE_S."""
    for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, None)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=grace)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def read_junit(path: Path) -> dict[str, TestTime]:
    """Each test's own time and outcome from pytest's junit.xml (none when pytest wrote none)."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return {}
    times = {}
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        outcome = next((o for tag, o in (("error", "error"), ("failure", "failed"), ("skipped", "skipped")) if tag in tags),
                       "passed")  # fmt: skip
        times[f"{case.get('classname', '')}::{case.get('name', '')}"] = TestTime(
            seconds=float(case.get("time", 0.0)), outcome=outcome)  # fmt: skip
    return times


@dataclass
class Call:
    """One call of the round: its pieces in order while the deadline allows, each exported as it ends."""

    layout: RoundLayout
    plan: RoundPlan
    machine: Machine
    state: RoundState
    deadline: float
    python: str = sys.executable
    export: Path | None = None
    failed: list[str] = field(default_factory=list)

    def run(self) -> int:
        self.publish()  # what earlier calls finished comes back even if this one is killed at once
        for planned in self.plan.pieces:
            if self.state.done(planned.name):
                continue
            planned = piece_in_call(planned, self.layout.piece(planned.name), self.state)
            need = planned.need_s(self.done_runs(planned))
            if not fits(self.machine.clock(), need, self.deadline):
                left = max(self.deadline - self.machine.clock(), 0.0)
                print(f"{planned.name}: not started: it needs {need:.0f} s, {left:.0f} s are left")
                continue
            self.run_piece(planned, need)
        self.publish(goals=True)
        if self.failed:
            return EXIT_FAILED
        return EXIT_OK if all(self.state.done(p.name) for p in self.plan.pieces) else EXIT_AGAIN

    def done_runs(self, planned: PlannedPiece) -> set[str]:
        """The runs of a campaign piece its sweep folders already hold (a stopped sweep resumes from them)."""
        folder = self.layout.piece(planned.name)
        return {run for sweep in planned.sweeps for run in already_done(folder / sweep.name, list(sweep.runs))}

    def run_piece(self, planned: PlannedPiece, need: float) -> None:
        name = planned.name
        before = self.state.pieces.get(name)
        record = PieceRecord(status="running", attempts=before.attempts + 1 if before else 1,
                             wall_s=before.wall_s if before else 0.0)  # fmt: skip
        self.state.pieces[name] = record
        self.layout.save(self.state)
        folder = self.layout.piece(name)
        folder.mkdir(parents=True, exist_ok=True)
        started = self.machine.clock()
        # Its timeout: twice its need, at least one device test's timeout more (a test piece's seconds are partly
        # unmeasured), never past the deadline. A toy round's needs are priced for a GPU: it has the deadline alone.
        until = self.deadline - PACK_S
        if not self.state.toy:
            until = min(until, started + max(2 * need, need + TEST_TIMEOUT_S))
        outcome = self.tests(planned, until) if planned.piece.kind == "tests" else self.campaign(planned, until)
        wall = record.wall_s + self.machine.clock() - started
        record = record.model_copy(update={**outcome, "wall_s": wall})
        self.state.pieces[name] = record
        self.layout.save(self.state)
        if record.status == "failed":
            self.failed.append(name)
        print(f"{name}: {record.status} after {self.machine.clock() - started:.0f} s (planned "
              f"{planned.need_s() / START_MARGIN:.0f} s){'; ' + record.detail if record.detail else ''}")  # fmt: skip
        self.publish(name)

    def tests(self, planned: PlannedPiece, until: float) -> dict[str, Any]:
        folder = self.layout.piece(planned.name)
        junit = folder / "junit.xml"
        junit.unlink(missing_ok=True)
        per_test = ["--timeout", str(TEST_TIMEOUT_S)] if importlib.util.find_spec("pytest_timeout") else []
        command = [self.python, "-m", "pytest", *planned.piece.sources, "-m", "gpu", "-p", "no:cacheprovider", "-q",
                   "-rA", f"--junitxml={junit}", *per_test]  # fmt: skip
        env = {**self.env(), FINDINGS_ENV: str(folder / "findings.jsonl")}
        code = self.machine.execute(command, label=planned.name, env=env, log=folder / "piece.log",
                                    timeout_s=until - self.machine.clock())  # fmt: skip
        tests = read_junit(junit)
        if code is None:
            return {"status": "timed-out", "exit": None, "tests": tests, "detail": "stopped at its timeout"}
        if code not in (0, 1):
            return {"status": "failed", "exit": code, "tests": tests, "detail": f"pytest exit {code}: see piece.log"}
        if tests and all(t.outcome == "skipped" for t in tests.values()):
            return {"status": "failed", "exit": code, "tests": tests, "detail": "every test skipped (no CUDA?)"}
        return {"status": "done", "exit": code, "tests": tests, "detail": ""}

    def campaign(self, planned: PlannedPiece, until: float) -> dict[str, Any]:
        folder = self.layout.piece(planned.name)
        codes = []
        for sweep in planned.sweeps:
            left = until - self.machine.clock()
            # The sweep starts no run predicted to end after this (its own seconds, from after its imports).
            stop_after = max(1.0, (left - SWEEP_START_S - TERM_GRACE_S) / START_MARGIN)
            command = [self.python, "-m", "orchestrator.cli", "sweep", spec_argument(sweep, folder), "--executor",
                       "inline", "--out", str(folder / sweep.name), "--no-report", "--stop-after", f"{stop_after:.0f}"]
            code = self.machine.execute(command, label=f"{planned.name}:{sweep.name}", env=self.env(),
                                        log=folder / "piece.log", timeout_s=left)  # fmt: skip
            if code is None:
                return {"status": "timed-out", "exit": None, "detail": f"{sweep.name} stopped at its timeout"}
            if code == EXIT_AGAIN:
                return {"status": "stopped", "exit": code, "detail": f"{sweep.name} stopped before its deadline"}
            if code not in (EXIT_OK, EXIT_FAILED):
                return {"status": "failed", "exit": code, "detail": f"{sweep.name} could not run: see piece.log"}
            codes.append(code)
        sweeps = [folder / sweep.name for sweep in planned.sweeps]
        if all({r.status for r in read_results(sweep)} == {RunStatus.REFUSED} for sweep in sweeps):
            # Nothing measured, and a resumed sweep would keep its refused runs as done: set aside, run afresh.
            for sweep in sweeps:
                shutil.rmtree(sweep.with_name(f"{sweep.name}.refused"), ignore_errors=True)
                sweep.rename(sweep.with_name(f"{sweep.name}.refused"))
            return {"status": "failed", "exit": max(codes), "detail": "every run refused its device (no CUDA?); "
                    "set aside as <sweep>.refused"}  # fmt: skip
        detail = "some runs failed: see their artifacts" if any(codes) else ""
        return {"status": "done", "exit": max(codes), "detail": detail}

    def env(self) -> dict[str, str]:
        """A piece's environment: this process's, with the round's compile caches."""
        return {**os.environ, **compile_cache_env(self.layout.root, os.environ)}

    def publish(self, piece: str | None = None, *, goals: bool = False) -> None:
        """Export the piece that just ended (None: every piece that ended before) and gpu-round.json."""
        if self.export is not None:
            names = [piece] if piece else [n for n, r in self.state.pieces.items() if r.status != "running"]
            for name in names:
                reason = pack(self.layout, name, self.state.pieces[name], self.export)
                if reason:
                    print(f"{name}: not exported: {reason}", file=sys.stderr)
        write_goals(self.layout, self.plan, self.state, scored=goals or piece is not None)
        if self.export is not None:
            atomic_write(self.export / self.layout.goals.name, self.layout.goals.read_bytes())


def start_call(layout: RoundLayout, plan: RoundPlan, machine: Machine, *, python: str, deadline: float,
               export: Path | None = None, resume: Path | None = None, toy: bool = False) -> int:  # fmt: skip
    """A call: the state read (a bad file, or a folder that is no round's, refused), CUDA required (a toy round
    runs on this CPU), an earlier export taken in where newer, the pieces run. Nothing is written before the
    device is found."""
    state = layout.load()
    if state.calls and state.toy != toy:
        kind = "a toy round's" if state.toy else "a GPU round's"
        raise RoundError(f"{layout.root}: {kind} folder; give --round another folder for this {'toy ' if toy else ''}"
                         "round")  # fmt: skip
    device = TOY_DEVICE if toy else machine.device(python)
    if device is None:
        raise RoundError(f"no CUDA device: torch.cuda.is_available() is false for {python}; a round measures on a "
                         "GPU (nothing was run or marked done)")  # fmt: skip
    if resume is not None:
        taken = take_in(layout, state, resume, [p.name for p in PIECES])
        if taken:
            print(f"taken in from {resume}: {', '.join(taken)}")
    state.calls += 1
    state.device = device
    state.toy = toy
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.save(state)
    call = Call(layout, plan, machine, state, deadline, python=python, export=export)
    code = call.run()
    print_goals(layout, json.loads(layout.goals.read_text(encoding="utf-8")))
    if toy and all(state.done(p.name) for p in plan.pieces if p.sweeps):
        print("toy round: every campaign piece done; the graph tests skip without CUDA, so the graph rows are left "
              "out (its record says so)")  # fmt: skip
        return EXIT_OK
    if code == EXIT_AGAIN:
        print("the round goes on: call again with --resume and this call's export (docs/gpu-leases.md)",
              file=sys.stderr)  # fmt: skip
    return code


def toy_plan(plan: RoundPlan) -> RoundPlan:
    """The first call's pieces, each campaign at toy shapes on this CPU (orchestrator/gpu_round/sweep_specs.py)."""
    pieces = tuple(plan.piece(n).with_variant(Variant(toy=True)) if plan.piece(n).sweeps else plan.piece(n)
                   for n in plan.first)  # fmt: skip
    return RoundPlan(pieces, plan.budget_s, plan.first, 0.0, ())


def main(argv: list[str] | None = None, machine: Machine | None = None) -> int:
    args = parse(argv)
    plan = plan_round(args.budget)
    if args.dry_run:
        print(format_plan(plan))
        return EXIT_OK if plan.first else EXIT_FAILED
    if args.export_named == OUT_NAMED:
        print(f"exporting each piece to {args.export}, from $OUT (give --export to choose the folder)", file=sys.stderr)
    machine = machine or Machine()
    started = args.since if args.since is not None else machine.clock()
    layout = RoundLayout(args.round)
    try:
        if args.goals:
            state = layout.load()
            if args.resume is not None:
                take_in(layout, state, args.resume, [p.name for p in PIECES])
            layout.root.mkdir(parents=True, exist_ok=True)
            layout.save(state)  # the folder is a round's from now on
            print_goals(layout, write_goals(layout, plan, state))
            return EXIT_OK
        return start_call(layout, toy_plan(plan) if args.toy else plan, machine, python=sys.executable,
                          deadline=started + args.budget, export=args.export, resume=args.resume, toy=args.toy)
    except (RoundError, UnsafeFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"interrupted: every piece that ended is packed in {args.export or args.round}", file=sys.stderr)
        return 130
    except OSError as error:
        where = error.filename or args.round
        print(f"error: {where}: cannot write ({error.strerror or error}); give --round (or {args.export_named}) a "
              "folder you can write", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE


if __name__ == "__main__":
    # A SIGTERM (the device tool's limit) ends the call as an interrupt: the piece running is stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
