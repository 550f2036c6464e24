"""Confidence-aware parallel decoding for LLaDA: how many positions a step commits in each row.

Fast-dLLM (Wu et al. 2025, arXiv:2505.22618, Sec. 3.3) commits, at each step, every masked position of the
current block whose confidence is at least a threshold θ (its Theorem 1: greedy parallel decoding of
tokens whose marginal confidence exceeds a bound agrees with sequential decoding), and the "factor" rule:
the top n positions, n the largest with the n-th highest confidence ≥ 1 − f/(n+1). Here neither may
commit fewer than the step's transfer schedule, so the grid's step count stays an upper bound on the
forwards and a block never needs more steps than vanilla gives it.
"""

from __future__ import annotations

import torch
from torch import Tensor

NEG_INF = float("-inf")


def parallel_commit(
    confidence: Tensor, scheduled: int, *, threshold: float | None, factor: float | None
) -> tuple[Tensor, Tensor]:
    """Which positions each row commits: `(mask [B, W], counts [B])` from candidates' confidences `[B, W]`.

    Non-candidates are -inf, so they sort last and never pass a rule. A row commits at least
    `min(scheduled, candidates)` and at most its candidates (none once it is done); among equal
    confidences the leftmost goes first.
    """
    ordered = torch.sort(confidence, dim=-1, descending=True, stable=True)
    ranked, order = ordered.values, ordered.indices  # [B, W]
    width = confidence.shape[-1]
    if threshold is not None:
        passing = ranked >= threshold  # [B, W], a prefix of each row: the values are sorted
    elif factor is not None:
        n = torch.arange(1, width + 1, device=confidence.device, dtype=ranked.dtype)  # [W]
        # conf_n falls and 1 - f/(n+1) rises with n, so the rule holds on a prefix; cumprod keeps only that
        # prefix even where rounding would let a later rank pass again.
        passing = (ranked >= 1 - factor / (n + 1)).long().cumprod(dim=-1).bool()  # [B, W]
    else:
        raise ValueError("parallel_commit needs a threshold or a factor")
    candidates = (ranked > NEG_INF).sum(dim=-1)  # [B]
    counts = torch.maximum(passing.sum(dim=-1), candidates.clamp(max=scheduled)).minimum(candidates)  # [B]
    ranks = torch.arange(width, device=confidence.device).expand_as(order)  # [B, W]
    chosen = torch.zeros_like(order, dtype=torch.bool).scatter_(1, order, ranks < counts.unsqueeze(-1))
    return chosen, counts
