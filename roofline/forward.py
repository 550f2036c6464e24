"""The operators of one decoder forward pass (every registry family shares the layout), in the study's cost rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from roofline.operators import (
    BYTES_PER_ELEMENT,
    Operator,
    elementwise,
    exact_causal_masked_positions,
    matmul,
    norm,
    study_causal_masked_macs,
)
from specs.shapes import ModelShape

# none: bidirectional (LLaDA) or a decode pass (one query sees the whole cache);
# study-causal: the study's correction; causal: exact causal work.
Mask = Literal["none", "study-causal", "causal"]


@dataclass(frozen=True, slots=True)
class ForwardPass:
    """What one forward pass computes: per sequence, `new_tokens` query positions attend `kv_len` positions
    (the new ones are the last of them), and the LM head maps `lm_head_positions` of them to logits."""

    batch: int
    new_tokens: int
    kv_len: int
    mask: Mask
    lm_head_positions: int


def forward_operators(
    shape: ModelShape, fp: ForwardPass, *, element_bytes: int = BYTES_PER_ELEMENT
) -> tuple[Operator, ...]:
    """Every operator of the pass, with instance counts over layers, KV heads and the batch.

    The layout is the study's (roofline-model.md): projections are W[out, in] @ X[in, tokens], so weights
    are read once per pass whatever the batch; attention is costed per KV head with its g query heads
    stacked into the rows, per sequence (no weights, so everything scales with the batch).
    Tensors take `element_bytes` each (the run's dtype). Kernel launches: one per operator per layer, and one
    fused attention kernel per layer (counted on qk; pv and softmax run inside it).
    With `shape.attention_bias` (Qwen2, Dream) q, k and v add their bias in the projection's kernel: B*S*(d + 2 kv)
    adds and d + 2 kv bias elements read per layer (`matmul(bias=True)`); o_proj has none.
    The embedding lookup (B*S rows gathered from the table) is not costed, in any family.
    """
    unary, binary = 2 * element_bytes, 3 * element_bytes
    d, f, hd = shape.hidden_size, shape.intermediate_size, shape.head_dim
    g, kv_heads, layers = shape.kv_group_size, shape.num_kv_heads, shape.num_layers
    kv_dim = kv_heads * hd
    s, lkv, b = fp.new_tokens, fp.kv_len, fp.batch
    tokens = b * s
    rows = g * s  # stacked query rows of one KV head

    if fp.mask == "study-causal":
        qk_masked = study_causal_masked_macs(rows, hd, lkv)
        pv_masked = study_causal_masked_macs(rows, lkv, hd)
        t = min(rows, lkv)
        softmax_masked = t * (t - 1) // 2
    elif fp.mask == "causal":
        softmax_masked = g * exact_causal_masked_positions(s)
        qk_masked = pv_masked = hd * softmax_masked
    else:
        qk_masked = pv_masked = softmax_masked = 0

    per_head = layers * kv_heads * b
    eb = element_bytes
    qkv_bias = shape.attention_bias
    ops = [
        matmul("q_proj", "mha_linear", d, d, tokens, count=layers, element_bytes=eb, bias=qkv_bias),
        matmul("k_proj", "mha_linear", kv_dim, d, tokens, count=layers, element_bytes=eb, bias=qkv_bias),
        matmul("v_proj", "mha_linear", kv_dim, d, tokens, count=layers, element_bytes=eb, bias=qkv_bias),
        matmul("o_proj", "mha_linear", d, d, tokens, count=layers, element_bytes=eb),
        matmul(
            "qk", "mha_attention", rows, hd, lkv, write_output=False, masked_macs=qk_masked, count=per_head,
            launches=layers, element_bytes=eb,
        ),
        matmul(
            "pv", "mha_attention", rows, lkv, hd, load_a=False, masked_macs=pv_masked, count=per_head,
            launches=0, element_bytes=eb,
        ),
        # Softmax lives inside the fused attention kernel: compute only, no DRAM traffic, so it is charged at the
        # vector roof, which must be an arithmetic rate (roofline/measured.py vector_roof).
        elementwise(
            "softmax", "nonlinear", rows, lkv, bytes_per_element=0, masked=softmax_masked, count=per_head,
            launches=0,
        ),
        elementwise("rope_q", "nonlinear", d, tokens, bytes_per_element=unary, count=layers),
        elementwise("rope_k", "nonlinear", kv_dim, tokens, bytes_per_element=unary, count=layers),
        norm("attn_norm", tokens, d, count=layers, element_bytes=eb),
        norm("ffn_norm", tokens, d, count=layers, element_bytes=eb),
        elementwise("residual_add", "nonlinear", tokens, d, bytes_per_element=binary, count=2 * layers),
        elementwise("silu", "nonlinear", tokens, f, bytes_per_element=unary, count=layers),
        elementwise("gate_mul_up", "nonlinear", tokens, f, bytes_per_element=binary, count=layers),
        matmul("gate_proj", "ffn_linear", f, d, tokens, count=layers, element_bytes=eb),
        matmul("up_proj", "ffn_linear", f, d, tokens, count=layers, element_bytes=eb),
        matmul("down_proj", "ffn_linear", d, f, tokens, count=layers, element_bytes=eb),
        norm("final_norm", tokens, d, element_bytes=eb),
    ]
    if fp.lm_head_positions:
        ops.append(matmul("lm_head", "classifier", shape.vocab_size, d, b * fp.lm_head_positions, element_bytes=eb))
    return tuple(ops)
