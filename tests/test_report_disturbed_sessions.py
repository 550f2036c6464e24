"""Disturbed sessions: each CPU-timed repetition records its process CPU time beside its wall time, each run the
machine's load; a session whose runs waited for a core, or ran on a machine with more runnable tasks than CPUs, is
flagged in the Setup, the Findings and the verdict; a quiet one, a GPU's and an older artifact's are not."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fixture_grid import SMOKE_LIKE
from report_fixtures import reseal, write_sweep
from test_report_verdict import SMOKE

from report.answer.findings_file import FindingsFile
from report.document.render import render_report
from report.table.sessions import DISTURBED_CPU_SHARE, disturbed_finding, disturbed_text, session_loads
from report.answer.verdict.short import verdict
from specs.results import HostLoad, RunResult
from workers.measure.timing import PerfCounterTimer, load_average


def test_the_cpu_timer_reads_cpu_time_beside_wall_time() -> None:
    """Work on the core counts as CPU time; waiting off it (a sleep stands for being descheduled) does not."""
    timer = PerfCounterTimer()
    with timer.measure() as busy:
        end = time.perf_counter() + 0.05
        while time.perf_counter() < end:
            pass
    with timer.measure() as waiting:
        time.sleep(0.05)
    # On a busy machine the loop itself may wait for its core: it still holds it far more than a sleep does.
    assert waiting.cpu_seconds() < 0.2 * waiting.seconds()
    assert busy.cpu_seconds() / busy.seconds() > 5 * waiting.cpu_seconds() / waiting.seconds()
    load = load_average()
    assert load is None or (len(load) == 3 and min(load) >= 0)


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    root = write_sweep(tmp_path_factory.mktemp("disturbed"), SMOKE_LIKE)
    runs = [RunResult.model_validate_json(p.read_text(encoding="utf-8")) for p in sorted((root / "runs").glob("*.json"))]
    return next(r for r in runs if r.status == "ok" and r.samples is not None and r.samples.timer == "perf_counter")


def synthetic(base: RunResult, session: int, share: float, *, load: float = 0.4, threads: int = 1,
              timer: str = "perf_counter") -> RunResult:
    """`base` as run in `session` of 3, its process holding its cores `share` of each repetition's wall time."""
    assert base.samples is not None and base.environment is not None
    wall = base.samples.latency_e2e_s
    samples = base.samples.model_copy(update={
        "timer": timer, "cpu_s": [w * share * threads for w in wall],
        "host_load": HostLoad(start=[load, load, load], end=[load, load, load], cpus=2)})
    controls = base.config.controls.model_copy(update={"sessions": 3})
    config = base.config.model_copy(update={"session": session, "controls": controls})
    return base.model_copy(update={"samples": samples, "config": config,
                                   "environment": base.environment.model_copy(update={"cpu_threads": threads})})


def test_a_quiet_session_passes_and_a_descheduled_one_is_flagged(base_run: RunResult) -> None:
    quiet = [synthetic(base_run, s, 0.97) for s in range(3)]
    loads = session_loads(quiet)
    assert [s.session for s in loads] == [0, 1, 2] and not any(s.reasons for s in loads)
    assert disturbed_text(loads) == "" and disturbed_finding(loads) is None
    descheduled = [*quiet[:1], synthetic(base_run, 1, 0.45), quiet[2]]
    loads = session_loads(descheduled)
    assert [bool(s.reasons) for s in loads] == [False, True, False]
    assert disturbed_text(loads) == "session 2 of 3 (CPU time 45% of wall time)"
    finding = disturbed_finding(loads)
    assert finding is not None and finding.startswith("DISTURBED SESSIONS (session 2 of 3: CPU time 45% of wall time)")
    # Just above the threshold is quiet: the flag is the threshold's, not any shortfall's.
    assert not session_loads([synthetic(base_run, 0, DISTURBED_CPU_SHARE + 0.02)])[0].reasons


def test_spinning_threads_hide_sharing_so_the_load_flags_it(base_run: RunResult) -> None:
    """Two spinning threads keep their CPU time up while the cores are shared; more runnable tasks than CPUs flags it."""
    busy = [synthetic(base_run, s, 0.95, threads=2, load=5.2 if s else 0.8) for s in range(3)]
    loads = session_loads(busy)
    assert [bool(s.reasons) for s in loads] == [False, True, True]
    assert disturbed_text(loads) == "sessions 2 and 3 of 3 (load up to 5.2 on 2 CPUs)"


def test_gpu_runs_and_older_artifacts_are_not_judged(base_run: RunResult) -> None:
    assert session_loads([synthetic(base_run, 0, 0.1, timer="cuda_event")]) == []
    assert base_run.samples is not None and base_run.samples.cpu_s is None  # the fixture writes what older runs held
    assert disturbed_text(session_loads([base_run])) is None


def test_the_verdict_says_when_its_intervals_rest_on_flagged_sessions() -> None:
    sure = verdict(SMOKE, disturbed="session 2 of 3 (CPU time 45% of wall time)")[-1]
    assert sure.startswith("How sure: ")
    assert "they rest on session 2 of 3 (CPU time 45% of wall time), flagged as disturbed" in sure
    assert verdict(SMOKE, disturbed="")[-1].endswith("; no session was flagged as disturbed.")
    assert "disturbed" not in verdict(SMOKE)[-1]  # nothing judged, nothing said


def test_the_report_flags_them_in_the_setup_findings_and_findings_json(tmp_path: Path) -> None:
    root = write_sweep(tmp_path, SMOKE_LIKE)
    for path in (root / "runs").glob("*.json"):
        run = RunResult.model_validate_json(path.read_text(encoding="utf-8"))
        if run.samples is not None:
            samples = run.samples.model_copy(update={"cpu_s": [w * 0.45 for w in run.samples.latency_e2e_s]})
            path.write_text(run.model_copy(update={"samples": samples}).model_dump_json(indent=1), encoding="utf-8")
    out = render_report(reseal(root), echo=False)
    found = FindingsFile.model_validate_json(out.findings_json.read_text(encoding="utf-8"))
    # 45% of one thread's time: the fixture's runs name their torch threads, which divide the share further.
    threads = {RunResult.model_validate_json(p.read_text(encoding="utf-8")).environment.cpu_threads
               for p in (root / "runs").glob("*.json")} - {None}
    share = f"{0.45 / max(threads | {1}):.0%}"
    assert found.disturbed == f"session 1 of 1 (CPU time {share} of wall time)"
    assert found.verdict[-1].startswith("How sure: ") and "flagged as disturbed" in found.verdict[-1]
    assert found.verdict == verdict(found.findings, found.unanswered, found.disturbed)
    markdown = out.markdown.read_text(encoding="utf-8")
    assert f"DISTURBED SESSIONS (session 1 of 1: CPU time {share} of wall time)" in markdown  # the Findings' line
    assert "| session 1 of 1 |" in markdown and f"DISTURBED: CPU time {share} of wall time" in markdown  # the Setup's
