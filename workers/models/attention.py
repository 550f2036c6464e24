"""Attention modules that hand the kernel nothing it would read on the host: no position ids.

transformers passes `position_ids` down to every attention module, which forwards its keyword arguments
to the kernel. With `flash_attention_2`, `_flash_attention_forward` then calls `_is_packed_sequence`,
which reads the position ids' values to detect packed sequences: a host sync in every layer whenever the
batch is 1 and more than one position is fed (32 per LLaDA step and per LLaMA prefill at 8B; none per
LLaMA decode, whose single position skips the check). Rotary embeddings have used the position ids
before attention runs, and the benchmark never packs sequences, so the modules drop them.
`tests/test_sync_free.py` fails if any attention call receives them again, or if a timed step syncs.

A KV cache may also bring its own attention (`attend`, as `workers/samplers/live_cache.LiveCache` does for
the compiled decode step): the module then hands the layer's attention to it, so a kernel is chosen per
call by the cache a caller passes, never by changing the model that other variants share.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel
from transformers.models.llama.modeling_llama import LlamaAttention, apply_rotary_pos_emb
from transformers.models.qwen2.modeling_qwen2 import Qwen2Attention

from workers.models.cache_kwarg import find_cache

# Keyword arguments that make a kernel read tensor values on the host (transformers 5.x flash path).
HOST_READ_KWARGS = ("position_ids",)


def drop_host_read_kwargs(kwargs: dict[str, object]) -> None:
    """Remove, in place, the arguments an attention kernel would sync on."""
    for name in HOST_READ_KWARGS:
        kwargs.pop(name, None)


def project_qkv(
    attention: LlamaAttention | Qwen2Attention, hidden_states: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layer's query [B, H, S, D] and key and value [B, H_kv, S, D] before RoPE, as LlamaAttention and
    Qwen2Attention project them (Qwen2's projections carry their bias): the modules that replace their forward
    (here, LLaDA's and Dream's) must not drift from them."""
    hidden_shape = (*hidden_states.shape[:-1], -1, attention.head_dim)
    query = attention.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    key = attention.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    value = attention.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    return query, key, value


class SyncFreeAttention:
    """An attention module whose kernel never receives position ids (see the module docstring). Mixed into each
    layout's attention class (LLaMA's, Qwen2's: the same projections and RoPE, Qwen2's with a QKV bias), whose
    forward it calls for everything else."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs: object,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        # The KV cache travels in kwargs under whichever name the installed transformers uses
        # (workers/models/cache_kwarg.py), so it reaches the parent's forward as the parent expects it.
        drop_host_read_kwargs(kwargs)
        cache = find_cache(kwargs)
        if getattr(cache, "attend", None) is not None:
            return self._forward_with_cache_attention(hidden_states, position_embeddings, attention_mask, cache)
        return super().forward(  # type: ignore[misc]
            hidden_states, position_embeddings=position_embeddings, attention_mask=attention_mask, **kwargs
        )

    def _forward_with_cache_attention(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None,
        attention_mask: torch.Tensor | None,
        cache: object,
    ) -> tuple[torch.Tensor, None]:
        """The layout's attention forward with the cache's own attention in place of the configured kernel."""
        assert position_embeddings is not None, "the decoder always passes the rotary embeddings"
        input_shape = hidden_states.shape[:-1]
        query, key, value = project_qkv(self, hidden_states)  # type: ignore[arg-type]
        query, key = apply_rotary_pos_emb(query, key, *position_embeddings)
        key, value = cache.update(key, value, self.layer_idx)  # type: ignore[attr-defined]
        output = cache.attend(self, query, key, value, attention_mask)  # type: ignore[attr-defined]  # [B, S, H, D]
        return self.o_proj(output.reshape(*input_shape, -1).contiguous()), None  # type: ignore[attr-defined]


class SyncFreeLlamaAttention(SyncFreeAttention, LlamaAttention):
    """LlamaAttention without position ids for its kernel."""


class SyncFreeQwen2Attention(SyncFreeAttention, Qwen2Attention):
    """Qwen2Attention (Qwen2.5's layout) without position ids for its kernel."""


# Each layout's causal attention class → its sync-free subclass.
_SYNC_FREE: dict[type, type] = {LlamaAttention: SyncFreeLlamaAttention, Qwen2Attention: SyncFreeQwen2Attention}


def make_sync_free(model: PreTrainedModel) -> PreTrainedModel:
    """Swap every causal attention module's class in place (no new parameters; also on the meta device)."""
    for layer in model.model.layers:  # type: ignore[union-attr]
        sync_free = _SYNC_FREE.get(type(layer.self_attn))
        if sync_free is not None:
            layer.self_attn.__class__ = sync_free
    return model
