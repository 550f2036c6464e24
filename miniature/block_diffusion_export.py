"""Write the block-diffusion member in Fast-dLLM v2's own checkpoint format, and read it back as Qwen2.

The official folder (Efficient-Large-Model/Fast_dLLM_v2_7B) is Qwen2.5's: config.json with
`model_type: Fast_dLLM_Qwen`, Qwen2's keys plus `bd_size` (and the training flag `conplemenrary_mask`, spelled
so), safetensors under Qwen2's parameter names with q/k/v biases, a generation_config.json and the tokenizer.
The miniature member is written the same way, in bf16, without `auto_map` (the official modeling code is not
shipped: the benchmark reads the folder as transformers' Qwen2ForCausalLM and applies the block-wise mask
itself). The stop token is config.json's `eos_token_id` and generation_config.json's list, as in the official
folder; the [MASK] token is the tokenizer's `mask_token` (`<|mdm_mask|>`) and also `mask_token_id` in
config.json, because the official code has it only as `generate`'s default argument (`mask_id=151665`).
"""

from __future__ import annotations

import json
from pathlib import Path

import transformers
from safetensors.torch import load_file, save_file
from transformers import PreTrainedTokenizerBase, Qwen2Config, Qwen2ForCausalLM

from miniature.export import STORED_DTYPE, _bf16_state, _readable

MODEL_TYPE = "Fast_dLLM_Qwen"
ARCHITECTURE = "Fast_dLLM_QwenForCausalLM"
GENERATION_CONFIG_FILE = "generation_config.json"


def official_config(config: Qwen2Config, mask_token_id: int, eos_token_id: int) -> dict[str, object]:
    """config.json with the official file's keys (Fast_dLLM_QwenConfig's), for this network."""
    if any(kind != "full_attention" for kind in config.layer_types):
        raise ValueError("Fast-dLLM v2 attends to every earlier block in every layer: no sliding-window layers")
    return {
        "architectures": [ARCHITECTURE],
        "attention_dropout": 0.0,
        "bd_size": config.bd_size,
        "bos_token_id": None,  # the miniature tokenizer prepends nothing
        "conplemenrary_mask": True,
        "eos_token_id": eos_token_id,
        "hidden_act": config.hidden_act,
        "hidden_size": config.hidden_size,
        "initializer_range": config.initializer_range,
        "intermediate_size": config.intermediate_size,
        "layer_types": list(config.layer_types),
        "mask_token_id": mask_token_id,
        "max_position_embeddings": config.max_position_embeddings,
        "max_window_layers": config.num_hidden_layers,
        "model_type": MODEL_TYPE,
        "num_attention_heads": config.num_attention_heads,
        "num_hidden_layers": config.num_hidden_layers,
        "num_key_value_heads": config.num_key_value_heads,
        "pad_token_id": config.pad_token_id,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_scaling": None,
        "rope_theta": float(config.rope_parameters["rope_theta"]),
        "sliding_window": None,
        "tie_word_embeddings": config.tie_word_embeddings,
        "torch_dtype": str(STORED_DTYPE).removeprefix("torch."),
        "transformers_version": transformers.__version__,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": config.vocab_size,
    }


def save_block_diffusion(model: Qwen2ForCausalLM, tokenizer: PreTrainedTokenizerBase, directory: Path,
                         mask_token_id: int, eos_token_id: int) -> None:
    """The official folder's files: config.json, generation_config.json, model.safetensors (bf16), tokenizer."""
    directory.mkdir(parents=True, exist_ok=True)
    config = official_config(model.config, mask_token_id, eos_token_id)
    generation = {"bos_token_id": None, "eos_token_id": [eos_token_id], "pad_token_id": config["pad_token_id"],
                  "transformers_version": config["transformers_version"]}
    for name, payload in (("config.json", config), (GENERATION_CONFIG_FILE, generation)):
        (directory / name).write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    save_file(_bf16_state(model), str(directory / "model.safetensors"), metadata={"format": "pt"})
    _readable(directory / "model.safetensors")
    tokenizer.save_pretrained(str(directory))


def qwen2_config_from_official(raw: dict) -> Qwen2Config:
    """An official config.json as the Qwen2Config of the same network (`bd_size` kept as an attribute)."""
    if raw.get("model_type") != MODEL_TYPE:
        raise ValueError(f"model_type {raw.get('model_type')!r}: not a Fast-dLLM v2 checkpoint ({MODEL_TYPE!r})")
    if raw.get("rope_scaling") or raw.get("use_sliding_window"):
        raise ValueError("rope_scaling and sliding windows are not part of the Fast-dLLM v2 network")
    keep = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "hidden_act", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings",
            "bos_token_id", "eos_token_id", "pad_token_id", "bd_size")
    return Qwen2Config(**{key: raw[key] for key in keep}, use_sliding_window=False, use_cache=False,
                       rope_parameters={"rope_type": "default", "rope_theta": float(raw["rope_theta"])})


def load_as_qwen2(directory: Path) -> Qwen2ForCausalLM:
    """A folder written by `save_block_diffusion` as transformers' Qwen2ForCausalLM in float32 (strict names)."""
    config = qwen2_config_from_official(json.loads((directory / "config.json").read_text(encoding="utf-8")))
    config._attn_implementation = "sdpa"
    model = Qwen2ForCausalLM(config)
    stored = load_file(str(directory / "model.safetensors"))
    model.load_state_dict({name: tensor.float() for name, tensor in stored.items()})
    return model.eval()
