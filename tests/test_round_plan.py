"""The GPU round's plan (`just gpu-round --dry-run`): its first call the 8B headline (the graph tests, then B = 1 in
three interleaved sessions) in at most 540 s with its margin on h100-sxm and h200, each session priced with its
start and compiles, measured where the committed H200 runs ran the configuration; two sessions, said and why,
where three do not fit; a second call of at most 240 s where the lease leaves time, the rerun kept, the rest in a
printed order; every argument is checked, dry run included, in one line; without CUDA nothing is marked done."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.plan import plan_runs
from orchestrator.gpu_round.plan_text import format_plan
from orchestrator.gpu_round.plan import (
    EXPORT_FILES,
    LEASE_S,
    MACHINE_START_S,
    PIECES,
    PROFILES,
    SECOND_CALL_S,
    TEST_FILES,
    plan_round,
)
from orchestrator.gpu_round.times import SESSION_START_S, WARM_COMPILE_S
from orchestrator.walltime import RUN_OVERHEAD_S, SWEEP_START_S
from specs.loader import PACKAGE_ROOT, load_spec

SCRIPT = PACKAGE_ROOT / "container" / "gpu-round.sh"


def _script(*args: str, cwd: Path = PACKAGE_ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("OUT", None)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd,
                          check=False)


def test_call_1_is_the_headline_graph_tests_first_in_540_s_with_margin_on_both_profiles() -> None:
    plan = plan_round()
    assert plan.first == ("graph-tests", "headline")
    for profile in PROFILES:
        assert plan.call_s(plan.first, profile) <= 540  # each piece x1.25 on this profile
    assert plan.call_s(plan.first) <= 540  # as the runner packs it: each piece on its slower profile
    assert plan.second_s <= SECOND_CALL_S and plan.call_s(plan.second) <= plan.second_s
    assert plan.lease_s(MACHINE_START_S[1]) <= LEASE_S  # the longest start, both calls and the rerun
    assert sorted((*plan.first, *plan.second, *plan.left)) == sorted(p.name for p in PIECES)
    assert len(PIECES) + 1 <= EXPORT_FILES  # a tarball per piece and gpu-round.json
    assert plan.notes == ()  # three sessions fit: no fallback


def _runs(spec: str) -> set[tuple]:
    return {(r.config.model.arch, r.config.batch_size, r.config.prompt_length, r.config.generation_length,
             r.config.steps, r.config.block_length, r.config.impl_name, r.config.session)
            for r in plan_runs(load_spec(PACKAGE_ROOT / spec))}  # fmt: skip


def test_the_headline_spec_is_what_a_reviewer_asked_for() -> None:
    """LLaMA-3-8B and LLaDA-8B shapes at 512 + 256, block 32, K = N_out / 4 (and N_out for the fastest LLaDA);
    compiled LLaMA against graph-captured LLaDA and eager against eager; 3 sessions, 3 warm-ups, 3 repetitions,
    every run in full."""
    pieces = {p.name: p for p in PIECES}
    spec = load_spec(PACKAGE_ROOT / pieces["headline"].sources[0])
    controls = spec.controls
    assert (controls.sessions, controls.warmup, controls.repetitions, controls.extrapolation) == (3, 3, 3, None)
    assert {(m.arch, m.source.synthetic) for m in spec.models} == {("llama", "8b"), ("llada", "8b")}
    point = {("llama", "vanilla", None), ("llama", "static-compile", None), ("llada", "vanilla", 64),
             ("llada", "graph", 64), ("llada", "dual-cache-graph", 64), ("llada", "dual-cache-graph", 256)}
    block = {"llama": None, "llada": 32}
    assert _runs(pieces["headline"].sources[0]) == {
        (arch, 1, 512, 256, steps, block[arch], impl, session) for arch, impl, steps in point for session in range(3)}
    assert {(a, b, i) for a, b, _, _, _, _, i, _ in _runs(pieces["headline-b8"].sources[0])} == {
        ("llama", 8, "static-compile"), ("llada", 8, "dual-cache-graph")}
    assert {(a, b, i, s) for a, b, _, _, _, _, i, s in _runs(pieces["headline-b64"].sources[0])} == {
        ("llama", 64, "static-compile", None), ("llada", 64, "dual-cache-graph", None)}
    assert {(a, b, i) for a, b, _, _, _, _, i, _ in _runs(pieces["headline-eager-b8"].sources[0])} == {
        ("llama", 8, "vanilla"), ("llada", 8, "vanilla")}
    assert all(p.gate == "graph-tests" for p in PIECES if p.name in ("headline", "headline-b8", "headline-b64"))


def test_each_session_is_priced_with_its_start_and_only_its_first_compile_cold() -> None:
    plan = plan_round()
    sweep = plan.piece("headline").sweeps[0]
    costs = sweep.all_costs
    compiled = [(c.session, c.compile) for c in costs if c.compile]
    assert compiled == [(0, "cold"), (1, "warm"), (2, "warm")]
    cold, warm = (next(c for c in costs if c.compile == kind) for kind in ("cold", "warm"))
    assert cold.seconds["h200"] - warm.seconds["h200"] == pytest.approx(30.06 - WARM_COMPILE_S, abs=0.01)
    # Measured where accel-8b ran the configuration (its run named), predicted by the roofline elsewhere.
    measured = {c.label: c.twin.run_id for c in costs if c.twin is not None}
    assert measured == {"llama vanilla B=1": "a286390f05fa", "llama static-compile B=1": "d95a440d5f79",
                        "llada vanilla B=1 K=64": "beb054004d43"}
    llama = next(c for c in costs if c.label == "llama vanilla B=1")
    assert llama.seconds["h200"] == pytest.approx(6 * 5.18 + RUN_OVERHEAD_S, abs=0.05)  # 3 + 3 generations
    # The whole sweep: its runs, a start per session (the first is the command's) and each session's builds.
    runs = sum(c.seconds["h100-sxm"] for c in costs)
    assert sweep.seconds("h100-sxm") == pytest.approx(runs + SWEEP_START_S + 2 * SESSION_START_S
                                                      + sweep.loads_s["h100-sxm"])
    # A resumed sweep: two sessions done, the third priced alone, its compile cold again (a fresh call).
    done = {c.run_id for c in costs if c.session in (0, 1)}
    left = sweep.costs(done)
    assert {c.session for c in left} == {2} and [c.compile for c in left if c.compile] == ["cold"]
    assert sweep.seconds("h200", done) == pytest.approx(
        sum(c.seconds["h200"] for c in left) + SWEEP_START_S + sweep.loads_s["h200"] / 3)


def test_a_shorter_first_call_plans_two_sessions_and_says_how_much_wider_the_interval_is() -> None:
    """Three sessions need about 445 s; with a 420 s deadline the plan takes two and says why, with t's width."""
    plan = plan_round(420)
    headline = plan.piece("headline")
    assert "headline" in plan.first and headline.sweeps[0].spec.controls.sessions == 2
    assert headline.sweeps[0].name == "headline-8b-2-sessions"
    (note,) = plan.notes
    assert "3 sessions need" in note and "runs 2" in note and "t = 12.706" in note and "4.303" in note
    assert "3.6x as wide" in note  # (12.706 / sqrt 2) / (4.303 / sqrt 3)
    assert plan.call_s(plan.first) <= 420
    nothing = plan_round(200)  # not even two sessions fit: said, and the headline waits
    assert "headline" not in nothing.first and "cannot hold it" in nothing.notes[0]


def test_the_dry_run_shows_each_piece_s_sessions_and_each_session_s_cost_measured_or_predicted() -> None:
    text = format_plan(plan_round())
    lines = text.splitlines()
    headline = next(line for line in lines if line.startswith("headline "))
    assert headline.split()[1:6] == ["1", "3", "3", "3", "18"]  # call, sessions, warm-ups, repetitions, runs
    sessions = [line for line in lines if line.strip().startswith("session ")]
    assert len(sessions) == 3 and "cold compiles" in sessions[0] and "warm compiles" in sessions[2]
    assert all(re.search(r"\d+ s on h100-sxm, \d+ s on h200", line) for line in sessions)
    assert any("measured on the H200" in line and "a286390f05fa" in line for line in lines)
    assert any(line.strip().startswith("predicted by the roofline: llada dual-cache-graph") for line in lines)
    assert any(line.strip().startswith("weights: rebuilt on the device") for line in lines)
    assert any("call 1 with headline-b8 too would need" in line for line in lines)
    later = [line for line in lines if line.startswith("next lease ")]
    assert [line.split()[3] for line in later][:2] == ["headline-b8", "headline-b64"]  # the order they run in


def test_the_budget_changes_the_plan() -> None:
    default, short = plan_round(), plan_round(300)
    assert short.call_s(short.first) <= 300 and short.first != default.first


@pytest.mark.slow
def test_the_device_tests_are_the_fixed_set_the_plan_prices() -> None:
    """Every file of tests/gpu with tests is in exactly one piece, and holds as many as the plan prices (pytest's
    collection on this CPU: the tests skip here, but they are collected)."""
    files = sorted(str(p.relative_to(PACKAGE_ROOT)) for p in (PACKAGE_ROOT / "tests" / "gpu").glob("test_*.py"))
    in_pieces = [s for p in PIECES if p.kind == "tests" for s in p.sources]
    assert sorted(in_pieces) == files == sorted(TEST_FILES)
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                           *files], capture_output=True, text=True, cwd=PACKAGE_ROOT, timeout=300, check=False)  # fmt: skip
    counts: dict[str, int] = {}
    for line in done.stdout.splitlines():
        if "::" in line:
            counts[line.split("::")[0]] = counts.get(line.split("::")[0], 0) + 1
    assert counts == {path: f.tests for path, f in TEST_FILES.items()}, done.stdout + done.stderr


def test_gpu_round_dry_run_prints_one_call_of_at_most_540_s_on_both_profiles() -> None:
    done = _script("--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "h100-sxm" in lines[0] and "h200" in lines[0]
    call1 = next(line for line in lines if line.startswith("call 1:"))
    seconds = dict(re.findall(r"(\d+) s on ([\w-]+)", call1))
    assert set(seconds.values()) == set(PROFILES) and all(int(s) <= 540 for s in seconds)
    assert "of its 540 s deadline" in call1
    assert any(line.startswith("call 2:") for line in lines) and lines[-1].startswith("lease:")
    shorter = _script("--dry-run", "--budget", "300")
    assert shorter.returncode == 0 and "of its 300 s deadline" in shorter.stdout and shorter.stdout != done.stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--budget", "abc"], "--budget"), (["--budget", "0"], "--budget"), (["--budget", "-5"], "--budget"),
     (["--budget", "nan"], "--budget"), (["--budget", "inf"], "--budget"), (["--budget", "1e9"], "--budget"),
     (["--budget"], "--budget"), (["--bogus"], "--bogus"), (["--bundle", "no-such-bundle"], "--bundle"),
     (["--resume", "no-such-export"], "--resume"), (["--round"], "--round"),
     (["--round", "here", "--export", "here/out"], "--export")],
)  # fmt: skip
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "call"])
def test_every_bad_argument_is_one_line_naming_it_before_anything_runs(tmp_path: Path, args: list[str], named: str,
                                                                       dry_run: bool) -> None:  # fmt: skip
    done = _script(*(["--dry-run"] if dry_run else []), *args, cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and named in done.stderr, done.stderr
    assert done.stdout == "" and not any(tmp_path.iterdir())


@pytest.mark.slow
def test_gpu_round_without_cuda_refuses_in_one_line_and_marks_nothing(tmp_path: Path) -> None:
    done = _script("--round", "round", "--export", "out", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().count("\n") == 0 and "no CUDA device" in done.stderr
    assert not (tmp_path / "round").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_runs_nothing(tmp_path: Path, flag: str) -> None:
    done = _script("--dry-run", flag, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: gpu-round") and "--budget" in done.stdout and done.stderr == ""
    assert not any(tmp_path.iterdir())
