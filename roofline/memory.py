"""Memory footprint of a run (weights, KV cache, activations, logits), to predict where it will not fit.

The study had no memory model, so this is the same in both fidelities. It estimates what PyTorch allocates
(`max_memory_allocated`), not what its caching allocator reserves, and assumes a fused attention kernel
(sdpa / flash-attn: no seq x seq score matrix in DRAM).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from roofline.dream import default_logits_positions, dream_sampler_buffer_bytes_per_element
from roofline.llada import LladaCache
from roofline.operators import BYTES_PER_ELEMENT
from roofline.sampler import Remasking, sampler_buffer_bytes_per_element
from specs.shapes import ModelShape


class MemoryFootprint(BaseModel):
    """Bytes of each kind; `peak_bytes` is the largest total alive at one moment, not the sum of the parts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    logits_bytes: int
    peak_bytes: int


def weights_bytes(shape: ModelShape, element_bytes: int = BYTES_PER_ELEMENT) -> int:
    """Every parameter (embeddings, layers with their QKV biases where the family has them, final norm, LM head),
    `element_bytes` each (BF16 by default); tied embeddings are one tensor, counted once (`parameter_count`)."""
    return shape.parameter_count() * element_bytes


def layer_activation_bytes(shape: ModelShape, tokens: int, element_bytes: int = BYTES_PER_ELEMENT) -> int:
    """Peak live activations inside one layer for `tokens` rows (batch x positions).

    Attention: residual, normed input, q, k, v, their rotated copies, the attention output and the o_proj
    output. MLP (HF LlamaMLP, `down(act(gate(x)) * up(x))`): residual, normed input, act(gate), up and
    their product. The larger of the two, in BF16.
    """
    d, f = shape.hidden_size, shape.intermediate_size
    kv = shape.num_kv_heads * shape.head_dim
    attention = 6 * d + 3 * kv
    mlp = 2 * d + 3 * f
    return tokens * max(attention, mlp) * element_bytes


def kv_cache_bytes(shape: ModelShape, *, batch: int, positions: int, element_bytes: int = BYTES_PER_ELEMENT) -> int:
    """K and V of every layer for `positions` positions, `element_bytes` each."""
    return 2 * shape.num_layers * batch * positions * shape.num_kv_heads * shape.head_dim * element_bytes


def llama_memory(
    shape: ModelShape, *, batch: int, prompt_len: int, gen_len: int, element_bytes: int = BYTES_PER_ELEMENT
) -> MemoryFootprint:
    """Peak = weights + the larger of (prefill: prompt KV + its activations) and (last decode pass: full KV +
    one token's activations + the last position's logits). The cache ends at P + G - 1 positions: the
    last token is sampled, never fed back."""
    eb = element_bytes
    weights = weights_bytes(shape, eb)
    final_positions = prompt_len + max(gen_len - 1, 0)
    kv_final = kv_cache_bytes(shape, batch=batch, positions=final_positions, element_bytes=eb)
    prefill_activations = layer_activation_bytes(shape, batch * prompt_len, eb)
    logits = batch * shape.vocab_size * eb
    prefill = kv_cache_bytes(shape, batch=batch, positions=prompt_len, element_bytes=eb) + prefill_activations + logits
    decode = kv_final + layer_activation_bytes(shape, batch, eb) + logits
    return MemoryFootprint(
        weights_bytes=weights,
        kv_cache_bytes=kv_final,
        activation_bytes=prefill_activations,
        logits_bytes=logits,
        peak_bytes=weights + max(prefill, decode),
    )


def llada_memory(
    shape: ModelShape,
    *,
    batch: int,
    prompt_len: int,
    gen_len: int,
    cfg_scale: float = 0.0,
    temperature: float = 0.0,
    remasking: Remasking = "low_confidence",
    logits_positions: int | None = None,
    element_bytes: int = BYTES_PER_ELEMENT,
    cache: LladaCache = "none",
) -> MemoryFootprint:
    """Peak = weights + the KV cache + the larger of one step's layer activations and its logits stage.

    KV cache (`llada_cache_bytes`): none for the vanilla sampler. The longest step runs over prompt + generation (every step, or the last block when
    truncating). Logits stage of the official sampler: BF16 logits of the model batch (2x with CFG), the CFG
    combination, then the sampler's float64 buffers over [batch, seq, vocab] (roofline.sampler).
    """
    seq = prompt_len + gen_len
    cfg = cfg_scale > 0.0
    model_batch = 2 * batch if cfg else batch
    weights = weights_bytes(shape, element_bytes)
    activations = layer_activation_bytes(shape, model_batch * seq, element_bytes)
    per_sequence_logits = (seq if logits_positions is None else min(logits_positions, seq)) * shape.vocab_size
    logits = per_sequence_logits * (
        model_batch * element_bytes
        + (batch * element_bytes if cfg else 0)
        + batch * sampler_buffer_bytes_per_element(temperature=temperature, remasking=remasking)
    )
    kv = llada_cache_bytes(shape, cache=cache, batch=model_batch, prompt_len=prompt_len, gen_len=gen_len,
                           element_bytes=element_bytes)
    return MemoryFootprint(
        weights_bytes=weights,
        kv_cache_bytes=kv,
        activation_bytes=activations,
        logits_bytes=logits,
        # The block's first step is a full forward while the cache it fills is alive.
        peak_bytes=weights + kv + max(activations, logits),
    )


def llada_cache_bytes(
    shape: ModelShape,
    *,
    cache: LladaCache,
    batch: int,
    prompt_len: int,
    gen_len: int,
    element_bytes: int = BYTES_PER_ELEMENT,
) -> int:
    """Peak KV bytes of a LLaDA variant's cache (`batch` is the model's: doubled with CFG); `none` holds nothing.

    Both caches hold every position of the sequence, as the workers' BlockCache does (workers/samplers/
    block_cache.py: one [B, H_kv, L, D] buffer per layer, allocated at the first refresh): the block's first step
    writes them all, and a prefix-cached step overwrites the block and what lies right of it in place. A prefix
    cache could keep only what lies left of the block (at most prompt + generation - one block): a lower bound
    this model does not use, since it is not what the runs hold."""
    if cache == "none":
        return 0
    if cache not in ("prefix", "dual"):
        raise ValueError(f"unknown cache {cache!r}; allowed: none, prefix, dual")
    return kv_cache_bytes(shape, batch=batch, positions=prompt_len + gen_len, element_bytes=element_bytes)


def dream_memory(
    shape: ModelShape,
    *,
    batch: int,
    prompt_len: int,
    gen_len: int,
    temperature: float = 0.0,
    alg: str = "entropy",
    top_p: float | None = None,
    top_k: int | None = None,
    logits_positions: int | None = None,
    element_bytes: int = BYTES_PER_ELEMENT,
) -> MemoryFootprint:
    """Peak = weights + the larger of one step's layer activations (over prompt + generation; no KV cache) and its
    logits stage, at the first step (every generated position still masked).

    Logits stage of `_sample`: the logits over `logits_positions` per sequence (None: the generation's N, as the
    workers project them), the masked positions' gathered logits, and `sample_tokens`' buffers over them
    (`roofline.dream.dream_sampler_buffer_bytes_per_element`); `origin` samples only the positions it commits, at
    most the schedule's share (1 - eps) / steps of them, counted here as all of them (a bound from above)."""
    seq = prompt_len + gen_len
    weights = weights_bytes(shape, element_bytes)
    activations = layer_activation_bytes(shape, batch * seq, element_bytes)
    head = default_logits_positions(gen_len) if logits_positions is None else min(logits_positions, seq)
    vocab = shape.vocab_size
    logits = batch * vocab * (
        head * element_bytes  # the logits
        + gen_len * element_bytes  # the gathered masked logits
        + gen_len * dream_sampler_buffer_bytes_per_element(
            temperature=temperature, alg=alg, top_p=top_p, top_k=top_k, element_bytes=element_bytes)
    )
    return MemoryFootprint(
        weights_bytes=weights,
        kv_cache_bytes=0,
        activation_bytes=activations,
        logits_bytes=logits,
        peak_bytes=weights + max(activations, logits),
    )


def block_diffusion_memory(
    shape: ModelShape,
    *,
    batch: int,
    prefill_length: int,
    cache_length: int,
    block_length: int,
    sub_block_length: int,
    temperature: float = 0.0,
    element_bytes: int = BYTES_PER_ELEMENT,
) -> MemoryFootprint:
    """Peak = weights + the KV cache + the larger of a forward's layer activations (the prefill's prompt blocks, or a
    block) and its logits stage.

    The cache is one buffer of every position the generation reaches (`cache_length`: the prompt's whole blocks and
    every block decoded), allocated at the first forward, as the workers' BlockDiffusionCache is. The logits stage of
    an in-block forward: the sub-block's logits, their probabilities and the argmax's copy with the mask excluded
    (temperature > 0: the scaled logits, the sort's values and int64 indices, the cumulative sums)."""
    eb = element_bytes
    weights = weights_bytes(shape, eb)
    kv = kv_cache_bytes(shape, batch=batch, positions=cache_length, element_bytes=eb)
    activations = layer_activation_bytes(shape, batch * max(prefill_length, block_length), eb)
    per_element = 3 * eb + (2 * eb + 8 + eb if temperature > 0 else 0)
    logits = batch * sub_block_length * shape.vocab_size * per_element
    return MemoryFootprint(
        weights_bytes=weights, kv_cache_bytes=kv, activation_bytes=activations, logits_bytes=logits,
        peak_bytes=weights + kv + max(activations, logits),
    )  # fmt: skip
