"""LLaMA (autoregressive) inference cost: one causal prefill, then one KV-cached decode pass per new token."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from roofline.errors import RooflineInputError
from roofline.estimate import Estimate
from roofline.fidelity import Fidelity, modelling, require_study_scope
from roofline.forward import ForwardPass, forward_operators
from roofline.hardware import HardwareProfile
from roofline.operators import BYTES_PER_ELEMENT, OpClass
from roofline.phase import PhaseCost, cost_of, cost_of_affine_passes
from roofline.workload import Workload
from specs.shapes import ModelShape


class PhaseSummary(BaseModel):
    """One phase as the study prints it: total time and arithmetic intensities, plus what they come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total_s: float
    linear_ai: float
    attention_ai: float
    aggregate_ai: float
    time_by_class_s: dict[OpClass, float]
    flops: int
    bytes_: int

    @classmethod
    def of(cls, cost: PhaseCost) -> PhaseSummary:
        return cls(
            total_s=cost.total_time_s,
            linear_ai=cost.linear_ai,
            attention_ai=cost.attention_ai,
            aggregate_ai=cost.aggregate_ai,
            time_by_class_s=cost.time_s,
            flops=cost.total_flops,
            bytes_=cost.total_bytes,
        )


class LlamaEstimate(Estimate):
    """Predicted cost of one LLaMA generation: its prefill and its decode passes, per the chosen fidelity."""

    decode_passes: int
    compiled_decode: bool = False  # the decode passes ran compiled (no per-operator dispatch floor)
    prefill: PhaseSummary
    decode: PhaseSummary | None

    @property
    def ttft_s(self) -> float:
        """Time to first token: the prefill (its logits give the first token)."""
        return self.prefill.total_s

    @property
    def mean_decode_pass_s(self) -> float | None:
        """Mean time of one decode pass (the inter-token latency), None without decode passes."""
        return self.decode.total_s / self.decode_passes if self.decode else None


def decode_passes(gen_len: int, fidelity: Fidelity) -> int:
    """Decode passes for `gen_len` new tokens: the study runs one per token, a real loop one fewer."""
    if modelling(fidelity).decode_passes_equal_gen_len:
        return gen_len
    return max(gen_len - 1, 0)


def llama_phase_costs(
    shape: ModelShape, hardware: HardwareProfile, work: Workload, fidelity: Fidelity
) -> tuple[PhaseCost, PhaseCost | None, int]:
    """(prefill cost, decode cost or None, number of decode passes).

    `work.compiled_decode` (the `compile` variant): the decode step runs as one compiled graph (CUDA graphs on a
    GPU), so its operators are costed on their roofs alone, without the profile's per-operator dispatch floor;
    the prefill stays eager and keeps it."""
    batch, prompt_len, gen_len, eb = work.batch, work.prompt_len, work.gen_len, work.element_bytes
    choices = modelling(fidelity)
    require_study_scope(choices, batch=batch)
    if prompt_len < 1 or gen_len < 0 or batch < 1:
        raise RooflineInputError(
            f"need prompt_len >= 1, gen_len >= 0 and batch >= 1 (got {prompt_len}, {gen_len}, {batch})"
        )
    mask = "study-causal" if choices.causal_rule == "study" else "causal"
    # The LM head maps only the last position to logits (what generate() does with logits_to_keep=1).
    prefill = cost_of(forward_operators(shape, ForwardPass(batch, prompt_len, prompt_len, mask, 1), element_bytes=eb),
                      hardware)  # fmt: skip
    passes = decode_passes(gen_len, fidelity)
    if passes == 0:
        return prefill, None, 0
    # Decode pass i (1-based) feeds one token and attends the P + i cached positions, unmasked.
    first = forward_operators(shape, ForwardPass(batch, 1, prompt_len + 1, "none", 1), element_bytes=eb)
    last = forward_operators(shape, ForwardPass(batch, 1, prompt_len + passes, "none", 1), element_bytes=eb)
    decode_hardware = hardware.model_copy(update={"dispatch_s": 0.0}) if work.compiled_decode else hardware
    return prefill, cost_of_affine_passes(first, last, passes, decode_hardware), passes


def estimate_llama(
    shape: ModelShape, hardware: HardwareProfile, work: Workload, fidelity: Fidelity = "faithful"
) -> LlamaEstimate:
    """Cost of a LLaMA generation: prefill + decode, summed per operator class (`llama_phase_costs`)."""
    if fidelity == "study" and work.compiled_decode:
        raise RooflineInputError("fidelity 'study' models the eager decode loop only; use 'faithful' for variants")
    prefill, decode, passes = llama_phase_costs(shape, hardware, work, fidelity)
    total = prefill if decode is None else prefill + decode
    return LlamaEstimate.of(
        total, hardware, work, fidelity=fidelity, decode_passes=passes, compiled_decode=work.compiled_decode,
        prefill=PhaseSummary.of(prefill), decode=None if decode is None else PhaseSummary.of(decode),
    )


def decode_pass_bytes(shape: ModelShape, *, batch: int, kv_len: int, element_bytes: int = BYTES_PER_ELEMENT) -> int:
    """DRAM bytes the roofline charges one decode pass that attends `kv_len` positions per sequence: every weight
    once (the LM head included; the embedding table is not read, only the batch's rows), the live keys and values
    once, and the activations. What a decode step's memory roof is made of: a profile of the step compares its
    time with these bytes over the bandwidth (tests/gpu/profile_decode.py), as the report does with its runs."""
    ops = forward_operators(shape, ForwardPass(batch, 1, kv_len, "none", 1), element_bytes=element_bytes)
    return sum(op.count * op.bytes_ for op in ops)


def mean_decode_pass_bytes(shape: ModelShape, work: Workload) -> float:
    """The mean of `decode_pass_bytes` over a generation's decode passes (KV lengths P + 1 ... P + G - 1): the
    bytes are affine in the length, so the mean of the first and the last."""
    passes = decode_passes(work.gen_len, "faithful")
    if passes == 0:
        raise RooflineInputError(f"a generation of {work.gen_len} token(s) has no decode pass")
    batch, eb = work.batch, work.element_bytes
    first = decode_pass_bytes(shape, batch=batch, kv_len=work.prompt_len + 1, element_bytes=eb)
    last = decode_pass_bytes(shape, batch=batch, kv_len=work.prompt_len + passes, element_bytes=eb)
    return (first + last) / 2
