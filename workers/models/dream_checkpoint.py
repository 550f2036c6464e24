"""Dream's own checkpoint (Dream-org/Dream-v0-Base-7B / -Instruct-7B) read without its remote code.

Dream-v0 was initialised from Qwen2.5-7B and keeps its network: the official modeling_dream.py builds
`DreamModel` with transformers' Qwen2 names (`model.embed_tokens`, `model.layers.{i}.self_attn.{q,k,v,o}_proj`
with biases on q, k and v only, `mlp.{gate,up,down}_proj`, `input_layernorm`, `post_attention_layernorm`,
`model.norm`, `lm_head`), so its safetensors load into transformers' Qwen2ForCausalLM key for key. What
differs is behaviour, not weights: attention is bidirectional and the logits are shifted by one
(workers/models/dream_model.py), and generation is `diffusion_generate` (workers/samplers/dream/sampler.py).

The config maps with DreamConfig's own defaults for the keys it may omit. Two settings of DreamConfig never
reach the official network and are therefore not mapped: `use_sliding_window` (DreamSdpaAttention always
attends to the whole sequence) and `use_cache`. A RoPE scaling other than the default would change numbers
the mapping does not reproduce, so it is refused.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase, Qwen2Config

from workers.errors import CheckpointFormatError
from workers.models.checkpoint import mask_token_id

DREAM_MODEL_TYPE = "Dream"
MASK_TOKEN_NAME = "<|mask|>"  # Dream's tokenizer: the [MASK] its sampler fills

# DreamConfig's defaults (configuration_dream.py) for the keys config.json may leave out.
_DEFAULTS = {
    "hidden_act": "silu",
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
}
# Keys without which the network's shape is unknown: a config.json lacking one is not a Dream checkpoint.
_SHAPE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")


def is_dream_config(raw: dict) -> bool:
    """Whether a checkpoint's config.json is Dream's (its model_type is "Dream")."""
    return raw.get("model_type") == DREAM_MODEL_TYPE


def qwen2_config_from_dream(raw: dict, title: str = "Dream") -> Qwen2Config:
    """Dream's config.json as a Qwen2Config of the same network (`make_dream_bidirectional` then makes the
    model Dream's). Another checkpoint of Qwen2's keys and the same defaults (Fast-dLLM v2's) maps the same way;
    `title` names it in the errors."""
    missing = [key for key in _SHAPE_KEYS if raw.get(key) is None]
    if missing:
        raise CheckpointFormatError(f"{title} config.json lacks {', '.join(missing)}")
    settings = {**_DEFAULTS, **{key: raw[key] for key in _DEFAULTS if raw.get(key) is not None}}
    rope_scaling = raw.get("rope_scaling")
    if rope_scaling:
        rope_type = rope_scaling.get("rope_type", rope_scaling.get("type"))
        if rope_type != "default":
            raise CheckpointFormatError(
                f"{title} config.json: rope_scaling {rope_scaling!r} is not supported without remote code "
                "(need null or rope_type 'default')"
            )
    hidden, heads = raw["hidden_size"], raw["num_attention_heads"]
    if hidden % heads:
        raise CheckpointFormatError(
            f"{title} config.json: hidden_size {hidden} is not divisible by num_attention_heads {heads}"
        )
    if raw.get("head_dim") not in (None, hidden // heads):
        raise CheckpointFormatError(
            f"{title} config.json: head_dim {raw['head_dim']} but its attention uses "
            f"hidden_size // num_attention_heads = {hidden // heads}"
        )
    return Qwen2Config(
        vocab_size=raw["vocab_size"],
        hidden_size=hidden,
        intermediate_size=raw["intermediate_size"],
        num_hidden_layers=raw["num_hidden_layers"],
        num_attention_heads=heads,
        num_key_value_heads=raw.get("num_key_value_heads") or heads,
        hidden_act=settings["hidden_act"],
        max_position_embeddings=settings["max_position_embeddings"],
        rms_norm_eps=settings["rms_norm_eps"],
        rope_parameters={"rope_type": "default", "rope_theta": float(settings["rope_theta"])},
        tie_word_embeddings=bool(settings["tie_word_embeddings"]),
        use_sliding_window=False,  # never applied by the official SDPA attention
        attention_dropout=0.0,
        bos_token_id=raw.get("bos_token_id"),
        eos_token_id=raw.get("eos_token_id"),
        pad_token_id=raw.get("pad_token_id"),
        use_cache=False,
    )


def dream_to_qwen2_name(key: str) -> str | None:
    """A Dream checkpoint key -> the Qwen2ForCausalLM parameter name: the same name; RoPE frequency buffers
    (each DreamAttention owns one, never a weight) are skipped."""
    return None if key.endswith("rotary_emb.inv_freq") else key


def dream_mask_token_id(raw: dict, tokenizer: PreTrainedTokenizerBase | None, override: int | None) -> int:
    """[MASK]: the spec's override, else config.json's mask_token_id, else the tokenizer's <|mask|>."""
    return mask_token_id(raw, tokenizer, override, token_name=MASK_TOKEN_NAME, family="Dream")
