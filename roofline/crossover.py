"""The batch size B* at which the roofline predicts an autoregressive model's throughput to overtake a diffusion
model's at a step count: any (autoregressive, diffusion) pair of the registry, LLaMA against LLaDA by default."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from roofline.errors import RooflineInputError
from roofline.hardware import HardwareProfile
from roofline.operators import BYTES_PER_ELEMENT
from roofline.predict import predict
from roofline.workload import Workload
from specs.block_diffusion import OFFICIAL_SUB_BLOCK_LENGTH
from specs.registry import family
from specs.shapes import ModelShape

# Batch sizes searched: past this a crossover is reported as absent (no real deployment batches further).
MAX_BATCH = 4096


def diffusion_keywords(
    arch: str, *, steps: int, block_length: int | None, sub_block_length: int | None = None
) -> dict[str, Any]:
    """The workload's sampler fields (`roofline.workload.Workload`) for a diffusion family's run as the workers generate: LLaDA's sampler in blocks with
    logits over the current block only, Dream's whole-sequence steps (its logits over the generation), block
    diffusion's blocks and sub-blocks at its fixed schedule (its `steps` are that schedule's K; a run's measured
    forwards go in `forwards`), the sub-block the official default where none is given."""
    sampler = family(arch).sampler
    if sampler == "llada":
        return {"steps": steps, "block_length": block_length, "logits_positions": block_length}
    if sampler == "block_diffusion":
        if block_length is None:
            raise RooflineInputError(f"block_length: arch {arch!r} decodes in blocks; give one")
        return {"block_length": block_length, "sub_block_length": sub_block_length or OFFICIAL_SUB_BLOCK_LENGTH}
    if block_length is not None:
        raise RooflineInputError(f"block_length: arch {arch!r} denoises the whole sequence; leave it unset")
    return {"steps": steps}


def check_pair(ar: str, diffusion: str) -> None:
    """A pair is an autoregressive family and a diffusion one, in that order; the error names the one that is not."""
    for arch, paradigm in ((ar, "autoregressive"), (diffusion, "diffusion")):
        if family(arch).paradigm != paradigm:
            raise RooflineInputError(
                f"{arch!r} is {family(arch).paradigm}, not {paradigm}: the pair is (autoregressive, diffusion)"
            )


def throughput_ratio(
    batch: int,
    hardware: HardwareProfile,
    *,
    prompt_len: int,
    gen_len: int,
    steps: int,
    block_length: int | None = None,
    element_bytes: int = BYTES_PER_ELEMENT,
    ar: str = "llama",
    diffusion: str = "llada",
    ar_shape: ModelShape | None = None,
    diffusion_shape: ModelShape | None = None,
    llama_shape: ModelShape | None = None,
    llada_shape: ModelShape | None = None,
    diffusion_sampling: Mapping[str, Any] | None = None,
) -> float:
    """T_gen(autoregressive) / T_gen(diffusion at `steps`) at `batch` under the faithful roofline (> 1: the
    autoregressive model ahead).

    `ar` and `diffusion` name the pair's families (the registry checks their paradigms); their shapes are
    `ar_shape` and `diffusion_shape` (`llama_shape` and `llada_shape`: the same, under their first names), None the
    family's published shape. The diffusion model is costed as the workers run it (`diffusion_keywords`);
    `diffusion_sampling` adds or replaces its sampler's settings (Dream's `alg`, `top_p`, `top_k`; block diffusion's
    `sub_block_length`, `forwards`, `sub_block_cache`); both at temperature 0."""
    check_pair(ar, diffusion)
    work = Workload(prompt_len=prompt_len, gen_len=gen_len, batch=batch, element_bytes=element_bytes)
    ar_prediction = predict(ar, ar_shape or llama_shape, work, hardware=hardware)
    sampling = diffusion_keywords(diffusion, steps=steps, block_length=block_length) | dict(diffusion_sampling or {})
    diffusion_prediction = predict(diffusion, diffusion_shape or llada_shape, replace(work, **sampling),
                                   hardware=hardware)
    return ar_prediction.tokens_per_s / diffusion_prediction.tokens_per_s


def predicted_crossover(
    hardware: HardwareProfile, *, max_batch: int = MAX_BATCH, **generation: Any
) -> float | None:
    """The (real-valued) batch size where the autoregressive model's predicted throughput first reaches the diffusion
    model's (`crossing_batch` of `throughput_ratio`, whose keywords `generation` are: the pair and its shapes, the
    lengths, the diffusion model's steps (and LLaDA's block length), the element bytes). 1.0 when the autoregressive
    model is already ahead at batch 1; None when it stays behind up to `max_batch`."""
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
