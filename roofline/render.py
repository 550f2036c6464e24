"""Rendering estimates for the CLI: the study's text layout (to the byte) and the JSON documents."""

from __future__ import annotations

from typing import Any

from roofline.block_diffusion import BlockDiffusionEstimate
from roofline.dream import DreamEstimate
from roofline.estimate import Estimate
from roofline.hardware import HardwareProfile
from roofline.llada import LladaEstimate
from roofline.llama import LlamaEstimate, PhaseSummary
from roofline.memory import MemoryFootprint
from roofline.operators import STUDY_CLASSES, OpClass

# The study's labels, in its print order.
_CLASS_LABELS: dict[OpClass, str] = {
    "ffn_linear": "FFN Linear Layers",
    "mha_linear": "MHA Linear Layers",
    "mha_attention": "MHA Attention",
    "nonlinear": "Nonlinear Ops",
    "classifier": "Classifier",
    "sampler": "Sampler (logits post-processing)",
}
_RULE = "=" * 50
_THIN_RULE = "-" * 50
_GIB = 1 << 30


def _phase_lines(title: str, phase: PhaseSummary) -> list[str]:
    return [
        f"--- {title} Phase Analysis ---",
        f"Total: {phase.total_s:.6f} s",
        f"Linear AI: {phase.linear_ai:.4f}",
        f"Attention AI: {phase.attention_ai:.4f}",
        f"Aggregate AI: {phase.aggregate_ai:.4f}",
    ]


def _breakdown_lines(
    breakdown_s: dict[OpClass, float], total_s: float, *, scale: float, unit: str, digits: int
) -> list[str]:
    classes = [c for c in breakdown_s if c in STUDY_CLASSES or breakdown_s[c] > 0]
    return [
        f"  - {_CLASS_LABELS[c]}: {breakdown_s[c] * scale:.{digits}f} {unit} ({100 * breakdown_s[c] / total_s:.2f}%)"
        for c in classes
    ]


def _memory_line(memory: MemoryFootprint, hardware: HardwareProfile) -> str:
    fits = "fits" if memory.peak_bytes <= hardware.memory_bytes else "does NOT fit"
    return (
        f"Memory: weights {memory.weights_bytes / _GIB:.2f} GiB, KV cache {memory.kv_cache_bytes / _GIB:.2f} GiB, "
        f"activations {memory.activation_bytes / _GIB:.2f} GiB, logits {memory.logits_bytes / _GIB:.2f} GiB; "
        f"peak {memory.peak_bytes / _GIB:.2f} GiB of {hardware.memory_bytes / _GIB:.2f} GiB ({fits})"
    )


def llama_text(est: LlamaEstimate, memory: MemoryFootprint, hardware: HardwareProfile) -> str:
    """run_llama_roofline_model.py's printout; `faithful` appends a section of its own."""
    lines = [
        "--- Total Runtime Breakdown ---",
        f"Total Runtime: {est.total_s:.6f} s",
        *_breakdown_lines(est.breakdown_s, est.total_s, scale=1.0, unit="s", digits=6),
        "",
        *_phase_lines("Prefill (Prompt)", est.prefill),
    ]
    if est.decode is not None:
        lines += ["", *_phase_lines("Decode (Generation)", est.decode)]
    if est.fidelity == "faithful":
        itl = est.mean_decode_pass_s
        lines += [
            "",
            "--- Faithful Model (beyond the study) ---",
            f"Hardware: {hardware.name}",
            f"Batch: {est.batch}, Prompt: {est.prompt_len}, Generation: {est.gen_len}, Decode Passes: {est.decode_passes}",
            f"TTFT: {est.ttft_s:.6f} s, Mean Decode Pass: " + ("n/a" if itl is None else f"{itl:.6f} s")
            + (" (compiled: no dispatch floor)" if est.compiled_decode else ""),
            _memory_line(memory, hardware),
        ]
    return "\n".join(lines) + "\n"


def _variant_lines(est: LladaEstimate) -> list[str]:
    """A variant's cache and forwards (nothing for the vanilla sampler)."""
    if est.cache == "none" and est.forwards == est.steps:
        return []
    lines = [f"Variant: cache {est.cache}, forwards {est.forwards} of {est.steps} steps"]
    first = est.blocks[0]
    if first.cached_step_s is not None:
        lines.append(f"Block 1: full step {first.time_per_step_s * 1e3:.4f} ms, cached step over "
                     f"{first.cached_query_len} positions {first.cached_step_s * 1e3:.4f} ms")
    return lines


def llada_text(est: LladaEstimate, memory: MemoryFootprint, hardware: HardwareProfile) -> str:
    """run_llada_roofline_model.py's printout; `faithful` appends a section of its own."""
    lines = [
        _RULE,
        "LLaDA Theoretical Performance Analysis",
        _RULE,
        f"Mode: {est.mode}",
        f"Prompt: {est.prompt_len}, Generation: {est.gen_len}, Total Steps: {est.steps}",
        f"Blocks: {est.num_blocks}, Block Length: {est.block_length}, Steps per Block: {est.steps_per_block}",
        "",
        "--- Block-by-Block Analysis ---",
        *(
            f"Block {i}: SeqLen={b.seq_len}, Time/Step={b.time_per_step_s * 1e3:.4f} ms, Steps={b.steps}"
            for i, b in enumerate(est.blocks, start=1)
        ),
        *_total_lines(est),
    ]
    if est.fidelity == "faithful":
        cfg = f"on (scale {est.cfg_scale:g}, model batch {2 * est.batch})" if est.cfg_scale > 0 else "off"
        feed = (
            "prompt + blocks so far (truncated)"
            if est.truncate_blocks
            else "prompt + whole generation, every step"
        )
        lines += [
            "",
            "--- Faithful Model (beyond the study) ---",
            f"Hardware: {hardware.name}",
            f"Batch: {est.batch}, CFG: {cfg}, SeqLen: {feed}",
            f"LM head over every position; sampler: temperature {est.temperature:g}, {est.remasking} remasking",
            *_variant_lines(est),
            f"Mean Time/Step: {est.mean_step_s * 1e3:.4f} ms",
            "Total Runtime Breakdown:",
            *_breakdown_lines(est.breakdown_s, est.total_s, scale=1e3, unit="ms", digits=4),
            _memory_line(memory, hardware),
        ]
    return "\n".join(lines) + "\n"


def _total_lines(est: LladaEstimate | DreamEstimate) -> list[str]:
    """The whole generation's runtime and arithmetic intensity, as the study's printout closes a diffusion run."""
    return [
        "",
        _THIN_RULE,
        "--- Total Generation Analysis ---",
        f"Total Estimated Runtime: {est.total_s * 1e3:.4f} ms",
        f"Final Aggregate Arithmetic Intensity (AI): {est.aggregate_ai:.4f}",
    ]


def dream_text(est: DreamEstimate, memory: MemoryFootprint, hardware: HardwareProfile, title: str = "Dream") -> str:
    """A whole-sequence diffusion generation in the layout of the LLaDA printout: one "block" over the whole
    generation, every step over prompt + generation; `faithful` appends the sampler and the memory."""
    lines = [
        _RULE,
        f"{title} Theoretical Performance Analysis",
        _RULE,
        "Mode: Whole-Sequence Denoising (no blocks, no cache)",
        f"Prompt: {est.prompt_len}, Generation: {est.gen_len}, Total Steps: {est.steps}",
        f"SeqLen: {est.seq_len} every step, Time/Forward: {est.forward_s * 1e3:.4f} ms, "
        f"Mean Time/Step: {est.mean_step_s * 1e3:.4f} ms",
        *_total_lines(est),
    ]
    if est.fidelity == "faithful":
        filters = "".join(f", {name} {value:g}" for name, value in (("top-p", est.top_p), ("top-k", est.top_k))
                          if value is not None)
        lines += [
            "",
            "--- Faithful Model (beyond the study) ---",
            f"Hardware: {hardware.name}",
            f"Batch: {est.batch}, LM head over {est.logits_positions} positions per sequence",
            f"Sampler: alg {est.alg}, temperature {est.temperature:g}{filters}; {est.masked_positions} masked "
            "positions per sequence over the steps",
            "Total Runtime Breakdown:",
            *_breakdown_lines(est.breakdown_s, est.total_s, scale=1e3, unit="ms", digits=4),
            _memory_line(memory, hardware),
        ]
    return "\n".join(lines) + "\n"


def block_diffusion_text(
    est: BlockDiffusionEstimate, memory: MemoryFootprint, hardware: HardwareProfile, title: str = "Fast-dLLM v2"
) -> str:
    """A block-diffusion generation: the prefill, then each block's forwards against its cached prefix."""
    lines = [
        _RULE,
        f"{title} Theoretical Performance Analysis",
        _RULE,
        f"Mode: Block Diffusion (blocks of {est.block_length}, sub-blocks of {est.sub_block_length}, KV cache of the "
        f"finished blocks{', sub-block cache' if est.sub_block_cache else ''})",
        f"Prompt: {est.prompt_len}, Generation: {est.gen_len}, Batch: {est.batch}, Hardware: {hardware.name}",
        f"Forwards: {est.forwards} (fixed schedule K = {est.max_forwards}), Mean Time/Forward: "
        f"{est.mean_step_s * 1e3:.4f} ms",
        f"Prefill: {est.prefill_length} positions, {est.prefill_s * 1e3:.4f} ms",
        _THIN_RULE,
        *[f"Block {b}: {blk.cache_start} cached positions, {blk.block_forwards} block forwards x "
          f"{blk.block_forward_s * 1e3:.4f} ms, {blk.sub_forwards} sub-block forwards x {blk.sub_forward_s * 1e3:.4f} "
          f"ms" + (f", completing forward {blk.complete_s * 1e3:.4f} ms" if blk.completes else "")
          for b, blk in enumerate(est.blocks)],
        _THIN_RULE,
        f"Total: {est.total_s:.6f} s, Aggregate AI: {est.aggregate_ai:.4f}",
        "Total Runtime Breakdown:",
        *_breakdown_lines(est.breakdown_s, est.total_s, scale=1e3, unit="ms", digits=4),
        _memory_line(memory, hardware),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def block_diffusion_json(est: BlockDiffusionEstimate, memory: MemoryFootprint) -> dict[str, Any]:
    """A block-diffusion generation as one JSON document (times in seconds)."""
    return {
        "mode": "block-diffusion", "total_s": est.total_s, "aggregate_ai": est.aggregate_ai, **_generation_json(est),
        "block_length": est.block_length, "sub_block_length": est.sub_block_length,
        "sub_block_cache": est.sub_block_cache, "forwards": est.forwards, "max_forwards": est.max_forwards,
        "mean_step_s": est.mean_step_s, "prefill_length": est.prefill_length, "prefill_s": est.prefill_s,
        "blocks": [block.model_dump() for block in est.blocks], "breakdown_s": dict(est.breakdown_s),
        "memory": memory.model_dump(),
    }  # fmt: skip


def _phase_json(phase: PhaseSummary) -> dict[str, float]:
    return {
        "total_s": phase.total_s,
        "linear_ai": phase.linear_ai,
        "attention_ai": phase.attention_ai,
        "aggregate_ai": phase.aggregate_ai,
    }


def _generation_json(est: Estimate) -> dict[str, Any]:
    """What both documents say of the generation: its totals and what it was computed for."""
    return {"flops": est.flops, "bytes": est.bytes_, "fidelity": est.fidelity, "hardware": est.hardware,
            "batch": est.batch, "prompt_len": est.prompt_len, "gen_len": est.gen_len}


def llama_json(est: LlamaEstimate, memory: MemoryFootprint) -> dict[str, Any]:
    """The issue's LLaMA document (times in seconds), plus what it was computed for."""
    return {
        "total_s": est.total_s,
        "breakdown_s": {c: est.breakdown_s[c] for c in STUDY_CLASSES},
        "prefill": _phase_json(est.prefill),
        "decode": None if est.decode is None else _phase_json(est.decode),
        **_generation_json(est),
        "decode_passes": est.decode_passes,
        "ttft_s": est.ttft_s,
        "memory": memory.model_dump(),
    }


def llada_json(est: LladaEstimate, memory: MemoryFootprint) -> dict[str, Any]:
    """The issue's LLaDA document (times in seconds), plus what it was computed for."""
    return {
        "mode": est.mode,
        "num_blocks": est.num_blocks,
        "steps_per_block": est.steps_per_block,
        "blocks": [b.model_dump(exclude_none=True) for b in est.blocks],  # cache fields only for a variant
        "total_s": est.total_s,
        "aggregate_ai": est.aggregate_ai,
        **_generation_json(est),
        "block_length": est.block_length,
        "steps": est.steps,
        "cfg_scale": est.cfg_scale,
        "temperature": est.temperature,
        "remasking": est.remasking,
        "truncate_blocks": est.truncate_blocks,
        "mean_step_s": est.mean_step_s,
        **({"cache": est.cache, "forwards": est.forwards} if est.cache != "none" or est.forwards != est.steps else {}),
        "breakdown_s": dict(est.breakdown_s),
        "memory": memory.model_dump(),
    }


def dream_json(est: DreamEstimate, memory: MemoryFootprint) -> dict[str, Any]:
    """A whole-sequence diffusion generation as one JSON document (times in seconds)."""
    return {
        "mode": "whole-sequence",
        "total_s": est.total_s,
        "aggregate_ai": est.aggregate_ai,
        **_generation_json(est),
        "steps": est.steps,
        "seq_len": est.seq_len,
        "forward_s": est.forward_s,
        "mean_step_s": est.mean_step_s,
        "logits_positions": est.logits_positions,
        "masked_positions": est.masked_positions,
        "alg": est.alg,
        "temperature": est.temperature,
        "top_p": est.top_p,
        "top_k": est.top_k,
        "breakdown_s": dict(est.breakdown_s),
        "memory": memory.model_dump(),
    }
