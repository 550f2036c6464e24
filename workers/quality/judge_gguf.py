"""A LLaMA-architecture GGUF file as a transformers checkpoint: dequantised weights, config and tokenizer.

The packaged judge (SmolLM2-135M-Instruct, Q4_1) ships only as GGUF. transformers can load GGUF itself, but
its path took 72 s on a loaded 2-core machine; reading the tensors with the `gguf` package's numpy reader and
dequantising them directly does the same work in seconds. The mapping is the inverse of llama.cpp's
`convert_hf_to_gguf.py` for LLaMA: tensor names, and the row permutation it applies to the query and key
projections for its rotary layout (undone as transformers' `LlamaTensorProcessor` does).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

# llama.cpp's names of one block's tensors → transformers' LlamaForCausalLM names.
_BLOCK_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
              "output.weight": "lm_head.weight"}
_CONTROL_TOKEN = 3  # llama.cpp's token type of special (control) tokens
# llama.cpp's "smollm" pre-tokenizer: every digit on its own, then GPT-2's split (as SmolLM2's tokenizer.json).
_SPLIT_DIGITS_PRE = ("smollm", "starcoder", "refact")


class GgufFormatError(ValueError):
    """A GGUF file this converter does not read (another architecture or tokenizer); names the file."""


def hf_name(gguf_name: str) -> str:
    """transformers' name of a llama.cpp tensor name."""
    if gguf_name in _TOP_NAMES:
        return _TOP_NAMES[gguf_name]
    parts = gguf_name.split(".")  # blk.{i}.{kind}.weight
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _BLOCK_NAMES:
        return f"model.layers.{parts[1]}.{_BLOCK_NAMES[parts[2]]}.{parts[3]}"
    raise GgufFormatError(f"tensor {gguf_name!r} has no LLaMA counterpart")


def unpermute_rotary(weights: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's row permutation of a query or key projection ([heads·head_dim, hidden])."""
    half = weights.shape[0] // heads // 2
    return weights.reshape(heads, half, 2, *weights.shape[1:]).swapaxes(2, 1).reshape(weights.shape)


def _field(reader, key: str):
    field = reader.fields.get(key)
    return None if field is None else field.contents()


def llama_config(reader) -> dict:
    """config.json of the file's model, from its `llama.*` metadata."""
    if _field(reader, "general.architecture") != "llama":
        raise GgufFormatError(f"architecture {_field(reader, 'general.architecture')!r}; only 'llama' is read")
    names = {t.name for t in reader.tensors}
    heads = int(_field(reader, "llama.attention.head_count"))
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": int(_field(reader, "llama.vocab_size") or len(_field(reader, "tokenizer.ggml.tokens"))),
        "hidden_size": int(_field(reader, "llama.embedding_length")),
        "intermediate_size": int(_field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(_field(reader, "llama.block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(_field(reader, "llama.attention.head_count_kv") or heads),
        "max_position_embeddings": int(_field(reader, "llama.context_length")),
        "rms_norm_eps": float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(_field(reader, "llama.rope.freq_base") or 10000.0),
        "tie_word_embeddings": "output.weight" not in names,
        "bos_token_id": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _field(reader, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": _field(reader, "tokenizer.ggml.padding_token_id"),
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
    }  # fmt: skip


def dequantised_state(reader, config: dict) -> dict[str, np.ndarray]:
    """Every tensor in float32 under its transformers name, query and key rows put back in HF order."""
    from gguf import dequantize

    state = {}
    for tensor in reader.tensors:
        name = hf_name(tensor.name)
        weights = np.array(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)  # a writable copy
        if ".attn_q." in tensor.name:
            weights = unpermute_rotary(weights, config["num_attention_heads"])
        elif ".attn_k." in tensor.name:
            weights = unpermute_rotary(weights, config["num_key_value_heads"])
        state[name] = np.ascontiguousarray(weights)
    return state


def tokenizer_files(reader) -> dict[str, str]:
    """tokenizer.json and tokenizer_config.json (text) of the file's byte-level BPE tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise GgufFormatError(f"tokenizer {_field(reader, 'tokenizer.ggml.model')!r}; only byte-level BPE ('gpt2')")
    tokens = list(_field(reader, "tokenizer.ggml.tokens"))
    types = list(_field(reader, "tokenizer.ggml.token_type"))
    merges = [tuple(merge.split(" ", 1)) for merge in _field(reader, "tokenizer.ggml.merges")]
    tokenizer = Tokenizer(models.BPE({token: i for i, token in enumerate(tokens)}, merges))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if _field(reader, "tokenizer.ggml.pre") in _SPLIT_DIGITS_PRE:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
        tokenizer.pre_tokenizer = byte_level
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([t for t, kind in zip(tokens, types) if kind == _CONTROL_TOKEN])

    def token(key: str) -> str | None:
        index = _field(reader, key)
        return None if index is None else tokens[int(index)]

    settings = {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": int(_field(reader, "llama.context_length")),
        "bos_token": token("tokenizer.ggml.bos_token_id"), "eos_token": token("tokenizer.ggml.eos_token_id"),
        "unk_token": token("tokenizer.ggml.unknown_token_id"), "pad_token": token("tokenizer.ggml.padding_token_id"),
        "add_bos_token": bool(_field(reader, "tokenizer.ggml.add_bos_token")), "clean_up_tokenization_spaces": False,
    }  # fmt: skip
    template = _field(reader, "tokenizer.chat_template")
    if template:
        settings["chat_template"] = template
    return {"tokenizer.json": tokenizer.to_str(), "tokenizer_config.json": json.dumps(settings, indent=2) + "\n"}


def convert(gguf_path: Path, out_dir: Path) -> None:
    """Write `gguf_path`'s model into `out_dir` as a transformers Llama checkpoint in float32."""
    import torch
    from gguf import GGUFReader
    from safetensors.torch import save_file

    reader = GGUFReader(str(gguf_path))
    config = llama_config(reader)
    state = {name: torch.from_numpy(array) for name, array in dequantised_state(reader, config).items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for name, text in tokenizer_files(reader).items():
        (out_dir / name).write_text(text, encoding="utf-8")
