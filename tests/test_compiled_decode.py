"""LLaMA's compile variant: the decode step under torch.compile (CPU inductor here) gives vanilla's tokens."""

from __future__ import annotations

import pytest
import torch

from tests.sampler_models import left_padded_prompts, tiny_model
from workers.measure.preparation import Preparation, PreparationInTimedRegion
from workers.samplers import ar_generate, ar_steps
from workers.samplers.compiled import PREPARING_CALLS, CompiledDecode

N_NEW = 10


@pytest.mark.slow
def test_compiled_decode_matches_vanilla_and_compiles_once() -> None:
    """Padded batch of 3, greedy: the same tokens as the eager loop over the preallocated cache, in two
    generations that share one compilation (the second prepares nothing: its preparation_s is the first's)."""
    model = tiny_model(bidirectional=False)
    ids, mask = left_padded_prompts([5, 8, 3])
    vanilla = ar_generate(model, ids, mask, n_new=N_NEW)
    compiled = CompiledDecode(model, batch=3, capacity=ids.shape[1] + N_NEW)
    for _ in range(2):
        decoder = ar_steps(model, ids, mask, n_new=N_NEW, compiled=compiled)
        for _ in decoder:
            pass
        assert torch.equal(decoder.sequences, vanilla)
        assert compiled.preparation_s is not None and compiled.preparation_s > 0
    first = compiled.preparation_s
    decoder = ar_steps(model, ids, mask, n_new=N_NEW, compiled=compiled)
    for _ in decoder:
        pass
    assert compiled.preparation_s == first and len(compiled.preparation.prepared) == 1
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    assert decoder.cache_bytes == 2 * config.num_hidden_layers * 3 * config.num_key_value_heads * (8 + N_NEW) * head_dim * 4


@pytest.mark.slow
def test_a_new_signature_runs_until_replayed_while_prepared_and_the_cache_stays_in_place() -> None:
    """CUDA's cudagraph trees record a step on its second call, so a new signature is called three times while
    it is prepared (warm-up, record, replay) and a bucket met once per generation is never recorded in a timed
    repetition. The static cache's write position is rewound between the calls: forced to three calls here,
    the tokens are still vanilla's, and only the first decode step calls the compiled step more than once."""
    assert PREPARING_CALLS["cuda"] == 3
    model = tiny_model(bidirectional=False)
    ids, mask = left_padded_prompts([5, 8, 3])
    vanilla = ar_generate(model, ids, mask, n_new=N_NEW)
    compiled = CompiledDecode(model, batch=3, capacity=ids.shape[1] + N_NEW, preparing_calls=3)
    calls: list[int] = []
    step = compiled._step
    compiled._step = lambda *args: calls.append(1) or step(*args)
    decoder = ar_steps(model, ids, mask, n_new=N_NEW, compiled=compiled)
    for _ in decoder:
        pass
    assert torch.equal(decoder.sequences, vanilla)
    assert len(calls) == 3 + (N_NEW - 2)  # N_NEW - 1 decode steps, the first called three times


def test_a_frozen_ledger_refuses_a_new_signature_before_compiling_it() -> None:
    """Inside a timed repetition a decode signature never prepared is an error naming it, raised before any
    compilation starts."""
    model = tiny_model(bidirectional=False)
    ids, mask = left_padded_prompts([5, 8, 3])
    preparation = Preparation()
    compiled = CompiledDecode(model, batch=3, capacity=ids.shape[1] + N_NEW, preparation=preparation)
    decoder = ar_steps(model, ids, mask, n_new=N_NEW, compiled=compiled)
    next(decoder)  # the prefill runs eagerly
    with pytest.raises(PreparationInTimedRegion, match=r"decode step \(batch 3, 18 attended positions\)"):
        with preparation.frozen():
            next(decoder)
    assert compiled.graphs == 0 and preparation.prepared == []


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
