"""`just gpu-round` on a CPU, with a fake device and a fake clock: a call starts only what fits before its
deadline, packs every piece into the export the moment it ends, a call stopped at its deadline, past a piece's
timeout or killed keeps what ended, and the next call, on the same folder or a fresh one given the export,
resumes without redoing it, never taking older state over newer. The graph tests gate the graph rows; every
piece gets the round's compile caches; a toy round runs on this CPU. Refusals are one line."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from orchestrator.gpu_round import run as gpu_round
from orchestrator.gpu_round import state as round_state
from orchestrator.gpu_round.run import EXIT_AGAIN, EXIT_OK, EXIT_USAGE, Machine, main
from orchestrator.gpu_round.plan import EXPORT_FILES, plan_round
from orchestrator.gpu_round.state import RoundLayout
from tests.round_fakes import NAMES, FakeMachine, Killed, call, exported, pieces_ran


def test_a_call_starts_what_fits_exports_each_piece_and_a_fresh_machine_resumes(tmp_path: Path) -> None:
    machine = FakeMachine()
    out1 = tmp_path / "out1"
    assert call(machine, tmp_path / "round", "--export", str(out1)) == EXIT_AGAIN
    assert pieces_ran(machine) == ["graph-tests", "headline"]  # 160 s were left
    assert machine.now <= 1000 + 540
    assert exported(out1) == {"graph-tests": "done", "headline": "done"}
    assert len(list(out1.iterdir())) <= EXPORT_FILES and (out1 / "gpu-round.json").is_file()
    with tarfile.open(out1 / "graph-tests.tar.gz") as archive:
        names = archive.getnames()
    assert "graph-tests/junit.xml" in names and not any(n.endswith("sweep.lock") for n in names)
    document = json.loads((out1 / "gpu-round.json").read_text())
    assert document["complete"] is False and document["device"] == "Fake GPU"
    assert document["pieces"]["graph-tests"]["tests"] == {"tests.gpu.t::test_x": {"seconds": 1.5, "outcome": "passed"}}
    assert {g["piece"] for g in document["goals"]} >= {"headline", "graph-tests", "headline-b64"}
    # Later calls, each on a fresh machine given only the last export: nothing that ended is run again.
    ran, export, code = pieces_ran(machine), out1, EXIT_AGAIN
    for number in range(2, 6):
        fresh, out = FakeMachine(), tmp_path / f"out{number}"
        code = call(fresh, tmp_path / f"round{number}", "--export", str(out), "--resume", str(export), budget=600)
        assert not set(pieces_ran(fresh)) & set(ran) and fresh.now <= 1000 + 600
        ran, export = ran + pieces_ran(fresh), out
        assert len(list(out.iterdir())) <= EXPORT_FILES
        if code == EXIT_OK:
            break
    assert code == EXIT_OK and sorted(ran) == sorted(NAMES)
    assert exported(export) == dict.fromkeys(NAMES, "done")
    assert json.loads((export / "gpu-round.json").read_text())["complete"] is True
    assert (tmp_path / f"round{number}" / "headline" / "headline-headline-8b.out").is_file()  # its artifacts too


def test_a_piece_past_its_timeout_is_stopped_exported_and_rerun_by_the_nextcall(tmp_path: Path) -> None:
    machine = FakeMachine({"headline": 10_000})
    out = tmp_path / "out"
    assert call(machine, tmp_path / "round", "--export", str(out)) == EXIT_AGAIN
    state = json.loads((tmp_path / "round" / "state.json").read_text())
    headline = state["pieces"]["headline"]
    assert headline["status"] == "timed-out" and 400 < headline["wall_s"] < 540
    assert exported(out)["headline"] == "timed-out"
    assert machine.now <= 1000 + 540
    again = FakeMachine()
    assert call(again, tmp_path / "round", "--export", str(tmp_path / "out2")) == EXIT_AGAIN
    assert pieces_ran(again) == ["headline"]  # the graph tests ended: not run again
    state = json.loads((tmp_path / "round" / "state.json").read_text())
    assert state["pieces"]["headline"]["status"] == "done" and state["pieces"]["headline"]["attempts"] == 2


@pytest.mark.parametrize("machine_after", ["warm", "fresh"])
def test_a_killed_call_leaves_every_finished_piece_exported_and_the_next_resumes(tmp_path: Path, machine_after: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(Killed):
        call(FakeMachine(kill="headline"), tmp_path / "round", "--export", str(out))
    assert exported(out) == {"graph-tests": "done"}
    assert json.loads((out / "gpu-round.json").read_text())["pieces"]["graph-tests"]["status"] == "done"
    round_dir = tmp_path / ("round" if machine_after == "warm" else "fresh-round")
    nxt = FakeMachine()
    assert call(nxt, round_dir, "--export", str(tmp_path / "out2"), "--resume", str(out)) == EXIT_AGAIN
    assert pieces_ran(nxt) == ["headline"]  # again (it never ended); nothing that ended before
    assert exported(tmp_path / "out2") == {"graph-tests": "done", "headline": "done"}


def test_resume_takes_a_piece_only_where_it_is_further_along(tmp_path: Path) -> None:
    """A warm machine's folder keeps its newer state; a piece the export has done and this folder has not is
    taken in whole."""
    old_export = tmp_path / "old"
    call(FakeMachine({"headline": 10_000}), tmp_path / "elsewhere", "--export", str(old_export))
    assert exported(old_export)["headline"] == "timed-out"
    round_dir, out = tmp_path / "round", tmp_path / "out"
    call(FakeMachine(), round_dir, "--export", str(out))  # here the headline is done
    layout = RoundLayout(round_dir)
    marker = round_dir / "headline" / "headline-headline-8b.out"
    before = marker.read_text()
    call(FakeMachine(), round_dir, "--resume", str(old_export), "--export", str(tmp_path / "out3"))
    assert layout.load().pieces["headline"].status == "done" and marker.read_text() == before
    # The other way: this folder timed out where the export is done.
    behind = tmp_path / "behind"
    call(FakeMachine({"headline": 10_000}), behind)
    assert RoundLayout(behind).load().pieces["headline"].status == "timed-out"
    nxt = FakeMachine()
    call(nxt, behind, "--resume", str(out))
    assert RoundLayout(behind).load().pieces["headline"].status == "done" and "headline" not in pieces_ran(nxt)
    assert (behind / "headline" / marker.name).read_text() == before


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_without_cuda_the_call_refuses_in_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    round_dir = tmp_path / "round"
    machine = FakeMachine(device=None)
    assert call(machine, round_dir, "--export", str(tmp_path / "out")) == EXIT_USAGE
    assert "no CUDA device" in _one_line(capsys) and not round_dir.exists() and not (tmp_path / "out").exists()
    call(FakeMachine({"graph-tests": 10_000}), round_dir)  # a round under way, then a call without CUDA
    before = (round_dir / "state.json").read_bytes()
    assert call(FakeMachine(device=None), round_dir) == EXIT_USAGE and machine.ran == []
    assert (round_dir / "state.json").read_bytes() == before


@pytest.mark.parametrize(
    "content",
    ['{"calls": 1, "pieces": {"llada-b1": {"status": "done"}}}', '{"calls": 1, "pie', "", "[1, 2]", b"\xff\xfe"],
    ids=["wrong-shape", "truncated", "empty", "not-an-object", "not-utf8"],
)
def test_a_bad_state_file_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes) -> None:
    state = tmp_path / "state.json"
    state.write_bytes(content if isinstance(content, bytes) else content.encode())
    for extra in ([], ["--goals"]):
        assert call(FakeMachine(), tmp_path, *extra) == EXIT_USAGE
        assert str(state) in _one_line(capsys)


def test_a_round_state_that_is_no_regular_file_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The round folder is read like a sweep's: a FIFO as state.json is named, never opened to block."""
    os.mkfifo(tmp_path / "state.json")
    assert main(["--round", str(tmp_path), "--goals"]) == EXIT_USAGE
    assert "state.json" in _one_line(capsys)


def test_an_exported_piece_that_is_no_export_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    bad = seed / "headline.tar.gz"
    bad.write_text("not a tarball")
    assert main(["--round", str(tmp_path / "round"), "--goals", "--resume", str(seed)]) == EXIT_USAGE
    assert str(bad) in _one_line(capsys)
    with tarfile.open(bad, "w:gz") as archive:
        stray = tmp_path / "stray.txt"
        stray.write_text("x")
        archive.add(stray, arcname="elsewhere/stray.txt")
    assert main(["--round", str(tmp_path / "round"), "--goals", "--resume", str(seed)]) == EXIT_USAGE
    assert "elsewhere/stray.txt" in _one_line(capsys)


def test_a_round_folder_that_cannot_be_written_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    def refuse(path: Path, data: bytes) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(round_state, "atomic_write", refuse)
    assert call(FakeMachine(), tmp_path / "round") == EXIT_USAGE
    assert "state.json: cannot write (Permission denied)" in _one_line(capsys)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_round_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    round_dir = tmp_path / "round"
    round_dir.mkdir()
    round_dir.chmod(0o555)
    try:
        assert call(FakeMachine(), round_dir) == EXIT_USAGE
        assert str(round_dir) in _one_line(capsys)
    finally:
        round_dir.chmod(0o755)


def test_a_command_past_its_timeout_is_stopped_with_its_process_group(tmp_path: Path) -> None:
    """The real Machine: a piece that would run a minute is stopped at its 1 s timeout, children included."""
    script = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    started = time.monotonic()
    code = Machine().execute([sys.executable, "-c", script], label="sleeper", env=dict(os.environ),
                             log=tmp_path / "piece.log", timeout_s=1.0)  # fmt: skip
    assert code is None and time.monotonic() - started < gpu_round.TERM_GRACE_S
    assert "--- sleeper:" in (tmp_path / "piece.log").read_text()


def test_a_call_killed_outright_leaves_no_piece_running(tmp_path: Path) -> None:
    """SIGKILL to the call's process (a lease's hard limit): its piece gets SIGTERM (PR_SET_PDEATHSIG), so no sweep
    keeps the GPU and its lock for the next call."""
    pid_file = tmp_path / "piece.pid"
    piece = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    call = (f"import os, sys; from pathlib import Path; from orchestrator.gpu_round.run import Machine; "
            f"Machine().execute([sys.executable, '-c', {piece!r}], label='p', env=dict(os.environ), "
            f"log=Path({str(tmp_path / 'piece.log')!r}), timeout_s=60)")  # fmt: skip
    runner = subprocess.Popen([sys.executable, "-c", call], cwd=Path(gpu_round.__file__).parents[2])
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    runner.kill()
    runner.wait()
    child = int(pid_file.read_text())
    for _ in range(50):
        status = Path(f"/proc/{child}/status")
        if not status.exists() or "zombie" in status.read_text():
            return
        time.sleep(0.1)
    os.kill(child, 9)
    pytest.fail("the piece outlived the call")


class NoCudaInside(Machine):
    """The real commands, on a machine whose probe is fooled: the pieces themselves find no CUDA."""

    def device(self, python: str) -> str | None:
        return "a probe that lied"


@pytest.mark.slow
def test_pieces_that_measured_nothing_are_never_marked_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real sweep and pytest on this CPU: the graph tests all skip, so they end failed and the B = 64 piece runs
    without its graph rows; its compiled LLaMA is refused (no CUDA); both pieces end failed, exported, set to run
    again, the refused sweep set aside."""
    monkeypatch.setattr(gpu_round, "TEST_TIMEOUT_S", 1200)  # a loaded CPU's imports are no GPU machine's
    plan = plan_round()
    only = dataclasses.replace(plan, pieces=(plan.piece("graph-tests"), plan.piece("headline-b64")))
    layout, out = RoundLayout(tmp_path / "round"), tmp_path / "out"
    code = gpu_round.start_call(layout, only, NoCudaInside(), python=sys.executable, deadline=time.time() + 600,
                                export=out)  # fmt: skip
    assert code == gpu_round.EXIT_FAILED
    state = layout.load()
    assert {n: r.status for n, r in state.pieces.items()} == {"headline-b64": "failed", "graph-tests": "failed"}
    assert "refused" in state.pieces["headline-b64"].detail and "skipped" in state.pieces["graph-tests"].detail
    assert state.pieces["graph-tests"].tests and all(t.outcome == "skipped" for t in state.pieces["graph-tests"].tests.values())
    piece = tmp_path / "round" / "headline-b64"
    assert (piece / "headline-8b-b64-no-graphs.refused" / "runs").is_dir()
    assert not (piece / "headline-8b-b64-no-graphs").exists()  # the next call measures afresh
    assert "graph-tests ended failed" in (piece / "headline-8b-b64-no-graphs.yaml").read_text()
    assert exported(out) == {"headline-b64": "failed", "graph-tests": "failed"}
    assert json.loads((out / "gpu-round.json").read_text())["complete"] is False


def test_junit_gives_each_tests_own_time_and_outcome(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase classname="a" name="ok" time="2.5"/>'
        '<testcase classname="a" name="bad" time="1"><failure message="x"/></testcase>'
        '<testcase classname="a" name="gone" time="0"><skipped/></testcase></testsuite></testsuites>'
    )  # fmt: skip
    times = gpu_round.read_junit(junit)
    assert {k: (v.seconds, v.outcome) for k, v in times.items()} == {
        "a::ok": (2.5, "passed"), "a::bad": (1.0, "failed"), "a::gone": (0.0, "skipped")}  # fmt: skip
    assert gpu_round.read_junit(tmp_path / "missing.xml") == {}


