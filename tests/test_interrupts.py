"""Interrupts at any moment of a local sweep, Ray's start included: exit 3 without a traceback and no process
left behind; after SIGKILL, nothing of its Ray survives more than a few seconds. `--actors` is validated."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.cli import main
from specs.loader import PACKAGE_ROOT
from tests.sweep_faults import small_spec


@pytest.mark.parametrize("value", ["-1", "0", "two"])
def test_actors_must_be_a_positive_count(tmp_path: Path, capsys, value: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["sweep", str(small_spec(tmp_path)), "--actors", value, "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    assert "argument --actors:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


class Tracker:
    """Every process a driver starts, as the test sees it from outside: its descendants (polled), and any
    process holding a file of the driver's Ray session directory."""

    def __init__(self, driver: subprocess.Popen) -> None:
        self.driver = driver
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                for child in psutil.Process(self.driver.pid).children(recursive=True):
                    self.seen.setdefault(child.pid, child.create_time())
            except psutil.Error:
                pass
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def alive(self) -> list[str]:
        session = re.compile(rf"/session_[\d_-]+_{self.driver.pid}(/|$)")
        found = []
        for process in psutil.process_iter(["pid", "create_time", "cmdline"]):
            try:
                ours = self.seen.get(process.pid) == process.info["create_time"]
                ours = ours or any(session.search(f.path) for f in process.open_files())
                if ours and process.status() != psutil.STATUS_ZOMBIE:
                    found.append(f"{process.pid} {process.status()} {' '.join(process.info['cmdline'] or [])[:80]}")
            except psutil.Error:
                continue
        return found

    def kill_leftovers(self) -> None:
        for pid, created in self.seen.items():
            try:
                process = psutil.Process(pid)
                if process.create_time() == created:
                    process.kill()
            except psutil.Error:
                pass


def start(tmp_path: Path, delay_s: float = 0.3) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(LLADA_TEST_RUN_DELAY_S=str(delay_s), LLADA_TEST_EXEC_LOG=str(tmp_path / "executed.log"),
               PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sweep_faults", str(small_spec(tmp_path)), str(tmp_path / "out")],
        cwd=PACKAGE_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group, as a shell gives a foreground job
    )  # fmt: skip


def wait_for_line(process: subprocess.Popen, prefix: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith(prefix):
            return
        assert line, f"the sweep ended before printing {prefix!r}"
    raise AssertionError(f"no {prefix!r} line")


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("signum, after_s, group", [(signal.SIGINT, 1.0, True), (signal.SIGTERM, 2.5, False)],
                         ids=["Ctrl-C to the process group", "SIGTERM to the driver"])
def test_interrupt_while_ray_starts(tmp_path: Path, signum: int, after_s: float, group: bool) -> None:
    driver = start(tmp_path)
    tracker = Tracker(driver)
    try:
        wait_for_line(driver, "sweep 'tiny':")  # printed just before Ray starts (it takes seconds here)
        time.sleep(after_s)
        assert not (tmp_path / "executed.log").exists(), "Ray had started already; the test lost its moment"
        if group:  # what a terminal's Ctrl-C does: the driver and the Ray processes in its group
            os.killpg(driver.pid, signum)
        else:
            driver.send_signal(signum)
        _, stderr = driver.communicate(timeout=120)
        left = tracker.alive()
    finally:
        tracker.stop()
        tracker.kill_leftovers()
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 3, stderr
    assert "Traceback" not in stderr
    assert f"interrupted by {signal.Signals(signum).name}" in stderr and "rerun the same command to resume" in stderr
    assert left == [], left
    assert len(tracker.seen) >= 3  # Ray had started processes, and none outlived the driver


@pytest.mark.ray
@pytest.mark.slow
def test_nothing_of_ray_outlives_a_sigkilled_driver(tmp_path: Path) -> None:
    driver = start(tmp_path, delay_s=2.0)
    tracker = Tracker(driver)
    try:
        deadline = time.monotonic() + 90
        while not (tmp_path / "executed.log").exists():  # Ray is up and a run is in flight
            assert time.monotonic() < deadline and driver.poll() is None
            time.sleep(0.1)
        time.sleep(1.0)
        driver.kill()
        driver.communicate(timeout=30)
        gone_by = time.monotonic() + 5.0
        while tracker.alive() and time.monotonic() < gone_by:
            time.sleep(0.2)
        left = tracker.alive()
    finally:
        tracker.stop()
        tracker.kill_leftovers()
    assert left == [], left
    assert len(tracker.seen) >= 4


@pytest.mark.parametrize("cut_short", [False, True], ids=["Ray started or never asked", "Ray's start cut short"])
def test_the_command_exits_with_its_status_and_skips_teardown_only_after_a_cut_short_ray_start(cut_short: bool) -> None:
    """A half-built Ray can abort the interpreter's teardown (SIGABRT instead of status 3); exit_process then
    leaves at once, with the status and the output intact. Otherwise the normal exit runs (atexit included)."""
    code = (
        "import atexit, orchestrator.cluster as cluster\n"
        "atexit.register(lambda: print('teardown ran', flush=True))\n"
        f"cluster._start_cut_short = {cut_short}\n"
        "print('interrupted', end='')\n"
        "cluster.exit_process(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout.startswith("interrupted")  # flushed before leaving
    assert ("teardown ran" in done.stdout) is not cut_short
