"""The check every sampler makes of the prompt batch it is given, as errors that say what to pass."""

from __future__ import annotations

import torch
from torch import Tensor


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
