"""Fast-dLLM v2's block-diffusion objective as pure tensor functions: the training mask, per-block noise with
complementary masking, and the token shift.

Fast-dLLM v2 (Wu et al. 2025, arXiv:2509.26328, Section 3) fine-tunes an AR model into a block-diffusion one.
What its official modeling.py does in training mode (`Fast_dLLM_QwenForCausalLM.forward`, `block_diff_mask`):

* the sequence is cut into blocks of `bd_size` (32); each block draws its own t ~ U(0, 1) and masks each of
  its tokens with p = (1 − ε)·t + ε, ε = 1e-3;
* complementary masking: the batch holds every sequence twice, once with its mask and once with the
  complement (`~mask_indices`), so each position is a target exactly once per pair;
* the model reads the noisy and the clean sequence side by side, [x_t, x_0] (2L tokens, both halves at
  positions 0..L−1): x_t attends bidirectionally inside its own block and to the clean blocks before it,
  x_0 attends block-causally to itself, so the clean half is the KV cache of finished blocks at inference;
* the token shift: the AR model's next-token head is kept. The labels are the masked tokens and the loss is
  transformers' causal-LM loss, so the token at position i is read from x_t's output at i − 1: position 0 is
  never a target, and the first token of block k is read from the last position of the noisy block k − 1
  (at inference the sampler reads it from the finished block's last position, `generate`'s `next_token`);
* the loss is the mean cross-entropy over all targets of the pair, without the 1/p weight of LLaDA's bound.

One departure in layout, none in numbers: the two copies of a complementary pair share one x_0,
[x_t, x_t', x_0] (3L tokens instead of 2 × 2L), since neither noisy copy may see the other; each copy's
outputs are those of the official [x_t, x_0] forward (tests/test_miniature_block_diffusion_model.py), and a
training step reads a quarter fewer tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from miniature.objectives import MASK_EPSILON, masked_diffusion_loss

BLOCK_SIZE = 32  # Fast-dLLM v2's bd_size (config.json), in training and at inference
SUB_BLOCK_SIZE = 8  # the sub-block decoded in parallel inside a block at inference (`small_block_size`)


def check_blocks(length: int, block_size: int) -> int:
    """The number of blocks in `length` tokens; the official forward reshapes into whole blocks."""
    if block_size < 1 or length % block_size:
        raise ValueError(f"sequence length {length} is not a whole number of blocks of {block_size}")
    return length // block_size


def training_attention_mask(length: int, block_size: int, noisy_copies: int = 1) -> torch.Tensor:
    """Which positions of [x_t, x_0] each query may attend to (True: attend), [2L, 2L]: `block_diff_mask`'s
    block-diagonal (same block, same half), offset block-causal (x_t to x_0's earlier blocks) and block-causal
    (x_0 to x_0's blocks up to its own) parts. With `noisy_copies` = 2, [x_t, x_t', x_0] ([3L, 3L]): each noisy
    copy sees only itself and x_0, so its outputs are the official pair's, with x_0 computed once for both."""
    check_blocks(length, block_size)
    index = torch.arange((noisy_copies + 1) * length)
    half = index // length  # [(C+1)L]: which copy; the last is x_0
    clean = half == noisy_copies
    block = (index % length) // block_size
    same_block = block[:, None] == block[None, :]  # [(C+1)L, (C+1)L]
    earlier_block = block[:, None] > block[None, :]
    same_half = half[:, None] == half[None, :]
    noisy_query_clean_key = ~clean[:, None] & clean[None, :]
    both_clean = clean[:, None] & clean[None, :]
    return (same_block & same_half) | (noisy_query_clean_key & earlier_block) | (both_clean & (same_block | earlier_block))


def pair_positions(length: int, noisy_copies: int = 1) -> torch.Tensor:
    """Position ids of [x_t, x_0]: each half at 0..L−1, as the official training forward gives RoPE. [1, 2L]"""
    return torch.arange(length).repeat(noisy_copies + 1)[None, :]


def block_forward_mask(
    ids: torch.Tensor, block_size: int, mask_token_id: int, generator: torch.Generator, epsilon: float = MASK_EPSILON
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-block noise, drawn in the official order (one t per block, then one uniform per token):
    (noisy ids, masked positions, p_mask per position), all [B, L]."""
    batch, length = ids.shape
    blocks = check_blocks(length, block_size)
    t = torch.rand(batch * blocks, generator=generator, device=ids.device)  # [B·K]
    p_block = (1 - epsilon) * t + epsilon
    p_mask = p_block[:, None].expand(batch * blocks, block_size).reshape(batch, length)  # [B, L]
    draws = torch.rand(batch * blocks, block_size, generator=generator, device=ids.device).reshape(batch, length)
    masked = draws < p_mask  # [B, L]
    noisy = torch.where(masked, torch.full_like(ids, mask_token_id), ids)
    return noisy, masked, p_mask


def complementary_pair(ids: torch.Tensor, masked: torch.Tensor, mask_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch doubled: each sequence with its mask, then with the complement. (noisy, masked), [2B, L]."""
    both = torch.cat([masked, ~masked])  # [2B, L]
    clean = ids.repeat(2, 1)
    return torch.where(both, torch.full_like(clean, mask_token_id), clean), both


def shifted(logits: torch.Tensor, *per_position: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The token shift: logits at 0..L−2 against the per-position tensors at 1..L−1 (position 0 is no target)."""
    # logits [B, L, V]; each per-position tensor [B, L]
    return (logits[:, :-1], *(tensor[:, 1:] for tensor in per_position))


def block_diffusion_loss(logits: torch.Tensor, ids: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """The official training loss: mean cross-entropy of the masked tokens, each read from the position before
    it (nats per target). With complementary pairs the targets are every position 1..L−1 once per pair."""
    # logits [N, L, V] of the x_t half; ids, masked [N, L]
    logits, ids, masked = shifted(logits, ids, masked)
    return F.cross_entropy(logits[masked].float(), ids[masked])


def block_diffusion_bound(logits: torch.Tensor, ids: torch.Tensor, masked: torch.Tensor, p_mask: torch.Tensor) -> torch.Tensor:
    """Σ CE/p over the masked tokens 1..L−1 (each read from the position before it), ÷ B·(L−1).

    In expectation over t and the mask, an upper bound on the negative log-likelihood per token of
    positions 1..L−1 given position 0, each block conditioned on the clean blocks before it: the masked-
    diffusion bound inside blocks (BD3-LM's NELBO, Arriola et al. 2025), comparable in units with the AR
    model's next-token cross-entropy, which it can only exceed for the same conditional distribution."""
    return masked_diffusion_loss(*shifted(logits, ids, masked, p_mask))
