"""A tiny random checkpoint in Dream's official hub format, written with torch, safetensors and json only.

The same bytes come out under the project's environment and under the separate transformers 4.x environment
that runs Dream's official code (tests/data/dream_golden/RECORDING.md), so the golden outputs recorded there
and the project's loader here see one and the same model.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

VOCAB_SIZE = 256
HIDDEN_SIZE = 64
NUM_LAYERS = 2
NUM_HEADS = 4
NUM_KV_HEADS = 2
INTERMEDIATE_SIZE = 128
MAX_POSITIONS = 512
ROPE_THETA = 10000.0
RMS_NORM_EPS = 1e-6

# Special ids inside the vocabulary, all distinct so that a loader or sampler that confuses two is caught
# (Dream-v0 itself has pad = bos = eos = 151643 and mask = 151666).
PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
MASK_ID = VOCAB_SIZE - 1

CONFIG_NAME = "config.json"
GENERATION_CONFIG_NAME = "generation_config.json"
WEIGHTS_NAME = "model.safetensors"


def dream_config() -> dict[str, object]:
    """config.json as Dream-v0's hub repository has it (same keys), at the tiny shape above."""
    return {
        "architectures": ["DreamModel"],
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration_dream.DreamConfig",
            "AutoModel": "modeling_dream.DreamModel",
        },
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "hidden_act": "silu",
        "hidden_size": HIDDEN_SIZE,
        "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE_SIZE,
        "mask_token_id": MASK_ID,
        "max_position_embeddings": MAX_POSITIONS,
        "max_window_layers": NUM_LAYERS,
        "model_type": "Dream",
        "num_attention_heads": NUM_HEADS,
        "num_hidden_layers": NUM_LAYERS,
        "num_key_value_heads": NUM_KV_HEADS,
        "pad_token_id": PAD_ID,
        "rms_norm_eps": RMS_NORM_EPS,
        "rope_scaling": None,
        "rope_theta": ROPE_THETA,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "transformers_version": "4.46.2",
        "use_cache": False,
        "use_sliding_window": False,
        "vocab_size": VOCAB_SIZE,
    }


def dream_generation_config() -> dict[str, object]:
    """generation_config.json: Dream's `from_pretrained` reads it into its DreamGenerationConfig."""
    return {
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "mask_token_id": MASK_ID,
        "pad_token_id": PAD_ID,
        "transformers_version": "4.46.2",
    }


def _normal(gen: torch.Generator, shape: tuple[int, ...], std: float) -> torch.Tensor:
    return torch.randn(shape, generator=gen, dtype=torch.float32) * std


def _linear(gen: torch.Generator, out_features: int, in_features: int) -> torch.Tensor:
    """std 1/sqrt(fan_in), not Dream's 0.02: attention then is far from uniform, so RoPE positions, the
    attention mask and every bias move the logits by O(1) and a loader that gets one wrong cannot pass."""
    return _normal(gen, (out_features, in_features), 1.0 / math.sqrt(in_features))


def dream_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    """Every tensor of DreamModel's state_dict (Qwen2 names, QKV bias, no o_proj bias, untied lm_head)."""
    gen = torch.Generator().manual_seed(seed)
    head_dim = HIDDEN_SIZE // NUM_HEADS
    kv_width = NUM_KV_HEADS * head_dim
    tensors = {"model.embed_tokens.weight": _normal(gen, (VOCAB_SIZE, HIDDEN_SIZE), 1.0)}
    for layer in range(NUM_LAYERS):
        p = f"model.layers.{layer}."
        tensors[p + "self_attn.q_proj.weight"] = _linear(gen, HIDDEN_SIZE, HIDDEN_SIZE)
        tensors[p + "self_attn.q_proj.bias"] = _normal(gen, (HIDDEN_SIZE,), 0.1)
        tensors[p + "self_attn.k_proj.weight"] = _linear(gen, kv_width, HIDDEN_SIZE)
        tensors[p + "self_attn.k_proj.bias"] = _normal(gen, (kv_width,), 0.1)
        tensors[p + "self_attn.v_proj.weight"] = _linear(gen, kv_width, HIDDEN_SIZE)
        tensors[p + "self_attn.v_proj.bias"] = _normal(gen, (kv_width,), 0.1)
        tensors[p + "self_attn.o_proj.weight"] = _linear(gen, HIDDEN_SIZE, HIDDEN_SIZE)
        tensors[p + "mlp.gate_proj.weight"] = _linear(gen, INTERMEDIATE_SIZE, HIDDEN_SIZE)
        tensors[p + "mlp.up_proj.weight"] = _linear(gen, INTERMEDIATE_SIZE, HIDDEN_SIZE)
        tensors[p + "mlp.down_proj.weight"] = _linear(gen, HIDDEN_SIZE, INTERMEDIATE_SIZE)
        # Norm weights away from 1, so a loader that drops them is caught.
        tensors[p + "input_layernorm.weight"] = 1.0 + _normal(gen, (HIDDEN_SIZE,), 0.1)
        tensors[p + "post_attention_layernorm.weight"] = 1.0 + _normal(gen, (HIDDEN_SIZE,), 0.1)
    tensors["model.norm.weight"] = 1.0 + _normal(gen, (HIDDEN_SIZE,), 0.1)
    tensors["lm_head.weight"] = _linear(gen, VOCAB_SIZE, HIDDEN_SIZE)
    return tensors


def state_dict_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """A digest of names, dtypes, shapes and raw bytes, independent of the safetensors file layout: what the
    golden data pins, so a change in torch's random stream is caught before any logits comparison."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def write_tiny_dream_checkpoint(directory: Path, seed: int = 0) -> Path:
    """Write config.json, generation_config.json and model.safetensors into `directory`; return it.

    Deterministic: one seed, byte-identical files (the golden data records model.safetensors' sha256).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_NAME).write_text(json.dumps(dream_config(), indent=2, sort_keys=True) + "\n")
    (directory / GENERATION_CONFIG_NAME).write_text(
        json.dumps(dream_generation_config(), indent=2, sort_keys=True) + "\n"
    )
    save_file(dream_state_dict(seed), str(directory / WEIGHTS_NAME), metadata={"format": "pt"})
    return directory
