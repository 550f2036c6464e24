"""Memory footprint of a run (weights, KV cache, activations, logits), to predict where it will not fit.

The study had no memory model, so this is the same in both fidelities. It estimates what PyTorch allocates
(`max_memory_allocated`), not what its caching allocator reserves, and assumes a fused attention kernel
(sdpa / flash-attn: no seq x seq score matrix in DRAM).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from roofline.block_diffusion import block_plan
from roofline.dream import dream_sampler_buffer_bytes_per_element, logits_positions_of
from roofline.operators import BYTES_PER_ELEMENT
from roofline.sampler import sampler_buffer_bytes_per_element
from roofline.workload import Workload
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


def footprint(shape: ModelShape, work: Workload, *, kv: int, activations: int, logits: int) -> MemoryFootprint:
    """The footprint of a diffusion step: the weights and the KV cache alive throughout, and the larger of the
    step's layer activations and its logits stage on top (they are not alive together)."""
    weights = weights_bytes(shape, work.element_bytes)
    return MemoryFootprint(
        weights_bytes=weights, kv_cache_bytes=kv, activation_bytes=activations, logits_bytes=logits,
        peak_bytes=weights + kv + max(activations, logits),
    )


def llama_memory(shape: ModelShape, work: Workload) -> MemoryFootprint:
    """Peak = weights + the larger of (prefill: prompt KV + its activations) and (last decode pass: full KV +
    one token's activations + the last position's logits). The cache ends at P + G - 1 positions: the
    last token is sampled, never fed back."""
    batch, prompt_len, eb = work.batch, work.prompt_len, work.element_bytes
    weights = weights_bytes(shape, eb)
    final_positions = prompt_len + max(work.gen_len - 1, 0)
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


def llada_memory(shape: ModelShape, work: Workload) -> MemoryFootprint:
    """Peak = weights + the KV cache + the larger of one step's layer activations and its logits stage.

    KV cache (`llada_cache_bytes`): none for the vanilla sampler. The longest step runs over prompt + generation
    (every step, or the last block when truncating). Logits stage of the official sampler: BF16 logits of the model
    batch (2x with CFG), the CFG combination, then the sampler's float64 buffers over [batch, seq, vocab]
    (roofline.sampler). The block's first step is a full forward while the cache it fills is alive.
    """
    seq, batch, eb = work.seq_len, work.batch, work.element_bytes
    cfg = work.cfg_scale > 0.0
    model_batch = 2 * batch if cfg else batch
    positions = seq if work.logits_positions is None else min(work.logits_positions, seq)
    logits = positions * shape.vocab_size * (
        model_batch * eb + (batch * eb if cfg else 0) + batch * sampler_buffer_bytes_per_element(work)
    )
    return footprint(shape, work, kv=llada_cache_bytes(shape, work),
                     activations=layer_activation_bytes(shape, model_batch * seq, eb), logits=logits)


def llada_cache_bytes(shape: ModelShape, work: Workload) -> int:
    """Peak KV bytes of a LLaDA variant's cache (for the model's batch: doubled with CFG, the unconditional pass
    has its own); `none` holds nothing.

    Both caches hold every position of the sequence, as the workers' BlockCache does (workers/samplers/
    block_cache.py: one [B, H_kv, L, D] buffer per layer, allocated at the first refresh): the block's first step
    writes them all, and a prefix-cached step overwrites the block and what lies right of it in place. A prefix
    cache could keep only what lies left of the block (at most prompt + generation - one block): a lower bound
    this model does not use, since it is not what the runs hold."""
    if work.cache == "none":
        return 0
    if work.cache not in ("prefix", "dual"):
        raise ValueError(f"unknown cache {work.cache!r}; allowed: none, prefix, dual")
    model_batch = 2 * work.batch if work.cfg_scale > 0.0 else work.batch
    return kv_cache_bytes(shape, batch=model_batch, positions=work.seq_len, element_bytes=work.element_bytes)


def dream_memory(shape: ModelShape, work: Workload) -> MemoryFootprint:
    """Peak = weights + the larger of one step's layer activations (over prompt + generation; no KV cache) and its
    logits stage, at the first step (every generated position still masked).

    Logits stage of `_sample`: the logits over `logits_positions_of(work)` per sequence (capped at prompt +
    generation), the masked positions' gathered logits, and `sample_tokens`' buffers over them
    (`roofline.dream.dream_sampler_buffer_bytes_per_element`); `origin` samples only the positions it commits, at
    most the schedule's share (1 - eps) / steps of them, counted here as all of them (a bound from above)."""
    seq, gen_len, eb = work.seq_len, work.gen_len, work.element_bytes
    head = min(logits_positions_of(work), seq)
    per_position = head * eb + gen_len * eb + gen_len * dream_sampler_buffer_bytes_per_element(work)
    return footprint(shape, work, kv=0, activations=layer_activation_bytes(shape, work.batch * seq, eb),
                     logits=work.batch * shape.vocab_size * per_position)


def block_diffusion_memory(shape: ModelShape, work: Workload) -> MemoryFootprint:
    """Peak = weights + the KV cache + the larger of a forward's layer activations (the prefill's prompt blocks, or a
    block) and its logits stage.

    The cache is one buffer of every position the generation reaches (the prompt's whole blocks and every block
    decoded), allocated at the first forward, as the workers' BlockDiffusionCache is. The logits stage of an
    in-block forward: the sub-block's logits, their probabilities and the argmax's copy with the mask excluded
    (temperature > 0: the scaled logits, the sort's values and int64 indices, the cumulative sums)."""
    plan, batch, eb = block_plan(work), work.batch, work.element_bytes
    kv = kv_cache_bytes(shape, batch=batch, positions=plan.prefill_length + plan.max_new_tokens, element_bytes=eb)
    activations = layer_activation_bytes(shape, batch * max(plan.prefill_length, plan.block_length), eb)
    per_element = 3 * eb + (2 * eb + 8 + eb if work.temperature > 0 else 0)
    logits = batch * plan.sub_block_length * shape.vocab_size * per_element
    return footprint(shape, work, kv=kv, activations=activations, logits=logits)
