"""LLaMA's compiled decode over the live prefix on a real CUDA device (skipped elsewhere; `just test-gpu`).

In buckets of 256 positions, each compiled and recorded as a CUDA graph (reduce-overhead's cudagraph trees):
the replayed decode gives the eager loop's tokens, with and without a padded row, and a generation run frozen,
as a timed repetition is, records nothing. Each test compiles two shapes, the most of the device tests' time.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from tests.gpu.findings import record_finding
from tests.gpu.small import peaked_small, random_prompt

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("padded", [False, True])
def test_llama_live_decode_gives_the_eager_tokens_and_records_nothing_when_timed(padded: bool) -> None:
    """Prompt 250 + 8 new tokens: decode steps make the sequence 251-257 long, so the live lengths fall in the
    bucket 256 (six steps) and, for the last step alone, all 258 positions (the capacity): a bucket met once
    per generation. reduce-overhead records a graph on its second call; the preparation makes that call (and a
    replay) itself in the first generation, so the second, run frozen, records nothing and replays both."""
    from workers.samplers import ar_generate, ar_steps
    from workers.samplers.compiled import CompiledDecode

    loaded = peaked_small("llama")
    prompt = random_prompt(4, 250)
    mask = torch.ones_like(prompt)
    if padded:
        mask[0, :37] = 0
    mask_arg = mask if padded else None
    with torch.inference_mode():
        eager = ar_generate(loaded.model, prompt, mask_arg, n_new=8)
        compiled = CompiledDecode(loaded.model, batch=4, capacity=258, decode_attention="live")
        for frozen in (False, True):
            decoder = ar_steps(loaded.model, prompt, mask_arg, n_new=8, compiled=compiled)
            with compiled.preparation.frozen() if frozen else contextlib.nullcontext():
                for _ in decoder:
                    pass
            assert torch.equal(decoder.sequences, eager)
    assert compiled.graphs == 2 and len(compiled.preparation.prepared) == 2
    record_finding("llama_live_decode_token_exact", padded=padded, preparation_s=compiled.preparation_s,
                   kernel=compiled.kernel)  # fmt: skip
