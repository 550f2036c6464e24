"""LLaDA (masked diffusion) inference cost: `steps` bidirectional forward passes, block by block."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from roofline.errors import RooflineInputError
from roofline.fidelity import Fidelity, modelling, require_study_scope
from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import HardwareProfile
from roofline.operators import BYTES_PER_ELEMENT, OpClass, Operator
from roofline.phase import PhaseCost, cost_of, empty_cost
from roofline.sampler import Remasking, sampler_operators
from specs.shapes import ModelShape


class BlockEstimate(BaseModel):
    """One semi-autoregressive block: the sequence each of its steps runs over, and the time of one step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq_len: int
    time_per_step_s: float
    steps: int


class LladaEstimate(BaseModel):
    """Predicted cost of one LLaDA generation, per the chosen fidelity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fidelity: Fidelity
    hardware: str
    batch: int
    prompt_len: int
    gen_len: int
    block_length: int
    steps: int
    cfg_scale: float
    temperature: float
    remasking: Remasking
    truncate_blocks: bool
    mode: Literal["Semi-Autoregressive", "Non-Semi-Autoregressive"]
    num_blocks: int
    steps_per_block: int
    blocks: list[BlockEstimate]
    total_s: float
    aggregate_ai: float
    breakdown_s: dict[OpClass, float]
    flops: int
    bytes_: int

    @property
    def mean_step_s(self) -> float:
        return self.total_s / self.steps


def check_llada_schedule(*, prompt_len: int, gen_len: int, block_length: int, steps: int, batch: int) -> None:
    """The official sampler's preconditions (generate.py asserts them), as errors that say what is allowed."""
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


def step_operators(
    shape: ModelShape,
    *,
    seq_len: int,
    batch: int,
    cfg_scale: float,
    fidelity: Fidelity,
    temperature: float = 0.0,
    remasking: Remasking = "low_confidence",
    logits_positions: int | None = None,
    element_bytes: int = BYTES_PER_ELEMENT,
) -> tuple[Operator, ...]:
    """One diffusion step over `seq_len` positions: a bidirectional pass (no KV cache) and, in `faithful`,
    the LM head plus the sampler's work on the logits. CFG doubles the pass's batch.

    The official sampler takes logits at every position (`logits_positions=None`); a sampler that projects
    only the positions it can commit (this project's, `workers/samplers/llada.py`: the current block) passes
    their count."""
    cfg = cfg_scale > 0.0
    if not modelling(fidelity).llada_lm_head_and_sampler:
        return forward_operators(
            shape, ForwardPass(batch, seq_len, seq_len, "none", 0), element_bytes=element_bytes
        )
    model_batch = 2 * batch if cfg else batch
    head = seq_len if logits_positions is None else min(logits_positions, seq_len)
    return forward_operators(
        shape, ForwardPass(model_batch, seq_len, seq_len, "none", head), element_bytes=element_bytes
    ) + sampler_operators(
        shape, batch=batch, seq_len=head, cfg=cfg, temperature=temperature, remasking=remasking,
        element_bytes=element_bytes,
    )


def block_seq_lens(*, prompt_len: int, gen_len: int, block_length: int, truncate: bool) -> list[int]:
    """SeqLen of each block's steps: prompt + blocks so far when truncating, else prompt + whole generation."""
    num_blocks = gen_len // block_length
    if truncate:
        return [prompt_len + b * block_length for b in range(1, num_blocks + 1)]
    return [prompt_len + gen_len] * num_blocks


def estimate_llada(
    shape: ModelShape,
    hardware: HardwareProfile,
    *,
    prompt_len: int,
    gen_len: int,
    block_length: int,
    steps: int,
    batch: int = 1,
    cfg_scale: float = 0.0,
    fidelity: Fidelity = "faithful",
    truncate_blocks: bool = False,
    temperature: float = 0.0,
    remasking: Remasking = "low_confidence",
    logits_positions: int | None = None,
    element_bytes: int = BYTES_PER_ELEMENT,
) -> LladaEstimate:
    """Cost of a LLaDA generation: sum over blocks of steps-per-block x the cost of one step."""
    choices = modelling(fidelity, truncate_blocks=truncate_blocks)
    require_study_scope(choices, batch=batch, cfg_scale=cfg_scale)
    check_llada_schedule(
        prompt_len=prompt_len, gen_len=gen_len, block_length=block_length, steps=steps, batch=batch
    )
    if cfg_scale < 0 or temperature < 0:
        raise RooflineInputError(f"cfg_scale and temperature must be >= 0 (got {cfg_scale}, {temperature})")
    if remasking not in ("low_confidence", "random"):
        raise RooflineInputError(f"unknown remasking {remasking!r}; allowed: low_confidence, random")
    num_blocks = gen_len // block_length
    steps_per_block = steps // num_blocks
    # Blocks that run over the same length (all of them in the official sampler) share one step cost.
    step_costs: dict[int, tuple[PhaseCost, BlockEstimate]] = {}
    steps_at: dict[int, int] = {}
    blocks: list[BlockEstimate] = []
    for seq_len in block_seq_lens(
        prompt_len=prompt_len,
        gen_len=gen_len,
        block_length=block_length,
        truncate=choices.llada_truncate_blocks,
    ):
        if seq_len not in step_costs:
            ops = step_operators(
                shape,
                seq_len=seq_len,
                batch=batch,
                cfg_scale=cfg_scale,
                fidelity=fidelity,
                temperature=temperature,
                remasking=remasking,
                logits_positions=logits_positions,
                element_bytes=element_bytes,
            )
            step = cost_of(ops, hardware)
            block = BlockEstimate(seq_len=seq_len, time_per_step_s=step.total_time_s, steps=steps_per_block)
            step_costs[seq_len] = (step, block)
        blocks.append(step_costs[seq_len][1])
        steps_at[seq_len] = steps_at.get(seq_len, 0) + steps_per_block
    total = empty_cost()
    for seq_len, (step, _) in step_costs.items():
        total = total + step.repeated(steps_at[seq_len])
    return LladaEstimate(
        fidelity=fidelity,
        hardware=hardware.name,
        batch=batch,
        prompt_len=prompt_len,
        gen_len=gen_len,
        block_length=block_length,
        steps=steps,
        cfg_scale=cfg_scale,
        temperature=temperature,
        remasking=remasking,
        truncate_blocks=choices.llada_truncate_blocks,
        mode="Semi-Autoregressive" if num_blocks > 1 else "Non-Semi-Autoregressive",
        num_blocks=num_blocks,
        steps_per_block=steps_per_block,
        blocks=blocks,
        total_s=total.total_time_s,
        aggregate_ai=total.aggregate_ai,
        breakdown_s=total.time_s,
        flops=total.total_flops,
        bytes_=total.total_bytes,
    )
