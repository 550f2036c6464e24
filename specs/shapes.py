"""Model shapes shared by the workers (to build models) and the roofline (to cost them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ModelShape(BaseModel):
    """The architectural numbers that decide a decoder's cost; every registry family (specs/registry.py) has this
    layout: RMSNorm, SwiGLU, RoPE, grouped-query attention, with or without a bias on the q, k and v projections
    (Qwen2 and Dream have one; o_proj never does)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    max_position_embeddings: int = Field(default=8192, gt=0)
    rope_theta: float = Field(default=500000.0, gt=0)
    rms_norm_eps: float = Field(default=1e-5, gt=0)
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # a bias on q, k and v (Qwen2 layout)

    @model_validator(mode="after")
    def _heads_divide(self) -> ModelShape:
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size: {self.hidden_size} is not divisible by num_heads {self.num_heads}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads: num_heads {self.num_heads} is not divisible by num_kv_heads {self.num_kv_heads}"
            )
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def kv_group_size(self) -> int:
        """Query heads per KV head (g in the study's roofline)."""
        return self.num_heads // self.num_kv_heads

    def parameter_count(self) -> int:
        """Parameters of the decoder (embeddings, layers, final norm, LM head)."""
        d, f = self.hidden_size, self.intermediate_size
        kv = self.num_kv_heads * self.head_dim
        attention = d * d * 2 + d * kv * 2  # q, o; k, v
        if self.attention_bias:
            attention += d + 2 * kv
        mlp = 3 * d * f  # gate, up, down
        norms = 2 * d
        layers = self.num_layers * (attention + mlp + norms)
        embeddings = self.vocab_size * d
        head = 0 if self.tie_word_embeddings else self.vocab_size * d
        return embeddings + layers + d + head


# Vocabulary of the tokenizer that ships with the offline BERT package; the synthetic models use it,
# so their vocab must cover it exactly.
MINILM_VOCAB_SIZE = 30522
