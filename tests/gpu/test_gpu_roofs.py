"""The roofs and floors the roofline costs a GPU run on, measured on a real device, and the eager LLaMA warm-up
against its repetitions (skipped without CUDA; `just test-gpu`). Findings print as JSON lines, as in
test_gpu_device.py."""

from __future__ import annotations

import statistics

import pytest
import torch

from specs.results import RunStatus
from specs.schema import Controls, ModelSpec, Prompts, QualitySpec, RunConfig
from tests.gpu.findings import CUDA, record_finding

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_the_elementwise_multiply_is_measured_where_it_streams() -> None:
    """A 256 MiB multiply runs at what the bandwidth streams it at (two reads, one write), not at one launch's
    rate (a 65,536-element one measured 8.1e9 op/s on an H200): a bandwidth figure, which is why the roofline's
    vector roof on a GPU is the CUDA cores' datasheet rate instead (roofline/measured.py vector_roof)."""
    from workers.measure.calibrate import calibrate

    roofs = calibrate(CUDA, "bfloat16")
    streamed = roofs.memory_bandwidth_bytes_per_s / 6
    record_finding("roofs", vector_ops_per_s=roofs.vector_ops_per_s, streamed_ops_per_s=streamed,
             matmul_flops_per_s=roofs.matmul_flops_per_s, bandwidth=roofs.memory_bandwidth_bytes_per_s)
    assert roofs.vector_bytes is not None and roofs.vector_bytes >= 3 * (256 << 20)
    assert 0.5 * streamed < roofs.vector_ops_per_s < 2.0 * streamed


def test_an_eager_llama_warmup_costs_what_a_repetition_costs() -> None:
    """Every key length of an eager decode is a new attention shape: with cuDNN's SDPA (a plan per shape) the
    H200's warm-ups took 2.6-3.4x a repetition. The worker leaves cuDNN out for that decode; the run records it,
    and its host floor, measured on its own model."""
    from workers.runner import Worker

    config = RunConfig(
        model=ModelSpec(name="llama-small", arch="llama", source={"synthetic": "small"}),
        batch_size=4, prompt_length=64, generation_length=256,
        controls=Controls(dtype="bfloat16", attention="sdpa", device="cuda", warmup=1, repetitions=3),
        prompts=Prompts(dataset="specs/data/prompts.txt", count=4), prompt_ids=[0, 1, 2, 3], quality=QualitySpec(),
    )  # fmt: skip
    result = Worker().run(config, sweep="gpu", run_id="warmup")
    assert result.status == RunStatus.OK, result.traceback
    assert result.samples is not None and result.environment is not None
    warmup = result.samples.warmup_latency_s[0]
    repetition = statistics.median(result.samples.latency_e2e_s)
    roofs = result.environment.measured_roofs
    assert roofs is not None and roofs.host_floor_s is not None
    record_finding("eager_llama_warmup", warmup_s=warmup, repetition_s=repetition, host_floor_s=roofs.host_floor_s,
             attention_kernel=result.environment.attention_kernel)
    assert "no cuDNN" in (result.environment.attention_kernel or "")
    assert roofs.host_floor_layers == result.model_shape.num_layers  # type: ignore[union-attr]
    assert warmup < 1.5 * repetition
