"""No process of a local Ray outlives the sweep that started it, however the sweep ends.

Ray ties its GCS and raylet to the driver, but the raylet's dashboard and runtime-env agents poll for their
parent and linger a minute or more after it dies (SIGKILL, or an interrupt while Ray starts). So before
starting a local Ray the driver starts a watchdog: a small process in its own session, holding the read end
of a pipe. When the driver ends, however it ends, the pipe closes and the watchdog kills every process of
the driver's Ray session, then exits. A driver that ends cleanly does the same itself first.

A process belongs to the session when it holds a file under Ray's session directory, which Ray names
`session_<date>_<time>_<driver pid>`, or when the watchdog last saw it below the driver; either way it
started after the driver. Nothing else is touched.

Usage (by `start_watchdog` only): python -m orchestrator.reaper DRIVER_PID DRIVER_START_TICKS
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from specs import procs

POLL_S = 1.0  # how often the watchdog notes the driver's descendants
DONE = b"done\n"  # the driver ended cleanly and killed what was left itself
KILL_DEADLINE_S = 10.0
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def _session_pattern(driver_pid: int) -> re.Pattern[str]:
    return re.compile(rf"/session_\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_{driver_pid}(?:/|$)")


def session_processes(driver_pid: int, since_ticks: int, known: dict[int, int] | None = None) -> dict[int, int]:
    """Live processes of the local Ray that `driver_pid` started (pid → start ticks): those holding a file of
    its session directory, and `known` ones still running as the same process. Never this process, the
    driver, or anything that started before the driver."""
    pattern = _session_pattern(driver_pid)
    known = known or {}
    found = {}
    for pid in procs.pids():
        if pid in (os.getpid(), driver_pid):
            continue
        ticks = procs.start_ticks(pid)
        if ticks is None or ticks < since_ticks:
            continue
        if known.get(pid) == ticks or any(pattern.search(path) for path in procs.open_paths(pid)):
            found[pid] = ticks
    return found


def reap(driver_pid: int, since_ticks: int, known: dict[int, int] | None = None) -> int:
    """SIGKILL the session's processes until none is left, and wait until each is gone (a zombie holds
    nothing), or the deadline passes; how many were killed."""
    killed: dict[int, int] = {}
    deadline = time.monotonic() + KILL_DEADLINE_S
    while time.monotonic() < deadline:
        found = session_processes(driver_pid, since_ticks, known)
        if not found:
            break
        for pid, ticks in found.items():
            if procs.start_ticks(pid) == ticks:  # still the same process
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed[pid] = ticks
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.05)
    dying = {**(known or {}), **killed}  # a killed process closes its files before it is gone
    dying.pop(os.getpid(), None)
    while time.monotonic() < deadline and any(procs.start_ticks(p) == t for p, t in dying.items()):
        time.sleep(0.02)
    return len(killed)


class Watchdog:
    """The driver's handle on its watchdog process."""

    def __init__(self, process: subprocess.Popen[bytes], since_ticks: int) -> None:
        self._process = process
        self._since = since_ticks
        self._started = procs.start_ticks(process.pid) or since_ticks  # Ray starts after the watchdog

    def snapshot(self) -> dict[int, int]:
        """The session's processes now, while each still holds its files (take it before shutting Ray down),
        and this process's children started since the watchdog (Ray's, while it starts)."""
        return {**session_processes(os.getpid(), self._since), **self._children()}

    def finish(self, known: dict[int, int]) -> None:
        """The driver is ending cleanly, Ray shut down: kill what is left of `known` and of the session, wait
        until it is gone, then let the watchdog go."""
        reap(os.getpid(), self._since, {**known, **self._children()})
        try:
            if self._process.stdin is not None:
                self._process.stdin.write(DONE)
                self._process.stdin.close()
            self._process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()

    def _children(self) -> dict[int, int]:
        found = procs.descendants(os.getpid())
        return {pid: t for pid, t in found.items() if pid != self._process.pid and t >= self._started}


def start_watchdog() -> Watchdog | None:
    """Start the watchdog for this process (before it starts a local Ray); None where /proc is absent."""
    since = procs.start_ticks(os.getpid())
    if not since or not procs.PROC.is_dir():
        return None
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH")])))
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.reaper", str(os.getpid()), str(since)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        start_new_session=True,  # Ctrl-C reaches the driver's process group, not the watchdog
    )  # fmt: skip
    return Watchdog(process, since)


def watch(driver_pid: int, since_ticks: int) -> None:
    """Note the driver's descendants until its end of the pipe closes; unless it said it is done, it died:
    kill what is left of its Ray session."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    known: dict[int, int] = {}
    received = b""
    stdin = sys.stdin.fileno()
    while True:
        readable, _, _ = select.select([stdin], [], [], POLL_S)
        if readable:
            chunk = os.read(stdin, 4096)
            if not chunk:
                break
            received += chunk
            continue
        known = {pid: ticks for pid, ticks in {**known, **procs.descendants(driver_pid)}.items()
                 if procs.start_ticks(pid) == ticks}  # fmt: skip
    if received != DONE:
        reap(driver_pid, since_ticks, known)


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]))
