"""Dream's per-position choice: which token a masked position would take, and how confident that choice is.

The arithmetic is the official `generation_utils.sample_tokens` of Dream's `diffusion_generate`, operation for
operation, so the same logits give the same tokens and confidences bit for bit and draw the same random
numbers: temperature divides the logits; top-p then top-k set what they drop to the dtype's lowest finite
value; a softmax gives the probabilities; at temperature 0 the token is the most probable one, above it a
categorical draw. The confidence is that token's probability, or (`margin`) the gap between the two most
probable tokens, or (`entropy`) the negative entropy of the distribution.

The official draw is `torch.distributions.Categorical(probs).sample()` inside a bare `try`, falling back
to the greedy token when it raises. Categorical renormalises the probabilities, validates them as a simplex
(every row non-negative and summing to 1 within 1e-6) and samples with `torch.multinomial(..., 1, True)`:
when any row's renormalised sum misses 1 by 1e-6 or more (float32 rows practically never; bfloat16 rows with
a spread-out distribution can), the validation fails and the official code silently takes the greedy token
for every row of the step, drawing nothing. `categorical` reproduces all of it, with an explicit generator
instead of torch's global one.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import Tensor

Confidence = Literal["probability", "margin", "entropy"]
CONFIDENCES: tuple[str, ...] = get_args(Confidence)
# The official sampler's guards: the simplex tolerance of torch.distributions.constraints.simplex, and the
# epsilon inside the entropy's log.
SIMPLEX_TOLERANCE = 1e-6
ENTROPY_EPSILON = 1e-10


def top_p_filter(logits: Tensor, top_p: float) -> Tensor:
    """Nucleus filtering `[M, V]`: keep the most probable tokens up to and including the first whose
    cumulative probability exceeds `top_p`; the rest get the dtype's lowest finite value."""
    sorted_logits, order = torch.sort(logits, descending=True)
    cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)  # [M, V]
    drop_sorted = torch.zeros_like(cumulative, dtype=torch.bool)
    drop_sorted[..., 1:] = cumulative[..., :-1] > top_p  # the token that crosses top_p stays
    drop = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, order, drop_sorted)
    return logits.masked_fill(drop, torch.finfo(logits.dtype).min)


def top_k_filter(logits: Tensor, top_k: int) -> Tensor:
    """Keep the logits at least as large as the k-th largest (ties with it stay); the rest get the dtype's
    lowest finite value."""
    k = min(top_k, logits.shape[-1])
    kth = torch.topk(logits, k).values[..., -1:]  # [M, 1]
    return logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)


def categorical(probs: Tensor, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """One draw per row of `probs` `[M, V]`: (the drawn token's probability `[M]`, the token `[M]`), as
    the official Categorical draw, including its greedy fallback (module docstring). Reading the validation
    is one host sync; `torch.multinomial` makes its own."""
    normalised = probs / probs.sum(-1, keepdim=True)
    on_simplex = (normalised >= 0).all(dim=-1) & ((normalised.sum(-1) - 1).abs() < SIMPLEX_TOLERANCE)
    if not bool(on_simplex.all()):
        return probs.max(dim=-1)
    tokens = torch.multinomial(normalised, 1, replacement=True, generator=generator).squeeze(-1)  # [M]
    return probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), tokens


def choose_tokens(
    logits: Tensor,
    *,
    temperature: float,
    top_p: float | None,
    top_k: int | None,
    confidence: Confidence = "probability",
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """For masked positions' logits `[M, V]`: (confidence `[M]`, token `[M]`), as the official
    `sample_tokens`."""
    if temperature > 0:
        logits = logits / temperature
    if top_p is not None and top_p < 1:
        logits = top_p_filter(logits, top_p)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    probs = torch.softmax(logits, dim=-1)  # [M, V]
    if temperature > 0:
        score, tokens = categorical(probs, generator)
    else:
        score, tokens = probs.max(dim=-1)
    if confidence == "margin":
        top2 = torch.topk(probs, 2, dim=-1).values  # [M, 2]: the sorted distribution's first two entries
        score = top2[:, 0] - top2[:, 1]
    elif confidence == "entropy":
        score = torch.sum(probs * torch.log(probs + ENTROPY_EPSILON), dim=-1)  # negative entropy
    return score, tokens
