"""The GPU round's stand-ins (tests/test_gpu_round.py, tests/test_round_gate.py): a machine whose device is not
there and whose clock moves only as its commands 'run', and the helpers that call the round on it."""

from __future__ import annotations

from pathlib import Path

from orchestrator.gpu_round import state as round_state
from orchestrator.gpu_round.run import Machine, main
from orchestrator.gpu_round.plan import PIECES

NAMES = [p.name for p in PIECES]
# Seconds each command takes on the fake clock. Call 1's two pieces take 380 s, so no other (the smallest needs
# 198 s) starts before a 540 s deadline.
SECONDS = {"graph-tests": 20, "headline": 360, "headline-b8": 100, "headline-b64": 80, "headline-eager-b8": 250,
           "dream-qwen:round-dream-qwen": 150, "dream-qwen:round-dream-qwen-best": 60, "device-tests": 100}


class Killed(BaseException):
    """The call's process killed mid-piece (SIGKILL): nothing after it runs."""


class FakeMachine(Machine):
    """A device that is not there and a clock that moves only as commands 'run' (SECONDS, or `seconds`); a
    command writes an artifact in its piece's folder (a test piece, its junit.xml). `kill`: the piece whose
    command kills the call."""

    def __init__(self, seconds: dict[str, float] | None = None, kill: str | None = None, device: str | None = "Fake GPU",
                 outcome: str = "") -> None:  # fmt: skip
        self.now = 1000.0
        self.seconds = {**SECONDS, **(seconds or {})}
        self.kill = kill
        self.name = device
        self.outcome = outcome  # each test's junit child: "" passed, "<failure/>", "<skipped/>"
        self.ran: list[str] = []
        self.commands: dict[str, list[str]] = {}
        self.envs: dict[str, dict[str, str]] = {}

    def clock(self) -> float:
        return self.now

    def device(self, python: str) -> str | None:
        return self.name

    def execute(self, command: list[str], *, label: str, env: dict[str, str], log: Path, timeout_s: float) -> int | None:
        if label.split(":")[0] == self.kill:
            raise Killed(label)
        self.ran.append(label)
        self.commands[label], self.envs[label] = command, env
        spent = self.seconds.get(label) or self.seconds[label.split(":")[0]]
        if spent > timeout_s:
            self.now += timeout_s
            return None
        self.now += spent
        (log.parent / f"{label.replace(':', '-')}.out").write_text(f"measured on call at {self.now}\n")
        (log.parent / "sweep.lock").write_text("host, pid\n")  # never exported: it would look held elsewhere
        junit = next((c.removeprefix("--junitxml=") for c in command if c.startswith("--junitxml=")), None)
        if junit:
            Path(junit).write_text('<testsuites><testsuite><testcase classname="tests.gpu.t" name="test_x" '
                                   f'time="1.5">{self.outcome}</testcase></testsuite></testsuites>')  # fmt: skip
        return 0


def call(machine: FakeMachine, round_dir: Path, *args: str, budget: float = 540) -> int:
    argv = ["--round", str(round_dir), "--budget", str(budget), "--since", str(machine.now), *args]
    return main(argv, machine=machine)


def exported(folder: Path) -> dict[str, str]:
    """Each exported piece's status, read from its tarball's own record."""
    out = {}
    for tarball in folder.glob("*.tar.gz"):
        name = tarball.name.removesuffix(".tar.gz")
        out[name] = round_state.packed_record(tarball, name).status
    return out


def pieces_ran(machine: FakeMachine) -> list[str]:
    return list(dict.fromkeys(label.split(":")[0] for label in machine.ran))
