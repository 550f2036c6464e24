"""Write failures: an output path that cannot be written is one line and exit 2 before anything is computed;
a disk that fills mid-sweep keeps the finished result somewhere the message names, and exits 2.

Read-only and full filesystems are real ones: a tmpfs mounted inside a private mount namespace
(`unshare -m`), so nothing outside the test sees it. Without the privilege for that, those tests skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import main
from specs.artifacts import SweepLayout, verify
from specs.loader import PACKAGE_ROOT
from specs.results import RunResult
from tests.sweep_faults import FILL_ENV, finished_sweep, small_spec


def test_out_that_is_a_file(tmp_path: Path, capsys) -> None:
    spec = small_spec(tmp_path)
    file = tmp_path / "results.txt"
    file.write_text("mine")
    assert main(["sweep", str(spec), "--out", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"--out {file}: is a file" in err
    assert file.read_text() == "mine"
    assert main(["sweep", str(spec), "--out", str(file / "sweep")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {file / 'sweep'}: cannot create it (a parent is a file)" in err


def test_runs_that_is_a_file(tmp_path: Path, capsys) -> None:
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    finished_sweep(spec, out)
    shutil.rmtree(out / "runs")
    (out / "runs").write_text("not a directory")
    assert main(["sweep", str(spec), "--out", str(out)]) == 2
    assert f"{out / 'runs'}: is a file" in capsys.readouterr().err


def test_a_refused_result_is_kept_in_the_temporary_directory(tmp_path: Path, monkeypatch) -> None:
    import tempfile

    from orchestrator.plan import plan_runs
    from orchestrator.store import RESCUE_DIR_ENV, rescue_result
    from specs.loader import load_spec
    from tests.sweep_faults import ok_result

    monkeypatch.delenv(RESCUE_DIR_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    run = plan_runs(load_spec(small_spec(tmp_path)))[0]
    kept = rescue_result(ok_result(run, "tiny"), "tiny")
    assert kept == tmp_path / "tmp" / "llada-bench-rescued" / "tiny" / f"{run.run_id}.json"
    assert RunResult.model_validate_json(kept.read_text()).run_id == run.run_id


def in_mount_namespace(script: str, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run a shell script in a private mount namespace (its mounts vanish with it); skip where not allowed."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare to mount a private tmpfs")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs", "tmpfs", "/mnt"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount in a private namespace here: {probe.stderr.decode().strip()}")
    full_env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | (env or {})
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-ec", script], cwd=PACKAGE_ROOT,
                          env=full_env, capture_output=True, text=True, timeout=timeout)


def sweep_cli(spec: Path, out: str) -> str:
    return f"{sys.executable} -m orchestrator.cli sweep {spec} --out {out} --no-report"


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_read_only_mount(tmp_path: Path) -> None:
    spec, mount = small_spec(tmp_path), tmp_path / "mnt"
    mount.mkdir()
    done = in_mount_namespace(f"mount -t tmpfs -o ro tmpfs {mount}; {sweep_cli(spec, str(mount))}")
    assert f"{mount}: cannot write there (read-only filesystem)" in one_line(done)


def test_read_only_runs(tmp_path: Path) -> None:
    spec, out = small_spec(tmp_path), tmp_path / "out"
    finished_sweep(spec, out, leave_out=1)
    runs = out / "runs"
    done = in_mount_namespace(f"mount --bind {runs} {runs}; mount -o remount,bind,ro {runs}; {sweep_cli(spec, str(out))}")
    assert f"{runs}: cannot write there (read-only filesystem)" in one_line(done)
    assert verify(SweepLayout(out)) == []  # nothing was computed, nothing changed


def test_full_disk_before_the_sweep(tmp_path: Path) -> None:
    spec, mount = small_spec(tmp_path), tmp_path / "mnt"
    mount.mkdir()
    done = in_mount_namespace(f"mount -t tmpfs -o size=64k tmpfs {mount}; {sweep_cli(spec, str(mount / 'out'))}")
    assert f"{mount / 'out'}: cannot write there (no space left on the device)" in one_line(done)


@pytest.mark.ray
@pytest.mark.slow
def test_disk_full_mid_sweep_keeps_the_results_and_says_where(tmp_path: Path) -> None:
    """Two workers: the disk fills during whichever of the first two runs ends first, while the other is in flight. Both results are
    kept (one may still fit in the folder), no third run starts, and what was written verifies."""
    from orchestrator.plan import plan_runs
    from specs.loader import load_spec

    spec, mount, after = small_spec(tmp_path), tmp_path / "mnt", tmp_path / "after"
    mount.mkdir()
    planned = plan_runs(load_spec(spec))
    faults, rescue, log = tmp_path / "faults", tmp_path / "rescued", tmp_path / "executed.log"
    faults.mkdir()
    # Both first runs carry the cue: whichever the driver hears from first has filled the disk before its
    # result is written, whatever order a loaded machine starts the two actors in.
    for run in planned[:2]:
        (faults / f"fill-{run.run_id}").touch()
    env = {"LLADA_TEST_FAULT_DIR": str(faults), FILL_ENV: str(mount / "filler"), "LLADA_BENCH_RESCUE_DIR": str(rescue),
           "LLADA_TEST_EXEC_LOG": str(log), "LLADA_TEST_RUN_DELAY_S": "1.0", "LLADA_TEST_ACTORS": "2",
           "PYTHONUNBUFFERED": "1"}
    script = (
        f"mount -t tmpfs -o size=2m tmpfs {mount}\n"
        f"set +e; {sys.executable} -m tests.sweep_faults {spec} {mount / 'out'}; code=$?; set -e\n"
        f"cp -a {mount / 'out'} {after}; exit $code\n"
    )
    done = in_mount_namespace(script, env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"error: cannot write into {mount / 'out'} (No space left on device)" in done.stderr
    executed = log.read_text().split()
    assert sorted(executed) == sorted(r.run_id for r in planned[:2])  # no run started after the failure
    layout = SweepLayout(after)
    kept = {p.stem: p for p in (rescue / "tiny").glob("*.json")}
    assert kept and set(kept) <= {r.run_id for r in planned[:2]}
    assert set(kept) | set(layout.run_files()) == set(executed)  # every computed result is somewhere
    for run_id, path in kept.items():
        assert f"kept: the result of run {run_id} is in {path}" in done.stderr
        assert RunResult.model_validate_json(path.read_text()).run_id == run_id
    assert verify(layout) == []  # what was written is whole and verifies
