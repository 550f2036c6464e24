"""Attention modules that hand the kernel nothing it would read on the host: no position ids.

transformers passes `position_ids` down to every attention module, which forwards its keyword arguments
to the kernel. With `flash_attention_2`, `_flash_attention_forward` then calls `_is_packed_sequence`,
which reads the position ids' values to detect packed sequences: a host sync in every layer whenever the
batch is 1 and more than one position is fed (32 per LLaDA step and per LLaMA prefill at 8B; none per
LLaMA decode, whose single position skips the check). Rotary embeddings have used the position ids
before attention runs, and the benchmark never packs sequences, so the modules drop them.
`tests/test_sync_free.py` fails if any attention call receives them again, or if a timed step syncs.
"""

from __future__ import annotations

import torch
from transformers import LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaAttention

# Keyword arguments that make a kernel read tensor values on the host (transformers 5.x flash path).
HOST_READ_KWARGS = ("position_ids",)


def drop_host_read_kwargs(kwargs: dict[str, object]) -> None:
    """Remove, in place, the arguments an attention kernel would sync on."""
    for name in HOST_READ_KWARGS:
        kwargs.pop(name, None)


class SyncFreeLlamaAttention(LlamaAttention):
    """LlamaAttention whose kernel never receives position ids (see the module docstring)."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs: object,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        # The KV cache travels in kwargs under whichever name the installed transformers uses
        # (workers/cache_kwarg.py), so it reaches the parent's forward as the parent expects it.
        drop_host_read_kwargs(kwargs)
        return super().forward(
            hidden_states, position_embeddings=position_embeddings, attention_mask=attention_mask, **kwargs
        )


def make_sync_free(model: LlamaForCausalLM) -> LlamaForCausalLM:
    """Swap every causal attention module's class in place (no new parameters; also on the meta device)."""
    for layer in model.model.layers:
        if type(layer.self_attn) is LlamaAttention:
            layer.self_attn.__class__ = SyncFreeLlamaAttention
    return model
