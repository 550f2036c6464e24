"""The output directory: a sweep writes only into a directory it made, an empty one or its own sweep's, and
removes only temporary files it named itself; the report writes only into a sweep's directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.sweepdir import SweepDirError, claim
from specs.safefile import WRITER_TOKEN
from tests.sweep_faults import finished_sweep, small_spec


def user_folder(root: Path) -> dict[Path, bytes]:
    """A folder of someone's files, including names a sweep or its report would write."""
    files = {
        root / "notes.txt": b"my notes",
        root / "draft.tmp": b"an editor's swap file",
        root / "deep" / "down" / "work.tmp": b"keep me",
        root / "report.html": b"<p>my own report</p>",
        root / "figures" / "photo.png": b"\x89PNG my photo",
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def one_line_error(captured: str) -> str:
    lines = captured.strip().splitlines()
    assert len(lines) == 1, captured
    assert "Traceback" not in captured
    return lines[0]


def test_sweep_refuses_a_folder_of_other_files_and_touches_none(tmp_path: Path, capsys) -> None:
    spec = small_spec(tmp_path)
    home = tmp_path / "home"
    files = user_folder(home)
    assert main(["sweep", str(spec), "--out", str(home)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert f"--out {home}: not empty and holds no sweep" in line and "choose another --out" in line
    assert {p: p.read_bytes() for p in files} == files
    assert sorted(p.name for p in home.iterdir()) == ["deep", "draft.tmp", "figures", "notes.txt", "report.html"]


def test_force_does_not_open_a_folder_of_other_files(tmp_path: Path, capsys) -> None:
    spec = small_spec(tmp_path)
    files = user_folder(tmp_path / "home")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "home"), "--force"]) == 2
    assert "holds no sweep" in one_line_error(capsys.readouterr().err)
    assert {p: p.read_bytes() for p in files} == files


def test_resume_removes_only_the_temporaries_its_record_names(tmp_path: Path, capsys) -> None:
    """A temporary is removed only when a writer the record names made it; a file that merely looks like one of the
    package's temporaries (its name's shape, without a recorded writer) is the user's and stays."""
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    finished_sweep(spec, out)
    own = [out / "runs" / f".0123456789ab.json.{WRITER_TOKEN}.k2j3.tmp", out / f".manifest.json.{WRITER_TOKEN}.x1.tmp",
           out / "figures" / f".roofline.png.{WRITER_TOKEN}.q_9.tmp"]
    theirs = [out / "mine.tmp", out / "runs" / "notes.tmp", out / "figures" / "keep.tmp", out / "report.md.tmp",
              out / "report.html.tmp", out / "figures" / ".sketch.png.v2.tmp", out / ".manifest.json.x1.tmp",
              out / "runs" / ".0123456789ab.json.k2j3.tmp", out / "figures" / ".roofline.png.feedfacecafebeef.ab.tmp"]
    for path in own + theirs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    assert main(["sweep", str(spec), "--out", str(out), "--no-report"]) == 0
    assert "nothing to run" in capsys.readouterr().out
    assert [p for p in own if p.exists()] == []
    assert [p for p in theirs if not p.exists()] == []


def test_claim_accepts_new_empty_and_own_directories(tmp_path: Path) -> None:
    claim(tmp_path / "new" / "nested")
    assert (tmp_path / "new" / "nested").is_dir()
    (tmp_path / "empty").mkdir()
    claim(tmp_path / "empty")
    spec = small_spec(tmp_path)
    finished_sweep(spec, tmp_path / "own")
    claim(tmp_path / "own")
    (tmp_path / "born").mkdir()
    (tmp_path / "born" / "sweep.lock").write_text("")  # a sweep killed as it started
    claim(tmp_path / "born")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "spec.yaml").write_text("name: mine\n")  # a name a sweep uses is not a sweep
    with pytest.raises(SweepDirError, match="holds no sweep"):
        claim(tmp_path / "theirs")


def test_report_refuses_a_folder_that_holds_no_sweep(tmp_path: Path, capsys) -> None:
    from report.cli import main as report_main

    files = user_folder(tmp_path / "home")
    assert report_main([str(tmp_path / "home"), "--allow-unverified"]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "holds no sweep" in line
    assert {p: p.read_bytes() for p in files} == files
    assert not (tmp_path / "home" / "results.parquet").exists()
