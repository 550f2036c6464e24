"""Training objectives as pure tensor functions: next-token cross-entropy and LLaDA's masked bound.

LLaDA (Nie et al. 2025, Eq. 3 and Algorithm 1; the official pre-training snippet in its GUIDELINES):
per sequence draw t ~ U(0, 1), mask each token independently with p = (1 − ε)·t + ε, and average the
cross-entropy on masked positions weighted by 1/p over *all* B·L positions. The expectation of that
quantity upper-bounds the negative log-likelihood per token, which is why the held-out value is a bound.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

MASK_EPSILON = 1e-3  # ε of the official forward process: no sequence is left entirely unmasked


def next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting ids[:, 1:] from logits[:, :-1] (nats per predicted token)."""
    # logits [B, L, V], ids [B, L]
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())


def forward_mask(
    ids: torch.Tensor, mask_token_id: int, generator: torch.Generator, epsilon: float = MASK_EPSILON
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LLaDA's forward process: (noisy ids, masked positions, p_mask per position), all [B, L]."""
    batch, length = ids.shape
    t = torch.rand(batch, generator=generator, device=ids.device)  # [B]
    p_mask = ((1 - epsilon) * t + epsilon)[:, None].expand(batch, length)  # [B, L]
    masked = torch.rand(batch, length, generator=generator, device=ids.device) < p_mask  # [B, L]
    noisy = torch.where(masked, torch.full_like(ids, mask_token_id), ids)
    return noisy, masked, p_mask


def masked_diffusion_loss(
    logits: torch.Tensor, ids: torch.Tensor, masked: torch.Tensor, p_mask: torch.Tensor
) -> torch.Tensor:
    """Σ over masked positions of CE / p, divided by B·L (the official normalisation)."""
    # logits [B, L, V]; ids, masked, p_mask [B, L]
    ce = F.cross_entropy(logits[masked].float(), ids[masked], reduction="none")  # [n_masked]
    return (ce / p_mask[masked]).sum() / ids.numel()
