"""Graph-captured forwards on a real CUDA device (skipped elsewhere; `just test-gpu`).

On a CPU the graph variants run compiled by inductor, which checks their static buffers but captures
nothing. Here the forwards are captured and replayed: a replay reads the inputs copied into it; LLaDA's
replayed vanilla, prefix and dual steps give the eager variant's tokens generation after generation (float32,
peaked weights, so rounding decides no near-tie); the host time of a replayed step is a fraction of an eager
one; LLaMA's compiled decode over the live prefix (in buckets, reduce-overhead's CUDA graphs) gives the eager
loop's tokens. Findings are printed (-s) and appended to LLADA_GPU_FINDINGS when it is set.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import pytest
import torch

from specs.schema import Controls, ModelSpec
from tests.gpu.findings import CUDA, record_finding

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

GEN = {"gen_length": 64, "block_length": 32, "steps": 16}  # 2 blocks of 8 steps


def _model(arch: str, dtype: str = "float32") -> Any:
    """The `small` preset on the GPU, its matrices redrawn with a wider spread so predictions are peaked."""
    from workers.models.loading import load_model

    spec = ModelSpec(name=f"{arch}-small", arch=arch, source={"synthetic": "small"})
    loaded = load_model(spec, Controls(dtype=dtype, attention="sdpa", device="cuda"), CUDA)
    generator = torch.Generator(device=CUDA).manual_seed(0)
    with torch.no_grad():
        for _, param in sorted(loaded.model.named_parameters()):
            if param.ndim > 1:
                param.normal_(0.0, 0.1, generator=generator)
    return loaded


def _prompt(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1000, 20000, (batch, length), generator=generator).to(CUDA)


def test_a_captured_forward_replays_on_the_inputs_copied_into_it() -> None:
    from workers.samplers.graphs import CapturedForward

    forward = CapturedForward(lambda x, y: x * 2 + y, CUDA)
    x, y = torch.arange(4.0, device=CUDA), torch.ones(4, device=CUDA)
    assert torch.equal(forward(x, y), x * 2 + y)
    assert torch.equal(forward(x + 10, y), (x + 10) * 2 + y)  # a replay, not a new capture
    assert forward.graphs == 1 and forward.preparation.seconds > 0


@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
def test_llada_replayed_steps_give_the_eager_tokens(cache: str) -> None:
    """Two generations replay one set of graphs (two prompts, so the replay is not the capture's input)."""
    from workers.measure.memory import graph_pool_memory
    from workers.samplers import llada_generate
    from workers.samplers.llada_graphs import LladaGraphs

    loaded = _model("llada")
    graphs = LladaGraphs(loaded.model, rows=2, length=64 + GEN["gen_length"], cache=cache)
    with torch.inference_mode():
        for seed in (0, 1):
            prompt = _prompt(2, 64, seed)
            kw = {**GEN, "mask_id": loaded.mask_token_id, "cache": cache}
            eager = llada_generate(loaded.model, prompt, **kw)
            replayed = llada_generate(loaded.model, prompt, graphs=graphs, **kw)
            assert torch.equal(replayed, eager), f"seed {seed}: {(replayed != eager).sum().item()} tokens differ"
    expected = {"none": 1, "dual": 2, "prefix": 3}[cache]
    assert graphs.graphs == expected
    pool_reserved, pool_allocated = graph_pool_memory(CUDA)
    assert pool_reserved > pool_allocated >= graphs.output_bytes > 0  # replays write more than their outputs
    record_finding("llada_graph_token_exact", cache=cache, graphs=graphs.graphs,
                   preparation_s=graphs.preparation.seconds, graph_pool_bytes=pool_reserved,
                   output_bytes=graphs.output_bytes)  # fmt: skip


@pytest.mark.parametrize("cache", ["none", "dual"])
def test_llada_replayed_step_costs_a_fraction_of_the_eager_host_time(cache: str) -> None:
    """Host time of `next(sampler)` (no synchronize: what the CPU spends launching the step), batch 1, bf16.
    The eager step launches every operator of every layer; the replayed one launches one graph and the
    sampler's few operators."""
    from workers.samplers import llada_steps
    from workers.samplers.llada_graphs import LladaGraphs

    loaded = _model("llada", dtype="bfloat16")
    prompt = _prompt(1, 64)
    graphs = LladaGraphs(loaded.model, rows=1, length=64 + GEN["gen_length"], cache=cache)

    def host_ms(with_graphs: LladaGraphs | None) -> list[float]:
        times = []
        with torch.inference_mode():
            sampler = llada_steps(loaded.model, prompt, mask_id=loaded.mask_token_id, cache=cache,
                                  graphs=with_graphs, **GEN)  # fmt: skip
            while not sampler.done:
                sampler.prepare_step()
                torch.cuda.synchronize(CUDA)
                start = time.perf_counter()
                next(sampler)
                times.append(1e3 * (time.perf_counter() - start))
            torch.cuda.synchronize(CUDA)
        return times

    host_ms(None), host_ms(graphs)  # warm-up: kernels, allocator, the captures
    eager, replayed = host_ms(None), host_ms(graphs)
    record_finding("llada_step_host_ms", cache=cache, eager_median=statistics.median(eager),
             replayed_median=statistics.median(replayed), layers=loaded.model.config.num_hidden_layers)  # fmt: skip
    assert statistics.median(replayed) < 0.5 * statistics.median(eager)


@pytest.mark.parametrize("padded", [False, True])
def test_llama_live_decode_replays_the_eager_loops_tokens(padded: bool) -> None:
    """Prompt 250 + 20 new tokens: the live lengths 251-270 fall in two buckets (256, then 270 = capacity),
    each compiled and recorded as a CUDA graph in the first generation and replayed in the second."""
    from workers.samplers import ar_generate, ar_steps
    from workers.samplers.compiled import CompiledDecode

    loaded = _model("llama")
    prompt = _prompt(4, 250)
    mask = torch.ones_like(prompt)
    if padded:
        mask[0, :37] = 0
    mask_arg = mask if padded else None
    with torch.inference_mode():
        eager = ar_generate(loaded.model, prompt, mask_arg, n_new=20)
        compiled = CompiledDecode(loaded.model, batch=4, capacity=270, decode_attention="live")
        for _ in range(2):
            decoder = ar_steps(loaded.model, prompt, mask_arg, n_new=20, compiled=compiled)
            for _ in decoder:
                pass
            assert torch.equal(decoder.sequences, eager)
    assert compiled.graphs == 2
    record_finding("llama_live_decode_token_exact", padded=padded, preparation_s=compiled.preparation_s,
                   kernel=compiled.kernel)  # fmt: skip


def test_llama_bucket_met_once_per_generation_is_recorded_before_any_timed_step() -> None:
    """Prompt 250 + 8 new tokens: decode steps make the sequence 251-257 long; the last alone attends past 256, over
    all 258 positions (the capacity): a bucket met once per generation. reduce-overhead records a graph on its
    second call; the preparation makes that call (and a replay) itself, so a second generation run frozen, as a
    timed repetition is, records nothing."""
    from workers.samplers import ar_generate, ar_steps
    from workers.samplers.compiled import CompiledDecode

    loaded = _model("llama")
    prompt = _prompt(2, 250)
    with torch.inference_mode():
        eager = ar_generate(loaded.model, prompt, n_new=8)
        compiled = CompiledDecode(loaded.model, batch=2, capacity=258, decode_attention="live")
        for frozen in (False, True):
            decoder = ar_steps(loaded.model, prompt, n_new=8, compiled=compiled)
            if frozen:
                with compiled.preparation.frozen():
                    for _ in decoder:
                        pass
            else:
                for _ in decoder:
                    pass
            assert torch.equal(decoder.sequences, eager)
    assert compiled.graphs == 2 and len(compiled.preparation.prepared) == 2
