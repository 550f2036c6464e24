"""specs/three-way.yaml end to end, as `just sweep specs/three-way.yaml` runs it: the three shipped miniature members,
every run ok, and a verdict and findings.json that answer both diffusion models against the AR one, each
block-diffusion threshold with its own parity, speedup intervals and B*. It is the three-way answer CI checks
(the default sweep leaves the third member out to stay within five minutes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from statistics import median

import pytest

from specs.paths import PACKAGE_ROOT

PAIRS = ["llada-mini (LLaDA) vs llama-mini (LLaMA)", "fast-dllm-v2-mini (Fast-dLLM v2) vs llama-mini (LLaMA)"]
THRESHOLDS = (0.05, 0.1, 0.2, 0.9)


@pytest.mark.slow  # the whole spec: 90 runs and their report, about 4-5 minutes on 2 cores
def test_the_three_way_spec_answers_both_diffusion_models(tmp_path: Path) -> None:
    out = tmp_path / "three-way"
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "sweep", "specs/three-way.yaml", "--out", str(out)],
                          cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=1500)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "finished 90 runs (90 ok) in" in done.stdout  # the time it took, stated

    record = json.loads((out / "findings.json").read_text(encoding="utf-8"))
    assert record["pairs"] == PAIRS
    for pair in PAIRS:
        assert any(line.startswith(f"{pair}: ") for line in record["verdict"]), pair

    block_diffusion = [f for f in record["findings"] if f["dllm_arch"] == "fast_dllm_v2" and f["pairing"] == "vanilla"]
    settings = {f["sampler_setting"] for f in block_diffusion}
    assert settings == {f"sub-block 8, threshold {t:g}" for t in THRESHOLDS}
    for finding in block_diffusion:
        judged = [s for s in finding["s_parity"] if s["metric"] == "gen_ppl" and s["decides"]]
        assert judged and {s["judge"] for s in judged} == {"packaged-smollm2"}
        assert [s["batch_size"] for s in finding["speedups"]] == [1, 4, 16]
        assert all(s["speedup_low"] < s["speedup"] < s["speedup_high"] for s in finding["speedups"])
        assert finding["b_star_measured"] is not None and finding["b_star_coverage"] is not None

    # The threshold sets the forwards: the lowest runs fewer than the official 0.9, which commits one token each.
    forwards: dict[float, list[int]] = {}
    for path in (out / "runs").glob("*.json"):
        run = json.loads(path.read_text(encoding="utf-8"))
        sampling = run["config"].get("block_diffusion")
        if sampling is not None:
            forwards.setdefault(sampling["threshold"], []).extend(run["samples"]["forwards"])
    assert median(forwards[0.05]) < median(forwards[0.9]) == 32
