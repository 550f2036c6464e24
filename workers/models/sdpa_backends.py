"""The SDPA backends an eager LLaMA decode runs on a GPU: PyTorch's flash, memory-efficient and math kernels, never
cuDNN's.

Why (inferred from the H200 artifacts and PyTorch's backend order, not yet profiled on a GPU): on Hopper and later
GPUs recent PyTorch tries cuDNN's attention first, and cuDNN builds an execution plan for every new attention shape (tens to hundreds of milliseconds; it then caches it). An eager decode step attends a
key length one longer than the step before, so every step of a generation is a new shape: the first generation
at a (batch, prompt, length) pays a plan per token, the later ones hit the cache. On the H200 every eager LLaMA
warm-up took 2.6-3.4x as long as a measured repetition of the same generation (71 s against 30 s at batch 64,
1024 + 1024 tokens; about 50 ms more per decode step), while LLaDA, whose step shape is fixed within a run, and
the compiled decode, over a static cache, showed no such gap. Without cuDNN the kernels need no plan, so a
warm-up costs what a repetition costs, and no timed step can build one. The whole eager LLaMA run goes without
cuDNN (its prefill and its quality generations too); every other implementation keeps PyTorch's default order.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from specs.registry import is_diffusion
from specs.schema import RunConfig

# Recorded where the run says which attention it ran (Environment.attention_kernel).
NO_CUDNN = "no cuDNN"


def eager_llama_decode(config: RunConfig, device: torch.device) -> bool:
    """Whether the run is the eager autoregressive decode loop (LLaMA's, Qwen2.5's) on a GPU: the one whose attention
    shape changes every step."""
    impl = config.llama_impl
    diffusion = is_diffusion(config.model.arch)
    return device.type == "cuda" and not diffusion and (impl is None or not impl.is_accelerated)


@contextmanager
def without_cudnn_attention(config: RunConfig, device: torch.device) -> Iterator[None]:
    """Inside: SDPA picks among flash, memory-efficient and math only, for the eager LLaMA decode on a GPU; every
    other run is left as it is."""
    if not eager_llama_decode(config, device):
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        yield
