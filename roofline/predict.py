"""Predicted latency and memory of one benchmark run, to set beside its measurement in the report."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from roofline.block_diffusion import BlockDiffusionEstimate, estimate_block_diffusion
from roofline.dream import DreamEstimate, estimate_dream
from roofline.errors import RooflineInputError
from roofline.estimate import Estimate
from roofline.fidelity import Fidelity
from roofline.hardware import HardwareProfile
from roofline.llada import BlockEstimate, LladaCache, LladaEstimate, estimate_llada
from roofline.llama import LlamaEstimate, estimate_llama
from roofline.memory import MemoryFootprint, block_diffusion_memory, dream_memory, llada_memory, llama_memory
from roofline.operators import BYTES_PER_ELEMENT, element_bytes_of
from specs.block_diffusion import schedule
from specs.registry import Arch, family
from specs.shapes import ModelShape

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
    ttft_s: float | None  # autoregressive: the prefill; None for diffusion (its text appears at the last step)
    itl_s: float | None  # autoregressive: mean decode pass; None without decode passes or for diffusion
    step_s: float | None  # diffusion (LLaDA, Dream, block diffusion): mean forward; None for autoregressive
    tokens_per_s: float  # batch x generated tokens / latency
    flops: int
    bytes_: int
    peak_memory_bytes: int
    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    logits_bytes: int
    fits: bool  # peak <= the profile's memory
    forwards: int | None = None  # diffusion: the model forwards costed; None for autoregressive
    forwards_source: ForwardsSource | None = None  # diffusion: where `forwards` comes from
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
    **sampler: Any,
) -> Prediction:
    """Predict one run from plain values; `shape=None` (a checkpoint not yet loaded) means the family's published
    shape (`specs.registry.full_shape`). The family's sampler (the registry's, never the arch's name) picks the
    estimate: prefill + decode (autoregressive), LLaDA's blocks, or Dream's whole-sequence steps.
    `latency_roofs_s` is the roofs alone, a lower bound; `latency_s` adds the profile's floors. A profile with a
    host floor (`HardwareProfile.host_floor_s`) charges every eager forward at least that floor (scaled by the
    layers): a forward costs max(its roofs, the floor), the host and the device overlapping. It replaces the
    per-launch dispatch floor, a coarser model of the same host work. Compiled decode passes
    (`compiled_decode`) and graph-captured forwards (`graph_forwards`) skip the eager host path: no floor.
    `element_bytes`: bytes per tensor element of the run's dtype (2 = BF16, the study's).
    `sampler`: the keywords of the family's estimate. LLaDA (`estimate_llada`): `steps` and `block_length`
    (needed), `cfg_scale`, `truncate_blocks`, `temperature`, `remasking`, `logits_positions` (positions given
    logits each step; None: all, as the official sampler does) and `forwards` (fewer than `steps` under a confidence
    rule; `forwards_source` says where the count came from); `llada_cache` is its `cache`. Dream (`estimate_dream`):
    `steps` (needed), `temperature`, `alg`, `top_p`, `top_k`, `logits_positions` (None: the N generated positions,
    as the workers' sampler projects them). Block diffusion (`estimate_block_diffusion`): `block_length` and
    `sub_block_length` (needed), `temperature`, `forwards` (what a run measured; None: the fixed schedule's K),
    `sub_block_cache`, `prefill_one_block_prompt`.
    Another family's keywords pass only unset, but for the sampler settings that cost it nothing here (temperature,
    remasking, logits positions, block truncation: a run records them whatever its family); the autoregressive
    families take `compiled_decode`."""
    try:
        fam = family(arch)
    except KeyError as exc:
        raise RooflineInputError(exc.args[0]) from None
    shape = shape or fam.full_shape
    _refuse_foreign_keywords(fam.name, fam.sampler, sampler, llada_cache, compiled_decode)
    floor_s = 0.0 if graph_forwards else hardware.host_floor_of(shape.num_layers)
    if hardware.host_floor_s > 0 or graph_forwards:  # a replayed graph dispatches no operator from the host
        hardware = hardware.model_copy(update={"dispatch_s": 0.0})
    run = {"batch": batch, "prompt_len": prompt_len, "gen_len": gen_len, "element_bytes": element_bytes}
    estimate: Callable[[HardwareProfile], Estimate]  # the run's estimate on a profile
    memory: MemoryFootprint
    if fam.sampler == "autoregressive":
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
    elif fam.sampler == "llada":
        llada = _own(sampler, _LLADA_KEYWORDS)
        if llada.get("steps") is None or llada.get("block_length") is None:
            raise RooflineInputError(f"arch {arch!r} needs steps and block_length")
        estimate = partial(estimate_llada, shape, fidelity=fidelity, cache=llada_cache, **run, **llada)
        est = estimate(hardware)
        assert isinstance(est, LladaEstimate)
        memory = llada_memory(shape, **run, cfg_scale=est.cfg_scale, temperature=est.temperature,
                              remasking=est.remasking, logits_positions=llada.get("logits_positions"), cache=est.cache)
        latency_s = est.total_s + sum(_block_floor_extra_s(block, floor_s) for block in est.blocks)
        ttft_s, itl_s, step_s = None, None, latency_s / est.forwards
        costed_forwards = est.forwards
        source = forwards_source or ("schedule" if llada.get("forwards") is None else "measured")
    elif fam.sampler == "block_diffusion":
        blocks = _own(sampler, _BLOCK_KEYWORDS)
        if blocks.get("block_length") is None or blocks.get("sub_block_length") is None:
            raise RooflineInputError(f"arch {arch!r} needs block_length and sub_block_length")
        estimate = partial(estimate_block_diffusion, shape, fidelity=fidelity, **run, **blocks)
        est = estimate(hardware)
        assert isinstance(est, BlockDiffusionEstimate)
        cache_length = est.prefill_length + len(est.blocks) * est.block_length
        memory = block_diffusion_memory(shape, batch=batch, prefill_length=est.prefill_length, cache_length=cache_length,
                                        block_length=est.block_length, sub_block_length=est.sub_block_length,
                                        temperature=est.temperature, element_bytes=element_bytes)  # fmt: skip
        latency_s = est.total_s + _block_diffusion_floor_extra_s(est, floor_s)
        ttft_s, itl_s, step_s = None, None, latency_s / est.forwards
        costed_forwards = est.forwards
        source = forwards_source or ("schedule" if blocks.get("forwards") is None else "measured")
    else:  # the dream sampler: whole-sequence steps
        dream = _own(sampler, _DREAM_KEYWORDS)
        if dream.get("steps") is None:
            raise RooflineInputError(f"arch {arch!r} needs steps")
        estimate = partial(estimate_dream, shape, fidelity=fidelity, **run, **dream)
        est = estimate(hardware)
        assert isinstance(est, DreamEstimate)
        memory = dream_memory(shape, **run, temperature=est.temperature, alg=est.alg, top_p=est.top_p,
                              top_k=est.top_k, logits_positions=est.logits_positions or None)
        # Each forward below the floor is raised to it (at the mean step: a lower bound where steps differ).
        latency_s = est.total_s + est.forwards * max(floor_s - est.mean_step_s, 0.0)
        ttft_s, itl_s, step_s = None, None, latency_s / est.forwards
        costed_forwards, source = est.forwards, forwards_source or "schedule"
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


_RUN_KEYWORDS = frozenset({"shape", "hardware", "batch", "prompt_len", "gen_len", "element_bytes", "fidelity", "cache"})
# The keywords of each diffusion estimate that `predict` passes on (what it does not take itself).
_LLADA_KEYWORDS = frozenset(inspect.signature(estimate_llada).parameters) - _RUN_KEYWORDS
_DREAM_KEYWORDS = frozenset(inspect.signature(estimate_dream).parameters) - _RUN_KEYWORDS
_BLOCK_KEYWORDS = frozenset(inspect.signature(estimate_block_diffusion).parameters) - _RUN_KEYWORDS
_OWN_KEYWORDS: dict[str, frozenset[str]] = {
    "autoregressive": frozenset(), "llada": _LLADA_KEYWORDS, "dream": _DREAM_KEYWORDS,
    "block_diffusion": _BLOCK_KEYWORDS,
}
# Sampler settings any run records and that cost a family without them nothing here: they pass whatever is set.
_COSTLESS_KEYWORDS = frozenset({"temperature", "remasking", "logits_positions", "truncate_blocks"})


def _own(sampler: dict[str, Any], keywords: frozenset[str]) -> dict[str, Any]:
    """The keywords one estimate takes, from everything `predict` was given."""
    return {k: v for k, v in sampler.items() if k in keywords}


def _refuse_foreign_keywords(
    arch: str, sampler_name: str, sampler: dict[str, Any], cache: LladaCache, compiled_decode: bool
) -> None:
    """A keyword no estimate takes is a TypeError; another sampler's setting is refused when it is set, naming it."""
    if unknown := sorted(sampler.keys() - _LLADA_KEYWORDS - _DREAM_KEYWORDS - _BLOCK_KEYWORDS):
        raise TypeError(f"predict() got unexpected keyword arguments {unknown}")
    own = _OWN_KEYWORDS[sampler_name] | _COSTLESS_KEYWORDS
    foreign = sorted(k for k, v in sampler.items() if k not in own and v is not None and v is not False and v != 0)
    if sampler_name != "llada" and cache != "none":
        foreign.append("llada_cache")
    if sampler_name != "autoregressive" and compiled_decode:
        foreign.append("compiled_decode")
    if foreign:
        raise RooflineInputError(
            f"{', '.join(foreign)}: not a setting of arch {arch!r} (its sampler is {sampler_name!r}); leave unset"
        )


def _block_diffusion_floor_extra_s(est: BlockDiffusionEstimate, floor_s: float) -> float:
    """What the host floor adds to a block-diffusion generation: each forward below the floor is raised to it."""
    extra = max(floor_s - est.prefill_s, 0.0) if est.prefill_length else 0.0
    for block in est.blocks:
        extra += block.block_forwards * max(floor_s - block.block_forward_s, 0.0)
        extra += block.sub_forwards * max(floor_s - block.sub_forward_s, 0.0)
        extra += block.completes * max(floor_s - block.complete_s, 0.0)
    return extra


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
    checkpoint) falls back to the family's published shape. Tensors take the bytes of `config.controls.dtype`.
    The family's sampler (specs.registry) decides what is read: LLaDA is costed as the workers run it, logits over
    the current block only (`workers/samplers/llada.py`), its sampler cost following `config.remasking` and
    `config.controls.temperature` when they are set; Dream by its steps and `config.dream` (alg, top-p, top-k);
    the temperature for both. The implementation variant (`config.llada_impl` / `config.llama_impl`, None:
    vanilla) picks the cache and the compiled decode. A confidence rule's forwards are data-dependent:
    `measured_forwards` (the run's median of samples.forwards) when the artifact has them, else the steps as a
    cap; `Prediction.forwards_source` says which.
    """
    model = config.model
    arch = model.arch
    sampler_name = family(arch).sampler
    controls = getattr(config, "controls", None)
    temperature = getattr(controls, "temperature", 0.0) or 0.0
    run = {"batch": config.batch_size, "prompt_len": config.prompt_length, "gen_len": config.generation_length,
           "hardware": hardware, "fidelity": fidelity,
           "element_bytes": element_bytes_of(getattr(controls, "dtype", None))}
    if sampler_name == "block_diffusion":
        setting, impl = config.block_diffusion, getattr(config, "block_diffusion_impl", None)
        forwards, source = _block_forwards(config, measured_forwards)
        return predict(arch, shape or model.shape(), **run, block_length=config.block_length,
                       sub_block_length=setting.sub_block_length, temperature=temperature, forwards=forwards,
                       forwards_source=source, sub_block_cache=bool(impl is not None and impl.sub_block_cache),
                       prefill_one_block_prompt=setting.prefill_one_block_prompt, graph_forwards=_graph_captured(impl))
    if sampler_name == "dream":
        dream = config.dream
        # A variant that replays captured forwards (an implementation with `graph` or `compile` set) has no host floor.
        return predict(arch, shape or model.shape(), **run, steps=config.steps, temperature=temperature,
                       alg=dream.alg, top_p=dream.top_p, top_k=dream.top_k,
                       graph_forwards=_graph_captured(getattr(config, "dream_impl", None)))
    is_llada = sampler_name == "llada"
    llada_impl = getattr(config, "llada_impl", None) if is_llada else None
    llama_impl = getattr(config, "llama_impl", None) if not is_llada else None
    forwards, source = _variant_forwards(config, llada_impl, measured_forwards)
    return predict(
        arch,
        shape or model.shape(),
        **run,
        steps=config.steps if is_llada else None,
        block_length=config.block_length if is_llada else None,
        cfg_scale=(config.cfg_scale or 0.0) if is_llada else 0.0,
        temperature=temperature,
        remasking=getattr(config, "remasking", None) or "low_confidence",
        # The workers' LLaDA sampler projects logits only over the block it is filling.
        logits_positions=config.block_length if is_llada else None,
        llada_cache=llada_impl.cache if llada_impl is not None else "none",
        forwards=forwards,
        forwards_source=source,
        compiled_decode=bool(llama_impl is not None and llama_impl.compile),
        graph_forwards=_graph_captured(llada_impl),
    )


def _graph_captured(impl: Any) -> bool:
    """Whether a diffusion implementation replays its forwards as captured graphs (no eager host path per forward):
    an implementation that says so with a `graph` or `compile` attribute."""
    return impl is not None and bool(getattr(impl, "graph", False) or getattr(impl, "compile", False))


def _block_forwards(config: Any, measured: float | None) -> tuple[int | None, ForwardsSource]:
    """The forwards to cost a block-diffusion run at: its measured median rounded to a whole forward and kept within
    the schedule; else threshold 1's fixed schedule, or (below 1, nothing measured) that schedule's K as a cap."""
    if measured is None:
        return None, "schedule" if config.block_diffusion.threshold >= 1 else "step cap"
    setting = config.block_diffusion
    plan = schedule(config.prompt_length, config.generation_length, config.block_length, setting.sub_block_length,
                    setting.prefill_one_block_prompt)  # fmt: skip
    return min(max(round(measured), plan.min_forwards), plan.max_forwards), "measured"


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
