"""LLaDA (masked diffusion) inference cost: `steps` bidirectional forward passes, block by block."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from roofline.errors import RooflineInputError
from roofline.estimate import DiffusionEstimate
from roofline.fidelity import Fidelity, modelling, require_study_scope
from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import HardwareProfile
from roofline.operators import Operator
from roofline.phase import PhaseCost, cost_of, empty_cost
from roofline.sampler import sampler_operators
from roofline.workload import LladaCache, Remasking, Workload
from specs.shapes import ModelShape


class BlockEstimate(BaseModel):
    """One semi-autoregressive block: the sequence each of its steps runs over, and the time of one step.

    With a cache the block's first step is a full forward (`time_per_step_s`) and its other `steps - 1` are
    cached steps over `cached_query_len` positions (`cached_step_s`); without one every step is full."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq_len: int
    time_per_step_s: float
    steps: int
    cached_query_len: int | None = None
    cached_step_s: float | None = None


class LladaEstimate(DiffusionEstimate):
    """Predicted cost of one LLaDA generation, per the chosen fidelity; `forwards`: `steps`, or fewer where a
    confidence rule ends blocks early."""

    block_length: int
    steps: int
    cache: LladaCache
    cfg_scale: float
    temperature: float
    remasking: Remasking
    truncate_blocks: bool
    mode: Literal["Semi-Autoregressive", "Non-Semi-Autoregressive"]
    num_blocks: int
    steps_per_block: int
    blocks: list[BlockEstimate]


def llada_schedule(work: Workload) -> tuple[int, int]:
    """(block_length, steps) of `work`, checked against the official sampler's preconditions (generate.py asserts
    them), as errors that say what is allowed."""
    prompt_len, gen_len, block_length, steps, batch = (
        work.prompt_len, work.gen_len, work.block_length, work.steps, work.batch
    )
    if block_length is None or steps is None:
        raise RooflineInputError(f"need block_length and steps (got {block_length}, {steps})")
    if prompt_len < 1 or gen_len < 1 or block_length < 1 or steps < 1 or batch < 1:
        raise RooflineInputError(
            "need prompt_len, gen_len, block_length, steps and batch >= 1 "
            f"(got {prompt_len}, {gen_len}, {block_length}, {steps}, {batch})"
        )
    if gen_len % block_length:
        raise RooflineInputError(f"gen_len {gen_len} must be a multiple of block_length {block_length}")
    num_blocks = gen_len // block_length
    if steps % num_blocks:
        raise RooflineInputError(f"steps {steps} must be a multiple of the number of blocks {num_blocks}")
    return block_length, steps


def step_operators(
    shape: ModelShape, work: Workload, fidelity: Fidelity, *, seq_len: int, query_len: int | None = None,
    llada_sampler: bool = True,
) -> tuple[Operator, ...]:
    """One diffusion step over `seq_len` positions: a bidirectional pass and, in `faithful`, the LM head plus the
    sampler's work on the logits (`work`'s settings). CFG doubles the pass's batch.

    `query_len` (a cached step) feeds only that many positions, which attend all `seq_len` keys: the rest of the
    K and V are read from the cache, so the weights are read for fewer tokens' work and the step slides back
    under the memory roof. None feeds every position (no cache).
    The official sampler takes logits at every position (`work.logits_positions` None); a sampler that projects
    only the positions it can commit (this project's, `workers/samplers/llada/sampler.py`: the current block) passes
    their count. `llada_sampler=False` leaves out LLaDA's sampler ops: the denoising forward alone, which another
    diffusion sampler (roofline/dream.py) adds its own work to."""
    batch, eb = work.batch, work.element_bytes
    fed = seq_len if query_len is None else query_len
    if not modelling(fidelity).llada_lm_head_and_sampler:
        return forward_operators(shape, ForwardPass(batch, fed, seq_len, "none", 0), element_bytes=eb)
    model_batch = 2 * batch if work.cfg_scale > 0.0 else batch
    head = fed if work.logits_positions is None else min(work.logits_positions, fed)
    forward = forward_operators(shape, ForwardPass(model_batch, fed, seq_len, "none", head), element_bytes=eb)
    if not llada_sampler:
        return forward
    return forward + sampler_operators(shape, work, seq_len=head)


def cached_query_len(cache: LladaCache, *, seq_len: int, prefix_len: int, block_length: int) -> int:
    """Positions a cached step of a block feeds: `prefix` the block and everything right of it (seq_len minus the
    cached prefix), `dual` the block alone (Fast-dLLM's PrefixCache and DualCache)."""
    if cache == "prefix":
        return seq_len - prefix_len
    if cache == "dual":
        return block_length
    raise RooflineInputError(f"cache {cache!r} has no cached steps; allowed: prefix, dual")


def block_forwards(*, steps: int, num_blocks: int, forwards: int | None) -> list[int]:
    """Forwards each block runs: the schedule's steps / blocks, or `forwards` (what a confidence rule ran, summed
    over the generation) spread as evenly as integers allow, earlier blocks taking the remainder."""
    per_block = steps // num_blocks
    if forwards is None:
        return [per_block] * num_blocks
    if not num_blocks <= forwards <= steps:
        raise RooflineInputError(
            f"forwards {forwards} must lie between the number of blocks {num_blocks} (one forward each) and the "
            f"steps {steps} (the schedule's cap)"
        )
    base, extra = divmod(forwards, num_blocks)
    return [base + (1 if b < extra else 0) for b in range(num_blocks)]


def block_seq_lens(*, prompt_len: int, gen_len: int, block_length: int, truncate: bool) -> list[int]:
    """SeqLen of each block's steps: prompt + blocks so far when truncating, else prompt + whole generation."""
    num_blocks = gen_len // block_length
    if truncate:
        return [prompt_len + b * block_length for b in range(1, num_blocks + 1)]
    return [prompt_len + gen_len] * num_blocks


def estimate_llada(
    shape: ModelShape, hardware: HardwareProfile, work: Workload, fidelity: Fidelity = "faithful"
) -> LladaEstimate:
    """Cost of a LLaDA generation: per block, its forwards x the cost of one step.

    `work.cache` (an accelerated variant): each block's first step is a full forward that fills the cache, its
    later steps are cached steps (`cached_query_len`). `work.forwards`: the forwards a confidence rule (threshold,
    factor) actually ran, fewer than `steps`; None runs the schedule."""
    prompt_len, gen_len, cache, forwards = work.prompt_len, work.gen_len, work.cache, work.forwards
    cfg_scale, temperature, remasking = work.cfg_scale, work.temperature, work.remasking
    choices = modelling(fidelity, truncate_blocks=work.truncate_blocks)
    require_study_scope(choices, batch=work.batch, cfg_scale=cfg_scale)
    block_length, steps = llada_schedule(work)
    if cfg_scale < 0 or temperature < 0:
        raise RooflineInputError(f"cfg_scale and temperature must be >= 0 (got {cfg_scale}, {temperature})")
    if remasking not in ("low_confidence", "random"):
        raise RooflineInputError(f"unknown remasking {remasking!r}; allowed: low_confidence, random")
    if cache not in ("none", "prefix", "dual"):
        raise RooflineInputError(f"unknown cache {cache!r}; allowed: none, prefix, dual")
    if fidelity == "study" and (cache != "none" or forwards is not None):
        raise RooflineInputError("fidelity 'study' models the vanilla sampler only; use 'faithful' for variants")
    num_blocks = gen_len // block_length
    per_block = block_forwards(steps=steps, num_blocks=num_blocks, forwards=forwards)
    # Steps over the same (length, fed positions) share one cost (every full step of the official sampler).
    costs: dict[tuple[int, int], PhaseCost] = {}

    def step(seq_len: int, query_len: int) -> PhaseCost:
        if (seq_len, query_len) not in costs:
            costs[seq_len, query_len] = cost_of(
                step_operators(shape, work, fidelity, seq_len=seq_len, query_len=query_len), hardware
            )
        return costs[seq_len, query_len]

    seq_lens = block_seq_lens(
        prompt_len=prompt_len, gen_len=gen_len, block_length=block_length, truncate=choices.llada_truncate_blocks
    )
    total = empty_cost()
    blocks: list[BlockEstimate] = []
    for b, (seq_len, runs) in enumerate(zip(seq_lens, per_block, strict=True)):
        full = step(seq_len, seq_len)
        if cache == "none":
            total = total + full.repeated(runs)
            blocks.append(BlockEstimate(seq_len=seq_len, time_per_step_s=full.total_time_s, steps=runs))
            continue
        query = cached_query_len(cache, seq_len=seq_len, prefix_len=prompt_len + b * block_length,
                                 block_length=block_length)
        cached = step(seq_len, query)
        total = total + full + cached.repeated(runs - 1)
        blocks.append(BlockEstimate(seq_len=seq_len, time_per_step_s=full.total_time_s, steps=runs,
                                    cached_query_len=query, cached_step_s=cached.total_time_s))
    return LladaEstimate.of(
        total, hardware, work, fidelity=fidelity, block_length=block_length, steps=steps, forwards=sum(per_block),
        cache=cache, cfg_scale=cfg_scale, temperature=temperature, remasking=remasking, truncate_blocks=choices.llada_truncate_blocks,
        mode="Semi-Autoregressive" if num_blocks > 1 else "Non-Semi-Autoregressive", num_blocks=num_blocks,
        steps_per_block=steps // num_blocks, blocks=blocks, aggregate_ai=total.aggregate_ai,
    )
