"""Block-diffusion runs as the workers measure them: every forward a timed step, its tokens per forward recorded,
exactly N_out tokens a row, the block cache named and written; and end to end on CPU, a sweep whose every run the
roofline bounds from below."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from specs.block_diffusion import BlockDiffusionImpl, BlockDiffusionSampling, schedule
from specs.paths import PACKAGE_ROOT
from specs.schema import Controls, ModelSpec, Prompts, QualitySpec, RunConfig

PROMPT, GEN, BLOCK, SUB = 20, 24, 8, 4


def bd_config(*, impl: BlockDiffusionImpl | None = None, threshold: float = 1.0, batch: int = 2) -> RunConfig:
    """A tiny synthetic Fast-dLLM v2 run: prompt 20, 24 new tokens, blocks of 8, sub-blocks of 4."""
    return RunConfig(
        model=ModelSpec(name="fd-tiny", arch="fast_dllm_v2", source={"synthetic": "tiny"}), batch_size=batch,
        prompt_length=PROMPT, generation_length=GEN, block_length=BLOCK,
        steps=schedule(PROMPT, GEN, BLOCK, SUB).max_forwards,
        block_diffusion=BlockDiffusionSampling(sub_block_length=SUB, threshold=threshold), block_diffusion_impl=impl,
        controls=Controls(dtype="float32", attention="sdpa", device="cpu", warmup=1, repetitions=2),
        prompts=Prompts(), prompt_ids=[0, 1], quality=QualitySpec(),
    )  # fmt: skip


@pytest.mark.parametrize("impl", [None, BlockDiffusionImpl(name="subcache", sub_block_cache=True)],
                         ids=["block cache", "sub-block cache"])
def test_a_measured_run_records_each_forward_and_its_tokens(impl: BlockDiffusionImpl | None) -> None:
    from workers.measure.scenario import measure
    from workers.models.loading import load_model

    config = bd_config(impl=impl)
    loaded = load_model(config.model, config.controls, torch.device("cpu"))
    batches = [torch.randint(1000, 20000, (2, PROMPT), generator=torch.Generator().manual_seed(b)) for b in (0, 1)]
    measured = measure(loaded, config, batches)
    samples = measured.samples
    assert samples.ttft_s is None and samples.itl_s is None
    for steps, committed, forwards in zip(samples.step_s, samples.tokens_committed, samples.forwards, strict=True):
        assert len(steps) == len(committed) == forwards == config.steps  # threshold 1: the fixed schedule, K
        assert sum(committed) == 2 * GEN  # every generated token of both rows, the completing forwards' included
    assert measured.nfe == config.steps
    assert measured.kv_cache == ("block+sub-block" if impl else "block") and measured.cache_bytes > 0
    assert all(out.shape == (2, GEN) and not (out == loaded.mask_token_id).any() for out in measured.outputs.values())


def _spec(directory: Path) -> Path:
    data = {
        "name": "fd-tiny",
        "models": [{"name": "qwen2-tiny", "arch": "qwen2", "source": {"synthetic": "tiny"}},
                   {"name": "fd-tiny", "arch": "fast_dllm_v2", "source": {"synthetic": "tiny"}}],
        "grid": {"batch_sizes": [1, 2], "prompt_lengths": [PROMPT], "generation_lengths": [GEN],
                 "block_diffusion": {"thresholds": [1.0], "block_lengths": [BLOCK], "sub_block_lengths": [SUB],
                                     "impl": [{"name": "vanilla"}, {"name": "subcache", "sub_block_cache": True}]}},
        "controls": {"dtype": "float32", "attention": "sdpa", "device": "cpu", "warmup": 1, "repetitions": 2},
        "prompts": {"dataset": str(PACKAGE_ROOT / "specs" / "data" / "prompts.txt"), "count": 2},
    }  # fmt: skip
    path = directory / "fd-tiny.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_cpu_sweep_of_the_family_is_bounded_by_the_roofline(tmp_path: Path) -> None:
    """Every Fast-dLLM v2 run of a CPU sweep: ok, its forwards costed as measured, and its roofs-only prediction on
    the CPU's measured roofs below its measured latency."""
    from report.analysis.predictions import choose_profile, measured_roofs_of, prediction_table
    from report.table.flat import results_table
    from specs.artifacts import SweepLayout, load_results
    from specs.results import RunStatus

    out = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "sweep", str(_spec(tmp_path)), "--out", str(out),
         "--executor", "inline"], cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = load_results(SweepLayout(out))
    assert len(results) == 2 + 2 * 2 and all(r.status == RunStatus.OK for r in results)
    profile = choose_profile("cpu", measured_roofs_of(results, "cpu")).profile
    assert profile is not None
    table = prediction_table(results, results_table(results), profile)
    ours = table.filter((table["arch"] == "fast_dllm_v2") & (table["fidelity"] == "faithful"))
    assert ours.height == 4 and set(ours["forwards_source"].to_list()) == {"measured"}
    assert (ours["predicted_latency_roofs_s"] < ours["measured_latency_s"]).all()
    assert not ours["roofline_violated"].any()
    assert (out / "report.md").is_file()
