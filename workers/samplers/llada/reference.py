"""A readable, per-row transcription of the official LLaDA sampler: the correctness oracle and bench baseline.

It follows the newest `generate.py` of ML-GSAI/LLaDA step by step, in the official order of operations
and with the official data layout (full logits at every position, a per-row transfer schedule, a per-row
`topk`), so that `llada.py` can be checked against it token for token and timed against it. It is not
used for measurement. Deliberate departures, none of which changes a token:

* `model(...)` is called with `use_cache=False`: LLaDA has no KV cache (the official remote-code model
  never builds one), while a transformers `LlamaForCausalLM` would fill a `DynamicCache` by default.
* CFG without an attention mask runs (the official code raises NameError on that branch).
* The RNG can be an explicit `torch.Generator`; None uses the global one, as the official code does.
* EOS/EoT ids are arguments instead of LLaDA-8B's literals (126081, 126348).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

NEG_INF = float("-inf")


def _row_schedules(block_masked: Tensor, steps: int) -> Tensor:
    """`[B, steps]` tokens to commit by row and step: the row's masks spread evenly, remainder first."""
    counts = block_masked.sum(dim=1)  # [B]
    schedule = torch.zeros((counts.shape[0], steps), dtype=torch.long, device=block_masked.device)
    for row in range(counts.shape[0]):
        base, remainder = divmod(int(counts[row]), steps)
        schedule[row] = base
        schedule[row, :remainder] += 1
    return schedule


def _gumbel_perturb(logits: Tensor, temperature: float, generator: torch.Generator | None) -> Tensor:
    """exp(logits) / (-log u)^T in float64, so that argmax draws from softmax(logits / T) (Gumbel-max).

    At temperature 0 the logits themselves come back (the same tensor object, as in the official code).
    """
    if temperature == 0:
        return logits
    logits64 = logits.to(torch.float64)
    uniform = torch.rand(logits64.shape, dtype=torch.float64, generator=generator, device=logits.device)
    return logits64.exp() / (-torch.log(uniform)) ** temperature


@torch.no_grad()
def reference_llada_generate(
    model: nn.Module,
    prompt: Tensor,
    attention_mask: Tensor | None = None,
    *,
    steps: int,
    gen_length: int,
    block_length: int,
    mask_id: int,
    temperature: float = 0.0,
    cfg_scale: float = 0.0,
    remasking: str = "low_confidence",
    eos_id: int | None = None,
    eot_id: int | None = None,
    logits_eos_inf: bool = False,
    confidence_eos_eot_inf: bool = False,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The official LLaDA sampler, one row at a time where the official code loops over rows.

    prompt `[B, P]` (left-padded), attention_mask `[B, P]` or None; returns `[B, P + gen_length]`.
    """
    batch, prompt_length = prompt.shape
    device = prompt.device
    x = torch.full((batch, prompt_length + gen_length), mask_id, dtype=torch.long, device=device)
    x[:, :prompt_length] = prompt
    if attention_mask is not None:
        # The generation region is always attended to.
        attention_mask = torch.cat(
            [attention_mask, torch.ones((batch, gen_length), dtype=attention_mask.dtype, device=device)],
            dim=-1,
        )
    is_prompt = x != mask_id  # [B, L], what the unconditional CFG branch hides

    assert gen_length % block_length == 0
    num_blocks = gen_length // block_length
    assert steps % num_blocks == 0
    steps_per_block = steps // num_blocks

    for block in range(num_blocks):
        block_start = prompt_length + block * block_length
        block_end = block_start + block_length
        schedule = _row_schedules(x[:, block_start:block_end] == mask_id, steps_per_block)  # [B, S]
        for step in range(steps_per_block):
            masked = x == mask_id  # [B, L]
            if cfg_scale > 0:
                hidden_prompt = x.clone()
                hidden_prompt[is_prompt] = mask_id
                both = torch.cat([x, hidden_prompt], dim=0)  # [2B, L]
                both_mask = (
                    None if attention_mask is None else torch.cat([attention_mask, attention_mask], dim=0)
                )
                both_logits = model(both, attention_mask=both_mask, use_cache=False).logits  # [2B, L, V]
                cond, uncond = torch.chunk(both_logits, 2, dim=0)
                logits = uncond + (cfg_scale + 1) * (cond - uncond)  # [B, L, V]
            else:
                logits = model(x, attention_mask=attention_mask, use_cache=False).logits  # [B, L, V]

            if logits_eos_inf:
                logits[:, :, eos_id] = NEG_INF

            perturbed = _gumbel_perturb(logits, temperature, generator)
            x0 = torch.argmax(perturbed, dim=-1)  # [B, L]

            if confidence_eos_eot_inf:
                # Official quirk: the EOS write lands on `perturbed`, which is `logits` only at temperature 0.
                perturbed[:, :, eos_id] = NEG_INF
                logits[:, :, eot_id] = NEG_INF

            if remasking == "low_confidence":
                probs = F.softmax(logits, dim=-1)  # [B, L, V]
                x0_p = torch.gather(probs, dim=-1, index=x0.unsqueeze(-1)).squeeze(-1)  # [B, L]
            elif remasking == "random":
                x0_p = torch.rand((batch, x.shape[1]), generator=generator, device=device)  # [B, L]
            else:
                raise NotImplementedError(remasking)

            x0_p[:, block_end:] = NEG_INF  # later blocks wait for their turn
            x0 = torch.where(masked, x0, x)
            confidence = torch.where(masked, x0_p, NEG_INF)  # [B, L]

            commit = torch.zeros_like(x0, dtype=torch.bool)
            for row in range(batch):
                _, picked = torch.topk(confidence[row], k=int(schedule[row, step]))
                commit[row, picked] = True
            x[commit] = x0[commit]
    return x
