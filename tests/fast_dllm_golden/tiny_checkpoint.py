"""A tiny random checkpoint in Fast-dLLM v2's official hub format, written with torch, safetensors and json only.

Fast-dLLM v2-7B (Efficient-Large-Model/Fast_dLLM_v2_7B) keeps Qwen2.5's parameter names, q/k/v biases included,
so the tensors are the tiny Dream checkpoint's (tests/dream_golden/tiny_checkpoint.py: the same shape, names and
seeded draws); what makes the folder Fast-dLLM's is its config.json (`model_type: Fast_dLLM_Qwen`, `bd_size`, the
hub's keys) and a tokenizer whose `<|mdm_mask|>` is the mask, as the miniature's export writes one. The same bytes
come out under the project's environment and under the separate transformers 4.x environment that runs the
official code (tests/data/fast_dllm_golden/RECORDING.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from tests.dream_golden.tiny_checkpoint import (
    HIDDEN_SIZE,
    INTERMEDIATE_SIZE,
    MAX_POSITIONS,
    NUM_HEADS,
    NUM_KV_HEADS,
    NUM_LAYERS,
    RMS_NORM_EPS,
    ROPE_THETA,
    VOCAB_SIZE,
    WEIGHTS_NAME,
    dream_state_dict,
    state_dict_sha256,
)

# The LM head is Dream's tiny one times this: with Dream's alone the top probability stays under 0.1 over 256 tokens,
# so no threshold between 0.3 and 0.9 would ever commit a second token in a forward; 4x spreads it over (0.2, 0.9).
LM_HEAD_SCALE = 4.0
# The block the checkpoint was "trained" with (config.json `bd_size`); generate's own block_size is an argument.
BD_SIZE = 8
# Special ids inside the vocabulary, all distinct (Fast-dLLM v2-7B: pad 151643 <|endoftext|>, eos and stop 151645
# <|im_end|>, mask 151665 |<MASK>|); the tokens carry the miniature's spellings.
PAD_ID = 0
BOS_ID = 1
STOP_ID = 2  # <|im_end|>: config.json's eos_token_id, the official generate's stop_token
MASK_ID = VOCAB_SIZE - 1  # <|mdm_mask|>
SPECIAL_TOKENS = {PAD_ID: "<|endoftext|>", BOS_ID: "<|im_start|>", STOP_ID: "<|im_end|>", MASK_ID: "<|mdm_mask|>"}

CONFIG_NAME = "config.json"
GENERATION_CONFIG_NAME = "generation_config.json"


def fast_dllm_config() -> dict[str, object]:
    """config.json with the keys of Fast_dLLM_v2_7B's, at the tiny shape (no mask_token_id: the 7B's has none)."""
    return {
        "architectures": ["Fast_dLLM_QwenForCausalLM"],
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration.Fast_dLLM_QwenConfig",
            "AutoModel": "modeling.Fast_dLLM_QwenModel",
            "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM",
        },
        "bd_size": BD_SIZE,
        "bos_token_id": BOS_ID,
        "conplemenrary_mask": True,  # sic: the hub's spelling
        "eos_token_id": STOP_ID,
        "hidden_act": "silu",
        "hidden_size": HIDDEN_SIZE,
        "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE_SIZE,
        "layer_types": ["full_attention"] * NUM_LAYERS,
        "max_position_embeddings": MAX_POSITIONS,
        "max_window_layers": NUM_LAYERS,
        "model_type": "Fast_dLLM_Qwen",
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
        "transformers_version": "4.53.1",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": VOCAB_SIZE,
    }


def fast_dllm_generation_config() -> dict[str, object]:
    """generation_config.json as the hub's lists it: its eos ids (the turn end, then the text end)."""
    return {"bos_token_id": BOS_ID, "eos_token_id": [STOP_ID, PAD_ID], "pad_token_id": PAD_ID,
            "transformers_version": "4.53.1"}


def fast_dllm_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    """Every tensor of Fast_dLLM_QwenForCausalLM's state_dict: the tiny Dream draws, the LM head sharpened."""
    tensors = dream_state_dict(seed)
    tensors["lm_head.weight"] = tensors["lm_head.weight"] * LM_HEAD_SCALE
    return tensors


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer over the 256 ids (`t3` ... `t254` and the special tokens), mask `<|mdm_mask|>`."""
    vocab = {SPECIAL_TOKENS.get(i, f"t{i}"): i for i in range(VOCAB_SIZE)}
    word_level = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS[PAD_ID]))
    word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=word_level, eos_token=SPECIAL_TOKENS[STOP_ID], pad_token=SPECIAL_TOKENS[PAD_ID],
        mask_token=SPECIAL_TOKENS[MASK_ID], model_max_length=MAX_POSITIONS,
    )  # fmt: skip


def write_tiny_fast_dllm_checkpoint(directory: Path, seed: int = 0, *, tokenizer: bool = True) -> Path:
    """Write config.json, generation_config.json, model.safetensors (and the tokenizer) into `directory`.

    Deterministic: one seed, byte-identical weights (the golden data records their digest)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_NAME).write_text(json.dumps(fast_dllm_config(), indent=2, sort_keys=True) + "\n")
    (directory / GENERATION_CONFIG_NAME).write_text(
        json.dumps(fast_dllm_generation_config(), indent=2, sort_keys=True) + "\n"
    )
    save_file(fast_dllm_state_dict(seed), str(directory / WEIGHTS_NAME), metadata={"format": "pt"})
    if tokenizer:
        tiny_tokenizer().save_pretrained(str(directory))
    return directory


__all__ = [
    "BD_SIZE", "MASK_ID", "PAD_ID", "STOP_ID", "VOCAB_SIZE", "WEIGHTS_NAME", "fast_dllm_config", "fast_dllm_state_dict",
    "state_dict_sha256", "write_tiny_fast_dllm_checkpoint",
]
