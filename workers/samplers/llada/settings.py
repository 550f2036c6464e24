"""A LLaDA generation's settings: the remasking and cache choices, the transfer schedule, the suppressed ids,
the step record, and the official sampler's preconditions as errors that say what to fix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from torch import Tensor, nn

from workers.samplers.prompt_batch import check_bidirectional, check_prompt_batch

Remasking = Literal["low_confidence", "random"]
REMASKING_STRATEGIES: tuple[str, ...] = get_args(Remasking)
Cache = Literal["none", "prefix", "dual"]
CACHES: tuple[str, ...] = get_args(Cache)


@dataclass(frozen=True)
class LladaStep:
    """What one step did: which step of which block, and how many tokens it committed over the batch."""

    step: int  # 0 .. steps-1, over the whole generation
    block: int  # 0 .. num_blocks-1, the semi-autoregressive block being filled
    # Positions committed this step (the schedule's count), summed over the batch rows. A committed
    # prediction may itself be `mask_id`; the official algorithm allows that and revisits the position.
    # With a threshold or factor rule it is what the rule chose, at least the schedule's count per open row,
    # as a 0-d tensor: reading it syncs, so a timing caller reads it after its timed region.
    committed: int | Tensor
    forwards: int = 1  # model forwards this step ran (2 only with the cache test option refresh_every_step)


def transfer_schedule(block_length: int, steps_per_block: int) -> list[int]:
    """Tokens to commit at each step of one block.

    LLaDA's linear noise schedule (paper Eq. 8) makes the expected number of tokens unmasked per step
    constant, so the official `get_num_transfer_tokens` spreads a block's masked count evenly over its
    steps, the remainder going to the earliest steps. A block is always fully masked when its turn comes,
    so its masked count is `block_length` in every row and the schedule is the same for all rows.
    """
    base, remainder = divmod(block_length, steps_per_block)
    return [base + (1 if i < remainder else 0) for i in range(steps_per_block)]


def official_suppress_ids(
    *,
    eos_id: int,
    eot_id: int,
    logits_eos_inf: bool,
    confidence_eos_eot_inf: bool,
    temperature: float,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Map the official `logits_eos_inf` / `confidence_eos_eot_inf` flags onto our two id lists.

    Returns `(logits_suppress_ids, confidence_suppress_ids)`. Paper Appendix B.4: EOS may be banned from
    sampling (`logits_eos_inf`), and EOS/EoT may be kept from looking confident (`confidence_eos_eot_inf`).
    The official code does the latter with `logits_with_noise[..., EOS] = logits[..., EoT] = -inf` after
    sampling: at temperature 0 `logits_with_noise` *is* `logits`, so both ids reach the confidence softmax;
    at temperature > 0 it is a fresh float64 tensor that is never read again, so only EoT does. We
    reproduce that, since the goal is the official tokens.
    """
    logits_ids = (eos_id,) if logits_eos_inf else ()
    if not confidence_eos_eot_inf:
        return logits_ids, ()
    return logits_ids, ((eos_id, eot_id) if temperature == 0 else (eot_id,))


def check_arguments(
    model: nn.Module,
    prompt_ids: Tensor,
    attention_mask: Tensor | None,
    gen_length: int,
    block_length: int,
    steps: int,
    mask_id: int,
    temperature: float,
    cfg_scale: float,
    remasking: str,
    logits_suppress_ids: Sequence[int],
    confidence_suppress_ids: Sequence[int],
) -> None:
    """The official sampler's preconditions (its asserts and docstring), as errors that say what to fix."""
    check_bidirectional(model, "LLaDA needs bidirectional attention",
                        "build it with e.g. LlamaConfig(..., is_causal=False)")
    vocab_size = int(model.config.vocab_size)
    check_prompt_batch(prompt_ids, attention_mask)
    if gen_length <= 0 or block_length <= 0 or steps <= 0:
        raise ValueError(
            f"gen_length, block_length and steps must be positive, got {gen_length}, {block_length}, {steps}"
        )
    if gen_length % block_length:
        raise ValueError(f"gen_length ({gen_length}) must be a multiple of block_length ({block_length})")
    num_blocks = gen_length // block_length
    if steps % num_blocks:
        raise ValueError(
            f"steps ({steps}) must be a multiple of the number of blocks "
            f"(gen_length // block_length = {num_blocks})"
        )
    if steps > gen_length:
        raise ValueError(
            f"steps ({steps}) must be at most gen_length ({gen_length}): at least one token per step"
        )
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id {mask_id} is not in the model's vocabulary [0, {vocab_size})")
    for name, ids in (
        ("logits_suppress_ids", logits_suppress_ids),
        ("confidence_suppress_ids", confidence_suppress_ids),
    ):
        bad = [i for i in ids if not 0 <= i < vocab_size]
        if bad:
            raise ValueError(f"{name} {bad} are not in the model's vocabulary [0, {vocab_size})")
    if remasking not in REMASKING_STRATEGIES:
        raise ValueError(f"Unknown remasking {remasking!r}. Available: {', '.join(REMASKING_STRATEGIES)}")
    if temperature < 0 or cfg_scale < 0:
        raise ValueError(f"temperature and cfg_scale must be >= 0, got {temperature} and {cfg_scale}")
    if attention_mask is not None and bool((prompt_ids[attention_mask == 0] == mask_id).any()):
        raise ValueError("the pad token is the mask token: pad prompts with a token other than mask_id")


def check_variant(cache: str, threshold: float | None, factor: float | None, remasking: str) -> None:
    """An accelerated variant's settings, as errors that say what is allowed."""
    if cache not in CACHES:
        raise ValueError(f"Unknown cache {cache!r}. Available: {', '.join(CACHES)}")
    if threshold is not None and factor is not None:
        raise ValueError("give either threshold or factor, not both")
    if threshold is not None and not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if factor is not None and not factor > 0:
        raise ValueError(f"factor must be > 0, got {factor}")
    if (threshold is not None or factor is not None) and remasking != "low_confidence":
        raise ValueError("threshold and factor rank the model's confidence: they need remasking 'low_confidence'")
