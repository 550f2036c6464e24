"""Breaking the driver on purpose: SIGKILL and SIGTERM mid-sweep, then resume; nothing finished is lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.plan import plan_runs
from specs.artifacts import SweepLayout, verify
from specs.loader import PACKAGE_ROOT, load_spec
from specs.results import RunResult

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SPEC = "specs/tiny.yaml"


def start_sweep(out: Path, log: Path, fault_dir: Path, delay_s: float = 0.4) -> subprocess.Popen:
    env = dict(os.environ, LLADA_TEST_EXEC_LOG=str(log), LLADA_TEST_FAULT_DIR=str(fault_dir),
               LLADA_TEST_RUN_DELAY_S=str(delay_s), PYTHONUNBUFFERED="1")
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.run_fake_sweep", SPEC, str(out)], cwd=PACKAGE_ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def finished_ids(out: Path) -> set[str]:
    manifest = out / "manifest.json"
    try:
        return set(json.loads(manifest.read_text())["runs"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return set()


def wait_for(condition, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the sweep"
        time.sleep(0.05)


def reap(process: subprocess.Popen) -> None:
    """Kill whatever the driver left behind (its own session only), then wait."""
    try:
        group = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        group = []
    for child in group:
        child.kill()
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=30)


@pytest.fixture
def sweep_dirs(tmp_path: Path):
    faults = tmp_path / "faults"
    faults.mkdir()
    return tmp_path / "out", tmp_path / "executed.log", faults


@pytest.mark.parametrize("kill_after", [0, 3, 12])
def test_sigkill_then_resume_recomputes_nothing_finished(sweep_dirs, kill_after: int) -> None:
    out, log, faults = sweep_dirs
    total = len(plan_runs(load_spec(SPEC)))
    first = start_sweep(out, log, faults)
    try:
        if kill_after == 0:
            wait_for(lambda: log.exists())  # a run is in flight, none finished
        else:
            wait_for(lambda: len(finished_ids(out)) >= kill_after)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        reap(first)
    survived = finished_ids(out)
    # Nothing half-written is visible: every run file is a whole result, and all listed ones verify.
    for path in (out / "runs").glob("*.json"):
        RunResult.model_validate_json(path.read_text())
    assert [p for p in verify(SweepLayout(out)) if "missing" in p.reason or "mismatch" in p.reason] == []

    log.write_text("")
    second = start_sweep(out, log, faults, delay_s=0.0)
    try:
        stdout, stderr = second.communicate(timeout=180)
    finally:
        reap(second)
    assert second.returncode == 0, stderr
    recomputed = set(log.read_text().split())
    assert not recomputed & survived
    assert len(recomputed) == total - len(survived)
    assert f"{len(survived)} already done" in stdout
    assert verify(SweepLayout(out)) == []
    assert len(finished_ids(out)) == total


def test_sigterm_saves_what_arrived_and_says_how_to_resume(sweep_dirs) -> None:
    out, log, faults = sweep_dirs
    first = start_sweep(out, log, faults)
    try:
        wait_for(lambda: len(finished_ids(out)) >= 2)
        first.send_signal(signal.SIGTERM)
        stdout, stderr = first.communicate(timeout=60)
    finally:
        reap(first)
    assert first.returncode == 3
    assert "interrupted by SIGTERM" in stderr and "rerun the same command to resume" in stderr
    assert verify(SweepLayout(out)) == []
    saved = finished_ids(out)
    assert len(saved) >= 2

    log.write_text("")
    second = start_sweep(out, log, faults, delay_s=0.0)
    try:
        stdout, stderr = second.communicate(timeout=180)
    finally:
        reap(second)
    assert second.returncode == 0, stderr
    assert not set(log.read_text().split()) & saved


def test_local_ray_listens_on_loopback_only() -> None:
    code = (
        "import psutil\n"
        "from orchestrator.cluster import connect, disconnect\n"
        "connect(num_cpus=1)\n"
        "seen = set()\n"
        "for p in psutil.Process().children(recursive=True):\n"
        "    try:\n"
        "        seen |= {c.laddr.ip for c in p.net_connections(kind='inet') if c.status == psutil.CONN_LISTEN}\n"
        "    except psutil.Error:\n"
        "        pass\n"
        "print(sorted(seen))\n"
        "disconnect()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    done = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE_ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    addresses = eval(done.stdout.strip().splitlines()[-1])  # a printed list of strings
    assert addresses, "no listening socket found"
    assert set(addresses) <= {"127.0.0.1", "::ffff:127.0.0.1", "::1"}
