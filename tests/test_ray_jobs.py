"""`ray job submit` against a real Ray head (`ray start --head` on 127.0.0.1), as on a Ray cluster.

The head runs with token authentication (the token passed to the head and to the `ray job` client in the
environment, never written to ~/.ray), its own ports and its own --temp-dir, so it cannot meet another Ray on
this machine; it is stopped by its own process ids, never by `ray stop` (which would stop every Ray here).
The job uploads the working directory, connects through RAY_ADDRESS, and its driver writes the artifacts.

Run as a module (`python -m tests.test_ray_jobs SPEC OUT`), this file is the stand-in job: the real driver
with the stand-in actor of tests/fake_actors.py, for a fast check of the job plumbing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.plan import plan_runs
from specs.artifacts import SweepLayout, verify
from specs.loader import PACKAGE_ROOT, load_spec

pytestmark = pytest.mark.ray

ROOT = PACKAGE_ROOT
BIN = Path(sys.executable).parent
LOOPBACK = "127.0.0.1"
READY_TIMEOUT_S = 180  # a loaded 2-core machine can take a minute to bring a head up
EXCLUDES = json.dumps(
    {"excludes": [".git", ".venv", ".hypothesis", ".pytest_cache", ".ruff_cache", "artifacts"]}
)


@dataclass(frozen=True)
class Head:
    address: str  # the job server, http://127.0.0.1:<dashboard port>
    env: dict[str, str]  # what a client needs: the same auth mode and token as the head
    temp_dir: Path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _ray(*args: str, env: dict[str, str], timeout: float, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "ray"), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )


def _stop(head: subprocess.Popen, temp_dir: Path) -> None:
    """Stop exactly the processes of this head: `ray start --block` and its descendants, plus anything whose
    command line names this head's temp dir; TERM first, then KILL."""
    import psutil

    try:
        root = psutil.Process(head.pid)
        ours = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        ours = []
    for process in psutil.process_iter(["cmdline"]):
        if any(str(temp_dir) in part for part in process.info["cmdline"] or []) and process not in ours:
            ours.append(process)
    if head.poll() is None:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops the node's processes itself
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    _, alive = psutil.wait_procs(ours, timeout=10)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)
    if head.poll() is None:
        head.wait(timeout=10)
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def head():
    temp_dir = Path(
        tempfile.mkdtemp(prefix="lrj", dir="/tmp")
    )  # short: Ray's socket paths must fit 107 bytes
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        RAY_AUTH_MODE="token",  # Ray 2.60's default for new clusters; head and client must agree
        RAY_AUTH_TOKEN=secrets.token_hex(16),
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",  # bind loopback, not the machine's address
        RAY_USAGE_STATS_ENABLED="0",
        PYTHONUNBUFFERED="1",
    )
    dashboard = _free_port()
    command = [
        str(BIN / "ray"),
        "start",
        "--head",
        "--block",
        "--node-ip-address",
        LOOPBACK,
        "--port",
        str(_free_port()),
        "--dashboard-host",
        LOOPBACK,
        "--dashboard-port",
        str(dashboard),
        "--include-dashboard",
        "true",
        "--ray-client-server-port",
        str(_free_port()),
        "--dashboard-agent-listen-port",
        str(_free_port()),
        "--dashboard-agent-grpc-port",
        str(_free_port()),
        "--metrics-export-port",
        str(_free_port()),
        "--runtime-env-agent-port",
        str(_free_port()),
        "--temp-dir",
        str(temp_dir),
        "--num-cpus",
        "2",
        "--num-gpus",
        "0",
        "--disable-usage-stats",
    ]
    with open(temp_dir / "head.log", "w") as log:  # the head keeps its own copy of the descriptor
        process = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    started = Head(address=f"http://{LOOPBACK}:{dashboard}", env=env, temp_dir=temp_dir)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while _ray("job", "list", "--address", started.address, env=env, timeout=60).returncode != 0:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Ray head did not come up:\n{(temp_dir / 'head.log').read_text()[-3000:]}")
            time.sleep(1)
        yield started
    finally:
        _stop(process, temp_dir)


def submit(
    head: Head, submission_id: str, entrypoint: list[str], timeout: float
) -> subprocess.CompletedProcess:
    """`ray job submit` from the project directory, waiting for the job (its logs are the output)."""
    return _ray(
        "job",
        "submit",
        "--address",
        head.address,
        "--submission-id",
        submission_id,
        "--working-dir",
        ".",
        "--runtime-env-json",
        EXCLUDES,
        "--",
        *entrypoint,
        env=head.env,
        timeout=timeout,
    )


def check_job(
    head: Head, submission_id: str, done: subprocess.CompletedProcess, out: Path, spec: str
) -> None:
    status = _ray("job", "status", submission_id, "--address", head.address, env=head.env, timeout=60)
    assert f"job '{submission_id}' succeeded" in (status.stdout + status.stderr).lower(), (
        done.stdout[-4000:] + done.stderr[-2000:]
    )
    planned = load_spec(ROOT / spec)
    layout = SweepLayout(out)
    assert verify(layout) == []
    assert len(layout.run_files()) == len(plan_runs(planned))  # every planned run, written by the driver
    assert f"sweep {planned.name!r}" in done.stdout  # the driver's own output came back through the job logs


def test_job_submission_runs_the_smoke_sweep_with_stand_in_workers(head, tmp_path) -> None:
    out = tmp_path / "tiny"
    done = submit(
        head, "llada-fake-tiny", ["python", "-m", "tests.test_ray_jobs", "specs/tiny.yaml", str(out)], 300
    )
    check_job(head, "llada-fake-tiny", done, out, "specs/tiny.yaml")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_job_submission_runs_the_smoke_sweep(head, tmp_path) -> None:
    """The README's command, with the real worker: tiny synthetic models on the head's CPUs."""
    out = tmp_path / "tiny"
    done = submit(
        head,
        "llada-tiny",
        ["llada-bench", "sweep", "specs/tiny.yaml", "--out", str(out), "--no-report"],
        1100,
    )
    check_job(head, "llada-tiny", done, out, "specs/tiny.yaml")
    runs = [json.loads(p.read_text()) for p in SweepLayout(out).run_files().values()]
    assert {r["status"] for r in runs} == {"ok"}
    assert "FutureWarning" not in done.stdout + done.stderr  # no deprecation warning per forward
    assert all(r["environment"]["device"] == "cpu" for r in runs)


def _stand_in_job(spec: str, out: str) -> int:
    """The job's entry point for the fast test: the real sweep command, the stand-in actor."""
    import ray

    from orchestrator.cli import sweep_command
    from tests import fake_actors

    ray.cloudpickle.register_pickle_by_value(fake_actors)
    return sweep_command(spec, out=Path(out), report=False, actor_class=fake_actors.FakeActor)


if __name__ == "__main__":
    raise SystemExit(_stand_in_job(*sys.argv[1:3]))
