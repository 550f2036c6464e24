"""The transformers classes behind each registry layout and each diffusion family's attention.

A family of specs/registry.py names its `layout` (which class its weights load into) and its `sampler`; this
module maps those names to code, so loading builds any family the same way: the layout's config from a shape
or a checkpoint, its class on the meta device, and then, for a diffusion family, the conversion its sampler
needs (LLaDA's bidirectional attention with float32 RoPE, Dream's bidirectional attention with padding
inputs, which block diffusion shares). An autoregressive model gets the sync-free attention instead (workers/models/attention.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding

from specs.registry import LAYOUT_QKV_BIAS, Family
from specs.shapes import ModelShape
from workers.models.config_check import ConfigKey, same_key
from workers.models.dream_checkpoint import (
    dream_mask_token_id,
    dream_to_qwen2_name,
    is_dream_config,
    qwen2_config_from_dream,
)
from workers.models.dream_model import make_dream_bidirectional
from workers.models.fast_dllm_checkpoint import (
    FAST_DLLM_MODEL_TYPE,
    fast_dllm_mask_token_id,
    is_fast_dllm_config,
    qwen2_config_from_fast_dllm,
)
from workers.models.llada_checkpoint import (
    is_llada_config,
    llada_config_key,
    llada_mask_token_id,
    llada_to_llama_name,
    llama_config_from_llada,
)
from workers.models.llada_model import make_bidirectional

Rename = Callable[[str], "str | None"]


def keep_name(key: str) -> str | None:
    """transformers' own naming: identity, minus RoPE buffers that old checkpoints saved."""
    return None if key.endswith("rotary_emb.inv_freq") else key


def _shape_numbers(shape: ModelShape) -> dict[str, object]:
    """The config keywords every layout takes from a shape: exactly the numbers the roofline costs."""
    return dict(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        hidden_act="silu",
        max_position_embeddings=shape.max_position_embeddings,
        rms_norm_eps=shape.rms_norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": shape.rope_theta},
        tie_word_embeddings=shape.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


def llama_config_for_shape(shape: ModelShape) -> LlamaConfig:
    """A LlamaConfig with exactly the shape's numbers."""
    if shape.attention_bias:
        raise ValueError(
            "attention_bias: the LLaMA layout has no q/k/v bias (transformers' attention_bias would also bias "
            "o_proj); build a biased shape as a Qwen2-layout family (qwen2, dream)"
        )
    return LlamaConfig(**_shape_numbers(shape))


def qwen2_config_for_shape(shape: ModelShape) -> Qwen2Config:
    """A Qwen2Config with exactly the shape's numbers, full attention in every layer (no sliding window): synthetic
    Qwen2.5 and Dream models. Qwen2's attention always carries q/k/v biases, so a shape that says it has none is
    refused rather than built with biases it does not cost."""
    if not shape.attention_bias:
        raise ValueError(
            "attention_bias: a Qwen2/Dream model always has q/k/v biases; this shape has none "
            "(build it as a LLaMA-layout model, or set attention_bias: true)"
        )
    return Qwen2Config(**_shape_numbers(shape), use_sliding_window=False)


@dataclass(frozen=True)
class Layout:
    """One transformers architecture: its config from a shape, its model and rotary classes, whether its
    q/k/v projections carry a bias."""

    config_class: type[PretrainedConfig]
    config_for_shape: Callable[[ModelShape], PretrainedConfig]
    model_class: type[PreTrainedModel]
    rotary_class: type
    attention_bias: bool


LAYOUTS: dict[str, Layout] = {
    "llama": Layout(LlamaConfig, llama_config_for_shape, LlamaForCausalLM, LlamaRotaryEmbedding,
                    attention_bias=LAYOUT_QKV_BIAS["llama"]),
    "qwen2": Layout(Qwen2Config, qwen2_config_for_shape, Qwen2ForCausalLM, Qwen2RotaryEmbedding,
                    attention_bias=LAYOUT_QKV_BIAS["qwen2"]),
}

@dataclass(frozen=True)
class DiffusionModel:
    """What a diffusion sampler needs of its model: the in-place conversion that makes the layout's causal decoder
    its mask predictor, and where a checkpoint's [MASK] id is read (its config, else its tokenizer)."""

    make_bidirectional: Callable[[PreTrainedModel], object]
    mask_token_id: Callable[[dict, PreTrainedTokenizerBase | None, int | None], int]


DIFFUSION_MODELS: dict[str, DiffusionModel] = {
    "llada": DiffusionModel(make_bidirectional, llada_mask_token_id),  # type: ignore[arg-type]
    "dream": DiffusionModel(make_dream_bidirectional, dream_mask_token_id),  # type: ignore[arg-type]
    # Block diffusion attends bidirectionally inside a block, as Dream does over the whole sequence; the block-causal
    # masks (the prefill's) are the sampler's own (workers/samplers/block_diffusion/forward.py).
    "block_diffusion": DiffusionModel(make_dream_bidirectional, fast_dllm_mask_token_id),  # type: ignore[arg-type]
}


@dataclass(frozen=True)
class CheckpointFormat:
    """A config.json model_type the workers load without remote code: its config in the layout's class, the
    renaming of its tensors to the layout's names, and the config.json key behind each of the config's fields."""

    matches: Callable[[dict], bool]
    config: Callable[[dict, Path], PretrainedConfig]
    rename: Rename
    config_key: ConfigKey = same_key


CHECKPOINT_FORMATS: dict[str, CheckpointFormat] = {
    "llama": CheckpointFormat(lambda raw: raw.get("model_type") == "llama",
                              lambda raw, directory: LlamaConfig.from_pretrained(str(directory)), keep_name),
    "llada": CheckpointFormat(is_llada_config, lambda raw, directory: llama_config_from_llada(raw), llada_to_llama_name,
                              llada_config_key),
    "qwen2": CheckpointFormat(lambda raw: raw.get("model_type") == "qwen2",
                              lambda raw, directory: Qwen2Config.from_pretrained(str(directory)), keep_name),
    "Dream": CheckpointFormat(is_dream_config, lambda raw, directory: qwen2_config_from_dream(raw), dream_to_qwen2_name),
    FAST_DLLM_MODEL_TYPE: CheckpointFormat(
        is_fast_dllm_config, lambda raw, directory: qwen2_config_from_fast_dllm(raw), keep_name
    ),
}


def checkpoint_format(entry: Family, raw: dict) -> CheckpointFormat | None:
    """The format a checkpoint's config.json is read in for this family (None: not one it loads)."""
    for model_type in entry.checkpoint_model_types:
        known = CHECKPOINT_FORMATS.get(model_type)
        if known is not None and known.matches(raw):
            return known
    return None


def layout_of(entry: Family) -> Layout:
    return LAYOUTS[entry.layout]
