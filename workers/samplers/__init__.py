"""Samplers as iterators of steps: LLaDA's masked diffusion, the autoregressive loop, their caches and graphs."""

from workers.samplers.autoregressive import ArDecoder, ArStep, ar_generate, ar_steps
from workers.samplers.llada.sampler import (
    LladaSampler,
    LladaStep,
    llada_generate,
    llada_steps,
    official_suppress_ids,
    transfer_schedule,
)

__all__ = [
    "ArDecoder",
    "ArStep",
    "LladaSampler",
    "LladaStep",
    "ar_generate",
    "ar_steps",
    "llada_generate",
    "llada_steps",
    "official_suppress_ids",
    "transfer_schedule",
]
