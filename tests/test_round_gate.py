"""The graph tests gate the round's graph rows: a headline piece runs its graph-captured variants only after every
graph test passed, else a variant without them whose spec says why, and a sweep already begun keeps its variant.
Every piece gets the round's compile caches; a toy round runs call 1 on this CPU and never shares a GPU round's
folder. All on the fake machine (tests/round_fakes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.gpu_round.run import EXIT_AGAIN, EXIT_OK, EXIT_USAGE
from orchestrator.gpu_round.gate import gate_reason
from orchestrator.gpu_round.sweep_specs import Variant, graph_impls, variant_spec
from orchestrator.gpu_round.state import PieceRecord, RoundLayout, RoundState
from orchestrator.gpu_round.state import TestTime as Timed
from tests.round_fakes import FakeMachine, call, pieces_ran

HEADLINE = "headline:headline-8b"


def _spec_given(machine: FakeMachine, label: str) -> str:
    command = machine.commands[label]
    return command[command.index("sweep") + 1]


def test_a_headline_after_graph_tests_that_all_passed_runs_the_shipped_spec(tmp_path: Path) -> None:
    machine = FakeMachine()
    assert call(machine, tmp_path / "round") == EXIT_AGAIN
    assert _spec_given(machine, HEADLINE) == "specs/campaign-headline.yaml"
    assert machine.commands[HEADLINE][machine.commands[HEADLINE].index("--out") + 1].endswith("headline/headline-8b")


@pytest.mark.parametrize(("outcome", "why"), [("<failure message='x'/>", "1 of 1 tests did not pass (test_x failed)"),
                                               ("<skipped/>", "graph-tests ended failed (every test skipped")])
def test_failed_graph_tests_leave_the_graph_rows_out_and_the_spec_says_why(tmp_path: Path, outcome: str,
                                                                           why: str) -> None:  # fmt: skip
    machine = FakeMachine(outcome=outcome)
    call(machine, tmp_path / "round")
    label = "headline:headline-8b-no-graphs"
    spec_file = Path(_spec_given(machine, label))
    assert spec_file == tmp_path / "round" / "headline" / "headline-8b-no-graphs.yaml"
    data = yaml.safe_load(spec_file.read_text())
    assert graph_impls(data) == [] and why in data["description"]
    impls = {impl["name"] for impl in data["grid"]["llada"]["impl"]} | {impl["name"] for impl in data["grid"]["llama"]["impl"]}
    assert impls == {"vanilla", "static-compile"}  # the eager pairings and compiled LLaMA are still timed
    assert data["controls"]["sessions"] == 3


def test_a_sweep_begun_without_its_graph_rows_goes_on_so_even_after_the_gate_opens(tmp_path: Path) -> None:
    round_dir = tmp_path / "round"
    call(FakeMachine({"headline": 10_000}, outcome="<failure/>"), round_dir)  # gate closed; the headline cut short
    begun = round_dir / "headline" / "headline-8b-no-graphs"
    (begun / "runs").mkdir(parents=True)
    (begun / "runs" / "0123456789ab.json").write_text("{}")  # a finished run of its first session
    layout = RoundLayout(round_dir)
    state = layout.load()
    state.pieces["graph-tests"] = PieceRecord(status="done", attempts=2, tests={"t::x": Timed(seconds=1, outcome="passed")})
    layout.save(state)
    written = (round_dir / "headline" / "headline-8b-no-graphs.yaml").read_text()
    again = FakeMachine()
    call(again, round_dir)
    assert pieces_ran(again) == ["headline"] and "headline:headline-8b-no-graphs" in again.ran
    assert (round_dir / "headline" / "headline-8b-no-graphs.yaml").read_text() == written  # its spec, unchanged


def test_gate_reason_names_what_kept_the_graph_rows_out() -> None:
    state = RoundState()
    assert gate_reason(state, None) is None
    assert gate_reason(state, "graph-tests") == "graph-tests did not run before it"
    state.pieces["graph-tests"] = PieceRecord(status="timed-out", attempts=1, detail="stopped at its timeout")
    assert gate_reason(state, "graph-tests") == "graph-tests ended timed-out (stopped at its timeout)"
    state.pieces["graph-tests"] = PieceRecord(status="done", attempts=1, tests={
        "a::ok": Timed(seconds=1, outcome="passed"), "a::gone": Timed(seconds=0, outcome="error")})
    assert gate_reason(state, "graph-tests") == "graph-tests: 1 of 2 tests did not pass (gone error)"
    state.pieces["graph-tests"] = PieceRecord(status="done", attempts=1, tests={"a::ok": Timed(seconds=1, outcome="passed")})
    assert gate_reason(state, "graph-tests") is None


def test_a_variant_without_graph_rows_drops_a_diffusion_model_that_had_only_those() -> None:
    spec = variant_spec("specs/campaign-headline-b64.yaml", Variant(graphs=False, reason="x"))
    assert [m.arch for m in spec.models] == ["llama"] and spec.grid.llada is None
    assert spec.name == "headline-8b-b64-no-graphs"


def test_every_piece_gets_the_round_s_compile_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "mine"))
    machine = FakeMachine()
    call(machine, tmp_path / "round")
    for label in ("graph-tests", HEADLINE):
        env = machine.envs[label]
        assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "round" / "compile-cache" / "inductor")
        assert env["TRITON_CACHE_DIR"] == str(tmp_path / "mine")  # the caller's stays theirs
        assert env["TORCHINDUCTOR_FX_GRAPH_CACHE"] == env["TORCHINDUCTOR_AUTOGRAD_CACHE"] == "1"


def test_a_toy_round_runs_call_1_on_this_cpu_and_never_shares_a_gpu_round_s_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    machine = FakeMachine({"headline": 300}, device=None, outcome="<skipped/>")  # no CUDA: the graph tests skip
    round_dir = tmp_path / "toy"
    assert call(machine, round_dir, "--toy") == EXIT_OK
    assert pieces_ran(machine) == ["graph-tests", "headline"]
    spec_file = Path(_spec_given(machine, "headline:headline-8b-toy-no-graphs"))
    data = yaml.safe_load(spec_file.read_text())
    assert data["controls"]["device"] == "cpu" and {m["source"]["synthetic"] for m in data["models"]} == {"tiny"}
    assert (data["controls"]["sessions"], data["controls"]["warmup"], data["controls"]["repetitions"]) == (3, 3, 3)
    assert data["grid"]["llada"]["steps"] == [8, 32] and data["grid"]["generation_lengths"] == [32]  # K = N/4, N
    state = RoundLayout(round_dir).load()
    assert state.toy and state.device == "cpu (toy shapes)"
    capsys.readouterr()
    assert call(FakeMachine(), round_dir) == EXIT_USAGE
    assert "a toy round's folder" in capsys.readouterr().err
