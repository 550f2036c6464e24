"""Model shapes shared by the workers (to build models) and the roofline (to cost them)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Arch = Literal["llama", "llada"]


class ModelShape(BaseModel):
    """The architectural numbers that decide a decoder's cost; LLaMA and LLaDA share this layout."""

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
        """Parameters of a LLaMA-layout decoder (embeddings, layers, final norm, LM head)."""
        d, f = self.hidden_size, self.intermediate_size
        kv = self.num_kv_heads * self.head_dim
        attention = d * d * 2 + d * kv * 2  # q, o; k, v
        mlp = 3 * d * f  # gate, up, down
        norms = 2 * d
        layers = self.num_layers * (attention + mlp + norms)
        embeddings = self.vocab_size * d
        head = 0 if self.tie_word_embeddings else self.vocab_size * d
        return embeddings + layers + d + head


# Vocabulary of the tokenizer that ships with the offline BERT package; the synthetic models use it,
# so their vocab must cover it exactly.
MINILM_VOCAB_SIZE = 30522

# Published shapes: Meta-Llama-3-8B config.json and GSAI-ML/LLaDA-8B-Base config.json.
_LLAMA_8B = ModelShape(
    hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=8, intermediate_size=14336,
    vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
)
_LLADA_8B = ModelShape(
    hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=32, intermediate_size=12288,
    vocab_size=126464, max_position_embeddings=4096, rope_theta=500000.0, rms_norm_eps=1e-5,
)

PRESETS: dict[tuple[Arch, str], ModelShape] = {
    ("llama", "8b"): _LLAMA_8B,
    ("llada", "8b"): _LLADA_8B,
    # tiny: seconds on 2 CPU cores; small: the benchmark size (4 layers, d=512).
    ("llama", "tiny"): ModelShape(
        hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=192,
        vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=2048,
    ),
    ("llada", "tiny"): ModelShape(
        hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4, intermediate_size=176,
        vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=2048,
    ),
    ("llama", "small"): ModelShape(
        hidden_size=512, num_layers=4, num_heads=8, num_kv_heads=2, intermediate_size=1792,
        vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=4096,
    ),
    ("llada", "small"): ModelShape(
        hidden_size=512, num_layers=4, num_heads=8, num_kv_heads=8, intermediate_size=1536,
        vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=4096,
    ),
}

PRESET_NAMES: tuple[str, ...] = ("tiny", "small", "8b")


def preset_shape(arch: Arch, name: str) -> ModelShape:
    """Look up a named preset; the error lists what exists."""
    try:
        return PRESETS[(arch, name)]
    except KeyError:
        raise KeyError(
            f"unknown synthetic preset {name!r} for arch {arch!r}; allowed: {', '.join(PRESET_NAMES)}"
        ) from None
