"""gpu-round's arguments blame what the user gave: $OUT taken as the export is said, and named in its errors; a
--resume folder that holds no export is refused, dry run included."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.gpu_round.run import EXIT_USAGE, main
from orchestrator.gpu_round.args import OUT_NAMED, parse
from tests.round_fakes import FakeMachine, call


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err


def test_out_becomes_the_export_only_with_a_word_and_its_errors_name_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("OUT", str(tmp_path / "round" / "out"))
    with pytest.raises(SystemExit) as exited:
        parse(["--round", str(tmp_path / "round")])
    err = _err(capsys)
    assert exited.value.code == 2 and err.count("\n") == 1
    assert "argument $OUT (the environment variable --export defaults to)" in err and "argument --export" not in err
    with pytest.raises(SystemExit):  # given, --export is named as given
        parse(["--round", str(tmp_path / "round"), "--export", str(tmp_path / "round" / "x")])
    assert "argument --export:" in _err(capsys)
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    args = parse(["--round", str(tmp_path / "round")])
    assert args.export == tmp_path / "out" and args.export_named == OUT_NAMED
    assert call(FakeMachine(device=None), tmp_path / "round") == EXIT_USAGE  # no CUDA: refused after saying so
    err = _err(capsys)
    assert err.startswith(f"exporting each piece to {tmp_path / 'out'}, from $OUT") and "no CUDA device" in err
    monkeypatch.delenv("OUT")
    assert parse(["--round", str(tmp_path / "round")]).export is None


def test_a_resume_folder_that_holds_no_export_is_refused_dry_run_included(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    empty = tmp_path / "notes"
    empty.mkdir()
    (empty / "notes.txt").write_text("mine")
    for mode in (["--dry-run"], ["--goals"], []):
        with pytest.raises(SystemExit) as exited:
            main(["--round", str(tmp_path / "round"), *mode, "--resume", str(empty)])
        err = _err(capsys)
        assert exited.value.code == 2 and err.count("\n") == 1 and "holds no round's export" in err, err
    assert not (tmp_path / "round").exists()
