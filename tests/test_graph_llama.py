"""LLaMA's compiled decode with `decode_attention: live` (CPU inductor here; CUDA graphs in tests/gpu): the
eager loop's tokens, attending only over the live positions in buckets, with each KV head read once."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaForCausalLM

from tests.sampler_models import left_padded_prompts, tiny_config
from workers.models.attention import make_sync_free
from workers.samplers import ar_generate, ar_steps
from workers.samplers.compiled import CompiledDecode
from workers.samplers.live_cache import LiveCache, bucketed

N_NEW = 10


def gqa_model() -> LlamaForCausalLM:
    """The tiny causal model with LLaMA-3's grouping (4 query heads per KV head... here 2 per 1 of 2)."""
    torch.manual_seed(0)
    config = tiny_config(bidirectional=False)
    config.num_key_value_heads = 2
    config.initializer_range = 0.2
    return make_sync_free(LlamaForCausalLM(config).eval())


def test_bucketed_rounds_up_to_the_bucket_and_stops_at_capacity() -> None:
    assert [bucketed(n, bucket=256, capacity=768) for n in (1, 256, 257, 513, 768)] == [256, 256, 512, 768, 768]
    assert bucketed(1100, bucket=256, capacity=1200) == 1200


@pytest.mark.slow
@pytest.mark.parametrize("padded", [True, False])
def test_live_decode_attention_matches_the_eager_loop(padded: bool) -> None:
    """Buckets of 4 positions over 8 + 10: the step compiles once per bucket the decode reaches (9-18 → 12,
    16, 18), in the first generation only; both generations give the eager loop's tokens."""
    model = gqa_model()
    ids, mask = left_padded_prompts([5, 8, 3])
    mask = mask if padded else None
    eager = ar_generate(model, ids, mask, n_new=N_NEW)
    compiled = CompiledDecode(model, batch=3, capacity=ids.shape[1] + N_NEW, decode_attention="live", bucket=4)
    assert "grouped" in compiled.kernel
    for _ in range(2):
        decoder = ar_steps(model, ids, mask, n_new=N_NEW, compiled=compiled)
        for _ in decoder:
            pass
        assert torch.equal(decoder.sequences, eager)
        assert compiled.graphs == 3
    assert isinstance(decoder.cache, LiveCache) and all(layer.writes == 2 for layer in decoder.cache.layers)
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    assert decoder.cache_bytes == 2 * config.num_hidden_layers * 3 * 2 * (8 + N_NEW) * head_dim * 4


def test_live_decode_attention_needs_the_sync_free_attention() -> None:
    torch.manual_seed(0)
    plain = LlamaForCausalLM(tiny_config(bidirectional=False)).eval()
    with pytest.raises(ValueError, match="make_sync_free"):
        CompiledDecode(plain, batch=1, capacity=16, decode_attention="live")


def test_live_cache_decode_mask_covers_written_non_padding_positions() -> None:
    cache = LiveCache(1, 8, device=torch.device("cpu"), bucket=4)
    padding = torch.tensor([[0, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]])
    cache.begin(3, padding)
    cache.step(5)  # the token that makes the sequence 5 long goes to position 4; the bucket is 8
    assert cache.live == 8
    assert cache.decode_mask()[:, 0, 0].tolist() == [
        [False, True, True, True, True, False, False, False],
        [True, True, True, True, True, False, False, False],
    ]
