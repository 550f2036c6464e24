"""The data behind the roofline figures: operator points under the roofs, and latency vs generation length."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from roofline.errors import RooflineInputError
from roofline.fidelity import FIDELITIES, Fidelity, modelling
from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import HardwareProfile
from roofline.llada import estimate_llada, step_operators
from roofline.llama import decode_passes, estimate_llama
from roofline.operators import BYTES_PER_ELEMENT, OpClass, Operator, Unit
from specs.shapes import ModelShape
from specs.registry import Arch, preset_shape

Phase = Literal["llama prefill", "llama decode", "llada step"]

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
    steps: int | None  # LLaDA only
    latency_s: float


def _points(ops: Iterable[Operator], phase: Phase, hardware: HardwareProfile) -> list[OperatorPoint]:
    # Operators that move no bytes (the fused softmax) have infinite intensity: no place on a log axis.
    return [
        OperatorPoint(
            name=op.name,
            group=_GROUPS.get(op.name, "sampler" if op.op_class == "sampler" else "nonlinear"),
            op_class=op.op_class,
            phase=phase,
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
) -> list[OperatorPoint]:
    """Every operator of a LLaMA prefill, of LLaMA's last decode pass and of one LLaDA step over the whole
    prompt + generation (the last block's step in `study`, every step in `faithful`), tensors of
    `element_bytes` each."""
    if prompt_len < 1 or gen_len < 1 or batch < 1:
        raise RooflineInputError(
            f"need prompt_len, gen_len and batch >= 1 (got {prompt_len}, {gen_len}, {batch})"
        )
    llama = llama_shape or preset_shape("llama", "8b")
    llada = llada_shape or preset_shape("llada", "8b")
    mask = "study-causal" if modelling(fidelity).causal_rule == "study" else "causal"
    last_kv = prompt_len + max(decode_passes(gen_len, fidelity), 1)
    eb = element_bytes
    prefill = forward_operators(llama, ForwardPass(batch, prompt_len, prompt_len, mask, 1), element_bytes=eb)
    decode = forward_operators(llama, ForwardPass(batch, 1, last_kv, "none", 1), element_bytes=eb)
    step = step_operators(
        llada, seq_len=prompt_len + gen_len, batch=batch, cfg_scale=0.0, fidelity=fidelity, element_bytes=eb
    )
    return (
        _points(prefill, "llama prefill", hardware)
        + _points(decode, "llama decode", hardware)
        + _points(step, "llada step", hardware)
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
) -> list[LatencyPoint]:
    """Latency of both models at batch 1 for each generation length, under each fidelity.

    LLaDA runs `round(block_length x steps_per_token)` steps per block (1.0: one token per step, the
    LLaDA paper's default), so every length that is a multiple of `block_length` is a valid schedule.
    """
    llama = llama_shape or preset_shape("llama", "8b")
    llada = llada_shape or preset_shape("llada", "8b")
    steps_per_block = max(1, round(block_length * steps_per_token))
    points: list[LatencyPoint] = []
    for fidelity in fidelities:
        for gen_len in gen_lens:
            if gen_len < block_length or gen_len % block_length:
                raise RooflineInputError(
                    f"generation length {gen_len} must be a multiple of block_length {block_length}"
                )
            steps = steps_per_block * (gen_len // block_length)
            ar = estimate_llama(llama, hardware, prompt_len=prompt_len, gen_len=gen_len, fidelity=fidelity)
            diffusion = estimate_llada(
                llada,
                hardware,
                prompt_len=prompt_len,
                gen_len=gen_len,
                block_length=block_length,
                steps=steps,
                fidelity=fidelity,
            )
            points += [
                LatencyPoint(arch=arch, fidelity=fidelity, prompt_len=prompt_len, gen_len=gen_len, steps=arch_steps,
                             latency_s=latency_s)
                for arch, arch_steps, latency_s in (("llama", None, ar.total_s), ("llada", steps, diffusion.total_s))
            ]
    return points
