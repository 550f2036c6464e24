"""What one block-diffusion forward commits: a token and a confidence per position, then the threshold rule.

Both follow the official `Fast_dLLM_QwenForCausalLM.sample_with_top_p` and the commit in `generate`:

* greedy (temperature 0): `p = softmax(logits)`, the token is `argmax p`, its confidence `p[token]`;
* sampled: `softmax(logits / temperature)`, the tail past `top_p` of the descending cumulative sum zeroed (the
  first token always kept), renormalised, and one draw per position of the first row (`multinomial(p[0], 1)`:
  the official code samples row 0 only, so a sampled generation is one row);
* the commit: among the masked positions of the sub-block, every one whose confidence exceeds `threshold`, and
  always the most confident one of each row (`argmax`, the first of equals).
"""

from __future__ import annotations

import torch
from torch import Tensor

NEG_INF = float("-inf")
# A probability no token has: a masked-out column of `probs` never wins an argmax, and a zeroed one is never drawn.
NOT_A_PROBABILITY = -1.0


def top_p_probabilities(logits: Tensor, top_p: float, temperature: float) -> Tensor:
    """`[..., V]` logits → the official filtered, renormalised probabilities `[..., V]` (temperature > 0)."""
    probs = torch.softmax(logits / temperature, dim=-1)
    sorted_probs, sorted_indices = torch.sort(probs, descending=True)
    remove = torch.cumsum(sorted_probs, dim=-1) > top_p
    remove[..., 1:] = remove[..., :-1].clone()  # keep the token that crosses top_p
    remove[..., 0] = False
    probs = probs.masked_fill(torch.zeros_like(remove).scatter_(-1, sorted_indices, remove), 0.0)
    return probs / probs.sum(dim=-1, keepdim=True)


def choose_tokens(
    logits: Tensor,
    *,
    temperature: float,
    top_p: float,
    generator: torch.Generator | None,
    excluded_id: int | None = None,
) -> tuple[Tensor, Tensor]:
    """logits `[B, n, V]` → (tokens `[B, n]`, their probabilities `[B, n]`), as the official sampler chooses them.

    `excluded_id` (the mask id, where a run does not commit mask predictions) is never chosen: greedy takes the
    next most likely token with its own probability; sampled draws with that token's probability zeroed."""
    if temperature > 0:
        probs = top_p_probabilities(logits, top_p, temperature)  # [B, n, V]
        weights = probs if excluded_id is None else probs.index_fill(-1, _ids(excluded_id, probs), 0.0)
        tokens = torch.multinomial(weights[0], num_samples=1, generator=generator).unsqueeze(0).squeeze(-1)  # [1, n]
    else:
        probs = torch.softmax(logits, dim=-1)  # [B, n, V]
        ranked = probs if excluded_id is None else probs.index_fill(-1, _ids(excluded_id, probs), NOT_A_PROBABILITY)
        tokens = ranked.argmax(dim=-1)  # [B, n]
    return tokens, probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def commit(x_sub: Tensor, tokens: Tensor, confidence: Tensor, *, mask_id: int, threshold: float) -> Tensor:
    """Commit into `x_sub` `[B, n]` (a view of the sequence) in place; returns the positions committed, a 0-d tensor.

    Every masked position whose confidence exceeds `threshold`, and each row's most confident masked position.
    A row with nothing masked picks position 0 and then drops it (the official `& mask`)."""
    masked = x_sub == mask_id  # [B, n]
    confidence = torch.where(masked, confidence, NEG_INF)  # [B, n]
    chosen = confidence > threshold
    chosen[torch.arange(chosen.shape[0], device=chosen.device), confidence.argmax(dim=-1)] = True
    chosen &= masked
    x_sub.copy_(torch.where(chosen, tokens, x_sub))  # tokens [1, n] (sampled) broadcasts over the one row
    return chosen.sum()


def _ids(token_id: int, like: Tensor) -> Tensor:
    return torch.tensor([token_id], device=like.device)
