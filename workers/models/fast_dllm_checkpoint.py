"""Fast-dLLM v2's own checkpoint (Efficient-Large-Model/Fast_dLLM_v2_7B) read without its remote code.

Fast-dLLM v2 adapts Qwen2.5-7B-Instruct into a block-diffusion model (arXiv:2509.26328) without changing its
network: the official modeling.py builds `Fast_dLLM_QwenForCausalLM` with transformers' Qwen2 names
(`model.embed_tokens`, `model.layers.{i}.self_attn.{q,k,v,o}_proj` with biases on q, k and v only,
`mlp.{gate,up,down}_proj`, the two layernorms, `model.norm`, `lm_head`), so its safetensors load into
Qwen2ForCausalLM key for key. Its config.json holds Qwen2's keys with `model_type: Fast_dLLM_Qwen` and the
training block `bd_size`; Fast_dLLM_QwenConfig's defaults are DreamConfig's, so it maps as Dream's does
(workers/models/dream_checkpoint.py). What differs is behaviour: attention is block-causal (bidirectional inside a
block, the sampler's masks, workers/samplers/block_diffusion/forward.py) and generation is block by block
(workers/samplers/block_diffusion/sampler.py).

Its attention applies a sliding window where `layer_types` says so; the mapping refuses such layers rather than
load them wrong. The mask id is not in config.json: the 7B's tokenizer names it `|<MASK>|`, a miniature exported in
this format `<|mdm_mask|>`.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase, Qwen2Config

from workers.errors import CheckpointFormatError
from workers.models.checkpoint import mask_token_id
from workers.models.dream_checkpoint import qwen2_config_from_dream

FAST_DLLM_MODEL_TYPE = "Fast_dLLM_Qwen"
TITLE = "Fast-dLLM v2"
# The mask's spellings: Fast_dLLM_v2_7B's added token (id 151665), and the miniature's (LLaDA's spelling).
MASK_TOKEN_NAMES = ("|<MASK>|", "<|mdm_mask|>")


def is_fast_dllm_config(raw: dict) -> bool:
    """Whether a checkpoint's config.json is Fast-dLLM v2's (its model_type is "Fast_dLLM_Qwen")."""
    return raw.get("model_type") == FAST_DLLM_MODEL_TYPE


def qwen2_config_from_fast_dllm(raw: dict) -> Qwen2Config:
    """Fast-dLLM v2's config.json as a Qwen2Config of the same network, refusing what would not map."""
    bd_size = raw.get("bd_size")
    if bd_size is not None and (not isinstance(bd_size, int) or isinstance(bd_size, bool) or bd_size <= 0):
        raise CheckpointFormatError(f"{TITLE} config.json: bd_size {bd_size!r} is not a positive block length")
    sliding = [i for i, kind in enumerate(raw.get("layer_types") or []) if kind != "full_attention"]
    if sliding or (raw.get("use_sliding_window") and raw.get("sliding_window")):
        raise CheckpointFormatError(
            f"{TITLE} config.json: sliding-window attention (layers {sliding or 'all'}) is not supported without "
            "remote code; every layer must be full_attention"
        )
    return qwen2_config_from_dream(raw, TITLE)


def fast_dllm_mask_token_id(raw: dict, tokenizer: PreTrainedTokenizerBase | None, override: int | None) -> int:
    """[MASK]: the spec's override, else config.json's mask_token_id, else the tokenizer's `|<MASK>|` or
    `<|mdm_mask|>`, else its own mask token."""
    vocab = tokenizer.get_vocab() if tokenizer is not None else {}
    name = next((n for n in MASK_TOKEN_NAMES if n in vocab), MASK_TOKEN_NAMES[0])
    return mask_token_id(raw, tokenizer, override, token_name=name, family=TITLE)
