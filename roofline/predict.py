"""Predicted latency and memory of one benchmark run, to set beside its measurement in the report."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from roofline.errors import RooflineInputError
from roofline.estimate import Estimate
from roofline.fidelity import Fidelity
from roofline.hardware import HardwareProfile
from roofline.llada import BlockEstimate, LladaCache, LladaEstimate, estimate_llada
from roofline.llama import LlamaEstimate, estimate_llama
from roofline.memory import MemoryFootprint, llada_memory, llama_memory
from roofline.operators import BYTES_PER_ELEMENT, element_bytes_of
from specs.shapes import ModelShape
from specs.registry import Arch, preset_shape

# Where a LLaDA prediction's forward count comes from: the step schedule (no confidence rule), the forwards the
# run measured (samples.forwards), or the schedule's steps as a cap (a confidence rule, nothing measured).
ForwardsSource = Literal["schedule", "measured", "step cap"]


class Prediction(BaseModel):
    """What the roofline predicts for one run; times in seconds, memory in bytes (what PyTorch allocates)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arch: Arch
    fidelity: Fidelity
    hardware: str
    latency_s: float  # with the profile's floors: the host floor per eager forward, else the per-launch dispatch floor
    ttft_s: float | None  # LLaMA: the prefill; None for LLaDA (its text appears at the last step)
    itl_s: float | None  # LLaMA: mean decode pass; None without decode passes or for LLaDA
    step_s: float | None  # LLaDA: mean diffusion step; None for LLaMA
    tokens_per_s: float  # batch x generated tokens / latency
    flops: int
    bytes_: int
    peak_memory_bytes: int
    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    logits_bytes: int
    fits: bool  # peak <= the profile's memory
    forwards: int | None = None  # LLaDA: the model forwards costed; None for LLaMA
    forwards_source: ForwardsSource | None = None  # LLaDA: where `forwards` comes from
    latency_roofs_s: float | None = None  # the roofs alone (no floor of any kind): a lower bound on the time
    host_floor_s: float = 0.0  # the host floor charged per eager forward (0: none)


def predict(
    arch: Arch,
    shape: ModelShape | None,
    *,
    batch: int,
    prompt_len: int,
    gen_len: int,
    hardware: HardwareProfile,
    fidelity: Fidelity = "faithful",
    element_bytes: int = BYTES_PER_ELEMENT,
    llada_cache: LladaCache = "none",
    forwards_source: ForwardsSource | None = None,
    compiled_decode: bool = False,
    graph_forwards: bool = False,
    **llada: Any,
) -> Prediction:
    """Predict one run from plain values; `shape=None` (a checkpoint not yet loaded) means the arch's 8B preset.
    `latency_roofs_s` is the roofs alone, a lower bound; `latency_s` adds the profile's floors. A profile with a
    host floor (`HardwareProfile.host_floor_s`) charges every eager forward at least that floor (scaled by the
    layers): a forward costs max(its roofs, the floor), the host and the device overlapping. It replaces the
    per-launch dispatch floor, a coarser model of the same host work. Compiled decode passes
    (`compiled_decode`) and graph-captured forwards (`graph_forwards`) skip the eager host path: no floor.
    `element_bytes`: bytes per tensor element of the run's dtype (2 = BF16, the study's).
    `llada`: for arch 'llada', `estimate_llada`'s keywords: `steps` and `block_length` (needed), `cfg_scale`,
    `truncate_blocks`, `temperature`, `remasking`, `logits_positions` (positions given logits each step; None:
    all, as the official sampler does) and `forwards` (fewer than `steps` under a confidence rule;
    `forwards_source` says where the count came from); `llada_cache` is its `cache`. Arch 'llama' takes them
    unset (its sampler's temperature and remasking cost nothing here) and `compiled_decode`."""
    shape = shape or preset_shape(arch, "8b")
    floor_s = 0.0 if graph_forwards else hardware.host_floor_of(shape.num_layers)
    if hardware.host_floor_s > 0 or graph_forwards:  # a replayed graph dispatches no operator from the host
        hardware = hardware.model_copy(update={"dispatch_s": 0.0})
    run = {"batch": batch, "prompt_len": prompt_len, "gen_len": gen_len, "element_bytes": element_bytes}
    estimate: Callable[[HardwareProfile], Estimate]  # the run's estimate on a profile
    memory: MemoryFootprint
    if arch == "llama":
        _refuse_llada_keywords(llada, llada_cache)
        estimate = partial(estimate_llama, shape, fidelity=fidelity, compiled_decode=compiled_decode, **run)
        est = estimate(hardware)
        assert isinstance(est, LlamaEstimate)
        memory = llama_memory(shape, **run)
        decode_s = est.decode.total_s if est.decode else 0.0
        # What the floor adds where it binds (added, so a floor that never binds leaves the roofs' sum as is).
        prefill_extra = max(floor_s - est.ttft_s, 0.0)
        decode_extra = 0.0 if compiled_decode else max(est.decode_passes * floor_s - decode_s, 0.0)
        latency_s = est.total_s + prefill_extra + decode_extra
        ttft_s = est.ttft_s + prefill_extra
        itl_s = (decode_s + decode_extra) / est.decode_passes if est.decode_passes else None
        step_s = None
        costed_forwards, source = None, None
    elif arch == "llada":
        if llada.get("steps") is None or llada.get("block_length") is None:
            raise RooflineInputError("arch 'llada' needs steps and block_length")
        if compiled_decode:
            raise RooflineInputError("compiled_decode applies to arch 'llama' only")
        estimate = partial(estimate_llada, shape, fidelity=fidelity, cache=llada_cache, **run, **llada)
        est = estimate(hardware)
        assert isinstance(est, LladaEstimate)
        memory = llada_memory(shape, **run, cfg_scale=est.cfg_scale, temperature=est.temperature,
                              remasking=est.remasking, logits_positions=llada.get("logits_positions"), cache=est.cache)
        latency_s = est.total_s + sum(_block_floor_extra_s(block, floor_s) for block in est.blocks)
        ttft_s, itl_s, step_s = None, None, latency_s / est.forwards
        costed_forwards = est.forwards
        source = forwards_source or ("schedule" if llada.get("forwards") is None else "measured")
    else:
        raise RooflineInputError(f"unknown arch {arch!r}; allowed: llama, llada")
    roofs_s = est.total_s
    if floor_s == 0.0 and hardware.dispatch_s > 0:  # the roofs alone: the same run without the dispatch floor
        roofs_s = estimate(hardware.model_copy(update={"dispatch_s": 0.0})).total_s
    return Prediction(
        arch=arch, fidelity=fidelity, hardware=hardware.name, latency_s=latency_s, ttft_s=ttft_s, itl_s=itl_s,
        step_s=step_s, tokens_per_s=batch * gen_len / latency_s, flops=est.flops, bytes_=est.bytes_,
        peak_memory_bytes=memory.peak_bytes, **memory.model_dump(exclude={"peak_bytes"}),
        fits=memory.peak_bytes <= hardware.memory_bytes, forwards=costed_forwards, forwards_source=source,
        latency_roofs_s=roofs_s, host_floor_s=floor_s,
    )


# The keywords of `estimate_llada` that `predict` passes on (what it does not take itself).
_LLADA_KEYWORDS = frozenset(inspect.signature(estimate_llada).parameters) - {
    "shape", "hardware", "batch", "prompt_len", "gen_len", "element_bytes", "fidelity", "cache"
}


def _refuse_llada_keywords(llada: dict[str, Any], cache: LladaCache) -> None:
    """A LLaMA prediction takes LLaDA's keywords only unset; temperature, remasking, logits positions and block
    truncation pass (a LLaMA run records its sampler's settings too, and they cost it nothing here)."""
    if unknown := sorted(llada.keys() - _LLADA_KEYWORDS):
        raise TypeError(f"predict() got unexpected keyword arguments {unknown}")
    if (llada.get("steps") is not None or llada.get("block_length") is not None or llada.get("cfg_scale")
            or cache != "none" or llada.get("forwards")):
        raise RooflineInputError("steps, block_length, cfg_scale, llada_cache and forwards apply to arch 'llada' only")


def _block_floor_extra_s(block: BlockEstimate, floor_s: float) -> float:
    """What the host floor adds to a LLaDA block: each forward below the floor is raised to it (its full steps,
    or with a cache one full step and its cached steps)."""
    full_extra = max(floor_s - block.time_per_step_s, 0.0)
    if block.cached_step_s is None:
        return block.steps * full_extra
    return full_extra + (block.steps - 1) * max(floor_s - block.cached_step_s, 0.0)


def predict_run(
    config: Any,
    hardware: HardwareProfile,
    fidelity: Fidelity = "faithful",
    *,
    shape: ModelShape | None = None,
    measured_forwards: float | None = None,
) -> Prediction:
    """Predict a `specs.schema.RunConfig` (read by attribute, so the roofline does not import the schema).

    The shape is `shape` when given (what the worker loaded), else `config.model.shape()`; None (a real
    checkpoint) falls back to the arch's 8B preset. Tensors take the bytes of `config.controls.dtype`.
    LLaDA is costed as the workers run it: logits over the current block only (`workers/samplers/llada.py`).
    LLaDA's sampler cost follows `config.remasking` and `config.controls.temperature` when they are set.
    The implementation variant (`config.llada_impl` / `config.llama_impl`, None: vanilla) picks the cache and
    the compiled decode. A confidence rule's forwards are data-dependent: `measured_forwards` (the run's median
    of samples.forwards) when the artifact has them, else the steps as a cap; `Prediction.forwards_source` says
    which.
    """
    model = config.model
    arch = model.arch
    is_llada = arch == "llada"
    controls = getattr(config, "controls", None)
    llada_impl = getattr(config, "llada_impl", None) if is_llada else None
    llama_impl = getattr(config, "llama_impl", None) if not is_llada else None
    forwards, source = _variant_forwards(config, llada_impl, measured_forwards)
    return predict(
        arch,
        shape or model.shape(),
        batch=config.batch_size,
        prompt_len=config.prompt_length,
        gen_len=config.generation_length,
        hardware=hardware,
        steps=config.steps if is_llada else None,
        block_length=config.block_length if is_llada else None,
        cfg_scale=(config.cfg_scale or 0.0) if is_llada else 0.0,
        fidelity=fidelity,
        temperature=getattr(controls, "temperature", 0.0) or 0.0,
        remasking=getattr(config, "remasking", None) or "low_confidence",
        # The workers' LLaDA sampler projects logits only over the block it is filling.
        logits_positions=config.block_length if is_llada else None,
        element_bytes=element_bytes_of(getattr(controls, "dtype", None)),
        llada_cache=llada_impl.cache if llada_impl is not None else "none",
        forwards=forwards,
        forwards_source=source,
        compiled_decode=bool(llama_impl is not None and llama_impl.compile),
        graph_forwards=_graph_captured(llada_impl),
    )


def _graph_captured(impl: Any) -> bool:
    """Whether a LLaDA implementation replays its forwards as captured graphs (no eager host path per forward):
    an implementation that says so with a `graph` or `compile` attribute."""
    return impl is not None and bool(getattr(impl, "graph", False) or getattr(impl, "compile", False))


def _variant_forwards(
    config: Any, impl: Any, measured: float | None
) -> tuple[int | None, ForwardsSource | None]:
    """The forwards to cost a LLaDA variant at: None (the schedule) without a confidence rule; the measured
    median rounded to a whole forward, kept between one per block and the steps; else the steps as a cap."""
    if impl is None or not impl.parallel:
        return None, None
    if measured is None:
        return None, "step cap"
    blocks = config.generation_length // config.block_length
    return min(max(round(measured), blocks), config.steps), "measured"
