"""The checks every sampler makes of the prompt batch it is given, and every diffusion sampler of its model, as
errors that say what to pass."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def check_prompt_batch(prompt_ids: Tensor, attention_mask: Tensor | None) -> None:
    """prompt_ids must be `[B, P]` long; attention_mask, when given, the same shape."""
    if prompt_ids.ndim != 2 or prompt_ids.dtype != torch.long:
        raise ValueError(
            "prompt_ids must be a [batch, prompt_len] long tensor, "
            f"got {tuple(prompt_ids.shape)} {prompt_ids.dtype}"
        )
    if attention_mask is not None and attention_mask.shape != prompt_ids.shape:
        raise ValueError(
            f"attention_mask must have the prompt's shape {tuple(prompt_ids.shape)}, "
            f"got {tuple(attention_mask.shape)}"
        )


def check_bidirectional(model: nn.Module, needs: str, fix: str) -> None:
    """A diffusion sampler's model must attend bidirectionally (`config.is_causal` False): `needs` says where, `fix`
    how to build it so."""
    if getattr(getattr(model, "config", None), "is_causal", True) is not False:
        raise ValueError(f"{needs} but the model's config.is_causal is not False; {fix}")
