"""A transformers Qwen2Config with exactly a ModelShape's numbers: synthetic Qwen2.5 and Dream models.

Qwen2 is the LLaMA layout plus a bias on the query, key and value projections (never on the output
projection or the MLP); Dream-v0 is the same network made bidirectional (workers/models/dream_model.py).
The roofline costs the same numbers, so a synthetic 7B shape and its cost cannot drift apart.
"""

from __future__ import annotations

from transformers import Qwen2Config

from specs.shapes import ModelShape


def qwen2_config_for_shape(shape: ModelShape) -> Qwen2Config:
    """A Qwen2Config with exactly the shape's numbers, full attention in every layer (no sliding window).

    Qwen2's attention always carries q/k/v biases, so a shape that says it has none (`attention_bias`
    false, a LLaMA-layout shape) is refused rather than built with biases it does not cost.
    """
    if not shape.attention_bias:
        raise ValueError(
            "attention_bias: a Qwen2/Dream model always has q/k/v biases; this shape has none "
            "(build it as a LLaMA-layout model, or set attention_bias: true)"
        )
    return Qwen2Config(
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
        use_sliding_window=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
