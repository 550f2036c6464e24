"""Tiny random LLaMA-style models for the sampler tests: causal (LLaMA) and bidirectional (LLaDA)."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB_SIZE = 128
MASK_ID = VOCAB_SIZE - 1  # LLaDA keeps [MASK] as an ordinary vocabulary entry
PAD_ID = 0
EOS_ID = 1
EOT_ID = 2


def tiny_config(*, bidirectional: bool, vocab_size: int = VOCAB_SIZE, attn: str = "sdpa") -> LlamaConfig:
    """2 layers, d=48, full multi-head attention (LLaDA-8B has no GQA); fp32 on CPU."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        is_causal=not bidirectional,
        pad_token_id=PAD_ID,
        bos_token_id=None,
        eos_token_id=EOS_ID,
        tie_word_embeddings=False,
        attn_implementation=attn,
    )


def tiny_model(
    *, bidirectional: bool, seed: int = 0, vocab_size: int = VOCAB_SIZE, attn: str = "sdpa"
) -> LlamaForCausalLM:
    """A random model in eval mode; `initializer_range` is raised so its predictions are far from uniform."""
    torch.manual_seed(seed)
    config = tiny_config(bidirectional=bidirectional, vocab_size=vocab_size, attn=attn)
    config.initializer_range = 0.2
    return LlamaForCausalLM(config).eval()


def left_padded_prompts(
    lengths: list[int], *, vocab_size: int = VOCAB_SIZE, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random prompts of the given lengths, left-padded with PAD_ID: `(ids [B, P], attention_mask [B, P])`.

    Token ids avoid PAD, EOS, EoT and MASK so that every such id in an output was generated.
    """
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), PAD_ID, dtype=torch.long)
    mask = torch.zeros((len(lengths), width), dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, width - n :] = torch.randint(EOT_ID + 1, MASK_ID, (n,), generator=gen)
        mask[row, width - n :] = 1
    return ids, mask
