"""LLaDA's graph-captured step forwards on a real CUDA device (skipped elsewhere; `just test-gpu`).

On a CPU the graph variants run compiled by inductor, which checks their static buffers but captures
nothing. Here the forwards are captured and replayed, by hand (no compilation, so this file takes seconds):
a replay reads the inputs copied into it; LLaDA's replayed vanilla, prefix and dual steps give the eager
variant's tokens generation after generation (float32, peaked weights, so rounding decides no near-tie), and
a prompt replayed again as a timed repetition runs it, frozen, captures nothing; the host time of a replayed
step is a fraction of an eager one. LLaMA's compiled decode is tests/gpu/test_gpu_compiled.py. Findings are
printed (-s) and appended to LLADA_GPU_FINDINGS when it is set.
"""

from __future__ import annotations

import statistics
import time

import pytest
import torch

from tests.gpu.findings import CUDA, record_finding
from tests.gpu.small import peaked_small, random_prompt

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

GEN = {"gen_length": 64, "block_length": 32, "steps": 16}  # 2 blocks of 8 steps


def test_a_captured_forward_replays_on_the_inputs_copied_into_it() -> None:
    from workers.samplers.graphs import CapturedForward

    forward = CapturedForward(lambda x, y: x * 2 + y, CUDA)
    x, y = torch.arange(4.0, device=CUDA), torch.ones(4, device=CUDA)
    assert torch.equal(forward(x, y), x * 2 + y)
    assert torch.equal(forward(x + 10, y), (x + 10) * 2 + y)  # a replay, not a new capture
    assert forward.graphs == 1 and forward.preparation.seconds > 0


@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
def test_llada_replayed_steps_give_the_eager_tokens(cache: str) -> None:
    """Two generations replay one set of graphs (two prompts, so the replay is not the capture's input); the
    first prompt again, frozen as a timed repetition runs, replays them and captures nothing."""
    from workers.measure.memory import graph_pool_memory
    from workers.samplers import llada_generate
    from workers.samplers.llada.graphs import LladaGraphs

    loaded = peaked_small("llada")
    graphs = LladaGraphs(loaded.model, rows=2, length=64 + GEN["gen_length"], cache=cache)
    kw = {**GEN, "mask_id": loaded.mask_token_id, "cache": cache}
    with torch.inference_mode():
        eager = {}
        for seed in (0, 1):
            prompt = random_prompt(2, 64, seed)
            eager[seed] = llada_generate(loaded.model, prompt, **kw)
            replayed = llada_generate(loaded.model, prompt, graphs=graphs, **kw)
            assert torch.equal(replayed, eager[seed]), f"seed {seed}: {(replayed != eager[seed]).sum().item()} tokens differ"
        # A timed repetition (workers/measure/scenario.py) replays a prompt a warm-up prepared; a capture inside
        # it raises PreparationInTimedRegion.
        with graphs.preparation.frozen():
            again = llada_generate(loaded.model, random_prompt(2, 64, 0), graphs=graphs, **kw)
        assert torch.equal(again, eager[0])
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
    from workers.samplers.llada.graphs import LladaGraphs

    loaded = peaked_small("llada", dtype="bfloat16")
    prompt = random_prompt(1, 64)
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
