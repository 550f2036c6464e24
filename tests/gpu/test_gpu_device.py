"""What only a real CUDA device can show; every test here is skipped without one (`just test-gpu`).

The CPU suite fakes the device at its boundary (events, allocator, NVML). These run the same code on a
GPU: CUDA-event step times against the host's wall clock, the memory tracker's baseline and reset, a real
out-of-memory recorded as `oom` with the worker alive after it, no synchronising call inside a timed step
(torch's sync debug mode), SDPA and flash-attn giving the same bidirectional LLaDA logits in bf16, and how
often block-only and full logits commit different tokens in bf16. Small random models keep the whole file
under 5 minutes on an A100 or H100. Findings are printed (run with -s to see them) and, when
LLADA_GPU_FINDINGS names a file, appended to it as JSON lines.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from specs.results import RunStatus
from specs.schema import Controls, ModelSpec, Prompts, QualitySpec, RunConfig
from tests.gpu.findings import CUDA, record_finding

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

MIB = 2**20


def _model(arch: str, preset: str = "small", attention: str = "sdpa", dtype: str = "bfloat16"):  # noqa: ANN202
    from workers.models.loading import load_model

    spec = ModelSpec(name=f"{arch}-{preset}", arch=arch, source={"synthetic": preset})
    return load_model(spec, Controls(dtype=dtype, attention=attention, device="cuda"), CUDA)


def _peaked(loaded: Any, seed: int = 0, std: float = 0.1) -> Any:
    """Redraw the matrices with a larger spread, so predictions are peaked like a trained model's rather than
    nearly uniform (where bf16 rounding would flip ties everywhere and say nothing about kernels)."""
    generator = torch.Generator(device=CUDA).manual_seed(seed)
    with torch.no_grad():
        for _, param in sorted(loaded.model.named_parameters()):
            if param.ndim > 1:
                param.normal_(0.0, std, generator=generator)
    return loaded


def _config(arch: str, **overrides: Any) -> RunConfig:
    values: dict[str, Any] = dict(
        model=ModelSpec(name=f"{arch}-small", arch=arch, source={"synthetic": "small"}),
        batch_size=4, prompt_length=64, generation_length=64,
        controls=Controls(dtype="bfloat16", attention="sdpa", device="cuda", warmup=1, repetitions=2),
        prompts=Prompts(dataset="specs/data/prompts.txt", count=4), prompt_ids=[0, 1, 2, 3], quality=QualitySpec(),
    )  # fmt: skip
    if arch == "llada":
        values.update(steps=16, block_length=32, remasking="low_confidence")
    values.update(overrides)
    return RunConfig(**values)


# ---------------------------------------------------------------- timing


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_cuda_event_times_agree_with_the_wall_clock(arch: str) -> None:
    """Events time the GPU's work: the whole generation by events is close to the host's wall clock around
    it (with a synchronize on both sides), and the steps fit inside the whole."""
    from workers.measure.scenario import generate
    from workers.measure.timing import CudaEventTimer

    loaded = _model(arch)
    config = _config(arch)
    prompt = torch.randint(1000, 20000, (config.batch_size, config.prompt_length), device=CUDA)
    timer = CudaEventTimer(CUDA)
    generate(loaded, config, prompt, timer=timer, seed=0, temperature=0.0)  # warm-up: kernels, allocator
    ratios = []
    for _ in range(3):
        torch.cuda.synchronize(CUDA)
        start = time.perf_counter()
        run = generate(loaded, config, prompt, timer=timer, seed=0, temperature=0.0)
        torch.cuda.synchronize(CUDA)
        wall = time.perf_counter() - start
        e2e, steps = run.e2e.seconds(), [s.seconds() for s in run.steps]
        assert 0 < sum(steps) <= e2e * 1.001 and e2e <= wall * 1.001
        ratios.append(e2e / wall)
    record_finding("event_e2e_over_wall", arch=arch, ratios=ratios)
    assert min(ratios) > 0.7  # events start when queued: only launch latency before the first kernel is lost


# ---------------------------------------------------------------- memory


def test_memory_tracker_baseline_and_reset_on_the_device() -> None:
    from workers.measure.memory import MemoryTracker, free_device_memory

    free_device_memory(CUDA)
    resident = torch.empty(256 * MIB, dtype=torch.uint8, device=CUDA)
    with MemoryTracker(CUDA, weights=resident.numel()) as tracker:
        transient = torch.empty(512 * MIB, dtype=torch.uint8, device=CUDA)
        del transient
    first = tracker.result()
    assert first.baseline_allocated_bytes is not None and first.baseline_allocated_bytes >= 256 * MIB
    assert first.peak_allocated_bytes >= first.baseline_allocated_bytes + 512 * MIB
    free_device_memory(CUDA)
    with MemoryTracker(CUDA, weights=resident.numel()) as tracker:
        small = torch.empty(MIB, dtype=torch.uint8, device=CUDA)
        del small
    second = tracker.result()
    # The reset at entry: the first region's 512 MiB peak does not carry over into the second.
    assert second.peak_allocated_bytes < second.baseline_allocated_bytes + 64 * MIB
    assert second.peak_reserved_bytes < first.peak_reserved_bytes  # empty_cache gave the 512 MiB back
    del resident
    free_device_memory(CUDA)


def test_an_out_of_memory_is_recorded_as_oom_and_the_worker_goes_on() -> None:
    """A LLaDA run whose logits cannot fit a capped allocator: `oom` with the memory held, then the same
    worker runs the next config without reloading its model."""
    from workers.runner import Worker

    worker = Worker()
    small = _config("llada", batch_size=1)
    assert worker.run(small, sweep="gpu", run_id="first").status == RunStatus.OK
    free = torch.cuda.mem_get_info(CUDA)[0]
    fraction = min(1.0, (torch.cuda.memory_allocated(CUDA) + 2 * 2**30) / torch.cuda.get_device_properties(CUDA).total_memory)
    torch.cuda.set_per_process_memory_fraction(fraction, CUDA)  # about 2 GiB above what is held now
    try:
        # [512 x 2048 positions] of a d=512, 4-layer model: activations alone need tens of GiB.
        huge = _config(
            "llada", batch_size=512, prompt_length=1024, generation_length=1024, steps=16, block_length=64,
            prompts=Prompts(dataset="specs/data/prompts.txt", count=4, join_passages=True),
        )  # fmt: skip
        result = worker.run(huge, sweep="gpu", run_id="oom")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, CUDA)
    assert result.status == RunStatus.OOM, result.traceback
    assert result.memory is not None and result.memory.at_failure_allocated_bytes is not None
    after = worker.run(small, sweep="gpu", run_id="after")
    assert after.status == RunStatus.OK and after.model_load_s == 0.0 and worker.broken is None
    record_finding("oom_then_ok", free_bytes_before=free, fraction=fraction)


# ---------------------------------------------------------------- no sync inside a step


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_no_synchronising_call_inside_a_timed_step(arch: str) -> None:
    """torch's sync debug mode raises on any call that waits for the device; it is on inside every step."""
    from contextlib import contextmanager

    from workers.measure.scenario import generate

    class StrictSteps:
        kind = "cuda_event"

        def __init__(self) -> None:
            self.depth = 0

        @contextmanager
        def measure(self):  # noqa: ANN202
            self.depth += 1
            step = self.depth == 2
            if step:
                torch.cuda.set_sync_debug_mode("error")
            try:
                yield None
            finally:
                if step:
                    torch.cuda.set_sync_debug_mode("default")
                self.depth -= 1

        def synchronize(self) -> None:
            torch.cuda.synchronize(CUDA)

    loaded = _model(arch)
    config = _config(arch, batch_size=1)
    prompt = torch.randint(1000, 20000, (1, config.prompt_length), device=CUDA)
    try:
        run = generate(loaded, config, prompt, timer=StrictSteps(), seed=0, temperature=0.0)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert run.tokens.shape == (1, config.generation_length)


# ---------------------------------------------------------------- kernels and logits


def test_sdpa_and_flash_attention_give_the_same_bidirectional_logits_in_bf16() -> None:
    from transformers.utils import is_flash_attn_2_available

    if not is_flash_attn_2_available():
        pytest.skip("flash-attn is not installed on this machine")
    sdpa = _peaked(_model("llada", attention="sdpa"))
    flash = _peaked(_model("llada", attention="flash_attention_2"))  # same seed: the same weights
    ids = torch.randint(1000, 20000, (2, 256), device=CUDA)
    with torch.inference_mode():
        a = sdpa.model(ids, use_cache=False).logits.float()
        b = flash.model(ids, use_cache=False).logits.float()
    scale = a.abs().max().item()
    max_diff = (a - b).abs().max().item()
    argmax_agree = (a.argmax(-1) == b.argmax(-1)).float().mean().item()
    record_finding("sdpa_vs_flash_bidirectional_bf16", max_abs_diff=max_diff, logit_scale=scale, argmax_agreement=argmax_agree)
    assert max_diff <= 0.05 * scale and argmax_agree >= 0.9
    # Bidirectional in both: changing the last token moves the first position's logits.
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 20000
    with torch.inference_mode():
        moved = flash.model(changed, use_cache=False).logits.float()
    assert (moved[:, 0] - b[:, 0]).abs().max().item() > 0


def test_how_often_block_only_and_full_logits_commit_different_tokens_in_bf16() -> None:
    """Two samplers in lockstep from the same state at every step, one projecting logits over the block,
    one over every position (the official code): the share of steps whose commits differ. A bf16 matmul
    with fewer rows may round the last bit differently and flip a near-tie; this measures how often."""
    from workers.samplers.llada.sampler import llada_steps

    loaded = _peaked(_model("llada"))
    mask_id = loaded.mask_token_id
    prompt = torch.randint(1000, 20000, (8, 128), device=CUDA)
    settings = dict(gen_length=128, block_length=32, steps=64, mask_id=mask_id)
    full = llada_steps(loaded.model, prompt, full_logits=True, **settings)
    block = llada_steps(loaded.model, prompt, full_logits=False, **settings)
    differing_steps, differing_tokens, committed = 0, 0, 0
    with torch.inference_mode():
        for _ in range(settings["steps"]):
            block.x.copy_(full.x)  # the same state before the step
            record = next(full)
            next(block)
            diff = int((full.x != block.x).sum())  # positions either sampler committed and the other did not
            differing_tokens += diff
            differing_steps += diff > 0
            committed += record.committed
    record_finding(
        "block_only_vs_full_logits_bf16", steps=settings["steps"], differing_steps=differing_steps,
        differing_tokens=differing_tokens, committed_tokens=committed,
        differing_token_rate=differing_tokens / committed,
    )  # fmt: skip
    assert differing_tokens / committed <= 0.25  # near-ties only; a wrong window would differ everywhere
