"""The GPU round's plan (`just gpu-round --dry-run`): one call of at most 540 s on h100-sxm and h200 that answers
the open questions first, a second of at most 240 s where the lease leaves time, the rerun kept; `--budget`
changes it; every argument is checked, dry run included, in one line; without CUDA nothing is marked done."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.round_plan import (
    EXPORT_FILES,
    LEASE_S,
    MACHINE_START_S,
    PIECES,
    PROFILES,
    SECOND_CALL_S,
    TEST_FILES,
    plan_round,
)
from specs.loader import PACKAGE_ROOT, load_spec

SCRIPT = PACKAGE_ROOT / "container" / "gpu-round.sh"


def _script(*args: str, cwd: Path = PACKAGE_ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("OUT", None)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd,
                          check=False)


def test_the_round_is_one_call_of_540_s_on_both_profiles_with_the_open_questions_first() -> None:
    plan = plan_round()
    assert plan.first[:4] == ("llada-b1", "graph-tests", "llama-compile", "dream-qwen")
    for profile in PROFILES:
        assert plan.call_s(plan.first, profile) <= 540
    assert plan.call_s(plan.first) <= 540  # as the runner packs it: each piece on its slower profile
    assert plan.second_s <= SECOND_CALL_S and plan.call_s(plan.second) <= plan.second_s
    assert plan.lease_s(MACHINE_START_S[1]) <= LEASE_S  # the longest start, both calls and the rerun
    assert sorted((*plan.first, *plan.second, *plan.left)) == sorted(p.name for p in PIECES)
    assert len(PIECES) + 1 <= EXPORT_FILES  # a tarball per piece and gpu-round.json


def test_the_budget_changes_the_plan() -> None:
    default, short = plan_round(), plan_round(300)
    assert "dream-qwen" in default.first and "dream-qwen" not in short.first
    assert short.call_s(short.first) <= 300 and short.first != default.first


def test_the_campaign_pieces_run_what_the_questions_ask() -> None:
    """LLaDA-8B B = 1 (512 + 256, 64 steps, block 32) in its four variants; LLaMA-3-8B static-compile at B = 1 and
    64; Dream-7B against Qwen2.5-7B at B = 1, 8, 64 and each at its best at B = 1."""
    def runs(spec: str) -> set[tuple]:
        from orchestrator.plan import plan_runs

        return {(r.config.model.arch, r.config.batch_size, r.config.prompt_length, r.config.generation_length,
                 r.config.steps, r.config.block_length, r.config.impl_name)
                for r in plan_runs(load_spec(PACKAGE_ROOT / spec)) if r.config.timed_steps is None}  # fmt: skip

    pieces = {p.name: p for p in PIECES}
    assert runs(pieces["llada-b1"].sources[0]) == {
        ("llada", 1, 512, 256, 64, 32, impl) for impl in ("vanilla", "dual-cache", "graph", "dual-cache-graph")}  # fmt: skip
    assert runs(pieces["llama-compile"].sources[0]) == {("llama", b, 512, 256, None, None, "static-compile") for b in (1, 64)}
    vanilla, best = (runs(spec) for spec in pieces["dream-qwen"].sources)
    assert {(a, b) for a, b, *_ in vanilla} >= {("qwen2", 1), ("qwen2", 8), ("qwen2", 64), ("dream", 1)}
    assert best == {("qwen2", 1, 512, 256, None, None, "static-compile"), ("dream", 1, 512, 256, 64, None, "graph")}


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
