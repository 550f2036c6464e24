"""Generative perplexity: the NLL of each continuation given its prompt under an evaluator causal LM."""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedTokenizerBase

from workers.models.tokenization import chat_frame, default_prefix_ids

EVALUATOR_BATCH_SIZE = 4  # sequences per evaluator forward; the logits kept are [B, T+1, V] only


@dataclass(frozen=True)
class TokenNll:
    """Summed NLL (nats) of the scored tokens and how many there were."""

    nll_sum: float
    tokens: int

    @property
    def nll_per_token(self) -> float | None:
        return self.nll_sum / self.tokens if self.tokens else None

    @property
    def perplexity(self) -> float | None:
        per_token = self.nll_per_token
        return None if per_token is None else math.exp(per_token)


def evaluator_pair(
    tokenizer: PreTrainedTokenizerBase, prompt_text: str, continuation_text: str, *, chat: bool = False
) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as the evaluator reads them.

    The context is the prompt framed as a generator reads it (the chat template when the evaluator is a
    chat model, else the tokenizer's default BOS); the continuation is tokenised on its own, with any
    whitespace that ends the prompt moved to its front (the split of lm-evaluation-harness `_encode_pair`),
    so that both models' texts are cut at the same place whatever their own tokenizer was.
    """
    stripped = prompt_text.rstrip()
    continuation_text = prompt_text[len(stripped) :] + continuation_text
    prefix, suffix = chat_frame(tokenizer) if chat else (default_prefix_ids(tokenizer), [])
    body = tokenizer(stripped, add_special_tokens=False)["input_ids"] if stripped else []
    continuation = (
        tokenizer(continuation_text, add_special_tokens=False)["input_ids"] if continuation_text else []
    )
    return list(prefix) + list(body) + list(suffix), list(continuation)


@torch.no_grad()
def continuation_nll(
    model: nn.Module,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    batch_size: int = EVALUATOR_BATCH_SIZE,
    max_positions: int | None = None,
) -> list[TokenNll]:
    """-Σ log p(continuation_t | context, continuation_<t) for each (context ids, continuation ids) pair.

    Sequences are left-padded (attention mask and position ids say where each starts), so every
    continuation ends at the last position and only the last T_max + 1 positions' logits are projected.
    A context longer than `max_positions` allows is cut from the left; with an empty context the first
    continuation token has nothing to be predicted from and is not scored.
    """
    device = next(model.parameters()).device
    results: list[TokenNll] = []
    for start in range(0, len(pairs), batch_size):
        chunk = [_fit(list(c), list(t), max_positions) for c, t in pairs[start : start + batch_size]]
        width = max(len(c) + len(t) for c, t in chunk)
        if width == 0:
            results.extend(TokenNll(0.0, 0) for _ in chunk)
            continue
        ids = torch.zeros((len(chunk), width), dtype=torch.long)  # [B, W], left-padded
        mask = torch.zeros((len(chunk), width), dtype=torch.long)  # [B, W]
        for row, (context, continuation) in enumerate(chunk):
            sequence = context + continuation
            ids[row, width - len(sequence) :] = torch.tensor(sequence, dtype=torch.long)
            mask[row, width - len(sequence) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # [B, W]
        scored = max(len(t) for _, t in chunk)
        keep = min(scored + 1, width)
        logits = last_logits(
            model, ids.to(device), keep, attention_mask=mask.to(device), position_ids=positions.to(device)
        )  # [B, keep, V]
        # logits[:, j] predicts the token at sequence position width - keep + j + 1.
        log_probs = F.log_softmax(logits[:, :-1].float(), dim=-1)  # [B, keep-1, V]
        targets = ids[:, width - keep + 1 :].to(device)  # [B, keep-1]
        token_logp = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # [B, keep-1]
        for row, (context, continuation) in enumerate(chunk):
            # Tokens scored: all of the continuation, but its first when there is no context before it.
            n = min(len(continuation), len(context) + len(continuation) - 1)
            nll = -float(token_logp[row, token_logp.shape[1] - n :].sum()) if n > 0 else 0.0
            results.append(TokenNll(nll, max(n, 0)))
    return results


def last_logits(model: nn.Module, input_ids: torch.Tensor, keep: int, **kwargs: torch.Tensor) -> torch.Tensor:
    """The logits of the last `keep` positions, projecting only those where the model can. [B, keep, V]

    transformers' own classes take `logits_to_keep` (and `use_cache`); a checkpoint's remote code may not,
    and then the full logits are computed and sliced.
    """
    parameters = inspect.signature(model.forward).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if takes_any or "logits_to_keep" in parameters:
        return model(input_ids=input_ids, use_cache=False, logits_to_keep=keep, **kwargs).logits
    return model(input_ids=input_ids, **kwargs).logits[:, -keep:]


def _fit(
    context: list[int], continuation: list[int], max_positions: int | None
) -> tuple[list[int], list[int]]:
    if max_positions is None or len(context) + len(continuation) <= max_positions:
        return context, continuation
    continuation = continuation[:max_positions]
    return context[len(context) + len(continuation) - max_positions :], continuation
