"""The two training objectives on constructed batches, checked against the formulas by hand."""

from __future__ import annotations

import math

import torch

from miniature.objectives import MASK_EPSILON, forward_mask, masked_diffusion_loss, next_token_loss

MASK = 7


def test_forward_mask_uses_one_rate_per_sequence() -> None:
    ids = torch.arange(2, 6).repeat(4000, 1) % 5 + 1  # [4000, 4], no mask ids in it
    noisy, masked, p_mask = forward_mask(ids, MASK, torch.Generator().manual_seed(0))
    assert torch.all(p_mask == p_mask[:, :1])  # constant along each sequence
    assert p_mask.min() >= MASK_EPSILON and p_mask.max() <= 1.0
    assert torch.equal(noisy == MASK, masked)
    assert torch.equal(noisy[~masked], ids[~masked])
    # the masked share of a sequence follows its rate: E[masked | p] = p
    share = masked.float().mean(dim=1)
    assert abs(float(share.mean() - p_mask[:, 0].mean())) < 0.02
    high, low = p_mask[:, 0] > 0.8, p_mask[:, 0] < 0.2
    assert share[high].mean() > 0.8 and share[low].mean() < 0.2


def test_masked_loss_weights_each_masked_position_by_one_over_p_and_divides_by_all_positions() -> None:
    vocab = 5
    ids = torch.tensor([[1, 2, 3], [4, 0, 1]])
    logits = torch.zeros(2, 3, vocab)  # uniform: every masked position costs log(vocab)
    logits[1, 2, 1] = 2.0  # a confident right answer at a masked position
    masked = torch.tensor([[True, False, False], [False, True, True]])
    p_mask = torch.tensor([[0.5] * 3, [0.25] * 3])
    ce_uniform = math.log(vocab)
    ce_confident = -math.log(math.exp(2.0) / (math.exp(2.0) + vocab - 1))
    expected = (ce_uniform / 0.5 + ce_uniform / 0.25 + ce_confident / 0.25) / 6
    assert math.isclose(float(masked_diffusion_loss(logits, ids, masked, p_mask)), expected, rel_tol=1e-6)
    # unmasked positions never count, whatever their logits say
    logits[0, 1] = 50.0
    assert math.isclose(float(masked_diffusion_loss(logits, ids, masked, p_mask)), expected, rel_tol=1e-6)


def test_next_token_loss_predicts_the_following_token() -> None:
    ids = torch.tensor([[0, 1, 2]])
    logits = torch.full((1, 3, 3), -20.0)
    logits[0, 0, 1] = logits[0, 1, 2] = 20.0  # position t puts its mass on ids[t + 1]
    assert float(next_token_loss(logits, ids)) < 1e-6
    logits[0, 0, 1], logits[0, 0, 0] = -20.0, 20.0  # predicting the current token instead is wrong
    assert float(next_token_loss(logits, ids)) > 10
