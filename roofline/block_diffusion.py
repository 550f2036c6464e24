"""Block diffusion (Fast-dLLM v2) inference cost: a prefill, then per block its in-block forwards and one completing
forward, every one of them against the KV cache of the blocks before it.

The forwards are the official `generate`'s (arXiv:2509.26328; workers/samplers/block_diffusion/sampler.py runs them), laid
out by `specs.block_diffusion.schedule`:

* the prefill feeds the prompt's whole blocks once, costed causal (its block-causal mask attends at least that);
* each in-block forward feeds the block (`block_length` tokens) and attends the cached prefix and the block, as an
  autoregressive decode pass attends its cache but with a block of queries; the LM head maps the sub-block's
  `sub_block_length` positions, and the token choice reads them (softmax and argmax over the vocabulary);
* with the sub-block cache some in-block forwards feed one sub-block instead, against the same keys;
* the completing forward feeds the block again, its LM head the last position only.

How many in-block forwards run is data-dependent below threshold 1: the run's measured forwards (`forwards`), else
the fixed schedule's K (threshold 1: one token per row per forward). A measured total is split so that the cost is
a lower bound: every block its least (one forward per sub-block with masks), the rest to the cheapest blocks (the
earliest: fewest cached keys); with the sub-block cache every in-block forward but each block's first is costed
as a sub-block's. Not modelled (the roofline stays a lower bound): top-p's sort in a sampled run, the host's reads
between forwards.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from roofline.errors import RooflineInputError
from roofline.estimate import DiffusionEstimate
from roofline.fidelity import Fidelity
from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import HardwareProfile
from roofline.operators import Operator, elementwise
from roofline.phase import PhaseCost, cost_of, empty_cost
from roofline.workload import Workload
from specs.block_diffusion import Schedule, schedule
from specs.shapes import ModelShape


class BlockCost(BaseModel):
    """One block: what it attends, how many forwards of each kind it was costed at, and their times."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_start: int  # cached positions every forward of the block attends besides the block
    block_forwards: int  # in-block forwards feeding the whole block
    sub_forwards: int  # in-block forwards feeding one sub-block (the sub-block cache)
    completes: bool
    block_forward_s: float
    sub_forward_s: float
    complete_s: float


class BlockDiffusionEstimate(DiffusionEstimate):
    """Predicted cost of one block-diffusion generation; `forwards`: every forward costed (the prefill, the
    in-block ones, the completing ones)."""

    block_length: int
    sub_block_length: int
    sub_block_cache: bool
    temperature: float
    max_forwards: int  # K: the fixed schedule's (threshold 1)
    prefill_length: int
    prefill_s: float
    blocks: list[BlockCost]


def token_choice_operators(shape: ModelShape, work: Workload, *, rows: int) -> tuple[Operator, ...]:
    """The token choice of one in-block forward over `rows` (batch x sub-block) logit rows: the division by the
    temperature (> 0), the softmax, and the argmax (or the draw) reading the probabilities."""
    unary, read, hot = 2 * work.element_bytes, work.element_bytes, work.temperature > 0
    vocab = shape.vocab_size
    ops = [elementwise("softmax", "sampler", rows, vocab, bytes_per_element=unary),
           elementwise("categorical" if hot else "max", "sampler", rows, vocab, bytes_per_element=read)]
    if hot:
        ops.insert(0, elementwise("temperature_div", "sampler", rows, vocab, bytes_per_element=unary))
    return tuple(ops)


def forwards_per_block(plan: Schedule, forwards: int | None) -> list[int]:
    """In-block forwards of each block: the schedule's K (threshold 1), or a measured total (prefill and completing
    forwards included) split as a lower bound: each block its least, the rest to the earliest blocks."""
    most = [sum(b.masked) for b in plan.blocks]
    if forwards is None:
        return most
    fixed = (plan.prefill_length > 0) + sum(b.completes for b in plan.blocks)
    if not plan.min_forwards <= forwards <= plan.max_forwards:
        raise RooflineInputError(
            f"forwards {forwards} must lie between the schedule's least {plan.min_forwards} (one per sub-block) and "
            f"its K {plan.max_forwards} (threshold 1)"
        )
    per_block = [b.sub_blocks for b in plan.blocks]
    extra = forwards - fixed - sum(per_block)
    for i, ceiling in enumerate(most):
        take = min(extra, ceiling - per_block[i])
        per_block[i] += take
        extra -= take
    return per_block


def block_plan(work: Workload) -> Schedule:
    """The forwards of `work`'s generation (`specs.block_diffusion.schedule`); a schedule it cannot run is a
    `RooflineInputError` that says why."""
    if work.block_length is None or work.sub_block_length is None:
        raise RooflineInputError(
            f"need block_length and sub_block_length (got {work.block_length}, {work.sub_block_length})"
        )
    try:
        return schedule(work.prompt_len, work.gen_len, work.block_length, work.sub_block_length,
                        work.prefill_one_block_prompt)  # fmt: skip
    except ValueError as exc:
        raise RooflineInputError(str(exc)) from None


def estimate_block_diffusion(
    shape: ModelShape, hardware: HardwareProfile, work: Workload, fidelity: Fidelity = "faithful"
) -> BlockDiffusionEstimate:
    """Cost of a block-diffusion generation of `gen_len` tokens (module docstring); `work.forwards`: what the run
    measured, None the fixed schedule's K. Only `faithful`: the study modelled no block diffusion."""
    if fidelity != "faithful":
        raise RooflineInputError(f"fidelity {fidelity!r}: the study has no block-diffusion model; use 'faithful'")
    batch, eb = work.batch, work.element_bytes
    if batch < 1 or work.temperature < 0:
        raise RooflineInputError(f"need batch >= 1 and temperature >= 0 (got {batch}, {work.temperature})")
    plan = block_plan(work)
    block_length, sub_block_length = plan.block_length, plan.sub_block_length
    choose = cost_of(token_choice_operators(shape, work, rows=batch * sub_block_length), hardware)

    def forward(fed: int, kv: int, head: int, mask: str = "none") -> PhaseCost:
        return cost_of(forward_operators(shape, ForwardPass(batch, fed, kv, mask, head), element_bytes=eb), hardware)  # type: ignore[arg-type]

    total = empty_cost()
    prefill_s = 0.0
    if plan.prefill_length:
        prefill = forward(plan.prefill_length, plan.prefill_length, 1, "causal")
        total, prefill_s = total + prefill, prefill.total_time_s
    blocks: list[BlockCost] = []
    for block, runs in zip(plan.blocks, forwards_per_block(plan, work.forwards), strict=True):
        keys = block.cache_start + block_length
        full = forward(block_length, keys, sub_block_length) + choose
        sub = forward(sub_block_length, keys, sub_block_length) + choose
        complete = forward(block_length, keys, 1)
        subs = max(runs - 1, 0) if work.sub_block_cache else 0
        total = total + full.repeated(runs - subs) + sub.repeated(subs) + complete.repeated(int(block.completes))
        blocks.append(BlockCost(
            cache_start=block.cache_start, block_forwards=runs - subs, sub_forwards=subs, completes=block.completes,
            block_forward_s=full.total_time_s, sub_forward_s=sub.total_time_s, complete_s=complete.total_time_s,
        ))  # fmt: skip
    costed = (plan.prefill_length > 0) + sum(b.block_forwards + b.sub_forwards + b.completes for b in blocks)
    return BlockDiffusionEstimate.of(
        total, hardware, work, fidelity=fidelity, block_length=block_length, sub_block_length=sub_block_length,
        sub_block_cache=work.sub_block_cache, temperature=work.temperature, forwards=costed,
        max_forwards=plan.max_forwards, prefill_length=plan.prefill_length,
        prefill_s=prefill_s, blocks=blocks, aggregate_ai=total.aggregate_ai,
    )  # fmt: skip
