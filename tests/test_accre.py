"""container/accre.sbatch without SLURM or Apptainer: `apptainer`, `srun` and `scontrol` are stand-ins that record
how they were called. One node runs the sweep with a private Ray; several start one Ray cluster (a head, then
workers) that the driver joins, stop it workers first, and leave no Ray temp folder behind. TERM (SLURM's
warning before the time limit) reaches the driver and the job exits 3. `just cluster-test` runs the same script
under a real SLURM and Apptainer."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from specs.loader import PACKAGE_ROOT

SBATCH = PACKAGE_ROOT / "container" / "accre.sbatch"

# Every call is one record (ending in \x1e) of its arguments (each ending in \x1f) in $FAKE_LOG, then the Ray
# token it was given in its environment; `ray start` blocks until TERM, the driver (`llada-bench sweep`) too with FAKE_WAIT set.
FAKE_APPTAINER = r"""#!/bin/bash
{ printf '%s\x1f' "$@"; printf 'token=%s\x1e' "${APPTAINERENV_RAY_AUTH_TOKEN:-}"; } >> "$FAKE_LOG"
case "$*" in
    *"ray start"*)
        role=worker; case "$*" in *--head*) role=head ;; esac
        trap 'echo "stop $role" >> "$FAKE_LOG.events"; exit 0' TERM
        echo "start $role" >> "$FAKE_LOG.events"
        while :; do sleep 0.1; done ;;
    *"python -c"*)  # the wait for the nodes: until both have started
        for _ in $(seq 200); do [ "$(grep -c '^start ' "$FAKE_LOG.events")" -ge 2 ] && break; sleep 0.1; done
        echo "joined" >> "$FAKE_LOG.events"
        exit "${FAKE_JOIN:-0}" ;;
    *"llada-bench sweep"*)
        echo "sweep" >> "$FAKE_LOG.events"
        if [ -n "${FAKE_WAIT:-}" ]; then
            trap 'echo "sweep TERM" >> "$FAKE_LOG.events"; exit 3' TERM
            touch "$FAKE_LOG.ready"
            while :; do sleep 0.1; done
        fi
        exit "${FAKE_STATUS:-0}" ;;
esac
"""
# srun: one task on the node --nodelist names, or on the node --exclude leaves (two-node allocations); the step
# (its --job-name and the task's pid) is listed in $FAKE_LOG.steps, where squeue finds it and scancel signals it.
FAKE_SRUN = r"""#!/bin/bash
printf 'srun %s\n' "$*" >> "$FAKE_LOG.events"
node=node1 id=0
while [ "${1:-}" != "${1#--}" ]; do
    case "$1" in --exclude=*) node=node2 id=1 ;; --job-name=*) name="${1#--job-name=}" ;; esac
    shift
done
echo "$name $$" >> "$FAKE_LOG.steps"
exec env SLURMD_NODENAME="$node" SLURM_NODEID="$id" "$@"
"""
FAKE_SCONTROL = r"""#!/bin/bash
case "$1 $2" in
    "show hostnames") printf 'node1\nnode2\n' ;;
    "show node") echo "NodeName=$3 Arch=x86_64 NodeAddr=127.0.0.1 NodeHostName=$3" ;;
esac
"""
FAKE_SQUEUE = r"""#!/bin/bash
awk -v job="$SLURM_JOB_ID" '{ print job "." NR - 1, $1 }' "$FAKE_LOG.steps"
"""
FAKE_SCANCEL = r"""#!/bin/bash
printf 'scancel %s\n' "$*" >> "$FAKE_LOG.events"
kill -TERM "$(awk -v n="${2##*.}" 'NR - 1 == n { print $2 }' "$FAKE_LOG.steps")"
"""


@pytest.fixture
def fake_node(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A submit directory, an image file, an HF cache, and the stand-ins on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {"apptainer": FAKE_APPTAINER, "srun": FAKE_SRUN, "scontrol": FAKE_SCONTROL, "squeue": FAKE_SQUEUE,
             "scancel": FAKE_SCANCEL}  # fmt: skip
    for name, text in fakes.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "llada.sif").write_bytes(b"")
    (tmp_path / "hf").mkdir()
    env = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        SLURM_SUBMIT_DIR=str(tmp_path),
        SLURM_JOB_ID=str(900000 + os.getpid() % 100000),  # the job's Ray folders: /tmp/llada-ray-<job>.*
        CUDA_VISIBLE_DEVICES="0,1,2,3",
        LLADA_HF_CACHE=str(tmp_path / "hf"),
        FAKE_LOG=str(tmp_path / "apptainer.log"),
    )
    for name in ("LLADA_SIF", "LLADA_ARTIFACTS", "SLURM_JOB_NUM_NODES", "SLURM_JOB_NODELIST", "APPTAINERENV_RAY_AUTH_TOKEN"):
        env.pop(name, None)
    return tmp_path, env


def _calls(tmp_path: Path) -> list[tuple[list[str], str]]:
    """(arguments, Ray token in the environment) of every apptainer call, in order."""
    calls = []
    for record in (tmp_path / "apptainer.log").read_text().split("\x1e")[:-1]:
        *args, token = record.split("\x1f")
        calls.append((args, token.removeprefix("token=")))
    return calls


def _events(tmp_path: Path) -> list[str]:
    return (tmp_path / "apptainer.log.events").read_text().splitlines()


def _ray_folders(env: dict[str, str]) -> list[Path]:
    return sorted(Path("/tmp").glob(f"llada-ray-{env['SLURM_JOB_ID']}.*"))


def _sbatch(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SBATCH), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def _two_nodes(env: dict[str, str]) -> dict[str, str]:
    return dict(env, SLURM_JOB_NUM_NODES="2", SLURM_JOB_NODELIST="node[1-2]")


def test_accre_sbatch_asks_for_one_exclusive_a100_node_by_default() -> None:
    directives = dict(
        (line.split()[1].lstrip("-").split("=", 1) + [""])[:2]
        for line in SBATCH.read_text().splitlines()
        if line.startswith("#SBATCH ")
    )
    assert directives["nodes"] == "1" and directives["ntasks-per-node"] == "1" and "exclusive" in directives
    assert re.match(r"^gpu:a100:\d+$", directives["gres"])
    assert directives["mem"] == "0" and directives["time"]
    assert directives["signal"].startswith("B:TERM@")


def test_one_node_runs_the_sweep_in_the_image_with_the_cache_and_artifacts_bound(fake_node) -> None:
    tmp_path, env = fake_node
    done = _sbatch(env, tmp_path, "specs/paper.yaml", "--retry-failed")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nvidia-smi" not in done.stderr or shutil.which("nvidia-smi")  # no "command not found" without one
    [(args, token)] = _calls(tmp_path)
    assert args[:3] == ["exec", "--nv", "--cleanenv"] and token == ""
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3" in args
    assert f"{tmp_path / 'hf'}:/hf-cache" in args
    # In the submit directory, bound at its own path, its ./artifacts with it: the sweep writes there.
    assert _option(args, "--pwd") == [str(tmp_path)] and str(tmp_path) in _option(args, "--bind")
    assert f"LLADA_BENCH_ARTIFACTS={tmp_path / 'artifacts'}" in args and (tmp_path / "artifacts").is_dir()
    ray_tmp = next(a.removeprefix("RAY_TMPDIR=") for a in args if a.startswith("RAY_TMPDIR="))
    assert re.fullmatch(rf"/tmp/llada-ray-{env['SLURM_JOB_ID']}\.\w+", ray_tmp)
    assert not Path(ray_tmp).exists() and _ray_folders(env) == []  # removed once the driver is done
    assert args[-5:] == [str(tmp_path / "llada.sif"), "llada-bench", "sweep", "specs/paper.yaml", "--retry-failed"]


def _option(args: list[str], name: str) -> list[str]:
    """Every value given to an option (`--bind A --bind B` → [A, B])."""
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == name]


def test_the_spec_is_the_users_copy_in_the_submit_directory_or_its_own_folder_bound(fake_node) -> None:
    """A spec in the submit directory (an edited specs/paper.yaml, or one of the user's own) is the one the sweep
    reads: the job runs there, and a spec elsewhere has its folder bound; the log says which copy is read."""
    tmp_path, env = fake_node
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "paper.yaml").write_text("name: edited\n")
    done = _sbatch(env, tmp_path, "specs/paper.yaml")
    assert done.returncode == 0 and f"spec specs/paper.yaml ({tmp_path / 'specs' / 'paper.yaml'})" in done.stdout
    elsewhere = tmp_path.parent / f"{tmp_path.name}-specs"
    elsewhere.mkdir()
    (elsewhere / "mine.yaml").write_text("name: mine\n")
    (tmp_path / "apptainer.log").unlink()
    done = _sbatch(env, tmp_path, str(elsewhere / "mine.yaml"))
    [(args, _)] = _calls(tmp_path)
    assert done.returncode == 0 and str(elsewhere) in _option(args, "--bind")
    assert args[-1] == str(elsewhere / "mine.yaml")
    done = _sbatch(env, tmp_path, "specs/smoke.yaml")
    assert f"spec specs/smoke.yaml (not in {tmp_path}: the image's own copy)" in done.stdout


@pytest.mark.parametrize(("variable", "named"), [("LLADA_ARTIFACTS", "LLADA_ARTIFACTS"),
                                               ("LLADA_HF_CACHE", "LLADA_HF_CACHE"),
                                               ("SLURM_SUBMIT_DIR", "the submit directory")])
@pytest.mark.parametrize("char", [",", ":"])
def test_a_path_apptainer_would_split_is_refused_before_anything_runs(
    fake_node, variable: str, named: str, char: str
) -> None:
    tmp_path, env = fake_node
    odd = tmp_path / f"a{char}b"
    odd.mkdir()
    (odd / "hf").mkdir()
    done = _sbatch(dict(env, **{variable: str(odd)}), tmp_path, "specs/paper.yaml")
    assert done.returncode == 2 and f"{named} ({odd}) contains ',' or ':'" in done.stderr
    assert not (tmp_path / "apptainer.log").exists() and not (tmp_path / "artifacts").exists()
    assert sorted(p.name for p in odd.iterdir()) == ["hf"]


def test_a_refused_sweep_says_to_fix_the_error_not_to_resubmit(fake_node) -> None:
    tmp_path, env = fake_node
    refused = _sbatch(dict(env, FAKE_STATUS="2"), tmp_path, "specs/paper.yaml")
    assert refused.returncode == 2 and "fix that first" in refused.stderr
    assert "again to resume" not in refused.stdout + refused.stderr


def test_one_node_refuses_without_an_image_and_passes_failures_through(fake_node) -> None:
    tmp_path, env = fake_node
    missing = _sbatch(dict(env, LLADA_SIF=str(tmp_path / "nope.sif")), tmp_path)
    assert missing.returncode == 2 and "just image-apptainer" in missing.stderr
    failed = _sbatch(dict(env, FAKE_STATUS="1"), tmp_path)
    assert failed.returncode == 1 and "failed runs" in failed.stdout


def _term_the_driver(env: dict[str, str], tmp_path: Path) -> tuple[int, str]:
    """Start the job, send TERM to the batch script once the driver runs (what --signal=B:TERM@600 does)."""
    job = subprocess.Popen(
        ["bash", str(SBATCH), "specs/paper.yaml"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(env, FAKE_WAIT="1"), cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "apptainer.log.ready").exists():
            assert time.monotonic() < deadline, "the fake sweep never started"
            time.sleep(0.05)
        job.send_signal(signal.SIGTERM)
        out, _ = job.communicate(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
    return job.returncode, out


def test_one_node_passes_the_time_limit_signal_to_the_sweep(fake_node) -> None:
    tmp_path, env = fake_node
    status, out = _term_the_driver(env, tmp_path)
    assert "sweep TERM" in _events(tmp_path)
    assert status == 3 and "submit the same command again to resume" in out
    assert _ray_folders(env) == []


def test_several_nodes_start_one_ray_cluster_the_driver_joins(fake_node) -> None:
    tmp_path, env = fake_node
    done = _sbatch(_two_nodes(env), tmp_path, "specs/paper.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    calls = _calls(tmp_path)
    head = next(args for args, _ in calls if "--head" in args)
    worker = next(args for args, _ in calls if "ray" in args and "--head" not in args and "start" in args)
    driver = next(args for args, _ in calls if "sweep" in args)
    assert {"--port=6379", "--node-ip-address=127.0.0.1", "--num-gpus=4", "--block"} <= set(head)
    assert {"--address=127.0.0.1:6379", "--node-ip-address=127.0.0.1", "--num-gpus=4", "--block"} <= set(worker)
    assert "RAY_ADDRESS=127.0.0.1:6379" in driver and not any(a.startswith("RAY_TMPDIR") for a in driver)
    # Each node's Ray in a temp folder of its own, removed when it stopped.
    folders = [a.removeprefix("--temp-dir=") for a in head + worker if a.startswith("--temp-dir=")]
    assert len(set(folders)) == 2 and _ray_folders(env) == []
    # One token for the job, in every call's environment and on no command line.
    tokens = {token for _, token in calls}
    assert len(tokens) == 1 and re.fullmatch(r"[0-9a-f]{64}", tokens.pop() or "")
    assert not any(token in arg for args, token in calls for arg in args)
    events = _events(tmp_path)
    assert events.index("joined") < events.index("sweep"), "the driver waits until every node has joined"
    assert events.index("stop worker") < events.index("stop head"), "workers stop before the head"
    sruns = [e for e in events if e.startswith("srun ")]  # a step for the head, one for the other node(s)
    assert sorted(s.split(" bash -c ")[0] for s in sruns) == [
        "srun --job-name=llada-ray-head --nodes=1 --ntasks=1 --nodelist=node1",
        "srun --job-name=llada-ray-workers --nodes=1 --ntasks=1 --exclude=node1",
    ]
    # Each step's tasks are sent TERM (srun itself, sent TERM, kills its step at once: no temp folder removed).
    assert [e.split(".")[0] for e in events if e.startswith("scancel")] == ["scancel --signal=TERM " + env["SLURM_JOB_ID"]] * 2


def test_several_nodes_stop_on_term_and_exit_3(fake_node) -> None:
    tmp_path, env = fake_node
    status, out = _term_the_driver(_two_nodes(env), tmp_path)
    events = _events(tmp_path)
    assert status == 3 and "submit the same command again to resume" in out
    assert events.index("sweep TERM") < events.index("stop worker") < events.index("stop head")
    assert _ray_folders(env) == []


def test_several_nodes_run_nothing_when_the_cluster_does_not_form(fake_node) -> None:
    tmp_path, env = fake_node
    failed = _sbatch(dict(_two_nodes(env), FAKE_JOIN="1"), tmp_path, "specs/paper.yaml")
    assert failed.returncode == 1 and "did not form" in failed.stderr
    events = _events(tmp_path)
    assert "sweep" not in events and {"stop head", "stop worker"} <= set(events)
    assert _ray_folders(env) == []
