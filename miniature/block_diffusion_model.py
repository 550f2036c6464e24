"""The block-diffusion member as transformers' Qwen2ForCausalLM, adapted from the AR member's weights.

Fast-dLLM v2 adapts Qwen2.5, whose q/k/v projections carry biases; the miniature AR member is a LLaMA
without them. Its weights load into the Qwen2 network of the same shape name for name (the two layouts share
every name), and the q/k/v biases start at zero, so the adapted model computes exactly what the AR model
computes until fine-tuning moves them. The block-wise attention is the caller's: a 4-D boolean mask and
explicit position ids handed to the ordinary forward, so no attention code is replaced.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import Qwen2ForCausalLM

from miniature.architecture import MiniatureShape
from miniature.block_diffusion import pair_positions, training_attention_mask
from specs.shapes import ModelShape
from workers.models.layouts import qwen2_config_for_shape

BASE_WEIGHTS_FILE = "model.safetensors"
BASE_LOG_FILE = "training_log.json"
QKV_BIASES = ("q_proj.bias", "k_proj.bias", "v_proj.bias")


def qwen2_model(shape: MiniatureShape, special: dict[str, int], block_size: int) -> Qwen2ForCausalLM:
    """The AR member's shape as a Qwen2 network (q/k/v biases), in float32, with the pair's special ids."""
    config = qwen2_config_for_shape(ModelShape(
        hidden_size=shape.hidden_size, num_layers=shape.num_layers, num_heads=shape.num_heads,
        num_kv_heads=shape.num_kv_heads, intermediate_size=shape.intermediate_size, vocab_size=shape.vocab_size,
        max_position_embeddings=shape.context, rope_theta=shape.rope_theta, rms_norm_eps=shape.rms_norm_eps,
        attention_bias=True,
    ))  # fmt: skip
    config.eos_token_id = special["<|endoftext|>"]
    config.pad_token_id = special["<|pad|>"]
    config.bd_size = block_size
    config._attn_implementation = "sdpa"
    return Qwen2ForCausalLM(config)


def read_base(path: Path) -> tuple[dict[str, torch.Tensor], int]:
    """The AR weights to adapt (float32) and the tokens they were trained on. `path` is a member folder as
    shipped (model.safetensors + training_log.json's tokens_seen) or a weights file whose metadata carries
    `tokens` (the AR run's weights kept at one of its evaluations)."""
    weights = path / BASE_WEIGHTS_FILE if path.is_dir() else path
    if not weights.is_file():
        raise ValueError(f"{weights}: no such weights file (give an AR member folder or a .safetensors file)")
    with safe_open(str(weights), "pt") as reader:
        metadata = reader.metadata() or {}
    if "tokens" in metadata:
        tokens = int(metadata["tokens"])
    elif (weights.parent / BASE_LOG_FILE).is_file():
        tokens = int(json.loads((weights.parent / BASE_LOG_FILE).read_text(encoding="utf-8"))["tokens_seen"])
    else:
        raise ValueError(f"{weights}: how many tokens it was trained on is unknown (no `tokens` in its metadata, "
                         f"no {BASE_LOG_FILE} beside it)")
    return {name: tensor.float() for name, tensor in load_file(str(weights)).items()}, tokens


def adapt(model: Qwen2ForCausalLM, base: dict[str, torch.Tensor]) -> Qwen2ForCausalLM:
    """Load the AR member's weights into `model`; the q/k/v biases, which it lacks, are set to zero."""
    result = model.load_state_dict(base, strict=False)
    missing = set(result.missing_keys)
    if result.unexpected_keys or any(not name.endswith(QKV_BIASES) for name in missing):
        raise ValueError(f"the base is not the AR member's shape: missing {sorted(missing)}, "
                         f"unexpected {sorted(result.unexpected_keys)}")
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name in missing:
                parameter.zero_()
    return model


def noisy_logits(model: Qwen2ForCausalLM, noisy: list[torch.Tensor], clean: torch.Tensor, block_size: int) -> torch.Tensor:
    """The training-mode forward: [x_t, x_0] under the block-diffusion mask, the logits of the x_t half. Two
    noisy copies of the same sequences (a complementary pair) share one x_0: [x_t, x_t', x_0], whose noisy
    outputs are the official pair's (`training_attention_mask`). [C·N, L, V], copy by copy."""
    # noisy: C tensors [N, L]; clean [N, L]
    copies, (rows, length) = len(noisy), clean.shape
    mask = training_attention_mask(length, block_size, copies).to(clean.device)[None, None]  # [1, 1, (C+1)L, (C+1)L]
    logits = model(
        input_ids=torch.cat([*noisy, clean], dim=1),  # [N, (C+1)L]
        position_ids=pair_positions(length, copies).to(clean.device),
        attention_mask=mask,
        logits_to_keep=torch.arange(copies * length, device=clean.device),  # the official forward drops x_0's outputs
        use_cache=False,
    ).logits  # [N, C·L, V]
    return logits.view(rows, copies, length, -1).transpose(0, 1).reshape(copies * rows, length, -1)
