"""The miniature pair's shapes: LLaMA-3-8B and LLaDA-8B's differences, kept at a few million parameters.

LLaMA-3-8B uses grouped KV heads (32 query, 8 KV) and an FFN of 14336; LLaDA-8B uses full multi-head KV
(32/32) and an FFN of 12288, which makes the two parameter counts equal. The miniature keeps both
choices: 8 query heads, 2 KV heads and FFN 896 (3.5 × hidden, as in LLaMA-3) for the AR model; 8/8 and
FFN 768 for LLaDA. The extra K/V projections (2 × 256 × 192) equal the FFN saved (3 × 256 × 128).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from transformers import LlamaConfig

from specs.shapes import ModelShape
from workers.models.layouts import llama_config_for_shape

Arch = Literal["llama", "llada"]


@dataclass(frozen=True)
class MiniatureShape:
    arch: Arch
    vocab_size: int
    hidden_size: int = 256
    num_layers: int = 6
    num_heads: int = 8
    num_kv_heads: int = 2
    intermediate_size: int = 896
    context: int = 128
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def miniature_shape(arch: Arch, vocab_size: int, hidden_size: int = 256, num_layers: int = 6) -> MiniatureShape:
    """The AR or LLaDA member of the pair; smaller hidden sizes keep the same head and FFN ratios (tests)."""
    heads = max(4, hidden_size // 32)
    head_dim = hidden_size // heads
    llama_kv = max(1, heads // 4)
    llama_ffn = hidden_size * 7 // 2
    if arch == "llama":
        return MiniatureShape("llama", vocab_size, hidden_size, num_layers, heads, llama_kv, llama_ffn)
    extra_kv = 2 * hidden_size * (heads - llama_kv) * head_dim  # K and V grow to every head
    assert extra_kv % (3 * hidden_size) == 0, "shape ratios must let the FFN absorb the KV difference"
    return MiniatureShape("llada", vocab_size, hidden_size, num_layers, heads, heads, llama_ffn - extra_kv // (3 * hidden_size))


def llama_config(shape: MiniatureShape, special: dict[str, int]) -> LlamaConfig:
    """The transformers config both members train as (LLaDA is made bidirectional on top of it): the benchmark's
    own shape-to-config mapping, plus the pair's special ids and each member's attention direction."""
    config = llama_config_for_shape(ModelShape(
        hidden_size=shape.hidden_size, num_layers=shape.num_layers, num_heads=shape.num_heads,
        num_kv_heads=shape.num_kv_heads, intermediate_size=shape.intermediate_size, vocab_size=shape.vocab_size,
        max_position_embeddings=shape.context, rope_theta=shape.rope_theta, rms_norm_eps=shape.rms_norm_eps,
    ))  # fmt: skip
    config.eos_token_id = special["<|endoftext|>"]
    config.pad_token_id = special["<|pad|>"]
    config.use_cache = shape.arch == "llama"
    config.is_causal = shape.arch == "llama"
    return config


def parameter_count(shape: MiniatureShape) -> int:
    d, f, v = shape.hidden_size, shape.intermediate_size, shape.vocab_size
    head_dim = d // shape.num_heads
    attention = 2 * d * d + 2 * d * shape.num_kv_heads * head_dim
    per_layer = attention + 3 * d * f + 2 * d
    return shape.num_layers * per_layer + 2 * v * d + d
