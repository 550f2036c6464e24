"""Fast-dLLM v2's training objective on constructed cases: the block-wise mask by hand, per-block noise,
complementary pairs, and the token shift against transformers' causal-LM loss (the official loss)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.loss.loss_utils import ForCausalLMLoss

from miniature.block_diffusion import (
    block_diffusion_bound,
    block_diffusion_loss,
    block_forward_mask,
    complementary_pair,
    pair_positions,
    training_attention_mask,
)
from miniature.objectives import MASK_EPSILON

MASK = 7


def _rows(*rows: str) -> torch.Tensor:
    return torch.tensor([[c == "1" for c in row.replace(" ", "")] for row in rows])


def test_the_training_mask_is_block_diff_mask_on_a_hand_built_case() -> None:
    # L = 4, blocks of 2: x_t at 0..3, x_0 at 4..7
    expected = _rows(
        "1100 0000",  # x_t, block 0: its own block; no clean block before it
        "1100 0000",
        "0011 1100",  # x_t, block 1: its own block and x_0's block 0
        "0011 1100",
        "0000 1100",  # x_0, block 0: block-causal inside x_0
        "0000 1100",
        "0000 1111",  # x_0, block 1
        "0000 1111",
    )
    assert torch.equal(training_attention_mask(4, 2), expected)


def test_two_noisy_copies_share_one_clean_copy_and_never_see_each_other() -> None:
    # L = 2, blocks of 1: x_t at 0..1, x_t' at 2..3, x_0 at 4..5
    expected = _rows("10 00 00", "01 00 10", "00 10 00", "00 01 10", "00 00 10", "00 00 11")
    assert torch.equal(training_attention_mask(2, 1, noisy_copies=2), expected)
    single = training_attention_mask(8, 4)  # each copy's rows are the official pair's, keys mapped
    shared = training_attention_mask(8, 4, noisy_copies=2)
    for copy in (0, 1):
        rows = shared[copy * 8 : copy * 8 + 8]
        assert torch.equal(rows[:, copy * 8 : copy * 8 + 8], single[:8, :8])
        assert torch.equal(rows[:, 16:], single[:8, 8:])
        assert not rows[:, (1 - copy) * 8 : (1 - copy) * 8 + 8].any()


def test_positions_restart_in_each_copy() -> None:
    assert pair_positions(3).tolist() == [[0, 1, 2, 0, 1, 2]]
    assert pair_positions(2, noisy_copies=2).tolist() == [[0, 1, 0, 1, 0, 1]]


def test_a_length_that_is_not_whole_blocks_is_refused() -> None:
    with pytest.raises(ValueError, match="whole number of blocks"):
        training_attention_mask(10, 4)
    with pytest.raises(ValueError, match="whole number of blocks"):
        block_forward_mask(torch.ones(1, 10, dtype=torch.long), 4, MASK, torch.Generator())


def test_each_block_draws_its_own_rate() -> None:
    ids = torch.arange(64).repeat(3000, 1) % 5 + 1  # [3000, 64], no mask ids in it
    noisy, masked, p_mask = block_forward_mask(ids, 16, MASK, torch.Generator().manual_seed(0))
    blocks = p_mask.view(3000, 4, 16)
    assert torch.all(blocks == blocks[..., :1])  # constant inside a block
    assert (blocks[:, 0, 0] != blocks[:, 1, 0]).float().mean() > 0.99  # and not shared between blocks
    assert p_mask.min() >= MASK_EPSILON and p_mask.max() <= 1.0
    assert torch.equal(noisy == MASK, masked) and torch.equal(noisy[~masked], ids[~masked])
    share = masked.view(3000, 4, 16).float().mean(-1)
    assert abs(float(share.mean() - blocks[..., 0].mean())) < 0.01  # E[masked | p] = p


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 4), blocks=st.integers(1, 4), block_size=st.integers(1, 8), seed=st.integers(0, 2**31))
def test_a_complementary_pair_masks_every_position_exactly_once(batch: int, blocks: int, block_size: int, seed: int) -> None:
    ids = torch.randint(0, MASK, (batch, blocks * block_size), generator=torch.Generator().manual_seed(seed))
    _, masked, _ = block_forward_mask(ids, block_size, MASK, torch.Generator().manual_seed(seed))
    noisy, both = complementary_pair(ids, masked, MASK)
    assert noisy.shape == both.shape == (2 * batch, blocks * block_size)
    assert torch.equal(both[:batch] ^ both[batch:], torch.ones_like(masked))  # once per pair, never twice
    assert torch.equal(both[:batch], masked)
    assert torch.equal(noisy == MASK, both)
    assert torch.equal(torch.where(both, ids.repeat(2, 1), noisy), ids.repeat(2, 1))


def _next_token_logits(ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """Logits sure of the token after each position, as an AR head trained to perfection would be. [B, L, V]"""
    logits = torch.full((*ids.shape, vocab), -30.0)
    logits[:, :-1].scatter_(-1, ids[:, 1:, None], 30.0)
    return logits


def test_the_token_shift_reads_each_masked_token_from_the_position_before_it() -> None:
    ids = torch.tensor([[3, 1, 4, 1, 5, 2]])
    masked = torch.tensor([[False, True, True, False, True, True]])
    assert float(block_diffusion_loss(_next_token_logits(ids, 8), ids, masked)) < 1e-6
    same_position = torch.full((1, 6, 8), -30.0).scatter_(-1, ids[..., None], 30.0)  # no shift: wrong
    assert float(block_diffusion_loss(same_position, ids, masked)) > 10


def test_position_zero_is_never_a_target() -> None:
    ids = torch.tensor([[3, 1, 4, 1]])
    only_first = torch.tensor([[True, False, False, False]])
    logits = torch.zeros(1, 4, 8)
    assert float(block_diffusion_bound(logits, ids, only_first, torch.full((1, 4), 0.5))) == 0.0


def test_the_loss_is_transformers_causal_lm_loss_on_the_masked_labels() -> None:
    """The official forward labels the masked tokens (-100 elsewhere) and calls `self.loss_function`."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, MASK, (3, 16), generator=generator)
    _, masked, _ = block_forward_mask(ids, 8, MASK, generator)
    _, both = complementary_pair(ids, masked, MASK)
    logits = torch.randn(6, 16, 11, generator=generator)
    labels = torch.where(both, ids.repeat(2, 1), torch.full_like(both, -100, dtype=torch.long))
    official = ForCausalLMLoss(logits, labels, vocab_size=11)
    assert math.isclose(float(block_diffusion_loss(logits, ids.repeat(2, 1), both)), float(official), rel_tol=1e-6)


def test_the_bound_weights_each_block_by_its_own_rate() -> None:
    ids = torch.tensor([[1, 2, 3, 4]])  # blocks of 2: p = 0.5 for block 0, 0.25 for block 1
    p_mask = torch.tensor([[0.5, 0.5, 0.25, 0.25]])
    masked = torch.tensor([[False, True, True, False]])
    logits = torch.zeros(1, 4, 5)  # uniform: each target costs log 5
    expected = (math.log(5) / 0.5 + math.log(5) / 0.25) / 3  # ÷ B·(L−1) predicted positions
    assert math.isclose(float(block_diffusion_bound(logits, ids, masked, p_mask)), expected, rel_tol=1e-6)
