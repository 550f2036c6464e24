"""`verify` covers the files people read: each file the report wrote is checked against the checksum the report
recorded, an edit to any of them is named, rendering again rewrites them and their record, and a folder
rendered before the record existed (the committed H200 sweeps) still verifies, naming each file it cannot check."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import polars as pl
import pytest

from orchestrator.cli import main
from report import render as render_module
from report.render import render_report
from specs.artifacts import SweepLayout
from specs.loader import PACKAGE_ROOT
from specs.report_record import report_outputs

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The H200 accelerated-variants sweep (10 runs), unpacked and rendered by this version."""
    into = tmp_path_factory.mktemp("rendered")
    with tarfile.open(PACKAGE_ROOT / "tests" / "data" / "h200" / "accel-8b.tgz") as archive:
        archive.extractall(into, filter="data")
    render_report(into / "accel-8b", echo=False)
    return into / "accel-8b"


@pytest.fixture
def sweep(rendered: Path, tmp_path: Path) -> Path:
    """A copy of the rendered sweep, to damage."""
    return Path(shutil.copytree(rendered, tmp_path / "accel-8b"))


def verify(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["verify", str(root)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def edit_verdict(path: Path) -> None:
    findings = json.loads(path.read_text())
    findings["verdict"] = ["LLaDA is faster everywhere."]
    path.write_text(json.dumps(findings))


def halve_latencies(path: Path) -> None:
    table = pl.read_parquet(path)
    table.with_columns(pl.col("latency_e2e_s_median") / 2).write_parquet(path)


EDITS = {
    "findings.json": edit_verdict,
    "report.md": lambda p: p.write_text(p.read_text().replace("LLaDA", "LLaMA")),
    "report.html": lambda p: p.write_text(p.read_text() + "<p>added</p>"),
    "results.parquet": halve_latencies,
    "figures/roofline.svg": lambda p: p.write_text(p.read_text().replace("<svg", "<svg data-edited='1'", 1)),
}


def test_an_edit_to_any_file_the_report_wrote_is_named_until_the_report_is_rendered_again(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = len(report_outputs(SweepLayout(sweep)))
    code, out, _ = verify(sweep, capsys)
    assert code == 0 and f"the report's {outputs} files match)" in out
    for name, edit in EDITS.items():
        edit(sweep / name)
    code, out, _ = verify(sweep, capsys)
    assert code == 1
    for name in EDITS:
        assert f"{sweep / name}: checksum mismatch: edited after the report wrote it" in out, name
    render_report(sweep, echo=False)  # the report's own outputs never stop it: it rewrites them and their record
    code, out, _ = verify(sweep, capsys)
    assert code == 0 and f"the report's {outputs} files match)" in out


def test_a_folder_rendered_before_the_record_verifies_and_names_every_file_it_cannot_check(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (sweep / "report-manifest.json").unlink()
    code, out, err = verify(sweep, capsys)
    assert code == 0
    for path in report_outputs(SweepLayout(sweep)):
        assert f"{path}: not covered (no checksum recorded)" in out
    assert "the report recorded no checksums (rendered by an earlier version, or interrupted)" in err
    assert f"`llada-bench report {sweep}` renders it again and records them" in err


@pytest.mark.parametrize("name", ["accel-8b", "campaign-h100"])
def test_the_committed_h200_sweeps_verify_with_every_report_file_covered(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = PACKAGE_ROOT / "results" / "h200" / name
    code, out, _ = verify(root, capsys)
    assert code == 0, out
    written = len(report_outputs(SweepLayout(root)))
    assert f"the report's {written} files match" in out, out
    assert "not covered" not in out


def test_what_the_report_did_not_write_is_named_and_gone_files_are_said(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (sweep / "figures" / "mine.png").write_bytes(b"\x89PNG my own figure")
    (sweep / "report.html").unlink()  # left out on purpose, as the committed H200 folders leave it out
    code, out, err = verify(sweep, capsys)
    assert code == 0
    assert f"{sweep / 'figures' / 'mine.png'}: not covered (no checksum recorded)" in out
    assert "the report did not write them (it records every file it writes)" in err
    assert f"the report wrote are gone: {sweep / 'report.html'}" in err


def test_a_record_naming_a_file_the_report_never_writes_is_named_and_that_file_never_read(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record_path = sweep / "report-manifest.json"
    record = json.loads(record_path.read_text())
    record["files"]["../elsewhere.txt"] = "0" * 64
    record["files"]["spec.yaml"] = "0" * 64
    record_path.write_text(json.dumps(record))
    code, out, _ = verify(sweep, capsys)
    assert code == 1
    assert f"{sweep / '../elsewhere.txt'}: named by report-manifest.json, but no report writes it" in out
    assert f"{sweep / 'spec.yaml'}: named by report-manifest.json, but no report writes it" in out


def test_a_report_rendered_before_the_runs_changed_is_said_to_be_behind(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = sweep / "manifest.json"
    data = json.loads(manifest.read_text())
    dropped = sorted(data["runs"])[0]
    (sweep / "runs" / f"{dropped}.json").unlink()
    del data["runs"][dropped]
    manifest.write_text(json.dumps(data))  # as a run recomputed after the report would change it
    code, _, err = verify(sweep, capsys)
    assert code == 0
    assert "the report was rendered before the runs last changed, so it does not show them all" in err


@pytest.mark.slow
def test_an_interrupted_report_leaves_files_not_covered_never_called_edited(
    sweep: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(render_module, "findings_json", interrupted)  # after report.html and report.md are written
    with pytest.raises(KeyboardInterrupt):
        render_report(sweep, echo=False)
    code, out, _ = verify(sweep, capsys)
    assert code == 0 and "checksum mismatch" not in out
    assert f"{sweep / 'report.md'}: not covered (no checksum recorded)" in out
