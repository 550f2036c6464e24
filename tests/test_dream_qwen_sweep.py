"""The second pair end to end on CPU: a Dream/Qwen2.5 spec plans, sweeps (inline), and reports that pair's B*
and verdict, from tiny random-weight models of the Qwen2 layout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specs.artifacts import SweepLayout, load_results, verify
from specs.paths import PACKAGE_ROOT
from specs.results import RunStatus


def _trimmed_spec(directory: Path) -> Path:
    """specs/dream-qwen.yaml cut to the fewest runs that still give a B* and a parity: two batches, two step
    counts, one alg, each model's vanilla and one variant, four prompts, two repetitions."""
    data = yaml.safe_load((PACKAGE_ROOT / "specs" / "dream-qwen.yaml").read_text(encoding="utf-8"))
    data["grid"]["dream"].update(steps=[8, 32], algs=["entropy"])
    data["controls"].update(repetitions=2)
    data["prompts"].update(dataset=str(PACKAGE_ROOT / "specs" / "data" / "prompts.txt"), count=4)
    path = directory / "dream-qwen.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_dream_qwen_sweep_reports_the_pairs_b_star_and_verdict(tmp_path: Path) -> None:
    spec = _trimmed_spec(tmp_path)
    out = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "sweep", str(spec), "--out", str(out), "--executor", "inline"],
        cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = load_results(SweepLayout(out))
    assert {r.config.model.arch for r in results} == {"qwen2", "dream"}
    assert all(r.status == RunStatus.OK for r in results)
    assert len(results) == 2 * 2 + 2 * 2 * 2  # Qwen2.5: 2 batches x 2 impls; Dream: 2 batches x 2 steps x 2 impls
    dream = [r for r in results if r.config.model.arch == "dream"]
    # A Dream run records its steps as a diffusion run does: one step time and one forward per step.
    assert all(len(steps) == r.config.steps for r in dream for steps in r.samples.step_s)
    assert all(f == r.config.steps for r in dream for f in r.samples.forwards)
    assert all(r.samples.ttft_s is None and r.model_shape.attention_bias for r in dream)
    assert verify(SweepLayout(out)) == []

    findings = json.loads((out / "findings.json").read_text(encoding="utf-8"))
    pair = [f for f in findings["findings"] if f["pairing"] == "vanilla"]
    assert pair and all({f["llama_model"], f["llada_model"]} == {"qwen2-tiny", "dream-tiny"} for f in pair)
    assert all(f["b_star_measured"] is not None or f["b_star_bound"] is not None for f in pair)
    verdict = " ".join(findings["verdict"])
    assert "Qwen2.5" in verdict and "Dream" in verdict and "LLaDA" not in verdict and "LLaMA" not in verdict
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "B*" in report and "dream-tiny" in report and "qwen2-tiny" in report
