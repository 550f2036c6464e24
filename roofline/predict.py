"""Predicted latency and memory of one benchmark run, to set beside its measurement in the report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from roofline.block_diffusion import BlockDiffusionEstimate, block_plan, estimate_block_diffusion
from roofline.dream import estimate_dream
from roofline.errors import RooflineInputError
from roofline.estimate import DiffusionEstimate, Estimate
from roofline.fidelity import Fidelity
from roofline.hardware import HardwareProfile
from roofline.llada import BlockEstimate, LladaEstimate, estimate_llada
from roofline.llama import LlamaEstimate, estimate_llama
from roofline.memory import MemoryFootprint, block_diffusion_memory, dream_memory, llada_memory, llama_memory
from roofline.workload import Workload, run_workload
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
    work: Workload,
    *,
    hardware: HardwareProfile,
    fidelity: Fidelity = "faithful",
    forwards_source: ForwardsSource | None = None,
    graph_forwards: bool = False,
) -> Prediction:
    """Predict one run of `work`; `shape=None` (a checkpoint not yet loaded) means the family's published
    shape (`specs.registry.full_shape`). The family's sampler (the registry's, never the arch's name) picks the
    estimate: prefill + decode (autoregressive), LLaDA's blocks, or Dream's whole-sequence steps.
    `latency_roofs_s` is the roofs alone, a lower bound; `latency_s` adds the profile's floors. A profile with a
    host floor (`HardwareProfile.host_floor_s`) charges every eager forward at least that floor (scaled by the
    layers): a forward costs max(its roofs, the floor), the host and the device overlapping. It replaces the
    per-launch dispatch floor, a coarser model of the same host work. Compiled decode passes
    (`work.compiled_decode`) and graph-captured forwards (`graph_forwards`) skip the eager host path: no floor.
    What each family reads of `work` (`OWN_FIELDS`): LLaDA (`estimate_llada`) `steps` and `block_length` (needed),
    `cfg_scale`, `truncate_blocks`, `temperature`, `remasking`, `logits_positions` (None: all, as the official
    sampler does), `forwards` (fewer than `steps` under a confidence rule; `forwards_source` says where the count
    came from) and `cache`. Dream (`estimate_dream`): `steps` (needed), `temperature`, `alg`, `top_p`, `top_k`,
    `logits_positions` (None: the N generated positions, as the workers' sampler projects them). Block diffusion
    (`estimate_block_diffusion`): `block_length` and `sub_block_length` (needed), `temperature`, `forwards` (what a
    run measured; None: the fixed schedule's K), `sub_block_cache`, `prefill_one_block_prompt`. Autoregressive:
    `compiled_decode`. Another family's fields pass only at their defaults, but for the sampler settings that cost
    it nothing here (`COSTLESS_FIELDS`: a run records them whatever its family)."""
    try:
        fam = family(arch)
    except KeyError as exc:
        raise RooflineInputError(exc.args[0]) from None
    shape = shape or fam.full_shape
    _refuse_foreign_fields(fam.name, fam.sampler, work)
    floor_s = 0.0 if graph_forwards else hardware.host_floor_of(shape.num_layers)
    if hardware.host_floor_s > 0 or graph_forwards:  # a replayed graph dispatches no operator from the host
        hardware = hardware.model_copy(update={"dispatch_s": 0.0})
    estimator, memory_of, needed = _MODELS[fam.sampler]
    if any(getattr(work, name) is None for name in needed):
        raise RooflineInputError(f"arch {arch!r} needs {' and '.join(needed)}")
    estimate = partial(estimator, shape, work=work, fidelity=fidelity)  # the run's estimate on a profile
    est, memory = estimate(hardware), memory_of(shape, work)
    roofs_s = _roofs_s(estimate, est, hardware, floor_s)
    if isinstance(est, LlamaEstimate):
        decode_s = est.decode.total_s if est.decode else 0.0
        # What the floor adds where it binds (added, so a floor that never binds leaves the roofs' sum as is).
        prefill_extra = max(floor_s - est.ttft_s, 0.0)
        decode_extra = 0.0 if work.compiled_decode else max(est.decode_passes * floor_s - decode_s, 0.0)
        latency_s = est.total_s + prefill_extra + decode_extra
        ttft_s = est.ttft_s + prefill_extra
        itl_s = (decode_s + decode_extra) / est.decode_passes if est.decode_passes else None
        return _prediction(arch, est, memory, hardware, fidelity, latency_s=latency_s, ttft_s=ttft_s, itl_s=itl_s,
                           step_s=None, roofs_s=roofs_s, floor_s=floor_s)  # fmt: skip
    assert isinstance(est, DiffusionEstimate)
    if isinstance(est, LladaEstimate):
        latency_s = est.total_s + sum(_block_floor_extra_s(block, floor_s) for block in est.blocks)
    elif isinstance(est, BlockDiffusionEstimate):
        latency_s = est.total_s + _block_diffusion_floor_extra_s(est, floor_s)
    else:  # Dream: each forward below the floor is raised to it (at the mean step: a lower bound where steps differ)
        latency_s = est.total_s + est.forwards * max(floor_s - est.mean_step_s, 0.0)
    source = forwards_source or ("schedule" if work.forwards is None else "measured")
    return _prediction(arch, est, memory, hardware, fidelity, latency_s=latency_s, ttft_s=None, itl_s=None,
                       step_s=latency_s / est.forwards, forwards=est.forwards, forwards_source=source,
                       roofs_s=roofs_s, floor_s=floor_s)  # fmt: skip


# Each family's estimate, its memory model, and the workload fields it cannot run without.
_Model = tuple[Callable[..., Estimate], Callable[[ModelShape, Workload], MemoryFootprint], tuple[str, ...]]
_MODELS: dict[str, _Model] = {
    "autoregressive": (estimate_llama, llama_memory, ()),
    "llada": (estimate_llada, llada_memory, ("steps", "block_length")),
    "dream": (estimate_dream, dream_memory, ("steps",)),
    "block_diffusion": (estimate_block_diffusion, block_diffusion_memory, ("block_length", "sub_block_length")),
}


def _roofs_s(
    estimate: Callable[[HardwareProfile], Estimate], est: Estimate, hardware: HardwareProfile, floor_s: float
) -> float:
    """The roofs alone: `est`'s time, or where a dispatch floor was charged, the same run without it."""
    if floor_s == 0.0 and hardware.dispatch_s > 0:
        return estimate(hardware.model_copy(update={"dispatch_s": 0.0})).total_s
    return est.total_s


def _prediction(
    arch: Arch, est: Estimate, memory: MemoryFootprint, hardware: HardwareProfile, fidelity: Fidelity, *,
    latency_s: float, roofs_s: float, floor_s: float, **timing: Any,
) -> Prediction:
    """The prediction of one estimate with its floors (`latency_s`) and its footprint; `timing`: the family's
    own times (ttft and itl, or the step) and forward count."""
    return Prediction(
        arch=arch, fidelity=fidelity, hardware=hardware.name, latency_s=latency_s,
        tokens_per_s=est.batch * est.gen_len / latency_s, flops=est.flops, bytes_=est.bytes_,
        peak_memory_bytes=memory.peak_bytes, **memory.model_dump(exclude={"peak_bytes"}),
        fits=memory.peak_bytes <= hardware.memory_bytes, latency_roofs_s=roofs_s, host_floor_s=floor_s, **timing,
    )


# The fields of the workload each family's estimate reads besides the generation's shape (`predict`'s docstring).
OWN_FIELDS: dict[str, frozenset[str]] = {
    "autoregressive": frozenset({"compiled_decode"}),
    "llada": frozenset({"steps", "block_length", "cfg_scale", "truncate_blocks", "temperature", "remasking",
                        "logits_positions", "forwards", "cache"}),
    "dream": frozenset({"steps", "temperature", "alg", "top_p", "top_k", "logits_positions"}),
    "block_diffusion": frozenset({"block_length", "sub_block_length", "temperature", "forwards", "sub_block_cache",
                                  "prefill_one_block_prompt"}),
}
_SHAPE_FIELDS = frozenset({"prompt_len", "gen_len", "batch", "element_bytes"})
# Sampler settings any run records and that cost a family without them nothing here: they pass whatever is set.
COSTLESS_FIELDS = frozenset({"temperature", "remasking", "logits_positions", "truncate_blocks"})


def _refuse_foreign_fields(arch: str, sampler_name: str, work: Workload) -> None:
    """Another sampler's setting is refused when it is set (differs from its default), naming it."""
    foreign = sorted(work.set_fields() - _SHAPE_FIELDS - OWN_FIELDS[sampler_name] - COSTLESS_FIELDS)
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
    the current block only (`workers/samplers/llada/sampler.py`), its sampler cost following `config.remasking` and
    `config.controls.temperature` when they are set; Dream by its steps and `config.dream` (alg, top-p, top-k);
    the temperature for both. The implementation variant (`config.llada_impl` / `config.llama_impl`, None:
    vanilla) picks the cache and the compiled decode. A confidence rule's forwards are data-dependent:
    `measured_forwards` (the run's median of samples.forwards) when the artifact has them, else the steps as a
    cap; `Prediction.forwards_source` says which.
    """
    model = config.model
    sampler_name = family(model.arch).sampler
    temperature = getattr(getattr(config, "controls", None), "temperature", 0.0) or 0.0
    remasking = getattr(config, "remasking", None) or "low_confidence"

    def of(work: Workload, **how: Any) -> Prediction:
        return predict(model.arch, shape or model.shape(), work, hardware=hardware, fidelity=fidelity, **how)

    if sampler_name == "block_diffusion":
        setting, impl = config.block_diffusion, getattr(config, "block_diffusion_impl", None)
        work = run_workload(
            config, block_length=config.block_length, sub_block_length=setting.sub_block_length,
            temperature=temperature, sub_block_cache=bool(impl is not None and impl.sub_block_cache),
            prefill_one_block_prompt=setting.prefill_one_block_prompt,
        )  # fmt: skip
        forwards, source = _block_forwards(work, setting.threshold, measured_forwards)
        return of(replace(work, forwards=forwards), forwards_source=source, graph_forwards=_graph_captured(impl))
    if sampler_name == "dream":
        dream = config.dream
        work = run_workload(config, steps=config.steps, temperature=temperature, alg=dream.alg, top_p=dream.top_p,
                            top_k=dream.top_k)  # fmt: skip
        # A variant that replays captured forwards (an implementation with `graph` or `compile` set) has no host floor.
        return of(work, graph_forwards=_graph_captured(getattr(config, "dream_impl", None)))
    if sampler_name == "llada":
        impl = getattr(config, "llada_impl", None)
        forwards, source = _variant_forwards(config, impl, measured_forwards)
        # The workers' LLaDA sampler projects logits only over the block it is filling.
        work = run_workload(
            config, steps=config.steps, block_length=config.block_length, cfg_scale=config.cfg_scale or 0.0,
            temperature=temperature, remasking=remasking, logits_positions=config.block_length,
            cache=impl.cache if impl is not None else "none", forwards=forwards,
        )  # fmt: skip
        return of(work, forwards_source=source, graph_forwards=_graph_captured(impl))
    impl = getattr(config, "llama_impl", None)
    return of(run_workload(config, temperature=temperature, remasking=remasking,
                           compiled_decode=bool(impl is not None and impl.compile)))  # fmt: skip


def _graph_captured(impl: Any) -> bool:
    """Whether a diffusion implementation replays its forwards as captured graphs (no eager host path per forward):
    an implementation that says so with a `graph` or `compile` attribute."""
    return impl is not None and bool(getattr(impl, "graph", False) or getattr(impl, "compile", False))


def _block_forwards(
    work: Workload, threshold: float, measured: float | None
) -> tuple[int | None, ForwardsSource]:
    """The forwards to cost a block-diffusion run at: its measured median rounded to a whole forward and kept within
    the schedule; else threshold 1's fixed schedule, or (below 1, nothing measured) that schedule's K as a cap."""
    if measured is None:
        return None, "schedule" if threshold >= 1 else "step cap"
    plan = block_plan(work)
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
