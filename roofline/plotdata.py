"""The data behind the roofline figures: operator points under the roofs, and latency vs generation length."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict

from roofline.crossover import check_pair
from roofline.dream import dream_step_operators, estimate_dream
from roofline.errors import RooflineInputError
from roofline.fidelity import FIDELITIES, Fidelity, modelling
from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import HardwareProfile
from roofline.llada import estimate_llada, step_operators
from roofline.llama import decode_passes, estimate_llama
from roofline.operators import BYTES_PER_ELEMENT, OpClass, Operator, Unit
from roofline.workload import Workload
from specs.registry import Arch, family, full_shape
from specs.shapes import ModelShape

# "<arch> prefill", "<arch> decode" (autoregressive) or "<arch> step" (diffusion): "llama prefill", "llada step", ...
Phase = str
Stage = Literal["prefill", "decode", "step"]

# Legend groups, after roofline-plot.md ("qkv mlp", "up/gate/down", "qk/pv").
_GROUPS: dict[str, str] = {
    "q_proj": "qkv/o proj",
    "k_proj": "qkv/o proj",
    "v_proj": "qkv/o proj",
    "o_proj": "qkv/o proj",
    "gate_proj": "up/gate/down",
    "up_proj": "up/gate/down",
    "down_proj": "up/gate/down",
    "qk": "qk/pv",
    "pv": "qk/pv",
    "lm_head": "lm head",
}


class OperatorPoint(BaseModel):
    """One operator instance of one phase, placed on the roofline of `hardware`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    group: str  # legend group: "qkv/o proj", "up/gate/down", "qk/pv", "lm head", "nonlinear", "sampler"
    op_class: OpClass
    phase: Phase
    stage: Stage  # what the phase is, whatever the family
    unit: Unit  # tensor cores or CUDA cores: which roof applies
    flops: int  # one instance
    bytes_: int  # one instance
    count: int  # instances per pass (layers x heads x batch)
    arithmetic_intensity: float
    attainable_flops_per_s: float


class LatencyPoint(BaseModel):
    """Predicted end-to-end latency of one generation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arch: Arch
    fidelity: Fidelity
    prompt_len: int
    gen_len: int
    steps: int | None  # diffusion families only
    latency_s: float


def _points(ops: Iterable[Operator], phase: Phase, stage: Stage, hardware: HardwareProfile) -> list[OperatorPoint]:
    # Operators that move no bytes (the fused softmax) have infinite intensity: no place on a log axis.
    return [
        OperatorPoint(
            name=op.name,
            group=_GROUPS.get(op.name, "sampler" if op.op_class == "sampler" else "nonlinear"),
            op_class=op.op_class,
            phase=phase,
            stage=stage,
            unit=op.unit,
            flops=op.flops,
            bytes_=op.bytes_,
            count=op.count,
            arithmetic_intensity=op.arithmetic_intensity,
            attainable_flops_per_s=op.attainable_flops_per_s(hardware),
        )
        for op in ops
        if op.bytes_
    ]


def operator_points(
    hardware: HardwareProfile,
    *,
    prompt_len: int,
    gen_len: int,
    batch: int = 1,
    llama_shape: ModelShape | None = None,
    llada_shape: ModelShape | None = None,
    fidelity: Fidelity = "faithful",
    element_bytes: int = BYTES_PER_ELEMENT,
    ar: str = "llama",
    diffusion: str = "llada",
    ar_shape: ModelShape | None = None,
    diffusion_shape: ModelShape | None = None,
) -> list[OperatorPoint]:
    """Every operator of the autoregressive model's prefill and last decode pass, and of one step of the diffusion
    model over the whole prompt + generation (LLaDA: the last block's step in `study`, every step in `faithful`,
    logits at every position; Dream: its first step, logits over the generation), tensors of `element_bytes` each.
    `ar` and `diffusion` name the pair's families, LLaMA and LLaDA by default; their shapes are `ar_shape` and
    `diffusion_shape` (`llama_shape`, `llada_shape`: the same under their first names), None the published ones.
    Phases are named "<arch> prefill", "<arch> decode" and "<arch> step"; `OperatorPoint.stage` says which."""
    if prompt_len < 1 or gen_len < 1 or batch < 1:
        raise RooflineInputError(
            f"need prompt_len, gen_len and batch >= 1 (got {prompt_len}, {gen_len}, {batch})"
        )
    check_pair(ar, diffusion)
    ar_model = ar_shape or llama_shape or full_shape(ar)
    diffusion_model = diffusion_shape or llada_shape or full_shape(diffusion)
    mask = "study-causal" if modelling(fidelity).causal_rule == "study" else "causal"
    last_kv = prompt_len + max(decode_passes(gen_len, fidelity), 1)
    eb = element_bytes
    prefill = forward_operators(ar_model, ForwardPass(batch, prompt_len, prompt_len, mask, 1), element_bytes=eb)
    decode = forward_operators(ar_model, ForwardPass(batch, 1, last_kv, "none", 1), element_bytes=eb)
    work = Workload(prompt_len=prompt_len, gen_len=gen_len, batch=batch, element_bytes=eb)
    if family(diffusion).sampler == "dream":
        step = dream_step_operators(diffusion_model, work, fidelity)
    else:
        step = step_operators(diffusion_model, work, fidelity, seq_len=work.seq_len)
    return (
        _points(prefill, f"{ar} prefill", "prefill", hardware)
        + _points(decode, f"{ar} decode", "decode", hardware)
        + _points(step, f"{diffusion} step", "step", hardware)
    )


def latency_vs_generation_length(
    hardware: HardwareProfile,
    gen_lens: Iterable[int],
    *,
    prompt_len: int = 128,
    block_length: int = 32,
    steps_per_token: float = 1.0,
    llama_shape: ModelShape | None = None,
    llada_shape: ModelShape | None = None,
    fidelities: Iterable[Fidelity] = FIDELITIES,
    ar: str = "llama",
    diffusion: str = "llada",
    ar_shape: ModelShape | None = None,
    diffusion_shape: ModelShape | None = None,
) -> list[LatencyPoint]:
    """Latency of both models of a pair (LLaMA and LLaDA by default) at batch 1 for each generation length, under
    each fidelity.

    LLaDA runs `round(block_length x steps_per_token)` steps per block (1.0: one token per step, the
    LLaDA paper's default), so every length that is a multiple of `block_length` is a valid schedule; Dream runs
    `round(gen_len x steps_per_token)` steps over the whole generation (`block_length` only checks the lengths, so
    both families of a figure share them).
    """
    check_pair(ar, diffusion)
    ar_model = ar_shape or llama_shape or full_shape(ar)
    diffusion_model = diffusion_shape or llada_shape or full_shape(diffusion)
    whole_sequence = family(diffusion).sampler == "dream"
    steps_per_block = max(1, round(block_length * steps_per_token))
    points: list[LatencyPoint] = []
    for fidelity in fidelities:
        for gen_len in gen_lens:
            if gen_len < block_length or gen_len % block_length:
                raise RooflineInputError(
                    f"generation length {gen_len} must be a multiple of block_length {block_length}"
                )
            work = Workload(prompt_len=prompt_len, gen_len=gen_len)
            ar_estimate = estimate_llama(ar_model, hardware, work, fidelity)
            if whole_sequence:
                steps = max(1, round(gen_len * steps_per_token))
                diffusion_s = estimate_dream(diffusion_model, hardware, replace(work, steps=steps), fidelity).total_s
            else:
                steps = steps_per_block * (gen_len // block_length)
                diffusion_s = estimate_llada(
                    diffusion_model, hardware, replace(work, block_length=block_length, steps=steps), fidelity
                ).total_s
            points += [
                LatencyPoint(arch=arch, fidelity=fidelity, prompt_len=prompt_len, gen_len=gen_len, steps=arch_steps,
                             latency_s=latency_s)
                for arch, arch_steps, latency_s in ((ar, None, ar_estimate.total_s), (diffusion, steps, diffusion_s))
            ]
    return points
