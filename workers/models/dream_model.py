"""Dream as transformers' Qwen2ForCausalLM: bidirectional attention, shifted logits, and its padding inputs.

Dream-v0-7B is Qwen2.5-7B's network (Qwen2 layers: q/k/v biases, GQA, RMSNorm, SwiGLU, untied head) read
as a mask predictor (Ye et al. 2025, "Dream 7B: Diffusion Large Language Models"). Against
transformers' Qwen2 the official modeling_dream.py changes three things, reproduced here:

* attention is never causal (`DreamAttention.is_causal = False`, SDPA called with `is_causal=False`):
  `config.is_causal = False` makes transformers build a bidirectional mask, and each attention module's
  flag is cleared because the sdpa and flash paths read it when no mask is materialised. RoPE stays as in
  Qwen2 (cos/sin built in float32, cast to the activation dtype before rotating), as the official code does;
* the logits are shifted by one: the network keeps Qwen2's next-token head, so position i's token is read
  from the hidden state at i - 1, and position 0 from its own
  (`_sample`: `cat([logits[:, :1], logits[:, :-1]])`);
  `predicting_positions` gives those indices, so only the rows a step reads are projected;
* a left-padded batch gets the official padding inputs (`padding_inputs`): position ids that count only real
  tokens (`tok_idx`: cumsum - 1, pads at 1) and a mask that hides pads both as keys and as queries (a pad
  query attends to nothing, so its attention output is zero, as SDPA gives for a fully masked row).

The conversion swaps the classes of existing modules (no new parameters), so it applies equally to a model
on the meta device, to a synthetic one and to one loaded from Dream's checkpoint.
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers import Qwen2ForCausalLM
from transformers.masking_utils import create_bidirectional_mask
from transformers.models.qwen2.modeling_qwen2 import Qwen2Attention

from workers.models.attention import drop_host_read_kwargs


class BidirectionalQwen2Attention(Qwen2Attention):
    """Qwen2Attention that never masks causally and hands the kernel no position ids (a flash-attn host sync
    per layer otherwise: workers/models/attention.py). Everything else is Qwen2's own forward."""

    def forward(
        self,
        hidden_states: Tensor,
        position_embeddings: tuple[Tensor, Tensor],
        attention_mask: Tensor | None,
        **kwargs: object,
    ) -> tuple[Tensor, Tensor | None]:
        drop_host_read_kwargs(kwargs)
        kwargs.pop("is_causal", None)
        return super().forward(  # type: ignore[arg-type]
            hidden_states, position_embeddings, attention_mask, is_causal=False, **kwargs
        )


def make_dream_bidirectional(model: Qwen2ForCausalLM) -> None:
    """Turn a Qwen2ForCausalLM into Dream's mask predictor in place (see the module docstring)."""
    config = model.config
    rope_type = (config.rope_parameters or {}).get("rope_type", "default")
    if rope_type != "default":
        raise ValueError(f"Dream uses the default RoPE; this config has rope_type {rope_type!r}")
    if any(kind != "full_attention" for kind in config.layer_types):
        raise ValueError(
            "Dream attends to the whole sequence in every layer; this config has sliding-window layers"
        )
    config.is_causal = False
    config.use_cache = False  # no KV cache: every step re-reads the whole sequence
    for layer in model.model.layers:
        layer.self_attn.__class__ = BidirectionalQwen2Attention
        layer.self_attn.is_causal = False
        layer.self_attn.sliding_window = None


def is_dream_bidirectional(model: torch.nn.Module) -> bool:
    """Whether `make_dream_bidirectional` has been applied."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    return bool(layers) and all(isinstance(layer.self_attn, BidirectionalQwen2Attention) for layer in layers)


def predicting_positions(start: int, length: int, device: torch.device | str) -> Tensor:
    """Indices `[length - start]` of the hidden states whose logits predict positions `[start, length)`:
    i - 1 for position i, and 0 for position 0 (the official shift keeps position 0's own logits)."""
    return torch.arange(start - 1, length - 1, device=device).clamp_(min=0)


def padding_inputs(
    model: torch.nn.Module, attention_mask: Tensor | None
) -> tuple[Tensor | None, Tensor | None]:
    """The official inputs for a left-padded batch: (attention mask for the model's kernel, position ids
    `[B, L]`), both None when nothing is padded (the official "full" attention and default positions).

    attention_mask: `[B, L]` over the whole sequence, prompt and generation (1 = token, 0 = pad). The mask
    keeps a pair (query q, key k) only where both are tokens, as the official `[B, 1, L, L]` logical-and
    does; it is built once, in the form the configured kernel takes (boolean for sdpa, additive for eager;
    flash takes the 2-D mask and drops pad queries itself). Reading whether anything is padded is one host
    sync, once per generation.
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None, None
    is_token = attention_mask.bool()  # [B, L]
    position_ids = attention_mask.long().cumsum(-1) - 1  # [B, L]: 0, 1, ... over real tokens
    position_ids.masked_fill_(
        ~is_token, 1
    )  # the official value for pads (never read: pads attend to nothing)

    def query_is_token(batch_idx: Tensor, head_idx: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return is_token[batch_idx, q_idx]

    dtype = next(model.parameters()).dtype
    shape_only = torch.empty((*is_token.shape, 0), dtype=dtype, device=is_token.device)  # [B, L, 0]
    mask = create_bidirectional_mask(
        config=model.config,
        inputs_embeds=shape_only,
        attention_mask=is_token,
        and_mask_function=query_is_token,
    )
    return mask, position_ids
