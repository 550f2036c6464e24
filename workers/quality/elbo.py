"""LLaDA's own likelihood bound: a Monte-Carlo estimate of the masked-diffusion ELBO (an upper bound on NLL).

Nie et al. 2025 ("Large Language Diffusion Models", arXiv:2502.09992) bound the conditional NLL of an answer
r0 of length L given a prompt p0 by the masked-diffusion loss. The paper's Eq. (conditional bound) draws a
masking ratio t ~ U(0, 1], masks each answer token with probability t and weights the masked tokens' NLL by
1/t. That estimator is unbiased but its variance is infinite (a token is masked with probability t and then
weighted 1/t, so its second moment is E[1/t] = ∫ dt/t). We implement the lower-variance equivalent the
paper gives in its appendix and the official `get_log_likelihood.py` uses:

    -log p(r0 | p0) <= E_{l ~ U{1..L}} E_{M: |M| = l} [ (L / l) * Σ_{i in M} -log p_θ(r0_i | p0, r_M) ]

where r_M is the answer with the l positions M replaced by [MASK] (M uniform among the l-subsets). Each
token is in M with probability l/L and weighted L/l, so for a predictor that ignores its context the bound
equals the exact NLL Σ_i -log q_i(r0_i). The masked counts of the n samples are drawn by systematic
sampling (one uniform offset, n evenly spaced points mapped onto {1..L}), as the official code stratifies
them across a batch: still unbiased, lower variance than independent draws. No classifier-free guidance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from workers.quality.perplexity import last_logits

ELBO_BATCH_SIZE = 8  # Monte-Carlo samples per forward; each is one [P + L] sequence


@dataclass(frozen=True)
class ElboEstimate:
    """The bound on -log p(answer | prompt), in nats, from `samples` Monte-Carlo draws."""

    nll_bound: float  # summed over the answer's tokens
    tokens: int
    samples: int
    stderr: float | None  # spread of the per-sample estimates / sqrt(n); conservative under systematic draws

    @property
    def nll_bound_per_token(self) -> float | None:
        return self.nll_bound / self.tokens if self.tokens else None

    @property
    def stderr_per_token(self) -> float | None:
        """The Monte-Carlo standard error of `nll_bound_per_token` (kept in the artifact beside it)."""
        return self.stderr / self.tokens if self.stderr is not None and self.tokens else None


def masked_counts(answer_length: int, samples: int, generator: torch.Generator) -> Tensor:
    """l_j = floor((u + j) / n * L) + 1 for j < n, u ~ U[0, 1): systematic draws from U{1..L}. [n]"""
    offset = torch.rand((), generator=generator, dtype=torch.float64)
    points = (offset + torch.arange(samples, dtype=torch.float64)) / samples  # [n], in [0, 1)
    return (points * answer_length).floor().long().clamp(max=answer_length - 1) + 1


@torch.no_grad()
def elbo_nll(
    mask_predictor: nn.Module,
    prompt_ids: Sequence[int] | Tensor,
    answer_ids: Sequence[int] | Tensor,
    mask_token_id: int,
    *,
    samples: int,
    seed: int = 0,
    batch_size: int = ELBO_BATCH_SIZE,
) -> ElboEstimate:
    """Monte-Carlo estimate of the bound above for one (prompt, answer); `mask_predictor(input_ids).logits`.

    The predictor reads the whole sequence bidirectionally (LLaDA: `is_causal=False`), with no padding.
    Masks are drawn on the CPU from `seed`, so the estimate does not depend on the device.
    """
    prompt = torch.as_tensor(
        list(prompt_ids) if not isinstance(prompt_ids, Tensor) else prompt_ids, dtype=torch.long
    )
    answer = torch.as_tensor(
        list(answer_ids) if not isinstance(answer_ids, Tensor) else answer_ids, dtype=torch.long
    )
    length = int(answer.numel())
    if length == 0:
        return ElboEstimate(0.0, 0, samples, None)
    if samples < 1:
        raise ValueError(f"samples: need at least 1 Monte-Carlo sample, got {samples}")
    device = next(mask_predictor.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    counts = masked_counts(length, samples, generator)  # [n]
    sequence = torch.cat([prompt.cpu(), answer.cpu()])  # [P + L]
    estimates: list[Tensor] = []
    for start in range(0, samples, batch_size):
        n_masked = counts[start : start + batch_size]  # [b], the l of each sample
        b = int(n_masked.numel())
        # Exactly l_j masked positions per row, uniform among the l_j-subsets: the l_j smallest random keys.
        ranks = torch.rand((b, length), generator=generator).argsort(-1).argsort(-1)  # [b, L]
        masked = ranks < n_masked.unsqueeze(-1)  # [b, L]
        noisy = sequence.repeat(b, 1)  # [b, P + L]
        noisy[:, prompt.numel() :][masked] = mask_token_id
        logits = last_logits(mask_predictor, noisy.to(device), length)  # [b, L, V]
        masked_dev = masked.to(device)
        targets = answer.to(device).expand(b, length)[masked_dev]  # [m]
        nll = F.cross_entropy(logits[masked_dev].float(), targets, reduction="none")  # [m]
        rows = torch.arange(b, device=device).unsqueeze(-1).expand(b, length)[masked_dev]  # [m]
        per_row = torch.zeros(b, dtype=torch.float64, device=device).index_add_(0, rows, nll.double())  # [b]
        estimates.append((per_row * length / n_masked.to(device).double()).cpu())
    values = torch.cat(estimates)  # [n], each an unbiased estimate of the bound
    stderr = float(values.std(unbiased=True)) / math.sqrt(samples) if samples > 1 else None
    return ElboEstimate(float(values.mean()), length, samples, stderr)
