"""LLaDA's own checkpoint (GSAI-ML/LLaDA-8B-Base/-Instruct) read without its remote code.

The official modeling_llada.py names its weights after OLMo (`model.transformer.blocks.{i}.*`). Its
LLaDALlamaBlock computes the MLP as

    x, x_up = self.ff_proj(x), self.up_proj(x)
    x = self.act(x)          # activation_type "silu"
    x = x * x_up
    x = self.ff_out(x)

so `ff_proj` is the gated projection (transformers' `gate_proj`), `up_proj` stays `up_proj` and the block's
`ff_out` is `down_proj`; `attn_out` is `o_proj`, `attn_norm`/`ff_norm` are the two RMSNorms, `wte` the
embedding, `ln_f` the final norm and the transformer-level `ff_out` the untied LM head. Only the
configuration that LLaDA-8B ships (llama blocks, RMSNorm, SiLU gate, RoPE, no biases, no q/k norm, no
logit scaling) maps exactly onto LlamaForCausalLM; anything else is refused rather than loaded wrong.
"""

from __future__ import annotations

import re

from transformers import LlamaConfig, PreTrainedTokenizerBase

from workers.errors import CheckpointFormatError
from workers.models.checkpoint import mask_token_id

LLADA_MODEL_TYPE = "llada"
MASK_TOKEN_NAME = "<|mdm_mask|>"

_BLOCK_RENAMES = {
    "attn_norm": "input_layernorm",
    "ff_norm": "post_attention_layernorm",
    "q_proj": "self_attn.q_proj",
    "k_proj": "self_attn.k_proj",
    "v_proj": "self_attn.v_proj",
    "attn_out": "self_attn.o_proj",
    "ff_proj": "mlp.gate_proj",  # the gated one: SiLU is applied to its output
    "up_proj": "mlp.up_proj",
    "ff_out": "mlp.down_proj",
}
_TOP_RENAMES = {
    "transformer.wte.weight": "model.embed_tokens.weight",
    "transformer.ln_f.weight": "model.norm.weight",
    "transformer.ff_out.weight": "lm_head.weight",
}
_BLOCK_KEY = re.compile(r"^transformer\.blocks\.(\d+)\.(\w+)\.weight$")
_LAYER_KEY = re.compile(r"^model\.layers\.(\d+)\.([\w.]+)\.weight$")

# config key -> value the mapping requires (the values LLaDA-8B ships).
_REQUIRED = {
    "block_type": "llama",
    "activation_type": "silu",
    "layer_norm_type": "rms",
    "rope": True,
    "alibi": False,
    "include_bias": False,
    "include_qkv_bias": False,
    "attention_layer_norm": False,
    "scale_logits": False,
    "input_emb_norm": False,
    "block_group_size": 1,
    "clip_qkv": None,
}


# The key of LLaDA's config.json behind each LlamaConfig field `llama_config_from_llada` sets from it.
_CONFIG_KEYS = {"hidden_size": "d_model", "intermediate_size": "mlp_hidden_size", "num_hidden_layers": "n_layers",
                "num_attention_heads": "n_heads", "num_key_value_heads": "n_kv_heads"}


def llada_config_key(config: dict, field: str) -> str:
    """The config.json key that sets a LlamaConfig field of the mapped model (embedding_size, where set, is the
    vocabulary: the embedding's rows)."""
    if field == "vocab_size":
        return "embedding_size" if config.get("embedding_size") else "vocab_size"
    return _CONFIG_KEYS.get(field, field)


def is_llada_config(config: dict) -> bool:
    return config.get("model_type") == LLADA_MODEL_TYPE


def llada_to_llama_name(key: str) -> str | None:
    """A LLaDA checkpoint key -> the LlamaForCausalLM parameter name; a key with no counterpart is an error."""
    name = key.removeprefix("model.")
    if name in _TOP_RENAMES:
        return _TOP_RENAMES[name]
    match = _BLOCK_KEY.match(name)
    if match and match.group(2) in _BLOCK_RENAMES:
        return f"model.layers.{match.group(1)}.{_BLOCK_RENAMES[match.group(2)]}.weight"
    raise CheckpointFormatError(f"LLaDA checkpoint key {key!r} has no LlamaForCausalLM counterpart")


def llama_to_llada_name(name: str) -> str:
    """The inverse of `llada_to_llama_name`: where LLaDA's own checkpoint stores a LlamaForCausalLM parameter."""
    for official, ours in _TOP_RENAMES.items():
        if name == ours:
            return f"model.{official}"
    match = _LAYER_KEY.match(name)
    if match:
        for official, ours in _BLOCK_RENAMES.items():
            if match.group(2) == ours:
                return f"model.transformer.blocks.{match.group(1)}.{official}.weight"
    raise CheckpointFormatError(f"parameter {name!r} has no place in LLaDA's checkpoint format")


def official_llada_config(config: LlamaConfig, mask_token_id: int | None, eos_token_id: int | None) -> dict:
    """config.json with the keys and values LLaDA-8B ships, holding `config`'s shape (the inverse of
    `llama_config_from_llada`; the keys the mapping does not read are LLaDA-8B's own values)."""
    rope = config.rope_parameters or {}
    return {
        "activation_type": "silu", "alibi": False, "alibi_bias_max": 8.0, "architectures": ["LLaDAModelLM"],
        "attention_dropout": 0.0, "attention_layer_norm": False, "attention_layer_norm_with_affine": True,
        "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig", "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM"},
        "bias_for_layer_norm": False, "block_group_size": 1, "block_type": "llama", "d_model": config.hidden_size,
        "embedding_dropout": 0.0, "embedding_size": config.vocab_size, "eos_token_id": eos_token_id,
        "flash_attention": False, "include_bias": False, "include_qkv_bias": False, "init_cutoff_factor": None,
        "init_device": "meta", "init_fn": "mitchell", "init_std": 0.02, "input_emb_norm": False,
        "layer_norm_type": "rms", "layer_norm_with_affine": True, "mask_token_id": mask_token_id,
        "max_sequence_length": config.max_position_embeddings, "mlp_hidden_size": config.intermediate_size,
        "mlp_ratio": 4, "model_type": LLADA_MODEL_TYPE, "multi_query_attention": None,
        "n_heads": config.num_attention_heads, "n_kv_heads": config.num_key_value_heads,
        "n_layers": config.num_hidden_layers, "pad_token_id": eos_token_id, "precision": "amp_bf16",
        "residual_dropout": 0.0, "rms_norm_eps": config.rms_norm_eps, "rope": True, "rope_full_precision": True,
        "rope_theta": float(rope.get("rope_theta", 10000.0)), "scale_logits": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.46.3", "use_cache": False, "vocab_size": config.vocab_size,
        "weight_tying": bool(config.tie_word_embeddings),
    }  # fmt: skip


def llama_config_from_llada(config: dict) -> LlamaConfig:
    """LLaDA's config.json as a LlamaConfig (bidirectional, no KV cache), refusing what would not map."""
    wrong = [
        f"{key}={config[key]!r} (need {value!r})"
        for key, value in _REQUIRED.items()
        if key in config and config[key] != value
    ]
    if config.get("weight_tying") is None and "weight_tying" in config:
        wrong.append("weight_tying=None (need true or false)")
    if wrong:
        raise CheckpointFormatError(f"LLaDA config not expressible as LlamaForCausalLM: {', '.join(wrong)}")
    try:
        d_model, n_heads, n_layers = config["d_model"], config["n_heads"], config["n_layers"]
    except KeyError as exc:
        raise CheckpointFormatError(f"LLaDA config.json lacks {exc.args[0]!r}") from None
    n_kv_heads = config.get("n_kv_heads") or (1 if config.get("multi_query_attention") else n_heads)
    mlp = config.get("mlp_hidden_size") or config.get("mlp_ratio", 4) * d_model
    vocab = config.get("embedding_size") or config["vocab_size"]
    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=d_model,
        intermediate_size=mlp,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads,
        hidden_act="silu",
        max_position_embeddings=config.get("max_sequence_length", 4096),
        rms_norm_eps=config.get("rms_norm_eps", 1e-5),
        rope_parameters={"rope_type": "default", "rope_theta": float(config.get("rope_theta", 10000.0))},
        tie_word_embeddings=bool(config.get("weight_tying", False)),
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=config.get("bos_token_id"),
        eos_token_id=config.get("eos_token_id"),
        pad_token_id=config.get("pad_token_id"),
        use_cache=False,
        is_causal=False,
    )


def llada_mask_token_id(config: dict, tokenizer: PreTrainedTokenizerBase | None, override: int | None) -> int:
    """[MASK]: the spec's override, else config.json's mask_token_id, else the tokenizer's <|mdm_mask|>."""
    return mask_token_id(config, tokenizer, override, token_name=MASK_TOKEN_NAME, family="LLaDA")
