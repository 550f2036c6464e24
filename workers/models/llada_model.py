"""LLaDA as transformers' LlamaForCausalLM: bidirectional attention and rotary embeddings in float32.

LLaDA-8B is a LLaMA-layout decoder (RMSNorm, SwiGLU, RoPE, untied head) whose attention sees the whole
sequence (DESIGN "LLaDA model"). Two details of the official modeling_llada.py change numbers silently and
are reproduced here:

* attention is never causal: `config.is_causal = False` makes transformers build a bidirectional mask,
  and each attention module's `is_causal` flag is cleared too, because the sdpa and flash-attn paths read
  the module flag when no mask is materialised;
* `RotaryEmbedding.forward` casts q and k to float32 (`rope_full_precision: true`), builds sin/cos in
  float32 and casts back only after rotating, whatever the activation dtype; transformers' Llama casts
  cos/sin to the activation dtype first, which in bf16 moves logits visibly.

The conversion swaps the classes of existing modules (no new parameters), so it applies equally to a model
on the meta device, to a synthetic one and to one loaded from LLaDA's own checkpoint.
"""

from __future__ import annotations

import torch
from transformers import LlamaForCausalLM
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import (
    LlamaAttention,
    LlamaRotaryEmbedding,
    eager_attention_forward,
    rotate_half,
)

from workers.models.attention import drop_host_read_kwargs, project_qkv
from workers.models.cache_kwarg import pop_cache


class Float32RotaryEmbedding(LlamaRotaryEmbedding):
    """cos/sin of the default RoPE, left in float32 (LLaDA's `rope_full_precision`)."""

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = self.inv_freq.to(device=x.device, dtype=torch.float32)
        freqs = position_ids[..., None].to(torch.float32) * inv_freq  # [B, S, D/2]
        angles = torch.cat((freqs, freqs), dim=-1)  # [B, S, D]: LLaDA rotates halves, like LLaMA
        return angles.cos() * self.attention_scaling, angles.sin() * self.attention_scaling


def rotate_float32(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q, k [B, H, S, D] in float32 and return them in their own dtype (official order of operations)."""
    cos = cos.to(torch.float32).unsqueeze(1)  # [B, 1, S, D]
    sin = sin.to(torch.float32).unsqueeze(1)
    qf, kf = q.to(torch.float32), k.to(torch.float32)
    q_rot = qf * cos + rotate_half(qf) * sin
    k_rot = kf * cos + rotate_half(kf) * sin
    return q_rot.to(q.dtype), k_rot.to(k.dtype)


class BidirectionalAttention(LlamaAttention):
    """LlamaAttention without the causal mask and with float32 RoPE. Vanilla LLaDA passes no KV cache; the
    cached sampler variants pass a `BlockCache`, which returns the keys and values of the whole sequence."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs: object,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        cache = pop_cache(kwargs)  # `cache` from transformers 5.24, `past_key_values` before
        assert position_embeddings is not None, "LlamaModel always passes the rotary embeddings"
        input_shape = hidden_states.shape[:-1]
        q, k, v = project_qkv(self, hidden_states)  # [B, H, S, D], [B, H_kv, S, D] x 2
        q, k = rotate_float32(q, k, *position_embeddings)
        if cache is not None:  # the cached variants' BlockCache: keys and values of every position
            k, v = cache.update(k, v, self.layer_idx)
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        kwargs.pop("is_causal", None)
        drop_host_read_kwargs(kwargs)  # position ids would make flash-attn sync once per layer (workers/models/attention.py)
        output, weights = attention(
            self, q, k, v, attention_mask,
            dropout=0.0 if not self.training else self.attention_dropout,
            scaling=self.scaling,
            is_causal=False,
            **kwargs,
        )
        output = output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(output), weights


def make_bidirectional(model: LlamaForCausalLM) -> LlamaForCausalLM:
    """Turn a LlamaForCausalLM into LLaDA's mask predictor in place (see the module docstring)."""
    rope_type = (model.config.rope_parameters or {}).get("rope_type", "default")
    if rope_type != "default":
        raise ValueError(f"LLaDA uses the default RoPE; this config has rope_type {rope_type!r}")
    model.config.is_causal = False
    model.config.use_cache = False  # no KV cache: every step re-reads the whole sequence
    model.model.rotary_emb.__class__ = Float32RotaryEmbedding
    for layer in model.model.layers:
        layer.self_attn.__class__ = BidirectionalAttention
        layer.self_attn.is_causal = False
    return model


def is_bidirectional(model: torch.nn.Module) -> bool:
    """Whether `make_bidirectional` has been applied."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    return bool(layers) and all(isinstance(layer.self_attn, BidirectionalAttention) for layer in layers)
