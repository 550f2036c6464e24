"""`llada-bench report DIR`: exit codes and one-line errors, the refusal to render tampered artifacts (and
--allow-unverified), the summary the driver prints, and the house rule that the report never imports a model."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from report_fixtures import SMOKE_LIKE, write_sweep

from report.cli import main
from report.document.render import UnverifiedArtifactsError, render_report


def tamper(root: Path) -> Path:
    victim = min((root / "runs").glob("*.json"))
    victim.write_text(victim.read_text(encoding="utf-8").replace('"ok"', '"oom"', 1), encoding="utf-8")
    return victim


def test_tampered_artifacts_are_refused_naming_the_file(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, SMOKE_LIKE)
    victim = tamper(root)
    with pytest.raises(UnverifiedArtifactsError, match=re.escape(str(victim))):
        render_report(root, echo=False)
    assert not (root / "report.html").exists() and not (root / "results.parquet").exists()


def test_truncated_file_is_named_when_rendering_unverified(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, SMOKE_LIKE)
    victim = min((root / "runs").glob("*.json"))
    victim.write_text(victim.read_text(encoding="utf-8")[:100], encoding="utf-8")
    outputs = render_report(root, allow_unverified=True, echo=False)
    assert any(str(victim) in p and "unreadable" in p for p in outputs.problems)
    assert pl.read_parquet(outputs.results_parquet).height == len(list((root / "runs").glob("*.json"))) - 1


def test_extra_and_missing_files_are_refused(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, SMOKE_LIKE)
    (root / "runs" / "deadbeef0000.json").write_text("{}", encoding="utf-8")
    with pytest.raises(UnverifiedArtifactsError, match="extra file not in the manifest"):
        render_report(root, echo=False)
    (root / "manifest.json").unlink()
    with pytest.raises(UnverifiedArtifactsError, match="manifest.json: missing"):
        render_report(root, echo=False)


# ------------------------------------------------------------------ the command


def test_cli_renders_refuses_and_renders_unverified_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_sweep(tmp_path, SMOKE_LIKE)
    assert main([str(root)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:5] == ["model", "impl", "B", "P", "N_out"]  # the summary the driver shows
    assert "llama-tiny" in out and f"report: {root / 'report.html'}" in out
    # The answer closes the output: the verdict after the runs, then where the Findings are, the report's path last.
    lines = out.rstrip().splitlines()
    verdict = lines.index("Verdict")
    assert lines[-1].startswith(f"report: {root / 'report.html'}") and len(lines) - verdict <= 30
    assert any("Vanilla against vanilla (both eager)" in line for line in lines[verdict:])
    assert any(line.startswith("  - How sure: ") for line in lines[verdict:])
    assert "Findings" not in lines  # the Findings table is the report's, no longer printed
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such sweep directory" in err
    assert main([str(root), "--hardware", "tpu-v9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "allowed: " in err and "a100-sxm4-80gb" in err
    victim = tamper(root)
    assert main([str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-unverified" in err and str(victim) in err
    assert main([str(root), "--allow-unverified"]) == 0
    html = (root / "report.html").read_text(encoding="utf-8")
    assert "FAILED verification" in html and victim.name in html and "checksum mismatch" in html
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2


def test_the_report_never_imports_a_model() -> None:
    code = (
        "import sys, report.document.render, report.cli, report.document.catalog\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'transformers', 'workers', 'ray'})\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


def test_a_sweep_of_failures_or_no_runs_still_renders(tmp_path: Path) -> None:
    from report_fixtures import FixtureGrid, HardwareKind

    from specs.artifacts import Manifest, sha256_file

    grid = FixtureGrid(name="walls", batch_sizes=(64,), generation_lengths=(128,), steps=(64,), block_lengths=(64,),
                       hardware=(HardwareKind("NVIDIA A100-SXM4-80GB", "A100", capacity_bytes=1),),
                       extra_failures=False)
    outputs = render_report(write_sweep(tmp_path, grid), echo=False)
    assert [f.stem for f in outputs.figures] == ["memory_heatmap"]  # every run hit the memory wall
    assert {s.stem: s.reason for s in outputs.skipped}["throughput_by_batch"] == "no successful runs with throughput samples"

    empty = write_sweep(tmp_path / "empty", SMOKE_LIKE)
    for run in (empty / "runs").glob("*.json"):
        run.unlink()
    manifest = Manifest(sweep="smoke", spec_sha256=sha256_file(empty / "spec.yaml"), runs={})
    (empty / "manifest.json").write_text(manifest.model_dump_json(), encoding="utf-8")
    outputs = render_report(empty, echo=False)
    assert not outputs.figures and pl.read_parquet(outputs.results_parquet).height == 0
    assert "no runs with a recorded environment" in outputs.html.read_text(encoding="utf-8")
