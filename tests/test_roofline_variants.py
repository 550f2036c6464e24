"""The faithful roofline costs the accelerated variants: LLaDA's prefix and dual caches and confidence rules,
LLaMA's compiled decode step; each collapses to vanilla with its features switched off."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofline.errors import RooflineInputError
from roofline.hardware import get_hardware
from roofline.llada import block_forwards, cached_query_len, estimate_llada, step_operators
from roofline.llama import estimate_llama
from roofline.memory import kv_cache_bytes, llada_memory
from roofline.phase import cost_of
from roofline.predict import predict, predict_run
from roofline.workload import Workload
from specs import schema
from specs.registry import preset_shape

H100 = get_hardware("h100-sxm")
LLADA = preset_shape("llada", "8b")
LLAMA = preset_shape("llama", "8b")
# A profile with a dispatch floor (what a worker measures on an eager decoder), to see the compiled step lose it.
FLOORED = H100.model_copy(update={"name": "h100 + dispatch", "dispatch_s": 5e-6, "host_floor_s": 0.0})
RUN = Workload(prompt_len=512, gen_len=512, block_length=32, steps=256)


def _step(query_len: int | None, seq_len: int = 1024, batch: int = 1):
    work = Workload(prompt_len=seq_len - 32, gen_len=32, batch=batch, logits_positions=32)
    return cost_of(step_operators(LLADA, work, "faithful", seq_len=seq_len, query_len=query_len), H100)


def test_a_cached_step_over_one_block_is_memory_bound_again() -> None:
    full, prefix, dual = _step(None), _step(cached_query_len("prefix", seq_len=1024, prefix_len=768,
                                                              block_length=32)), _step(32)
    assert full.total_time_s > prefix.total_time_s > dual.total_time_s
    assert full.total_flops > prefix.total_flops > dual.total_flops
    # The full step's projections run over 1024 tokens: above the ridge. One block's 32 tokens fall below it.
    ridge = H100.ridge_point_flops_per_byte
    assert full.linear_ai > ridge > dual.linear_ai
    assert full.aggregate_ai > prefix.aggregate_ai > dual.aggregate_ai
    # The dual step reads the whole cached K and V: its attention bytes still cover all 1024 keys.
    kv_read = kv_cache_bytes(LLADA, batch=1, positions=1024)
    assert kv_read <= dual.bytes_["mha_attention"] < 1.1 * kv_read


def test_cached_query_lengths() -> None:
    assert cached_query_len("prefix", seq_len=1024, prefix_len=512, block_length=32) == 512
    assert cached_query_len("prefix", seq_len=1024, prefix_len=992, block_length=32) == 32  # the last block
    assert cached_query_len("dual", seq_len=1024, prefix_len=512, block_length=32) == 32
    with pytest.raises(RooflineInputError, match="allowed: prefix, dual"):
        cached_query_len("none", seq_len=1024, prefix_len=512, block_length=32)


@pytest.mark.parametrize("cache", ["prefix", "dual"])
def test_one_block_of_one_step_is_vanilla(cache: str) -> None:
    # Block = the whole generation, one step: the only forward is the full one that fills the cache.
    work = Workload(prompt_len=128, gen_len=64, block_length=64, steps=1, batch=2)
    vanilla = estimate_llada(LLADA, FLOORED, work)
    cached = estimate_llada(LLADA, FLOORED, replace(work, cache=cache))
    assert (cached.total_s, cached.flops, cached.bytes_) == (vanilla.total_s, vanilla.flops, vanilla.bytes_)


def test_caches_order_the_latency_and_keep_the_full_first_step() -> None:
    vanilla = estimate_llada(LLADA, H100, RUN)
    prefix = estimate_llada(LLADA, H100, replace(RUN, cache="prefix"))
    dual = estimate_llada(LLADA, H100, replace(RUN, cache="dual"))
    assert vanilla.total_s > prefix.total_s > dual.total_s
    per_block = 256 // 16
    first = dual.blocks[0]
    assert first.steps == per_block and first.cached_query_len == 32
    assert first.time_per_step_s == vanilla.blocks[0].time_per_step_s
    # Every block: one full forward, then cached ones.
    assert dual.total_s == pytest.approx(16 * (first.time_per_step_s + (per_block - 1) * first.cached_step_s))
    # The prefix cache feeds the block and what lies right of it: fewer positions block by block.
    assert [b.cached_query_len for b in prefix.blocks] == [512 - 32 * b for b in range(16)]


def test_block_forwards_spread_a_measured_count() -> None:
    assert block_forwards(steps=64, num_blocks=4, forwards=None) == [16] * 4
    assert block_forwards(steps=64, num_blocks=4, forwards=10) == [3, 3, 2, 2]
    assert block_forwards(steps=64, num_blocks=4, forwards=4) == [1] * 4
    for bad in (3, 65):
        with pytest.raises(RooflineInputError, match="between the number of blocks 4"):
            block_forwards(steps=64, num_blocks=4, forwards=bad)


@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
def test_latency_grows_with_the_forwards_and_the_batch(cache: str) -> None:
    cached = replace(RUN, cache=cache)
    times = [estimate_llada(LLADA, H100, replace(cached, forwards=f)).total_s for f in (16, 64, 128, 256)]
    assert times == sorted(times) and len(set(times)) == 4
    assert estimate_llada(LLADA, H100, replace(cached, forwards=256)).total_s == pytest.approx(
        estimate_llada(LLADA, H100, cached).total_s)
    batches = [estimate_llada(LLADA, H100, replace(cached, batch=b)).total_s for b in (1, 4, 16, 64)]
    assert batches == sorted(batches)


def test_a_cached_step_pays_its_flop_ratio_only_once_the_batch_fills_it() -> None:
    # At batch 1 the dual step over one block is memory-bound (the weights' read), so the cache saves far less
    # than its FLOPs suggest; a larger batch fills the cached step and the speedup climbs toward the FLOP ratio.
    def ratio(batch: int, what: str) -> float:
        vanilla = estimate_llada(LLADA, H100, replace(RUN, batch=batch))
        dual = estimate_llada(LLADA, H100, replace(RUN, batch=batch, cache="dual"))
        return vanilla.total_s / dual.total_s if what == "time" else vanilla.flops / dual.flops

    speedups = [ratio(b, "time") for b in (1, 8, 64)]
    assert 1 < speedups[0] < speedups[1] < speedups[2] <= 1.05 * ratio(64, "flops")
    assert speedups[0] < 0.5 * ratio(1, "flops")


def test_compiled_decode_drops_the_dispatch_floor_of_the_decode_passes_only() -> None:
    work = Workload(prompt_len=128, gen_len=64)
    eager = estimate_llama(LLAMA, FLOORED, work)
    compiled = estimate_llama(LLAMA, FLOORED, replace(work, compiled_decode=True))
    bare = estimate_llama(LLAMA, FLOORED.model_copy(update={"dispatch_s": 0.0}), work)
    assert compiled.prefill == eager.prefill  # the prefill stays eager
    assert compiled.decode.total_s == bare.decode.total_s < eager.decode.total_s
    assert (compiled.flops, compiled.bytes_) == (eager.flops, eager.bytes_)  # the same operators
    # Without a floor (a datasheet profile) compiling changes nothing the roofline sees.
    assert estimate_llama(LLAMA, H100, replace(work, compiled_decode=True)).total_s == \
        estimate_llama(LLAMA, H100, work).total_s


def test_cache_memory() -> None:
    work = Workload(prompt_len=128, gen_len=64, batch=2)
    vanilla = llada_memory(LLADA, work)
    dual = llada_memory(LLADA, replace(work, cache="dual"))
    prefix = llada_memory(LLADA, replace(work, cache="prefix"))
    assert dual.kv_cache_bytes == kv_cache_bytes(LLADA, batch=2, positions=192)
    # The workers' BlockCache holds every position for either cache (a prefix is overwritten right of the block).
    assert prefix.kv_cache_bytes == dual.kv_cache_bytes
    assert dual.peak_bytes == vanilla.peak_bytes + dual.kv_cache_bytes
    cfg = llada_memory(LLADA, replace(work, cache="dual", cfg_scale=1.0))
    assert cfg.kv_cache_bytes == 2 * dual.kv_cache_bytes  # the unconditional pass has its own cache


def _run(model: schema.ModelSpec, **fields) -> schema.RunConfig:
    common = {"controls": schema.Controls(), "prompts": schema.Prompts(), "prompt_ids": [0],
              "quality": schema.QualitySpec(), "batch_size": 1, "prompt_length": 128, "generation_length": 64}
    return schema.RunConfig(model=model, **{**common, **fields})


def test_predict_run_reads_the_variant_and_says_where_the_forwards_come_from() -> None:
    llada = schema.ModelSpec(name="llada-8b", arch="llada", source={"synthetic": "8b"})
    llama = schema.ModelSpec(name="llama-8b", arch="llama", source={"synthetic": "8b"})
    grid = {"steps": 64, "block_length": 32}
    vanilla = predict_run(_run(llada, **grid), FLOORED)
    assert (vanilla.forwards, vanilla.forwards_source) == (64, "schedule")
    fast = schema.LladaImpl(name="dual-t09", cache="dual", threshold=0.9)
    capped = predict_run(_run(llada, llada_impl=fast, **grid), FLOORED)
    assert (capped.forwards, capped.forwards_source) == (64, "step cap")
    measured = predict_run(_run(llada, llada_impl=fast, **grid), FLOORED, measured_forwards=9.5)
    assert (measured.forwards, measured.forwards_source) == (10, "measured")
    work = Workload(prompt_len=128, gen_len=64, logits_positions=32, cache="dual", forwards=10, **grid)
    assert measured.latency_s == predict("llada", LLADA, work, hardware=FLOORED).latency_s
    assert vanilla.latency_s > capped.latency_s > measured.latency_s
    assert capped.kv_cache_bytes == kv_cache_bytes(LLADA, batch=1, positions=192) > vanilla.kv_cache_bytes == 0
    # A measured count outside what the schedule allows is kept inside it: one forward per block at least.
    assert predict_run(_run(llada, llada_impl=fast, **grid), FLOORED, measured_forwards=1).forwards == 2
    compiled = predict_run(_run(llama, llama_impl=schema.LlamaImpl(name="static-compile", compile=True)), FLOORED)
    eager = predict_run(_run(llama), FLOORED)
    assert compiled.latency_s < eager.latency_s and compiled.ttft_s == eager.ttft_s
    with pytest.raises(RooflineInputError, match="vanilla sampler only"):
        predict_run(_run(llada, llada_impl=fast, **grid), FLOORED, "study")


def test_the_cli_costs_a_variant(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.cli import main

    args = ["llada", "--prompt-len", "512", "--gen-len", "512", "--block-length", "32", "--steps", "256"]
    assert main([*args, "--cache", "dual", "--forwards", "64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    expected = estimate_llada(LLADA, get_hardware("a100-sxm4-80gb"), replace(RUN, cache="dual", forwards=64))
    assert (doc["cache"], doc["forwards"], doc["total_s"]) == ("dual", 64, expected.total_s)
    assert doc["memory"]["kv_cache_bytes"] == kv_cache_bytes(LLADA, batch=1, positions=1024)
    assert main([*args, "--cache", "prefix"]) == 0
    assert "Variant: cache prefix, forwards 256 of 256 steps" in capsys.readouterr().out
    assert main(["llama", "--prompt-len", "64", "--gen-len", "64", "--compile"]) == 0
    assert "(compiled: no dispatch floor)" in capsys.readouterr().out
