"""A sweep whose results would be discarded with its container says so before it runs: inside Apptainer, an
output directory on the container's own scratch (a contained HOME or /tmp, the image under --writable-tmpfs)
rather than on a directory bound from the host; under `ray job submit`, a relative one. The mount table is a
file written here in /proc/self/mountinfo's format, naming this test's own directories' device."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.sweepdir import SweepDirError, vanishing

APPTAINER = {"APPTAINER_CONTAINER": "/data/llada.sif"}
SESSION = "/usr/local/apptainer/var/apptainer/mnt/session"


def _dev(path: Path) -> str:
    st_dev = path.stat().st_dev
    return f"{os.major(st_dev)}:{os.minor(st_dev)}"


def _mountinfo(tmp_path: Path, *lines: str) -> Path:
    file = tmp_path / "mountinfo"
    file.write_text("".join(line + "\n" for line in lines))
    return file


def _line(dev: str, point: str, fstype: str, options: str = "rw") -> str:
    return f"36 35 {dev} / {point} rw,relatime shared:1 - {fstype} {fstype} {options}"


def test_outside_a_container_nothing_vanishes(tmp_path: Path) -> None:
    table = _mountinfo(tmp_path, _line(_dev(tmp_path), "/etc/passwd", "tmpfs"))
    assert vanishing(tmp_path / "artifacts" / "smoke", env={}, mountinfo=table) is None


def test_apptainer_scratch_vanishes_a_bound_host_directory_does_not(tmp_path: Path) -> None:
    """--containall: HOME and /tmp are on the session tmpfs that also holds the passwd file Apptainer made."""
    scratch = _mountinfo(tmp_path, _line("0:40", "/etc/group", "tmpfs"), _line(_dev(tmp_path), "/etc/passwd", "tmpfs"))
    reason = vanishing(tmp_path / "artifacts" / "smoke", env=APPTAINER, mountinfo=scratch)
    assert reason is not None and "scratch" in reason and "--containall" in reason
    bound = _mountinfo(tmp_path, _line("0:40", "/etc/passwd", "tmpfs"), _line(_dev(tmp_path), "/work", "ext4"))
    assert vanishing(tmp_path / "artifacts" / "smoke", env=APPTAINER, mountinfo=bound) is None


def test_the_image_made_writable_by_writable_tmpfs_vanishes_a_persistent_overlay_does_not(tmp_path: Path) -> None:
    upper = f"rw,lowerdir={SESSION}/rootfs,upperdir={SESSION}/tmpfs/upper,workdir={SESSION}/tmpfs/work"
    writable = _mountinfo(tmp_path, _line(_dev(tmp_path), "/", "overlay", upper))
    reason = vanishing(tmp_path / "artifacts", env=APPTAINER, mountinfo=writable)
    assert reason is not None and "--writable-tmpfs" in reason
    kept = _mountinfo(tmp_path, _line(_dev(tmp_path), "/", "overlay", "rw,lowerdir=/a,upperdir=/data/overlay/upper"))
    assert vanishing(tmp_path / "artifacts", env=APPTAINER, mountinfo=kept) is None


def test_a_ray_job_loses_a_relative_output_directory_only(tmp_path: Path) -> None:
    job = {"RAY_JOB_CONFIG_JSON_ENV_VAR": "{}"}
    empty = _mountinfo(tmp_path)
    assert "ray job submit" in (vanishing(Path("artifacts/smoke"), env=job, mountinfo=empty) or "")
    assert vanishing(tmp_path / "artifacts", env=job, mountinfo=empty) is None
    assert vanishing(Path("artifacts/smoke"), env={"RAY_ADDRESS": "10.0.0.1:6379"}, mountinfo=empty) is None


def test_the_default_output_that_would_vanish_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "vanishing", lambda root: "the container's own scratch space")
    assert cli.main(["sweep", "specs/tiny.yaml"]) == cli.EXIT_USAGE
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "would vanish" in error and '--bind "$PWD" --pwd "$PWD"' in error
    assert list(tmp_path.iterdir()) == []


def test_an_output_named_with_out_is_warned_about_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "vanishing", lambda root: "the container's own scratch space")
    cli._refuse_vanishing(tmp_path / "out", chosen=True)
    assert capsys.readouterr().err.startswith(f"warning: --out {tmp_path / 'out'} (in ")
    with pytest.raises(SweepDirError, match="would vanish"):
        cli._refuse_vanishing(tmp_path / "out", chosen=False)
