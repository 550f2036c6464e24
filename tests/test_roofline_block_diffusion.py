"""The roofline of block diffusion (Fast-dLLM v2), worked by hand at Qwen2.5-7B's published shape: the prefill, the
in-block forwards against the cached prefix, the completing forwards, the token choice; the schedule's forwards;
measured forwards split as a lower bound; the sub-block cache; memory; predictions; the CLI; and its B* against AR."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from roofline import cli
from roofline.block_diffusion import estimate_block_diffusion, forwards_per_block
from roofline.crossover import predicted_crossover, throughput_ratio
from roofline.errors import RooflineInputError
from roofline.hardware import get_hardware
from roofline.memory import block_diffusion_memory, kv_cache_bytes, weights_bytes
from roofline.predict import predict, predict_run
from roofline.workload import Workload
from specs.block_diffusion import schedule
from specs.registry import full_shape
from tests.test_roofline_families import B, EB, QWEN25_7B, hand_forward

H200 = get_hardware("h200")
SHAPE = full_shape("fast_dllm_v2")
VOCAB = 152064


def hand_prefix_attention(*, s: int, cached: int) -> tuple[int, int]:
    """What attending `cached` more keys adds to a forward of `s` queries per sequence (every layer, KV head and
    sequence): QK and PV read the extra keys and values and do 2 g s hd FLOPs per key each; the softmax one op."""
    hd, g, kv_heads, layers = 128, 7, 4, 28
    instances = layers * kv_heads * B
    flops = instances * (2 * g * s * hd * cached * 2 + g * s * cached)
    bytes_ = instances * (EB * hd * cached * 2)
    return flops, bytes_


def hand_choice(rows: int) -> tuple[int, int]:
    """The token choice over `rows` logit rows: softmax (read + write) and argmax (read), one op per element."""
    elements = rows * VOCAB
    return 2 * elements, 3 * EB * elements


def _sum(*parts: tuple[int, int]) -> tuple[int, int]:
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def test_a_prompt_shorter_than_a_block_by_hand() -> None:
    """Prompt 5, 4 new tokens, blocks of 8, sub-blocks of 4: no prefill; the block [0, 8) holds the prompt and 3
    masks, all in its second sub-block: 3 forwards of the block (8 positions, logits over the sub-block's 4) and the
    completing one (logits at the last position) that gives the 4th token."""
    est = estimate_block_diffusion(SHAPE, H200, Workload(prompt_len=5, gen_len=4, block_length=8, sub_block_length=4,
                                                         batch=B))
    step = _sum(hand_forward(**QWEN25_7B, tokens_fed=8, causal=False, head_rows=4), hand_choice(B * 4))
    complete = hand_forward(**QWEN25_7B, tokens_fed=8, causal=False, head_rows=1)
    assert (est.flops, est.bytes_) == _sum(step, step, step, complete)
    assert (est.forwards, est.max_forwards, est.prefill_length) == (4, 4, 0)


def test_a_prefilled_prompt_and_its_cached_prefix_by_hand() -> None:
    """Prompt 16 (two whole blocks of 8), 9 new tokens, one sub-block per block: the causal prefill of 16 gives the
    first token; the block [16, 24) then decodes its 7 masks in 7 forwards, each of the 8 block positions against the
    16 cached ones, and completes (the 9th token)."""
    est = estimate_block_diffusion(SHAPE, H200, Workload(prompt_len=16, gen_len=9, block_length=8, sub_block_length=8,
                                                         batch=B))
    prefill = hand_forward(**QWEN25_7B, tokens_fed=16, causal=True, head_rows=1)
    cached = hand_prefix_attention(s=8, cached=16)
    step = _sum(hand_forward(**QWEN25_7B, tokens_fed=8, causal=False, head_rows=8), cached, hand_choice(B * 8))
    complete = _sum(hand_forward(**QWEN25_7B, tokens_fed=8, causal=False, head_rows=1), cached)
    assert (est.flops, est.bytes_) == _sum(prefill, *[step] * 7, complete)
    assert (est.forwards, est.prefill_length, est.blocks[0].cache_start) == (9, 16, 16)


def test_the_schedule_of_a_long_generation() -> None:
    """Prompt 512, 512 new tokens, blocks of 32: the prefill's token, then 16 blocks of 31 masks, the first 15
    completed (the last block's 32nd token is the run's 512th): K = 1 + 16 x 31 + 15 = 512 forwards, one per token,
    as many as the autoregressive model's; the fewest any threshold can take: 1 + 16 x 4 + 15."""
    plan = schedule(512, 512, 32, 8)
    assert (plan.prefill_length, plan.prefill_token, len(plan.blocks)) == (512, True, 16)
    assert [b.cache_start for b in plan.blocks] == [512 + 32 * i for i in range(16)]
    assert all(b.masked == (7, 8, 8, 8) for b in plan.blocks)
    assert [b.completes for b in plan.blocks] == [True] * 15 + [False]
    assert (plan.max_forwards, plan.min_forwards, plan.max_new_tokens) == (512, 80, 512)
    # A prompt off the block boundary: its tail starts the first block, and no token comes with the prefill.
    assert schedule(40, 24, 32, 8).blocks[0].masked == (0, 8, 8, 8)
    # A one-block prompt: the official code never prefills it; the named option does.
    assert schedule(32, 8, 32, 8).prefill_length == 0 and schedule(32, 8, 32, 8, True).prefill_length == 32


def test_measured_forwards_are_split_as_a_lower_bound() -> None:
    """A total between the least and K: every block its least, the rest to the earliest (cheapest) blocks; the cost
    then lies between the least schedule's and K's, and rises with the total."""
    plan = schedule(512, 512, 32, 8)
    assert forwards_per_block(plan, None) == [31] * 16
    assert forwards_per_block(plan, plan.min_forwards) == [4] * 16
    assert forwards_per_block(plan, plan.min_forwards + 30) == [31, 7] + [4] * 14
    work = Workload(prompt_len=512, gen_len=512, block_length=32, sub_block_length=8)
    costs = [estimate_block_diffusion(SHAPE, H200, replace(work, batch=8, forwards=f)).total_s
             for f in (80, 200, 400, 512)]  # fmt: skip
    assert costs == sorted(costs) and len(set(costs)) == 4
    with pytest.raises(RooflineInputError, match="between"):
        estimate_block_diffusion(SHAPE, H200, replace(work, forwards=79))


def test_the_sub_block_cache_feeds_one_sub_block_after_each_blocks_first_forward() -> None:
    work = Workload(prompt_len=512, gen_len=256, block_length=32, sub_block_length=8, batch=16)
    plain = estimate_block_diffusion(SHAPE, H200, work)
    cached = estimate_block_diffusion(SHAPE, H200, replace(work, sub_block_cache=True))
    assert [(b.block_forwards, b.sub_forwards) for b in cached.blocks] == [(1, 30)] * 8
    assert cached.forwards == plain.forwards and cached.total_s < plain.total_s
    assert cached.blocks[0].sub_forward_s < cached.blocks[0].block_forward_s


def test_memory_holds_the_cache_of_every_position_reached() -> None:
    # The prefill's 512 prompt positions and 16 blocks of 32: 1024 positions cached.
    memory = block_diffusion_memory(SHAPE, Workload(prompt_len=512, gen_len=512, block_length=32, sub_block_length=8,
                                                    batch=4))  # fmt: skip
    assert memory.kv_cache_bytes == kv_cache_bytes(SHAPE, batch=4, positions=1024) == 2 * 28 * 4 * 1024 * 4 * 128 * EB
    assert memory.logits_bytes == 4 * 8 * VOCAB * 3 * EB
    assert memory.peak_bytes == weights_bytes(SHAPE) + memory.kv_cache_bytes + memory.activation_bytes


def test_predict_and_predict_run_of_a_block_diffusion_run() -> None:
    p = predict("fast_dllm_v2", None, Workload(prompt_len=512, gen_len=256, batch=2, block_length=32,
                                               sub_block_length=8), hardware=H200)  # fmt: skip
    assert (p.forwards, p.forwards_source, p.ttft_s, p.itl_s) == (256, "schedule", None, None)
    assert p.latency_roofs_s < p.latency_s  # eager forwards at batch 2 sit under the H200's host floor
    run = SimpleNamespace(
        model=SimpleNamespace(arch="fast_dllm_v2", shape=lambda: None), batch_size=2, prompt_length=512,
        generation_length=256, block_length=32,
        block_diffusion=SimpleNamespace(threshold=0.9, sub_block_length=8, prefill_one_block_prompt=False),
        block_diffusion_impl=SimpleNamespace(sub_block_cache=False, graph=True),
    )
    assert predict_run(run, H200).forwards_source == "step cap"  # below threshold 1, nothing measured: K as a cap
    measured = predict_run(run, H200, measured_forwards=100.4)
    assert (measured.forwards, measured.forwards_source, measured.host_floor_s) == (100, "measured", 0.0)
    with pytest.raises(RooflineInputError, match="needs block_length"):
        predict("fast_dllm_v2", None, Workload(prompt_len=8, gen_len=8), hardware=H200)
    with pytest.raises(RooflineInputError, match="steps"):
        predict("fast_dllm_v2", None, Workload(prompt_len=8, gen_len=8, block_length=8, sub_block_length=8, steps=8),
                hardware=H200)  # fmt: skip


def test_b_star_against_ar_from_the_same_machinery() -> None:
    """The throughput ratio is Qwen2.5's tokens/s over Fast-dLLM v2's, each predicted as the workers run it; with
    fewer forwards (a threshold below 1, measured) the crossover moves to larger batches."""
    lengths = {"prompt_len": 512, "gen_len": 256, "steps": 256, "block_length": 32}
    ratio = throughput_ratio(4, H200, ar="qwen2", diffusion="fast_dllm_v2", **lengths)
    work = Workload(prompt_len=512, gen_len=256, batch=4)
    qwen = predict("qwen2", None, work, hardware=H200)
    blocks = predict("fast_dllm_v2", None, replace(work, block_length=32, sub_block_length=8), hardware=H200)
    assert ratio == qwen.tokens_per_s / blocks.tokens_per_s
    at_k = predicted_crossover(H200, ar="qwen2", diffusion="fast_dllm_v2", **lengths)
    fewer = predicted_crossover(H200, ar="qwen2", diffusion="fast_dllm_v2", **lengths,
                                diffusion_sampling={"forwards": 100})  # fmt: skip
    assert at_k is not None and fewer is not None and at_k < fewer
    assert throughput_ratio(int(fewer) + 1, H200, ar="qwen2", diffusion="fast_dllm_v2", **lengths,
                            diffusion_sampling={"forwards": 100}) >= 1.0  # fmt: skip


def test_cli_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fast_dllm_v2", "--prompt-len", "512", "--gen-len", "512", "--hardware", "h200"]) == 0
    text = capsys.readouterr().out
    assert "Fast-dLLM v2 Theoretical Performance Analysis" in text and "K = 512" in text
    assert cli.main(["fast_dllm_v2", "--prompt-len", "40", "--gen-len", "24", "--sub-block-cache", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "block-diffusion" and doc["prefill_length"] == 32 and doc["sub_block_cache"]
    assert cli.main(["fast_dllm_v2", "--prompt-len", "8", "--gen-len", "8", "--sub-block-length", "5"]) == 2
    assert "sub-block" in capsys.readouterr().err
