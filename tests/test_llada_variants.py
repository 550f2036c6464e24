"""LLaDA's accelerated variants: the KV caches and the confidence rules of parallel decoding.

With its accelerating features switched off (a cache refilled before every step, no confidence rule) each
variant is token-exact with vanilla; with them on, the rules themselves hold.
"""

from __future__ import annotations

import itertools
from functools import cache

import pytest
import torch

from tests.sampler_models import MASK_ID, left_padded_prompts, tiny_model
from workers.samplers import llada_generate, llada_steps, transfer_schedule
from workers.samplers.llada.parallel import parallel_commit

PROMPT_LENGTHS = [5, 8, 3]  # B=3, left-padded to 8
GEN = {"gen_length": 24, "block_length": 8, "steps": 12, "mask_id": MASK_ID}  # 3 blocks of 4 steps
# The random tiny model's confidences are low (vocab 128): this threshold passes some positions, not all.
LOW_THRESHOLD = 0.1


@cache
def llada_model() -> torch.nn.Module:
    return tiny_model(bidirectional=True)


def _generate(*, padded: bool = True, seed: int = 0, **kw) -> torch.Tensor:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    return llada_generate(
        llada_model(), ids, mask if padded else None, generator=torch.Generator().manual_seed(seed), **GEN, **kw
    )


# --- switched off, every variant is vanilla --------------------------------------------------------------


@pytest.mark.parametrize(
    ("cache_mode", "padded", "cfg_scale", "temperature"),
    [(c, p, *opts) for c, p, opts in itertools.product(["prefix", "dual"], [False, True], [(0.0, 0.0), (1.5, 0.9)])],
)
def test_cached_forward_refreshed_every_step_is_vanilla(
    cache_mode: str, padded: bool, cfg_scale: float, temperature: float
) -> None:
    """Every step's logits come from the cached forward (only the window, or the window and what lies right
    of it, fed) over a freshly filled cache: the same tokens as vanilla, batch 3, block-only logits."""
    kw = {"padded": padded, "cfg_scale": cfg_scale, "temperature": temperature}
    assert torch.equal(_generate(cache=cache_mode, refresh_every_step=True, **kw), _generate(**kw))


@pytest.mark.parametrize("cache_mode", ["prefix", "dual"])
def test_cached_full_logits_refreshed_every_step_is_vanilla(cache_mode: str) -> None:
    assert torch.equal(
        _generate(cache=cache_mode, refresh_every_step=True, full_logits=True), _generate(full_logits=True)
    )


def test_cached_with_masks_in_the_prompt_is_vanilla() -> None:
    """Infilling: the window reaches left of the block, and a cached forward feeds from there."""
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    ids[:, -3] = MASK_ID
    vanilla = llada_generate(llada_model(), ids, mask, **GEN)
    for cache_mode in ("prefix", "dual"):
        cached = llada_generate(llada_model(), ids, mask, cache=cache_mode, refresh_every_step=True, **GEN)
        assert torch.equal(cached, vanilla)


def test_a_threshold_above_every_confidence_is_vanilla() -> None:
    """θ = 1 passes nothing (no confidence of a 128-way softmax reaches 1 here): the schedule's count decides,
    and the sort-based commit picks the same positions as vanilla's topk."""
    assert torch.equal(_generate(threshold=1.0), _generate())
    assert torch.equal(_generate(factor=1e-6), _generate())


# --- switched on: what the caches do ----------------------------------------------------------------------


@pytest.mark.parametrize("cache_mode", ["prefix", "dual"])
def test_cache_feeds_fewer_positions_after_the_block_start(cache_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block's first step feeds the whole sequence; later ones the window (dual) or the window to the end
    (prefix). One forward per step, and the cache holds keys and values of every position of every layer."""
    model = llada_model()
    fed: list[int] = []
    original = model.forward

    def spy(input_ids: torch.Tensor, **kwargs):
        fed.append(input_ids.shape[1])
        return original(input_ids, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    sampler = llada_steps(model, ids, mask, cache=cache_mode, **GEN)
    records = list(sampler)
    length, block = 8 + 24, 8
    later = [length - 8 - b * block for b in range(3)] if cache_mode == "prefix" else [block] * 3
    assert fed == [n for b in range(3) for n in [length] + [later[b]] * 3]
    assert [r.forwards for r in records] == [1] * 12 and sampler.forwards == 12
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    assert sampler.cache_bytes == 2 * config.num_hidden_layers * 3 * config.num_key_value_heads * length * head_dim * 4
    assert llada_steps(model, ids, mask, **GEN).cache_bytes is None


def test_stale_cache_changes_tokens_but_commits_the_schedule() -> None:
    """Without the refresh, later steps read keys and values from the block's first step: an approximation
    (the tokens differ on this random model), still committing exactly the schedule, block by block."""
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    for cache_mode in ("prefix", "dual"):
        sampler = llada_steps(llada_model(), ids, mask, cache=cache_mode, **GEN)
        records = list(sampler)
        assert [r.committed for r in records] == [3 * k for k in transfer_schedule(8, 4)] * 3
        assert not torch.equal(sampler.x, _generate())
        assert not bool((sampler.generation == MASK_ID).all(dim=1).any())


# --- switched on: the confidence rules --------------------------------------------------------------------


@pytest.mark.parametrize("cache_mode", ["none", "prefix", "dual"])
@pytest.mark.parametrize("rule", [{"threshold": LOW_THRESHOLD}, {"factor": 4.0}])
def test_parallel_rule_commits_at_least_the_schedule_and_ends_blocks_early(cache_mode: str, rule: dict) -> None:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    sampler = llada_steps(llada_model(), ids, mask, cache=cache_mode, **rule, **GEN)
    schedule, prompt = transfer_schedule(8, 4), ids.shape[1]
    records = []
    while not sampler.done:
        sampler.prepare_step()
        lo = prompt + sampler.block * 8
        masks = (sampler.x[:, lo : lo + 8] == MASK_ID).sum(dim=1).tolist()  # per row, before the step
        record = next(sampler)
        i = sum(1 for r in records if r.block == record.block)
        # each row commits >= the schedule's count (all its masks if fewer are left), and no more than it has
        assert sum(min(schedule[i], m) for m in masks) <= record.committed <= sum(masks)
        records.append(record)
    by_block = {b: [r for r in records if r.block == b] for b in range(3)}
    assert sorted(by_block) == [0, 1, 2] and all(1 <= len(steps) <= 4 for steps in by_block.values())
    assert len(records) < 12, "the rule never beat the schedule: pick a lower threshold / higher factor"
    assert sampler.forwards == len(records) == sum(r.forwards for r in records)
    assert sampler.done and [r.step for r in records] == list(range(len(records)))
    if cache_mode != "none":
        assert sampler.cache_bytes is not None and sampler.cache_bytes > 0


def test_rows_finish_a_block_at_different_steps() -> None:
    """Batch > 1: a row with no masks left commits nothing while the others go on; the block ends when all
    rows are done, so the batch's forwards are those of its slowest row."""
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    sampler = llada_steps(llada_model(), ids, mask, threshold=LOW_THRESHOLD, **GEN)
    prompt = ids.shape[1]
    finished: dict[int, list[int | None]] = {}  # block -> the step at which each row had no mask left
    for record in sampler:
        lo = prompt + record.block * 8
        open_rows = (sampler.x[:, lo : lo + 8] == MASK_ID).any(dim=1).tolist()
        rows = finished.setdefault(record.block, [None] * 3)
        for row, is_open in enumerate(open_rows):
            if not is_open and rows[row] is None:
                rows[row] = record.step
    assert all(None not in rows for rows in finished.values())
    assert any(len(set(rows)) > 1 for rows in finished.values()), "rows finished together: pick another threshold"


def test_parallel_commit_rules() -> None:
    inf = float("-inf")
    confidence = torch.tensor(
        [
            [0.95, 0.2, 0.91, inf, 0.5],  # two pass θ=0.9
            [0.1, 0.2, 0.3, 0.05, 0.4],  # none pass: the schedule's 2, the most confident
            [inf, inf, 0.99, inf, inf],  # one candidate left: at most 1
            [inf, inf, inf, inf, inf],  # done: nothing
        ]
    )
    chosen, counts = parallel_commit(confidence, 2, threshold=0.9, factor=None)
    assert counts.tolist() == [2, 2, 1, 0]
    assert chosen.tolist() == [
        [True, False, True, False, False],
        [False, False, True, False, True],
        [False, False, True, False, False],
        [False] * 5,
    ]
    # factor f=1: the n-th confidence must reach 1 - 1/(n+1): 0.5, 0.667, 0.75, 0.8, ...
    ranked = torch.tensor([[0.9, 0.7, 0.76, 0.1, 0.85]])  # sorted: 0.9, 0.85, 0.76, 0.7, 0.1
    _, counts = parallel_commit(ranked, 1, threshold=None, factor=1.0)
    assert counts.tolist() == [3]  # 0.9 >= .5, 0.85 >= .667, 0.76 >= .75, 0.7 < .8
    _, counts = parallel_commit(ranked, 4, threshold=None, factor=1.0)
    assert counts.tolist() == [4]  # never fewer than the schedule


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cache": "full"}, "Unknown cache"),
        ({"threshold": 0.9, "factor": 1.0}, "not both"),
        ({"threshold": 1.5}, "threshold"),
        ({"factor": 0.0}, "factor"),
        ({"threshold": 0.9, "remasking": "random"}, "low_confidence"),
    ],
)
def test_variant_settings_are_checked(kwargs: dict, message: str) -> None:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    with pytest.raises(ValueError, match=message):
        llada_steps(llada_model(), ids, mask, **GEN, **kwargs)
