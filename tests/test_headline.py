"""The headline end to end on this CPU, at toy shapes: a toy round's first call (`just gpu-round --toy`), stopped
before its third session as at a deadline, keeps both finished sessions; the next call, on a fresh folder given
only the export, runs the third alone; the export goes into results/<device>/headline/ (`just headline-results`),
whose report renders into a table with provenance; the README's block refuses it, a CPU's being no GPU's headline.
The sweeps run for real (orchestrator.cli, the inline executor, a fresh process per session); only the worker in those
processes is a stand-in (tests/toy_worker.py), since a CPU compiles for minutes what a GPU compiles in seconds."""

from __future__ import annotations

import contextlib
import io
import shutil
from collections import Counter
from pathlib import Path

import pytest

from orchestrator import cli, inline
from orchestrator.gpu_round.run import EXIT_AGAIN, EXIT_OK, Machine, main
from orchestrator.gpu_round.results import import_headline
from report import cli as report_cli
from report.answer.headline import HeadlineError, render
from specs.loader import PACKAGE_ROOT
from tests.toy_worker import COMMIT, LOG_ENV

JUNIT = '<testsuites><testsuite><testcase classname="tests.gpu.test_gpu_graphs" name="test_tokens" time="2"/></testsuite></testsuites>'


class ThisCpu(Machine):
    """The round's commands here, in this process: the graph tests pass (their junit.xml, as on a GPU where they
    did), a sweep runs through orchestrator.cli with the real inline executor."""

    def device(self, python: str) -> str | None:
        return None

    def execute(self, command: list[str], *, label: str, env: dict[str, str], log: Path, timeout_s: float) -> int | None:
        junit = next((c.removeprefix("--junitxml=") for c in command if c.startswith("--junitxml=")), None)
        if junit:
            Path(junit).write_text(JUNIT)
            return 0
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return cli.main(command[command.index("orchestrator.cli") + 1:])


def _stop_before(session: int):
    """inline's budget check, stopping before the first run of `session` (as a call's deadline would)."""
    def over_budget(run, *args: object) -> str | None:
        return "the call's deadline" if run.config.session == session else None
    return over_budget


def _ran(log: Path) -> Counter[str]:
    return Counter(line.split()[1] for line in log.read_text().splitlines()) if log.exists() else Counter()


@pytest.mark.slow
def test_a_toy_round_resumes_by_session_and_renders_the_readme_headline_with_provenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inline, "WORKER", "tests.toy_worker.ToyWorker")
    log = tmp_path / "ran.log"
    monkeypatch.setenv(LOG_ENV, str(log))
    monkeypatch.setattr(inline, "_over_budget", _stop_before(2))
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    assert main(["--toy", "--round", str(tmp_path / "round1"), "--export", str(out1)], machine=ThisCpu()) == EXIT_AGAIN
    assert _ran(log) == {"0": 6, "1": 6}  # two whole sessions, kept and exported
    monkeypatch.setattr(inline, "_over_budget", _stop_before(99))
    log.unlink()
    assert main(["--toy", "--round", str(tmp_path / "round2"), "--export", str(out2), "--resume", str(out1)],
                machine=ThisCpu()) == EXIT_OK  # fmt: skip
    assert _ran(log) == {"2": 6}  # the third session alone: nothing finished is run again

    results = tmp_path / "results"
    (sweep,) = import_headline(out2, results)
    assert sweep == results / "cpu" / "headline" / "headline-8b-toy"
    assert report_cli.main([str(sweep)]) == 0
    readme = tmp_path / "README.md"
    shutil.copy(PACKAGE_ROOT / "README.md", readme)
    before = readme.read_text()
    with pytest.raises(HeadlineError, match="headline-8b-toy: ran on the CPU"):  # the README's headline is a GPU's
        render(results, readme)
    assert readme.read_text() == before and not (results / "cpu" / "headline" / "headline.md").exists()
    assert render(results, None) == [results / "cpu" / "headline" / "headline.md"]
    table = (results / "cpu" / "headline" / "headline.md").read_text()
    fast = next(line for line in table.splitlines() if line.startswith("| fast") and "| 8 |" in line)
    assert "static-compile (compiled)" in fast and "dual-cache-graph (graph-captured)" in fast
    assert "| 3 × 3 + 3; 95% t interval over sessions |" in fast
    eager = next(line for line in table.splitlines() if line.startswith("| eager against eager"))
    assert "vanilla (eager) | vanilla (eager)" in eager
    assert any(line.startswith("| fast") and "| 32 |" in line for line in table.splitlines())  # K = N_out
    assert f"commit {COMMIT[:12]}" in table and "3 sessions × 3 repetitions, 3 warm-ups per run" in table
    assert "interleaved: yes: in every session" in table and "no extrapolation: every latency is a full run" in table
    assert "graph rows: admitted by graph-tests (1 of 1 tests passed)" in table
    assert "models llada-8b-synthetic: the tiny preset, random weights" in table.splitlines()[0]
    render(tmp_path / "none", readme)  # no headline anywhere: the block is empty
    assert readme.read_text() == before
