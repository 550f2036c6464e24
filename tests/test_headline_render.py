"""A round's export into results/<gpu>/headline/ (orchestrator/gpu_round/results.py) and the headline table from it
(report/answer/headline.py), on the H200's accel-8b artifacts: the import verifies before it writes and never replaces a
folder or sweep it did not make; the table's provenance is read from the runs; the 4-step rule is applied to a
full run's own steps; the README's block is filled between its markers alone."""

from __future__ import annotations

import json
import shutil
import statistics
import tarfile
from pathlib import Path

import pytest

from orchestrator.gpu_round.results import import_headline
from orchestrator.gpu_round.results import main as import_main
from orchestrator.gpu_round.state import PieceRecord, RoundError, RoundLayout, pack
from report.answer.headline import (
    HEADLINE_BEGIN,
    HEADLINE_END,
    HeadlineError,
    extrapolation_check,
    fill_block,
    render,
)
from report.answer.headline import main as headline_main
from specs.artifacts import SweepLayout, load_results
from specs.loader import PACKAGE_ROOT
from specs.model_spec import CheckpointSource
from specs.round_record import HeadlineSweepRecord, headline_refusal, models_of

DATA = Path(__file__).parent / "data" / "h200"


def _export(tmp_path: Path) -> Path:
    """An export holding accel-8b as the headline piece's sweep, as a call packs it."""
    layout = RoundLayout(tmp_path / "round")
    with tarfile.open(DATA / "accel-8b.tgz") as archive:
        archive.extractall(layout.piece("headline"), filter="data")
    export = tmp_path / "export"
    assert pack(layout, "headline", PieceRecord(status="done", attempts=1, wall_s=300.0), export) is None
    return export


def test_an_export_s_headline_goes_into_results_gpu_headline_with_its_record(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (sweep,) = import_headline(_export(tmp_path), results)
    assert sweep == results / "h200" / "headline" / "accel-8b"  # the device its runs recorded: NVIDIA H200
    record = json.loads((results / "h200" / "headline" / "round.json").read_text())["sweeps"]["accel-8b"]
    assert record["piece"] == "headline" and record["status"] == "done"
    assert record["graph_gate"]["reason"] == "graph-tests did not run before it"
    with pytest.raises(RoundError, match="already holds that sweep; give --replace"):
        import_headline(_export(tmp_path / "again"), results)
    assert import_headline(_export(tmp_path / "again2"), results, replace=True) == [sweep]


def test_the_import_refuses_what_it_did_not_make_and_writes_nothing_unverified(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    results = tmp_path / "results"
    mine = results / "h200" / "headline"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine\n")
    with pytest.raises(RoundError, match="not a headline folder this made"):
        import_headline(_export(tmp_path), results)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert import_main([str(empty), "--results", str(tmp_path / "r2")]) == 2
    assert "holds no headline sweep" in capsys.readouterr().err and not (tmp_path / "r2").exists()
    # A run file edited after the sweep: nothing is written.
    export = _export(tmp_path / "t")
    scratch = tmp_path / "t" / "round" / "headline" / "accel-8b" / "runs"
    run = min(scratch.glob("*.json"))
    run.write_text(run.read_text().replace('"ok"', '"oom"', 1))
    pack(RoundLayout(tmp_path / "t" / "round"), "headline", PieceRecord(status="done", attempts=1), export)
    with pytest.raises(RoundError, match="does not verify"):
        import_headline(export, tmp_path / "r3")
    assert not (tmp_path / "r3").exists()


def test_the_four_step_rule_on_a_full_run_s_own_steps() -> None:
    results = load_results(SweepLayout(PACKAGE_ROOT / "results" / "h200" / "accel-8b"))
    vanilla = next(r for r in results if r.config.model.arch == "llada" and r.config.llada_impl is None
                   and r.config.batch_size == 1)  # fmt: skip
    assert vanilla.samples is not None and vanilla.samples.step_s is not None
    ruled, measured = extrapolation_check(vanilla)  # type: ignore[misc]
    expected = [e - sum(s[4:]) + 60 * statistics.fmean(s[:4])
                for e, s in zip(vanilla.samples.latency_e2e_s, vanilla.samples.step_s)]  # fmt: skip
    assert ruled == pytest.approx(statistics.median(expected)) and measured == statistics.median(vanilla.samples.latency_e2e_s)
    llama = next(r for r in results if r.config.model.arch == "llama")
    assert extrapolation_check(llama) is None  # no steps to extrapolate from


def _imported(tmp_path: Path) -> Path:
    """accel-8b imported as a GPU round's headline, with the report's findings.json beside its runs."""
    (sweep,) = import_headline(_export(tmp_path), tmp_path / "results")
    shutil.copy(PACKAGE_ROOT / "results" / "h200" / "accel-8b" / "findings.json", sweep / "findings.json")
    return sweep


def test_the_headline_table_reads_the_report_s_pairings_and_the_runs_provenance(tmp_path: Path) -> None:
    _imported(tmp_path)
    (path,) = render(tmp_path / "results", None)
    table = path.read_text()
    assert table.startswith("**The 8B headline, measured on NVIDIA H200**") and "LLaMA-3-8B's and LLaDA-8B's shapes" in table
    rows = [line for line in table.splitlines() if line.startswith(("| fast", "| eager"))]
    assert len(rows) == 4 and all("1 × 3 + 3" in row for row in rows)  # B = 1 and 8, both pairings, one session
    assert "commit 966dbcecf3c5" in table and "1 session × 3 repetitions, 1 warm-up per run" in table
    # accel-8b ran model after model (LLaMA's four runs, then LLaDA's six): the check says so.
    assert "interleaved: no: in session 0 the runs at B = 1 were split by other points' runs" in table
    assert "no extrapolation" in table
    assert "B\\* of the fast pairing" not in table  # one session: no B* over sessions' intervals


def test_the_block_is_filled_between_its_markers_alone() -> None:
    text = f"# Title\n{HEADLINE_BEGIN}\nold\n{HEADLINE_END}\nrest\n"
    assert fill_block(text, "new\n", "README.md") == f"# Title\n{HEADLINE_BEGIN}\nnew\n{HEADLINE_END}\nrest\n"
    assert fill_block(text, "", "README.md") == f"# Title\n{HEADLINE_BEGIN}\n{HEADLINE_END}\nrest\n"
    for broken in ("# no markers\n", f"{HEADLINE_END}\n{HEADLINE_BEGIN}\n", text + HEADLINE_BEGIN):
        with pytest.raises(HeadlineError, match="README.md: needs one"):
            fill_block(broken, "x", "README.md")
    readme = (PACKAGE_ROOT / "README.md").read_text()
    section = readme.split("## The answer, as measured on an NVIDIA H200\n", 1)[1]
    assert section.startswith(f"{HEADLINE_BEGIN}\n{HEADLINE_END}\n")  # empty until a headline is committed


def test_the_readme_takes_only_sweeps_round_json_names_as_a_gpu_round_s_at_the_8b_shapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    sweep = _imported(tmp_path)
    record = json.loads((sweep.parent / "round.json").read_text())["sweeps"]["accel-8b"]
    assert (record["device"], record["models"]) == ("NVIDIA H200", "8b")  # what its runs say, kept by the import
    readme = tmp_path / "README.md"
    readme.write_text(f"# R\n{HEADLINE_BEGIN}\n{HEADLINE_END}\n")
    render(tmp_path / "results", readme)
    assert "LLaMA-3-8B's and LLaDA-8B's shapes, random weights" in readme.read_text()
    filled = readme.read_text()
    # A sweep dropped in beside it that round.json does not name: refused in one line, nothing written.
    shutil.copytree(sweep, sweep.parent / "foreign")
    assert headline_main(["--results", str(tmp_path / "results"), "--readme", str(readme)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "foreign: not a sweep round.json records" in err and readme.read_text() == filled
    shutil.rmtree(sweep.parent / "foreign")
    # round.json gone, not JSON, or not a record: one line each.
    for text, says in ((None, "missing"), ("not json", "not a headline record"), ("{}", "sweeps: Field required"),
                       ("[]", "not a headline record")):  # fmt: skip
        saved = (sweep.parent / "round.json").read_text()
        (sweep.parent / "round.json").unlink()
        if text is not None:
            (sweep.parent / "round.json").write_text(text)
        assert headline_main(["--results", str(tmp_path / "results"), "--readme", str(readme)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and says in err, err
        (sweep.parent / "round.json").write_text(saved)
    assert headline_main(["--results", str(tmp_path / "results"), "--readme", str(tmp_path / "nope.md")]) == 2
    assert "--readme" in capsys.readouterr().err and not (tmp_path / "nope.md").exists()


def test_a_cpu_sweep_or_the_miniature_s_checkpoints_are_refused_and_named_for_what_they_are() -> None:
    results = load_results(SweepLayout(PACKAGE_ROOT / "results" / "h200" / "accel-8b"))
    on_cpu = [r.model_copy(update={"environment": r.environment.model_copy(update={"device": "cpu"})})
              for r in results]  # fmt: skip
    entry = HeadlineSweepRecord(piece="headline", status="done", attempts=1, wall_s=1.0, graph_gate=None,
                                device="cpu", models="8b")  # fmt: skip
    assert headline_refusal("s", entry, on_cpu, readme=False) is None  # its own headline.md: it is what it says
    assert "ran on the CPU" in headline_refusal("s", entry, on_cpu, readme=True)
    assert "round.json says it ran on cpu" in headline_refusal("s", entry, results, readme=True)
    trained = [r.model_copy(update={"config": r.config.model_copy(update={"model": r.config.model.model_copy(
        update={"source": CheckpointSource(checkpoint=f"models/miniature/{r.config.model.arch}")})})})
        for r in results]  # fmt: skip
    models = models_of(trained)
    assert "checkpoint models/miniature/llama" in models and "None" not in models and "preset" not in models
    gpu = entry.model_copy(update={"device": "NVIDIA H200", "models": models})
    assert "not LLaMA-3-8B's and LLaDA-8B's shapes" in headline_refusal("s", gpu, trained, readme=True)
