"""LLaMA's compile variant: the decode step under torch.compile (CPU inductor here) gives vanilla's tokens."""

from __future__ import annotations

import pytest
import torch

from tests.sampler_models import left_padded_prompts, tiny_model
from workers.samplers import ar_generate, ar_steps
from workers.samplers.compiled import CompiledDecode

N_NEW = 10


@pytest.mark.slow
def test_compiled_decode_matches_vanilla_and_compiles_once() -> None:
    """Padded batch of 3, greedy: the same tokens as the eager loop over the preallocated cache, in two
    generations that share one compilation (the second compiles nothing: its compile_s is the first's)."""
    model = tiny_model(bidirectional=False)
    ids, mask = left_padded_prompts([5, 8, 3])
    vanilla = ar_generate(model, ids, mask, n_new=N_NEW)
    compiled = CompiledDecode(model, batch=3, capacity=ids.shape[1] + N_NEW)
    for _ in range(2):
        decoder = ar_steps(model, ids, mask, n_new=N_NEW, compiled=compiled)
        for _ in decoder:
            pass
        assert torch.equal(decoder.sequences, vanilla)
        assert compiled.compile_s is not None and compiled.compile_s > 0
    first = compiled.compile_s
    decoder = ar_steps(model, ids, mask, n_new=N_NEW, compiled=compiled)
    for _ in decoder:
        pass
    assert compiled.compile_s == first
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    assert decoder.cache_bytes == 2 * config.num_hidden_layers * 3 * config.num_key_value_heads * (8 + N_NEW) * head_dim * 4


def test_compiled_decode_refuses_another_shape() -> None:
    model = tiny_model(bidirectional=False)
    ids, mask = left_padded_prompts([5, 8, 3])
    compiled = CompiledDecode(model, batch=2, capacity=ids.shape[1] + N_NEW)
    with pytest.raises(ValueError, match="built for batch 2"):
        ar_steps(model, ids, mask, n_new=N_NEW, compiled=compiled)


def test_preallocated_cache_reports_its_bytes() -> None:
    model = tiny_model(bidirectional=False)
    ids, mask = left_padded_prompts([5, 8, 3])
    decoder = ar_steps(model, ids, mask, n_new=N_NEW)
    assert decoder.cache_bytes == 0  # nothing allocated before the prefill
    next(decoder)
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    assert decoder.cache_bytes == 2 * config.num_hidden_layers * 3 * config.num_key_value_heads * (8 + N_NEW) * head_dim * 4
