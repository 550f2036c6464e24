"""An interval, a bound or a B* only where its inputs support it, each saying what it rests on: a session whose
runs failed or never ran is named and left out of both sides of a speedup; one repetition gives no interval, and no
B* interval; one batch size places no B*; the manifest table lists every session's run file. Rendered without
figures (they read what these tests check, and cost most of a report's time)."""

from __future__ import annotations

import dataclasses
import re
import statistics
from pathlib import Path

import pytest
from report_fixtures import SMOKE_LIKE, FixtureGrid, reseal, write_sweep

from report.document import render
from report.answer.findings_file import FindingsFile
from report.analysis.intervals import NO_B_STAR, Speedup, crossover
from specs.artifacts import SweepLayout, verify
from specs.results import RunResult

SMALL = dataclasses.replace(SMOKE_LIKE, name="support", generation_lengths=(32,), steps=(8, 32))
TWO_SESSIONS = dataclasses.replace(SMALL, sessions=2)


@pytest.fixture(autouse=True)
def _no_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "draw_figures", lambda *args, **kwargs: ([], [], ()))


def _render(root: Path) -> tuple[FindingsFile, str]:
    outputs = render.render_report(root, echo=False)
    findings = FindingsFile.model_validate_json(outputs.findings_json.read_text(encoding="utf-8"))
    return findings, outputs.markdown.read_text(encoding="utf-8")


def _runs(root: Path) -> dict[str, RunResult]:
    return {i: RunResult.model_validate_json(p.read_text()) for i, p in SweepLayout(root).run_files().items()}


def _without(root: Path, drop) -> Path:
    """The sweep with the run files `drop` picks deleted, as if they never ran, and its record sealed over them."""
    for run_id, result in _runs(root).items():
        if drop(result):
            SweepLayout(root).run_file(run_id).unlink()
    reseal(root)
    assert not verify(SweepLayout(root))
    return root


def _session_of(result: RunResult) -> int:
    return result.config.session or 0


# ---------------------------------------------------------------- sessions


@pytest.mark.parametrize(("grid", "drop", "why"), [
    (dataclasses.replace(TWO_SESSIONS, failed_sessions=(("llada", 1),)), None, "llada-tiny failed: error"),
    (TWO_SESSIONS, lambda r: r.config.model.arch == "llada" and _session_of(r) == 1, "llada-tiny did not run"),
    (TWO_SESSIONS, lambda r: _session_of(r) == 1, "llama-tiny did not run, llada-tiny did not run"),
], ids=["failed", "never-ran", "neither-ran"])
def test_a_session_a_side_lacks_is_named_and_both_sides_rest_on_the_others(
        tmp_path: Path, grid: FixtureGrid, drop, why: str) -> None:
    root = write_sweep(tmp_path, grid)
    if drop is not None:
        _without(root, drop)
    runs = _runs(root)
    found, md = _render(root)
    gap = f"session 2 of 2 ({why})"
    for point in (q for p in found.findings for q in p.speedups):
        assert point.sessions == 1 and point.sessions_left_out == [gap]
        assert f"1 of 2 sessions x 3 + 3 repetitions, leaving out {gap}" in point.interval_label
        # Both latencies are over session 1 alone, as the speedup is.
        for side, run_id, latency in (("llama", point.llama_run_id, point.llama_latency_s),
                                      ("llada", point.llada_run_id, point.llada_latency_s)):
            first = runs[run_id]
            assert _session_of(first) == 0, side
            assert latency == pytest.approx(statistics.median(first.samples.latency_e2e_s))
    assert any(gap in sentence for sentence in found.verdict)  # the verdict says which session it lacks, and why
    assert "(range, n=3, leaving out session 2 of 2 (llada-tiny " in md  # and so does each run's own interval
    assert any("sessions_left_out" in note for note in found.notes)
    crossover_rows = [line for line in md.splitlines() if line.startswith("| 32 | 32 | llada-tiny |")]
    assert crossover_rows and all(f"its speedups leave out {gap}" in line for line in crossover_rows)


def test_a_session_every_run_of_which_succeeded_leaves_nothing_out_and_pools_the_latencies(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, TWO_SESSIONS)
    runs = _runs(root)
    found, _ = _render(root)
    point = found.findings[0].speedups[0]
    assert point.sessions == 2 and point.sessions_left_out == [] and "leaving out" not in point.interval_label
    both = [v for r in runs.values() if r.config.model.arch == "llama" and r.status.value == "ok"
            and r.config.batch_size == point.batch_size and r.config.generation_length == 32
            for v in r.samples.latency_e2e_s]
    assert point.llama_latency_s == pytest.approx(statistics.median(both))
    assert '"sessions_left_out"' not in found.model_dump_json(exclude_defaults=True)


def test_the_manifest_table_lists_every_sessions_run_file_with_its_own_session_and_status(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, dataclasses.replace(TWO_SESSIONS, failed_sessions=(("llada", 1),)))
    _, md = _render(root)
    table = md[md.index("| run file | model | session | status | sha256 |"):]
    listed = {m[1]: (m[2], m[3], m[4]) for m in re.finditer(r"^\| runs/(\w+)\.json \| (\S+) \| (\d of 2) \| (\w+) \|",
                                                            table, re.MULTILINE)}
    runs = _runs(root)
    assert listed == {i: (r.config.model.name, f"{_session_of(r) + 1} of 2", r.status.value) for i, r in runs.items()}
    assert "missing" not in table and "not read" not in table


# ---------------------------------------------------------------- what the inputs support


def test_one_repetition_gives_no_speedup_interval_and_no_b_star_interval_and_renders_its_parity(
        tmp_path: Path) -> None:
    found, md = _render(write_sweep(tmp_path, dataclasses.replace(SMALL, repetitions=1)))  # quality on
    points = [q for p in found.findings for q in p.speedups]
    assert points and all(q.speedup_low is None and q.interval_level is None for q in points)
    for p in found.findings:
        assert p.b_star_measured is not None  # from the two batches' estimates
        assert (p.b_star_low, p.b_star_high, p.b_star_level, p.b_star_coverage) == (None, None, None, None)
    verdict = md[:md.index("## 2.")]  # the verdict, and in full in the Findings
    assert "How sure: no speedup has an interval (1 session x 1 + 1 repetitions: an interval needs" in verdict
    assert "B*'s interval inverts" not in md[:md.index("## 1.")] and "B* ≤ 1 (no interval)" in verdict
    assert "LLaMA stays ahead from B* ≤ 1 (LLaMA ahead already at the smallest batch measured; no interval" in verdict
    assert "(range, n=1" not in md  # one repetition's range is that value, not an interval
    parity = md[md.index("Steps to quality parity"):]
    assert re.search(r"\| \d\.\d+ \(no interval\) \|", parity)  # the speedup at parity, never a formatted None
    b_star_rows = [line for line in md.splitlines() if "| B*: llama-tiny overtakes" in line]
    assert b_star_rows and all("no interval: a speedup it rests on has none" in line for line in b_star_rows)


@pytest.mark.parametrize("drop", [None, lambda r: r.config.model.arch == "llada" and r.config.batch_size == 4],
                         ids=["one-batch-swept", "one-batch-in-common"])
def test_one_batch_size_places_no_b_star(tmp_path: Path, drop) -> None:
    grid = dataclasses.replace(SMALL, batch_sizes=(1,)) if drop is None else SMALL
    root = write_sweep(tmp_path, grid)
    if drop is not None:
        _without(root, drop)
    found, md = _render(root)
    for p in found.findings:
        assert [q.batch_size for q in p.speedups] == [1]
        assert (p.b_star_measured, p.b_star_bound, p.b_star_low, p.b_star_high) == (None, None, None, None)
    verdict = md[:md.index("## 2.")]  # the verdict, and in full in the Findings
    assert NO_B_STAR in verdict and "stays ahead from" not in verdict
    assert "no measured B* at" in verdict
    assert all(NO_B_STAR in line for line in md.splitlines() if "| B*: llama-tiny overtakes" in line)


def test_b_star_needs_two_batches_an_interval_at_every_one_and_carries_what_they_leave_out() -> None:
    with_interval = Speedup(2.0, 1.5, 2.5, 0.95, "t-sessions", 2, (3, 3))
    without = Speedup(0.5, None, None, None, "none", 1, (1, 1), left_out=("session 2 of 2 (x failed: oom)",))
    assert crossover([1], [with_interval]) is None
    both = crossover([1, 4], [with_interval, without])
    assert both is not None and both.estimate == pytest.approx(2.0) and both.low is None and both.coverage is None
    assert both.left_out == ("session 2 of 2 (x failed: oom)",)
    full = crossover([1, 4], [with_interval, dataclasses.replace(without, low=0.4, high=0.6, level=0.95)])
    assert full is not None and full.low is not None and full.coverage == pytest.approx(0.90)
