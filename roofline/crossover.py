"""The batch size B* at which the roofline predicts LLaMA's throughput to overtake LLaDA's at a step count."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from roofline.hardware import HardwareProfile
from roofline.operators import BYTES_PER_ELEMENT
from roofline.predict import predict
from specs.shapes import ModelShape

# Batch sizes searched: past this a crossover is reported as absent (no real deployment batches further).
MAX_BATCH = 4096


def throughput_ratio(
    batch: int,
    hardware: HardwareProfile,
    *,
    llama_shape: ModelShape | None,
    llada_shape: ModelShape | None,
    prompt_len: int,
    gen_len: int,
    steps: int,
    block_length: int,
    element_bytes: int = BYTES_PER_ELEMENT,
) -> float:
    """T_gen(LLaMA) / T_gen(LLaDA at `steps`) at `batch` under the faithful roofline (> 1: LLaMA ahead).

    LLaDA is costed as the workers run it (logits over the current block only); both at temperature 0."""
    llama = predict("llama", llama_shape, batch=batch, prompt_len=prompt_len, gen_len=gen_len, hardware=hardware,
                    element_bytes=element_bytes)
    llada = predict("llada", llada_shape, batch=batch, prompt_len=prompt_len, gen_len=gen_len, hardware=hardware,
                    steps=steps, block_length=block_length, logits_positions=block_length,
                    element_bytes=element_bytes)
    return llama.tokens_per_s / llada.tokens_per_s


def predicted_crossover(
    hardware: HardwareProfile, *, max_batch: int = MAX_BATCH, **generation: Any
) -> float | None:
    """The (real-valued) batch size where LLaMA's predicted throughput first reaches LLaDA's (`crossing_batch` of
    `throughput_ratio`, whose keywords `generation` are: the two shapes, the lengths, LLaDA's steps and block
    length, the element bytes). 1.0 when LLaMA is already ahead at batch 1; None when it stays behind up to
    `max_batch`."""
    return crossing_batch(lambda batch: math.log(throughput_ratio(batch, hardware, **generation)), max_batch)


def crossing_batch(log_ratio: Callable[[int], float], max_batch: int = MAX_BATCH) -> float | None:
    """Where log_ratio(B) first reaches 0, interpolated linearly in log B and log ratio between the integers around
    it; 1.0 when it is >= 0 at B = 1, None when it stays below 0 up to `max_batch`.

    Powers of two bracket the crossing, then a bisection over integers finds it (the ratio is evaluated some
    twenty times, not max_batch times)."""
    if log_ratio(1) >= 0:
        return 1.0
    low, high = 1, 2
    while log_ratio(high) < 0:
        if high >= max_batch:
            return None
        low, high = high, min(2 * high, max_batch)
    while high - low > 1:
        mid = (low + high) // 2
        if log_ratio(mid) < 0:
            low = mid
        else:
            high = mid
    r_low, r_high = log_ratio(low), log_ratio(high)
    fraction = -r_low / (r_high - r_low) if r_high != r_low else 1.0
    return math.exp(math.log(low) + fraction * (math.log(high) - math.log(low)))
