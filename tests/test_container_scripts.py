"""What the container scripts do to the machine they run on: they touch only what they made, replace a file the
user named only once its successor is whole, and remove no image but this project's. Each runs with podman
(and what image-test.sh checks for) faked on PATH, so nothing is built; image-check.sh runs for real."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from specs.loader import PACKAGE_ROOT

ROOT = PACKAGE_ROOT
CONTAINER = ROOT / "container"
BIN = Path(sys.executable).parent
PROJECT_LABEL = "label=org.opencontainers.image.title=llada-bench"

# A podman that logs every call and answers what image-test.sh and image-archive ask, as a machine with the
# image built would; FAKE_SAVE=fail makes `podman save` fail as it does when the image was never built.
FAKE_PODMAN = r"""#!/bin/bash
printf '%s\n' "$*" >> "$FAKE_LOG"
case "$1 $2" in
    "--version "*) echo "podman version 4.3.1" ;;
    "images "*) echo "localhost/llada-base:trixie-$TODAY" ;;
    "image inspect")
        case "$*" in
            *ManifestType*) echo 'application/vnd.docker.distribution.manifest.v2+json {"Test":["CMD","llada-bench"]}' ;;
            *) echo "image 0123456789ab: 42 bytes" ;;
        esac ;;
    "save "*)
        [ "${FAKE_SAVE:-}" = fail ] && { echo "Error: localhost/llada-bench:registry: image not known" >&2; exit 125; }
        while [ "$#" -gt 0 ]; do [ "$1" = --output ] && echo "new archive" > "$2"; shift; done ;;
    "run "*)
        case "$*" in
            *"just sweep"*) echo "finished 3 runs (3 ok) in 1.0 s"; echo "artifacts/smoke: verified (3 runs)" ;;
            *pytest*) echo "3 passed" ;;
        esac ;;
esac
exit 0
"""


def _fake_tools(tmp_path: Path) -> dict[str, str]:
    """PATH with the fake podman (and the engine tools image-test.sh looks for), the venv's `just` and the system."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text(FAKE_PODMAN)
    for name in ("buildah", "runc", "debootstrap", "newuidmap"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
        FAKE_LOG=str(tmp_path / "podman.log"),
        TODAY=datetime.now(UTC).strftime("%Y%m%d"),
    )


def _image_archive(env: dict[str, str], tar: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["just", "image-archive", str(tar)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )


def test_image_archive_keeps_the_archive_it_was_told_to_replace_when_the_save_fails(tmp_path: Path) -> None:
    env = _fake_tools(tmp_path)
    tar = tmp_path / "out" / "llada-bench.tar"
    tar.parent.mkdir()
    tar.write_text("last good archive")
    failed = _image_archive(dict(env, FAKE_SAVE="fail"), tar)
    assert failed.returncode != 0 and "image not known" in failed.stderr
    assert tar.read_text() == "last good archive"
    assert sorted(p.name for p in tar.parent.iterdir()) == ["llada-bench.tar"]  # no half-written archive left


def test_image_archive_replaces_the_archive_once_the_new_one_is_whole(tmp_path: Path) -> None:
    env = _fake_tools(tmp_path)
    tar = tmp_path / "out" / "llada-bench.tar"
    tar.parent.mkdir()
    tar.write_text("last good archive")
    done = _image_archive(env, tar)
    assert done.returncode == 0, done.stderr
    assert tar.read_text() == "new archive\n"
    assert sorted(p.name for p in tar.parent.iterdir()) == ["llada-bench.tar"]
    saved = next(line for line in (tmp_path / "podman.log").read_text().splitlines() if line.startswith("save"))
    assert "--output " + str(tar) not in saved, "podman writes a temporary beside it, never the file itself"


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="image-test.sh runs as root only")


def _image_test(env: dict[str, str], cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CONTAINER / "image-test.sh"), "--cache", str(cache), *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip


def _tree(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under `folder` with its owner, mode and (files) content: what a script must leave alone."""
    return {
        str(p.relative_to(folder)): (p.stat().st_uid, p.stat().st_mode, p.read_text() if p.is_file() else "")
        for p in sorted(folder.rglob("*"))
    }


@root_only
def test_image_test_leaves_what_it_did_not_make_in_its_cache_dir(tmp_path: Path) -> None:
    """`--cache DIR` with a folder `run` of the user's in it (read literally, `--cache /` and /run): it is neither
    removed nor given to the run's uid, with the sweep and tests skipped or not."""
    env = _fake_tools(tmp_path)
    cache = tmp_path / "cache"
    (cache / "run").mkdir(parents=True)
    (cache / "run" / "keep.txt").write_text("the user's")
    before = _tree(cache)
    done = _image_test(env, cache, "--no-tests", "--no-sweep")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _tree(cache) == before
    ran = _image_test(env, cache)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "3/3 ok" in ran.stdout and "3 passed" in ran.stdout
    after = _tree(cache)
    assert {k: v for k, v in after.items() if not k.startswith("image-test.run")} == before
    assert (cache / "image-test.run" / ".made-by-llada-bench-image-test").is_file()
    assert (cache / "image-test.run" / "home").stat().st_uid == 4242


@root_only
def test_image_test_refuses_a_run_folder_it_did_not_make(tmp_path: Path) -> None:
    env = _fake_tools(tmp_path)
    cache = tmp_path / "cache"
    (cache / "image-test.run").mkdir(parents=True)
    (cache / "image-test.run" / "notes.txt").write_text("the user's")
    refused = _image_test(env, cache, "--no-tests")
    assert refused.returncode == 2 and "not made by this script" in refused.stderr
    assert (cache / "image-test.run" / "notes.txt").read_text() == "the user's"


@root_only
def test_image_test_prunes_only_this_projects_dangling_images(tmp_path: Path) -> None:
    env = _fake_tools(tmp_path)
    done = _image_test(env, tmp_path / "cache", "--no-tests", "--no-sweep")
    assert done.returncode == 0, done.stdout + done.stderr
    prunes = [line for line in (tmp_path / "podman.log").read_text().splitlines() if line.startswith("image prune")]
    assert prunes == [f"image prune --force --filter {PROJECT_LABEL}"]


def test_the_label_image_test_prunes_by_is_on_both_recipes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    apptainer = (ROOT / "Apptainer.def").read_text()
    key, _, value = PROJECT_LABEL.removeprefix("label=").partition("=")
    assert f"LABEL {key}={value}" in dockerfile
    assert f"    {key} {value}\n" in apptainer


# ---------------------------------------------------------------- the image's own checks (apptainer test)


def _image_check(claims: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", LLADA_BENCH_IMAGE_CLAIMS=claims)
    return subprocess.run(
        [str(CONTAINER / "image-check.sh")], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


@pytest.mark.slow
def test_image_check_passes_here_and_fails_naming_a_claim_this_machine_cannot_meet() -> None:
    """What `apptainer test llada.sif` runs: every check passes for an image that claims nothing; one that
    claims flash-attn on a machine without it fails (exit 1) and names the check."""
    passed = _image_check("")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "image check: all passed" in passed.stdout and "FAIL" not in passed.stdout
    assert "GPU: none visible, not checked" in passed.stdout or "ok    GPU" in passed.stdout
    if importlib.util.find_spec("flash_attn") is None:
        failed = _image_check("flash_attn")
        assert failed.returncode == 1
        assert "FAIL  image: what it claims" in failed.stdout and "1 failed" in failed.stderr


# ---------------------------------------------------------------- just cluster-test


def test_cluster_test_refuses_bad_arguments_before_touching_anything() -> None:
    ran = subprocess.run(
        [str(CONTAINER / "cluster-test.sh"), "--frobnicate"], capture_output=True, text=True, timeout=30
    )
    assert ran.returncode == 2 and "unknown argument" in ran.stderr and "== install" not in ran.stdout
    helped = subprocess.run([str(CONTAINER / "cluster-test.sh"), "--help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0
    for stage in ("install", "sif", "cluster", "a ", "test", "b ", "c ", "d "):
        assert f"\n  {stage}" in helped.stdout, stage


# The tools the cluster test's outside part calls, faked: each logs its call; `apptainer build` writes the image it
# is asked for and `unshare` (the cluster, in its namespace) only writes the summary and times the checks would.
FAKE_CLUSTER_TOOL = r"""#!/bin/bash
printf '%s %s\n' "$(basename "$0")" "$*" >> "$FAKE_LOG"
case "$(basename "$0") $1" in
    "podman image") case "$*" in *Size*) echo "${FAKE_IMAGE_BYTES:-1000}" ;; *) echo "sha256:0123456789abcdef" ;; esac ;;
    "podman info") echo "$FAKE_LOG" ;;
    "apptainer build") for arg; do case "$arg" in *.sif) echo "built here" > "$arg" ;; esac; done ;;
    "unshare --net") while [ "$#" -gt 0 ]; do [ "$1" = --inside ] && echo "no checks" | tee "$2/summary" "$2/times"; shift; done ;;
esac
exit 0
"""


def _cluster_test(tmp_path: Path, root: Path, *args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "cluster-bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("apptainer", "podman", "slurmd", "slurmctld", "sbatch", "munged", "ip", "unshare"):
        (bin_dir / name).write_text(FAKE_CLUSTER_TOOL)
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", FAKE_LOG=str(tmp_path / "tools.log"),
               APPTAINER_PREFIX=str(tmp_path / "no-apptainer"), **env_vars)
    return subprocess.run([str(root / "container" / "cluster-test.sh"), *args], capture_output=True, text=True,
                          env=env, timeout=60)


def _project_copy(tmp_path: Path) -> Path:
    """The script's own folder, so that its build/llada.sif lands under tmp_path."""
    copy = tmp_path / "project"
    (copy / "container").mkdir(parents=True)
    for name in ("cluster-test.sh", "stages.sh"):
        shutil.copy2(CONTAINER / name, copy / "container" / name)
    return copy


@root_only
def test_cluster_test_releases_the_image_only_when_asked_and_warns_where_disk_looks_short(tmp_path: Path) -> None:
    """--release-image removes the image from podman's storage after saving it and before Apptainer unpacks it;
    without it the image stays. An image too large for the free space gets a warning naming the filesystem."""
    copy = _project_copy(tmp_path)
    log = tmp_path / "tools.log"
    huge = _cluster_test(tmp_path, copy, "--release-image", FAKE_IMAGE_BYTES=str(10**16))
    assert huge.returncode == 0, huge.stdout + huge.stderr
    calls = [c.split(" ", 2)[:2] for c in log.read_text().splitlines()]
    assert calls.index(["podman", "save"]) < calls.index(["podman", "rmi"]) < calls.index(["apptainer", "build"])
    assert "released localhost/llada-bench:registry from podman's storage" in huge.stdout
    warning = next(line for line in huge.stderr.splitlines() if "warning: the SIF build may need" in line)
    assert "set APPTAINER_TMPDIR" in warning and "--release-image" not in warning  # given already
    shutil.rmtree(copy / "build")
    log.unlink()
    kept = _cluster_test(tmp_path, copy, FAKE_IMAGE_BYTES=str(10**16))
    assert kept.returncode == 0 and "or pass --release-image" in kept.stderr
    assert ["podman", "rmi"] not in [c.split(" ", 2)[:2] for c in log.read_text().splitlines()]
    shutil.rmtree(copy / "build")
    small = _cluster_test(tmp_path, copy)
    assert small.returncode == 0 and "warning" not in small.stderr


def test_cluster_test_never_builds_over_a_sif_it_did_not_build(tmp_path: Path) -> None:
    """--sif names an image to test as it is; build/llada.sif is replaced only while it is the file the script
    built (its stamp says so). Anything else is refused by name before anything runs, and kept."""
    missing = _cluster_test(tmp_path, ROOT, "--sif", str(tmp_path / "none.sif"))
    assert missing.returncode == 2 and "no such file" in missing.stderr and "never builds one" in missing.stderr
    copy = _project_copy(tmp_path)  # with a build/llada.sif of the user's
    (copy / "build").mkdir()
    (copy / "build" / "llada.sif").write_text("the user's own image")
    refused = _cluster_test(tmp_path, copy)
    assert refused.returncode == 2 and "was not built by this script" in refused.stderr
    assert f"--sif {copy / 'build' / 'llada.sif'}" in refused.stderr
    (copy / "build" / "llada.sif.image").write_text("sha256:0123456789abcdef\n1 1\n")  # a stamp of another file
    assert _cluster_test(tmp_path, copy).returncode == 2
    assert (copy / "build" / "llada.sif").read_text() == "the user's own image"
    assert not (tmp_path / "tools.log").exists()


@root_only
def test_cluster_test_tests_a_given_sif_as_it_is(tmp_path: Path) -> None:
    mine = tmp_path / "mine.sif"
    mine.write_text("the user's own image")
    (tmp_path / "mine.sif.image").write_text("sha256:an-older-image\n")  # names another image: still not rebuilt
    ran = _cluster_test(tmp_path, ROOT, "--sif", str(mine))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "testing " + str(mine) + " as given" in ran.stdout
    assert mine.read_text() == "the user's own image"
    calls = (tmp_path / "tools.log").read_text().splitlines()
    assert not [c for c in calls if c.startswith(("podman save", "apptainer build"))], calls
