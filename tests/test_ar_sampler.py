"""The autoregressive decode loop: token-exact with generate(), prefill then decodes, n_new tokens."""

from __future__ import annotations

from functools import cache

import pytest
import torch

from tests.sampler_models import EOS_ID, VOCAB_SIZE, left_padded_prompts, tiny_model
from workers.samplers import ArStep, ar_generate, ar_steps
from workers.samplers.kv_cache import PreallocatedCache

N_NEW = 24
PROMPT_LENGTHS = [5, 9, 2, 7]  # left-padded to 9


@cache
def llama(attn: str = "sdpa") -> torch.nn.Module:
    return tiny_model(bidirectional=False, seed=1, attn=attn)


def _prompts(padded: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS if padded else [9] * 4, seed=2)
    return ids, (mask if padded else None)


def _generate(ids: torch.Tensor, mask: torch.Tensor | None, attn: str = "sdpa", **kwargs) -> torch.Tensor:
    attention_mask = torch.ones_like(ids) if mask is None else mask
    return llama(attn).generate(ids, attention_mask=attention_mask, max_new_tokens=N_NEW, **kwargs)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("padded", [False, True])
def test_greedy_equals_generate_with_eos_as_a_plain_token(padded: bool, attn: str) -> None:
    ids, mask = _prompts(padded)
    ours = ar_generate(llama(attn), ids, mask, n_new=N_NEW)
    assert torch.equal(ours, _generate(ids, mask, attn, do_sample=False, eos_token_id=None))


@pytest.mark.parametrize("padded", [False, True])
def test_greedy_with_eos_suppressed_equals_generate_min_new_tokens(padded: bool) -> None:
    """generate(min_new_tokens=N, max_new_tokens=N) bans EOS for all N steps; so does logits_suppress_ids."""
    ids, mask = _prompts(padded)
    ours = ar_generate(llama(), ids, mask, n_new=N_NEW, logits_suppress_ids=(EOS_ID,))
    assert torch.equal(ours, _generate(ids, mask, do_sample=False, min_new_tokens=N_NEW))
    assert not bool((ours[:, ids.shape[1] :] == EOS_ID).any())


def test_exactly_n_new_tokens_even_if_eos_appears() -> None:
    """Take a token the model emits early as its EOS: generate() stops there, the loop goes on to n_new."""
    ids, mask = _prompts(padded=True)
    ours = ar_generate(llama(), ids, mask, n_new=N_NEW)
    new = ours[:, ids.shape[1] :]  # [B, N]
    assert new.shape == (len(PROMPT_LENGTHS), N_NEW)
    eos = int(new[0, 2])
    first = int((new[0] == eos).nonzero()[0])  # where generate() stops row 0
    stopped = _generate(ids, mask, do_sample=False, eos_token_id=eos, pad_token_id=VOCAB_SIZE - 2)
    stopped_new = stopped[0, ids.shape[1] :]
    assert torch.equal(stopped_new[: first + 1], new[0, : first + 1])
    assert bool((stopped_new[first + 1 :] == VOCAB_SIZE - 2).all())  # generate() padded the rest
    assert not bool((new[0, first + 1 :] == VOCAB_SIZE - 2).all())  # the loop generated it


def test_iterator_prefill_then_decodes() -> None:
    ids, mask = _prompts(padded=True)
    decoder = ar_steps(llama(), ids, mask, n_new=5)
    first = next(decoder)
    assert first == ArStep(step=0, phase="prefill")
    assert isinstance(decoder.cache, PreallocatedCache) and decoder.cache.get_seq_length() == ids.shape[1]
    assert decoder.sequences.shape == (4, ids.shape[1] + 1)
    rest = list(decoder)
    assert [r.step for r in rest] == [1, 2, 3, 4] and {r.phase for r in rest} == {"decode"}
    assert decoder.done and decoder.cache.get_seq_length() == ids.shape[1] + 4  # the last token is never fed
    with pytest.raises(StopIteration):
        next(decoder)
    assert torch.equal(decoder.sequences, ar_generate(llama(), ids, mask, n_new=5))


@pytest.mark.parametrize("padded", [False, True])
def test_decode_writes_the_new_token_in_place_and_never_concatenates_the_cache(
    padded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DynamicCache copies the whole cache (torch.cat per layer, K and V) at every token; the loop's
    preallocated cache writes only the new position into buffers allocated once at the prefill."""
    ids, mask = _prompts(padded)
    decoder = ar_steps(llama(), ids, mask, n_new=6)
    next(decoder)  # the prefill allocates the buffers
    layer = decoder.cache.layers[0]
    buffer = layer.keys.untyped_storage().data_ptr()
    along_positions: list[tuple[int, ...]] = []  # [B, H, S, D] tensors concatenated along S
    real_cat = torch.cat

    def counting_cat(tensors, dim=0, *args, **kwargs):
        if all(t.ndim == 4 for t in tensors) and dim in (-2, 2):
            along_positions.append(tuple(t.shape[-2] for t in tensors))
        return real_cat(tensors, dim, *args, **kwargs)

    monkeypatch.setattr(torch, "cat", counting_cat)
    for _ in decoder:
        pass
    monkeypatch.undo()
    assert along_positions == []
    assert layer.keys.untyped_storage().data_ptr() == buffer and layer.get_seq_length() == ids.shape[1] + 5
    theirs = ar_generate(llama(), ids, mask, n_new=6, cache="dynamic")
    assert torch.equal(decoder.sequences, theirs)  # same tokens as generate()'s own cache


def test_seeded_sampling_is_reproducible_and_matches_generate() -> None:
    ids, mask = _prompts(padded=True)
    draws = [
        ar_generate(
            llama(), ids, mask, n_new=N_NEW, temperature=0.8, generator=torch.Generator().manual_seed(s)
        )
        for s in (3, 3, 4)
    ]
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    # Without a generator the draw comes from the global RNG, exactly as generate(do_sample=True) draws it.
    torch.manual_seed(9)
    ours = ar_generate(llama(), ids, mask, n_new=N_NEW, temperature=0.8)
    torch.manual_seed(9)
    theirs = _generate(ids, mask, do_sample=True, temperature=0.8, top_k=None, top_p=None, eos_token_id=None)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_new": 0}, "n_new must be positive"),
        ({"n_new": 4, "temperature": -0.1}, "temperature"),
        ({"n_new": 4, "logits_suppress_ids": (VOCAB_SIZE,)}, "vocabulary"),
    ],
)
def test_bad_arguments_are_errors(kwargs: dict, message: str) -> None:
    ids, mask = _prompts(padded=True)
    with pytest.raises(ValueError, match=message):
        ar_steps(llama(), ids, mask, **kwargs)


def test_attention_mask_must_match_prompt() -> None:
    ids, mask = _prompts(padded=True)
    with pytest.raises(ValueError, match="shape"):
        ar_steps(llama(), ids, mask[:, 1:], n_new=4)
