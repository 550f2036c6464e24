"""One sweep per output directory: a second sweep refuses naming the holder; a lock left by a process that is
gone is taken over with a message; the lock also holds where flock does not."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.plan import plan_runs
from specs import lock as lock_module
from specs.artifacts import SweepLayout, verify
from specs.loader import PACKAGE_ROOT, load_spec
from specs.lock import LockHeldError, SweepLock
from tests.sweep_faults import finished_sweep, small_spec


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def write_lock(path: Path, host: str, pid: int, age_s: float = 0.0) -> None:
    path.write_text(json.dumps({"host": host, "pid": pid, "started": "2026-01-01T00:00:00+00:00"}))
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))


def test_a_second_holder_is_refused_with_the_first_ones_name(tmp_path: Path) -> None:
    path = tmp_path / "sweep.lock"
    with SweepLock(path):
        holder = json.loads(path.read_text())
        assert holder["host"] == socket.gethostname() and holder["pid"] == os.getpid()
        with pytest.raises(LockHeldError, match=rf"another sweep is writing here \(host {socket.gethostname()}, pid {os.getpid()},"):
            SweepLock(path).acquire()
    assert not path.exists()  # released: the file goes with it
    with SweepLock(path) as again:
        assert again.notes == []


def test_a_lock_left_by_a_dead_process_is_taken_over_with_a_message(tmp_path: Path, capsys) -> None:
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    finished_sweep(spec, out)
    gone = dead_pid()
    write_lock(out / "sweep.lock", socket.gethostname(), gone)
    assert main(["sweep", str(spec), "--out", str(out), "--no-report"]) == 0
    err = capsys.readouterr().err
    assert f"took over the lock of a sweep that is no longer running (host {socket.gethostname()}, pid {gone}," in err
    assert not (out / "sweep.lock").exists()
    assert verify(SweepLayout(out)) == []


def test_a_fresh_lock_of_another_host_is_respected(tmp_path: Path, capsys) -> None:
    """NFS mounted `nolock` keeps flock per client: another host's live heartbeat must still stop us."""
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    finished_sweep(spec, out)
    write_lock(out / "sweep.lock", "gpu-node-7", 4242, age_s=5)
    assert main(["sweep", str(spec), "--out", str(out), "--no-report"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "another sweep is writing here (host gpu-node-7, pid 4242," in err
    write_lock(out / "sweep.lock", "gpu-node-7", 4242, age_s=lock_module.STALE_AFTER_S + 60)
    assert main(["sweep", str(spec), "--out", str(out), "--no-report"]) == 0
    assert "took over the lock" in capsys.readouterr().err


def test_without_flock_the_holder_is_judged_from_the_file(tmp_path: Path, monkeypatch) -> None:
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    path = tmp_path / "sweep.lock"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_lock(path, socket.gethostname(), sleeper.pid)
        with pytest.raises(LockHeldError, match=f"pid {sleeper.pid}"):
            SweepLock(path).acquire()
    finally:
        sleeper.kill()
        sleeper.wait()
    with SweepLock(path) as taken:  # the same pid, now gone
        assert "no longer running" in taken.notes[0]
        with pytest.raises(LockHeldError):  # and we, alive, hold it against the next one
            SweepLock(path).acquire()
    write_lock(path, "gpu-node-7", 4242, age_s=5)
    with pytest.raises(LockHeldError, match="gpu-node-7"):
        SweepLock(path).acquire()


def test_the_holder_keeps_its_heartbeat_fresh(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(lock_module, "HEARTBEAT_S", 0.05)
    path = tmp_path / "sweep.lock"
    with SweepLock(path):
        os.utime(path, (time.time() - 3600, time.time() - 3600))
        deadline = time.monotonic() + 5
        while time.time() - path.stat().st_mtime > 60:
            assert time.monotonic() < deadline, "the heartbeat never touched the lock file"
            time.sleep(0.02)


@pytest.mark.ray
@pytest.mark.slow
def test_a_second_sweep_on_the_same_directory_refuses_while_the_first_runs(tmp_path: Path) -> None:
    spec = small_spec(tmp_path)
    out, log = tmp_path / "out", tmp_path / "executed.log"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(LLADA_TEST_EXEC_LOG=str(log), LLADA_TEST_RUN_DELAY_S="1.0", PYTHONUNBUFFERED="1")
    first = subprocess.Popen(
        [sys.executable, "-m", "tests.sweep_faults", str(spec), str(out)], cwd=PACKAGE_ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not log.exists():  # the first sweep is computing
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.1)
        second = subprocess.run(
            [sys.executable, "-m", "tests.sweep_faults", str(spec), str(out)], cwd=PACKAGE_ROOT, env=env,
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        stdout, stderr = first.communicate(timeout=180)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert second.returncode == 2, second.stderr
    assert f"another sweep is writing here (host {socket.gethostname()}, pid {first.pid}," in second.stderr
    assert "Traceback" not in second.stderr
    assert first.returncode == 0, stderr
    executed = log.read_text().split()
    assert sorted(executed) == sorted(r.run_id for r in plan_runs(load_spec(spec)))  # once each, by the first
    assert verify(SweepLayout(out)) == []
