"""Block diffusion (Fast-dLLM v2) in a spec: the sampler's axes and variants, and the schedule of its forwards.

The official `generate` (Fast_dLLM_QwenForCausalLM, Wu et al. 2025, "Fast-dLLM v2: Efficient Block-Diffusion LLM",
arXiv:2509.26328) decodes block after block of `block_length` positions, each block against the KV cache of
everything before it, as an autoregressive model decodes token after token:

* a prompt longer than one block is prefilled once, up to its last whole block (block-causal attention), and when
  it ends exactly on a block boundary that forward also gives the first new token (the next-token head);
* a block starts as the prompt's tail (or that next token) followed by masks; its sub-blocks of
  `sub_block_length` are decoded left to right, each by forwards of the whole block until none of its positions
  is masked; a forward commits every masked position of the sub-block whose confidence exceeds `threshold`, and
  always the most confident one;
* a full block gets one more forward that writes its keys and values to the cache and gives the next block's
  first token.

The schedule below is that structure in numbers (no torch: the planner and the roofline read it). A run generates
exactly its generation length: the sampler runs the fewest whole blocks that reach it and stops as soon as those
positions are all committed, so the last block may end before its last sub-block and before its completing
forward. At threshold 1 every forward commits exactly one token per row, so the forward count is fixed; it is the
run's `steps` (K), and no threshold can exceed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from specs.frozen import Frozen, NamedImpl, distinct

# The official generate's defaults (Fast_dLLM_QwenForCausalLM.generate: block_size=32, small_block_size=8).
OFFICIAL_BLOCK_LENGTH = 32
OFFICIAL_SUB_BLOCK_LENGTH = 8


class BlockDiffusionSampling(Frozen):
    """One setting of the block-diffusion sampler: its sub-block, its confidence threshold, and the two places
    where a run may depart from the official `generate` (each off means the official behaviour).

    `commit_mask_predictions`: the official code commits a prediction that is the mask id itself, so the position
    stays masked; a row whose top prediction there stays the mask never finishes its sub-block, and the official
    loop never ends (random weights meet it within a few thousand commits). False takes the next most likely token
    at such a position (with its own probability), and for the next token a completing forward gives; no other
    decision changes.
    `prefill_one_block_prompt`: the official code prefills only a prompt longer than one block, so a prompt of
    exactly one block is never fed to the model (its first block sees only masks). True prefills it as a longer
    prompt's whole blocks are."""

    sub_block_length: int = Field(default=OFFICIAL_SUB_BLOCK_LENGTH, gt=0)
    threshold: float = Field(gt=0, le=1)
    commit_mask_predictions: bool = False
    prefill_one_block_prompt: bool = False


class BlockDiffusionImpl(NamedImpl):
    """One named implementation. The block-level KV cache is the design and always on. `sub_block_cache`: the
    official `use_block_cache`: after a forward of the whole block, a sub-block whose first position is committed
    in every row feeds only its own positions, attending to the block's keys and values from that forward.
    `graph`: every in-block forward replayed from a captured CUDA graph (inductor on a CPU), one per kind of forward
    and block; the prefill stays eager. It changes no number a forward computes."""

    sub_block_cache: bool = False
    graph: bool = False

    @property
    def is_accelerated(self) -> bool:
        return self.sub_block_cache or self.graph


class BlockDiffusionAxes(Frozen):
    """Axes that apply to models whose sampler is block diffusion (Fast-dLLM v2)."""

    thresholds: list[Annotated[float, Field(gt=0, le=1)]] = Field(min_length=1)
    block_lengths: list[Annotated[int, Field(gt=0)]] = Field(default_factory=lambda: [OFFICIAL_BLOCK_LENGTH], min_length=1)
    sub_block_lengths: list[Annotated[int, Field(gt=0)]] = Field(
        default_factory=lambda: [OFFICIAL_SUB_BLOCK_LENGTH], min_length=1
    )
    commit_mask_predictions: bool = False
    prefill_one_block_prompt: bool = False
    impl: list[BlockDiffusionImpl] = Field(default_factory=lambda: [BlockDiffusionImpl()], min_length=1)

    _distinct = field_validator("thresholds", "block_lengths", "sub_block_lengths")(distinct)

    @field_validator("impl")
    @classmethod
    def _distinct_names(cls, impls: list[BlockDiffusionImpl]) -> list[BlockDiffusionImpl]:
        distinct([impl.name for impl in impls])
        return impls

    @model_validator(mode="after")
    def _sub_blocks_tile_the_block(self) -> BlockDiffusionAxes:
        for block in self.block_lengths:
            bad = [s for s in self.sub_block_lengths if block % s]
            if bad:
                raise ValueError(
                    f"sub_block_lengths: {bad} do not divide block length {block}: the official loop decodes "
                    f"block // sub_block sub-blocks and never reaches the rest; allowed: divisors of {block}"
                )
        return self

    def settings(self) -> list[BlockDiffusionSampling]:
        return [
            BlockDiffusionSampling(sub_block_length=s, threshold=t, commit_mask_predictions=self.commit_mask_predictions,
                                   prefill_one_block_prompt=self.prefill_one_block_prompt)
            for s in self.sub_block_lengths for t in self.thresholds
        ]  # fmt: skip


# ---------------------------------------------------------------- the schedule


@dataclass(frozen=True)
class BlockSchedule:
    """One block of a generation: where it stands in the cache and what its forwards feed at most."""

    cache_start: int  # positions already in the KV cache: what every forward of the block attends besides itself
    masked: tuple[int, ...]  # masked positions of each sub-block to decode (up to the last one the run needs)
    completes: bool  # whether the block gets its completing forward (the next token, its keys to the cache)

    @property
    def max_forwards(self) -> int:
        """In-block forwards at threshold 1 (one token per row each), plus the completing one."""
        return sum(self.masked) + self.completes

    @property
    def sub_blocks(self) -> int:
        """Sub-blocks with something to decode: each takes at least one forward."""
        return sum(1 for m in self.masked if m)


@dataclass(frozen=True)
class Schedule:
    prefill_length: int  # prompt positions the prefill feeds (0: no prefill)
    prefill_token: bool  # whether the prefill gives the first new token
    blocks: tuple[BlockSchedule, ...]
    block_length: int
    sub_block_length: int

    @property
    def max_forwards(self) -> int:
        """K: the forwards at threshold 1, every one of them (prefill and completions included)."""
        return (self.prefill_length > 0) + sum(b.max_forwards for b in self.blocks)

    @property
    def min_forwards(self) -> int:
        """The fewest forwards any threshold can take: one per sub-block with masks, the prefill, the completions."""
        return (self.prefill_length > 0) + sum(b.sub_blocks + b.completes for b in self.blocks)

    @property
    def max_new_tokens(self) -> int:
        """The official `max_new_tokens` whose blocks reach the run's generation (blocks x block length)."""
        return len(self.blocks) * self.block_length


def prefills(prompt_length: int, block_length: int, prefill_one_block_prompt: bool = False) -> bool:
    """Whether the prompt is prefilled: the official test is `prompt > block` (a one-block prompt is not)."""
    return prompt_length > block_length or (prefill_one_block_prompt and prompt_length == block_length)


def schedule(
    prompt_length: int,
    gen_length: int,
    block_length: int,
    sub_block_length: int,
    prefill_one_block_prompt: bool = False,
) -> Schedule:
    """The blocks a generation of `gen_length` tokens runs, as the official `generate` lays them out."""
    if min(prompt_length, gen_length, block_length, sub_block_length) < 1 or block_length % sub_block_length:
        raise ValueError(
            f"need positive lengths and a sub-block that divides the block (got prompt {prompt_length}, generation "
            f"{gen_length}, block {block_length}, sub-block {sub_block_length})"
        )
    prefill = prefills(prompt_length, block_length, prefill_one_block_prompt)
    prefill_length = prompt_length // block_length * block_length if prefill else 0
    prefill_token = prefill and prompt_length % block_length == 0
    length = prompt_length + prefill_token  # tokens in the sequence so far
    cached = prefill_length
    wanted = prompt_length + gen_length  # the sequence's end once the run's tokens are all there
    blocks: list[BlockSchedule] = []
    while length < wanted:
        end = length + block_length - length % block_length  # the block is [end - block_length, end)
        start = end - block_length
        last = min(wanted, end) - 1  # the last position this block must decode
        masked = []
        for lo in range(start, end, sub_block_length):
            if lo > last:
                break
            masked.append(max(0, min(lo + sub_block_length, end) - max(lo, length)))
        completes = wanted > end
        blocks.append(BlockSchedule(cache_start=cached, masked=tuple(masked), completes=completes))
        if not completes:
            break
        cached += block_length
        length = end + 1
    return Schedule(prefill_length=prefill_length, prefill_token=prefill_token, blocks=tuple(blocks),
                    block_length=block_length, sub_block_length=sub_block_length)  # fmt: skip
