"""The measurement scenario: warm-ups, then R timed repetitions, every step timed, memory tracked around them.

Trackers wrap calls (STYLE 4): the samplers advance one model forward per `next()` and know nothing of
time; this module puts a timer around the whole generation (L_e2e) and one around each `next()` (LLaMA:
the prefill is TTFT, each decode an ITL sample; a diffusion model: each step, one forward). Intervals are read
only after a repetition has finished, so on GPU no host sync is added inside the timed region; the LLaDA
sampler's one host sync per block (finding the block's window), and block diffusion's one per forward (reading
the block's tokens to decide the next forward), run between steps, outside any step timer (`prepare_step`).
The diffusion samplers are built from the run's config in workers/measure/diffusion_samplers.py. Raw samples are kept; medians, IQRs and CIs are the report's job.

A run starts from a clean allocator (`free_device_memory`), runs its warm-ups, and only then enters the
memory and energy trackers around the measured repetitions. On CPU one more generation of the first prompt
batch follows them, untimed, to count the tensors' peak bytes (`tensor_peak_bytes`): the RSS growth the
tracker reads does not repeat. That pass runs in the first session only, as quality does: the bytes do not
depend on the session. With `RunConfig.timed_steps` (LLaDA, controls.extrapolation) each generation stops after
that many steps and its end-to-end latency is extrapolated from them; the samples say so (`Samples.extrapolated`).

Implementation variants (`RunConfig.llada_impl` / `llama_impl`) run the same scenario: a LLaDA variant's
sampler takes its cache and confidence rule, and a generation runs until the sampler is done (with a
confidence rule the steps vary; the plan never extrapolates such runs); the LLaMA `compile` variant
compiles its decode step once per batch shape (and, with `decode_attention: live`, per attended-length
bucket) and the LLaDA `graph` variant captures its step forwards once per batch shape and input shape,
both inside the warm-ups, and their preparation time is recorded (`workers/measure/preparation.py`). The
warm-ups reach everything the repetitions will meet: LLaMA's shapes follow from the batch shape, so an
extra untimed warm-up runs for each batch shape the configured ones missed; LLaDA's window starts at the
leftmost mask left of its block, which the tokens decide, so a graph variant warms up on every prompt batch
a repetition uses (a batch's generation is seeded, so its repetitions meet exactly its warm-up's shapes).
The repetitions then run frozen: a capture or compilation in them is an error of the run, never a number.
Every run records the forwards of each repetition and the bytes its KV cache held.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from specs.registry import family, is_diffusion
from specs.results import Energy, ExtrapolatedLatency, HostLoad, Memory, Samples
from specs.schema import RunConfig
from workers.measure.compiled_steps import CompiledSteps, forward_capture, uses_compiled_steps
from workers.measure.energy import EnergyMeter
from workers.measure.diffusion_samplers import DIFFUSION_SAMPLERS
from workers.measure.memory import MemoryTracker, free_device_memory, tensor_peak_bytes
from workers.measure.preparation import Preparation
from workers.measure.timing import Interval, PerfCounterTimer, Timer, load_average, timer_for, usable_cpus
from workers.models.loading import LoadedModel
from workers.engine import TORCH, RunEngine
from workers.samplers.autoregressive import KV_CACHE
from workers.samplers.cache_check import require_written


@dataclass
class TimedGeneration:
    """One generation of one prompt batch: its new tokens and the (still unread) intervals around it."""

    tokens: torch.Tensor  # [B, N_out] on the model's device
    e2e: Interval
    steps: list[Interval]
    committed: list[int] = field(default_factory=list)  # LLaDA: tokens committed per step, whole batch
    forwards: int = 0  # model forwards this generation ran (CFG widens a forward, it does not repeat it)
    cache_bytes: int | None = None  # bytes its KV cache held; None: no cache (vanilla LLaDA)


@dataclass
class Measurement:
    samples: Samples
    memory: Memory
    outputs: dict[int, torch.Tensor]  # batch index -> new tokens [B, N_out] on the CPU (first rep of it)
    nfe: int
    kv_cache: str  # the KV cache: "preallocated", "static" or "live" (LLaMA), "none", "prefix" or "dual" (LLaDA)
    energy: Energy | None = None
    cache_bytes: int | None = None  # peak bytes the KV cache held over the repetitions
    preparation_s: float | None = None  # the compile (graph) variant's preparation time, spent in the warm-ups
    compiled: CompiledSteps | None = None  # the compile (graph) variant's steps, for the untimed generations
    forward_capture: str | None = None  # how the step forward ran when not eagerly (`forward_capture`)
    decode_attention_kernel: str | None = None  # LLaMA compiled decode: the attention kernel it ran


def batch_seed(seed: int, batch_index: int) -> int:
    """A seed per prompt batch, so a batch samples the same tokens in every repetition and in quality runs."""
    digest = hashlib.sha256(f"llada-bench:{seed}:{batch_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def generate(
    loaded: LoadedModel,
    config: RunConfig,
    input_ids: torch.Tensor,
    *,
    timer: Timer,
    seed: int,
    temperature: float,
    compiled: CompiledSteps | None = None,
    engine: RunEngine = TORCH,
) -> TimedGeneration:
    """Generate `config.generation_length` tokens for one batch `[B, P']`, timing the whole and each step.
    With `config.timed_steps` a LLaDA generation stops after that many steps (its tokens are unfinished).
    `compiled` holds the LLaMA compile and LLaDA graph variants' step forwards (required for those); `engine` runs
    the diffusion forward or the autoregressive loop (workers/engine/)."""
    generator = torch.Generator(device=loaded.device).manual_seed(seed)
    step_intervals: list[Interval] = []
    committed: list[int] = []
    llama_impl = config.llama_impl
    with torch.inference_mode(), timer.measure() as e2e:
        if is_diffusion(config.model.arch):
            assert config.steps is not None and loaded.mask_token_id is not None
            sampler = DIFFUSION_SAMPLERS[family(config.model.arch).sampler](
                engine.diffusion_model(loaded), config, input_ids, generator=generator, temperature=temperature, compiled=compiled
            )
            # Every sampler is done after its schedule (at most `steps` forwards; block diffusion's planned K counts
            # the prompt without a tokenizer's prefix, its sampler the prompt it got); `timed_steps` stops earlier.
            while not sampler.done and len(step_intervals) != config.timed_steps:
                sampler.prepare_step()  # the per-block host sync, outside the step's timer
                with timer.measure() as interval:
                    record = next(sampler)
                step_intervals.append(interval)
                committed.append(record.committed)
            assert sampler.done or config.timed_steps is not None
            kv_cache = sampler.kv_cache
            tokens = sampler.generation  # [B, N_out]
            forwards, cache_bytes = sampler.forwards, sampler.cache_bytes
        else:
            step = None
            if llama_impl is not None and llama_impl.compile:
                assert compiled is not None, "the compile variant needs its CompiledSteps"
                step = compiled.for_batch(loaded, input_ids, config.generation_length, llama_impl.decode_attention)
            decoder = engine.ar_steps(
                loaded, input_ids, n_new=config.generation_length, temperature=temperature, generator=generator,
                compiled=step,
            )  # fmt: skip
            for _ in range(config.generation_length):
                with timer.measure() as interval:
                    next(decoder)
                step_intervals.append(interval)
            assert decoder.done
            kv_cache = decoder.cache
            tokens = decoder.tokens  # [B, N_out]
            forwards, cache_bytes = len(step_intervals), decoder.cache_bytes
    # A confidence rule's counts stay on the device through the timed region; they are read here, after it,
    # as is whether the cache the run measures was written at all (a bypassed cache fails the run).
    committed = [int(c) for c in committed]
    require_written(kv_cache, _kv_cache_name(config))
    return TimedGeneration(
        tokens=tokens, e2e=e2e, steps=step_intervals, committed=committed, forwards=forwards, cache_bytes=cache_bytes
    )


def generate_untimed(
    loaded: LoadedModel,
    config: RunConfig,
    input_ids: torch.Tensor,
    *,
    seed: int,
    temperature: float,
    compiled: CompiledSteps | None = None,
    engine: RunEngine = TORCH,
) -> torch.Tensor:
    """A generation outside the measurement (quality of batches no repetition ran): tokens on the CPU, from the
    run's own engine, so quality is scored on the tokens its kernels give."""
    if compiled is None and uses_compiled_steps(config):
        compiled = CompiledSteps()
    return generate(
        loaded, config, input_ids, timer=PerfCounterTimer(), seed=seed, temperature=temperature, compiled=compiled,
        engine=engine,
    ).tokens.cpu()


def measure(loaded: LoadedModel, config: RunConfig, batches: list[torch.Tensor], engine: RunEngine = TORCH) -> Measurement:
    """W warm-ups on the run's own shapes (excluded), then R repetitions, repetition r on batch r mod n, in the run's
    engine."""
    controls = config.controls
    free_device_memory(loaded.device)  # nothing cached or peaked by earlier runs carries into this one
    timer = timer_for(loaded.device)
    compiled = CompiledSteps() if uses_compiled_steps(config) else None
    warmup_s: list[float] = []
    prepared_by = _prepared_by(config, batches, compiled)
    for b in _warmup_batches(controls.warmup, controls.repetitions, len(batches), prepared_by):
        run = generate(
            loaded, config, batches[b], timer=timer, seed=batch_seed(controls.seed, b),
            temperature=controls.temperature, compiled=compiled, engine=engine,
        )  # fmt: skip
        warmup_s.append(run.e2e.seconds())
    latency: list[float] = []
    cpu_s: list[float | None] = []
    batch_index: list[int] = []
    steps_s: list[list[float]] = []
    committed: list[list[int]] = []
    forwards: list[int] = []
    cache_bytes: int | None = None
    outputs: dict[int, torch.Tensor] = {}
    preparation = compiled.preparation if compiled is not None else Preparation()
    load_at_start = load_average()
    with MemoryTracker(loaded.device, engine.weights_bytes(loaded)) as memory, EnergyMeter(loaded.device) as energy, \
            preparation.frozen():
        for r in range(controls.repetitions):
            b = r % len(batches)
            timer.synchronize()  # start every repetition from an idle device
            run = generate(
                loaded, config, batches[b], timer=timer, seed=batch_seed(controls.seed, b),
                temperature=controls.temperature, compiled=compiled, engine=engine,
            )  # fmt: skip
            latency.append(run.e2e.seconds())  # reading syncs: after the timed region, never inside it
            cpu_s.append(run.e2e.cpu_seconds())
            steps_s.append([interval.seconds() for interval in run.steps])
            committed.append(run.committed)
            forwards.append(run.forwards)
            if run.cache_bytes is not None:
                cache_bytes = max(cache_bytes or 0, run.cache_bytes)
            batch_index.append(b)
            if b not in outputs:
                outputs[b] = run.tokens.cpu()
    load_at_end = load_average()
    memory_record = memory.result()
    # After the timed region and its trackers (the profiler slows every operator), and in the first session only: the
    # same shapes allocate the same bytes in every session, as they give the same text (report/table/sessions.py takes a
    # configuration's memory and quality from that session's run).
    # The profiler sees torch's tensors only: an engine's own buffers are in the RSS growth, not here.
    if loaded.device.type == "cpu" and config.session in (None, 0) and engine.torch_tensors:
        memory_record = memory_record.model_copy(update={"peak_tensor_bytes": tensor_peak_bytes(lambda: generate(
            loaded, config, batches[0], timer=PerfCounterTimer(), seed=batch_seed(controls.seed, 0),
            temperature=controls.temperature, compiled=compiled))})
    diffusion = is_diffusion(config.model.arch)  # step samples, not TTFT and ITL
    # The schedule's forwards per generation; where a confidence rule ends blocks early, samples.forwards
    # holds what each repetition ran.
    nfe = config.steps if diffusion and config.steps is not None else config.generation_length
    extrapolated = None
    if config.timed_steps is not None:
        assert config.steps is not None
        extrapolated = ExtrapolatedLatency(timed_steps=config.timed_steps, steps=config.steps, measured_e2e_s=latency)
        latency = extrapolate_latency(latency, steps_s, config.steps)
        forwards = [config.steps] * len(latency)  # the forwards of the generation the latency stands for
        outputs = {}  # unfinished generations are not outputs
    samples = Samples(
        timer=timer.kind,
        warmup_latency_s=warmup_s,
        latency_e2e_s=latency,
        batch_index=batch_index,
        ttft_s=None if diffusion else [steps[0] for steps in steps_s],
        itl_s=None if diffusion else [steps[1:] for steps in steps_s],
        step_s=steps_s if diffusion else None,
        tokens_committed=committed if diffusion else None,
        forwards=forwards,
        extrapolated=extrapolated,
        cpu_s=None if None in cpu_s else [c for c in cpu_s if c is not None],
        host_load=(HostLoad(start=list(load_at_start), end=list(load_at_end), cpus=usable_cpus())
                   if load_at_start is not None and load_at_end is not None else None),
    )
    return Measurement(
        samples=samples,
        memory=memory_record,
        outputs=outputs,
        nfe=nfe,
        kv_cache=(engine.ar_kv_cache if not diffusion and engine.ar_kv_cache else _kv_cache_name(config)),
        energy=energy_record(energy, config, samples),
        cache_bytes=cache_bytes,
        preparation_s=compiled.preparation_s if compiled is not None else None,
        compiled=compiled,
        forward_capture=forward_capture(config, loaded.device),
        decode_attention_kernel=compiled.decode_kernel if compiled is not None else None,
    )


def _prepared_by(config: RunConfig, batches: list[torch.Tensor], compiled: CompiledSteps | None) -> list[object] | None:
    """What each prompt batch makes a compile (graph) variant prepare, as a key per batch (None: an eager run).

    LLaMA's compiled decode: its batch shape. LLaDA's and Dream's graphs: the batch itself, since their windows'
    widths depend on its tokens (`LladaSampler._start_block`, Dream's window widening): a fixed-width window
    cannot stay token-exact, because a mask left of it (a prompt's, or a committed prediction that is
    `mask_id`) must stay a candidate.
    """
    if compiled is None:
        return None
    if config.llama_impl is None:
        return list(range(len(batches)))
    return [(batch.shape, config.generation_length) for batch in batches]


def _warmup_batches(warmup: int, repetitions: int, n_batches: int, prepared_by: list[object] | None) -> list[int]:
    """The batch index of each warm-up: W of them, round robin; for a compile (graph) variant one more for
    every key (`_prepared_by`) of a batch the repetitions use that those W did not reach, so no compilation
    (capture) is ever timed."""
    chosen = [w % n_batches for w in range(warmup)]
    if prepared_by is None:
        return chosen
    reached = {prepared_by[b] for b in chosen}
    for b in sorted({r % n_batches for r in range(repetitions)}):
        if prepared_by[b] not in reached:
            chosen.append(b)
            reached.add(prepared_by[b])
    return chosen


def _kv_cache_name(config: RunConfig) -> str:
    if config.block_diffusion is not None:
        impl = config.block_diffusion_impl
        return "block+sub-block" if impl is not None and impl.sub_block_cache else "block"
    if is_diffusion(config.model.arch):
        return config.llada_impl.cache if config.llada_impl is not None else "none"
    impl = config.llama_impl
    if impl is not None and impl.compile:
        return "live" if impl.decode_attention == "live" else "static"
    return KV_CACHE


def extrapolate_latency(measured_e2e_s: list[float], steps_s: list[list[float]], steps: int) -> list[float]:
    """Each truncated generation's e2e plus its mean timed step for every step it did not run."""
    return [e2e + (steps - len(timed)) * sum(timed) / len(timed) for e2e, timed in zip(measured_e2e_s, steps_s)]


def energy_record(meter: EnergyMeter, config: RunConfig, samples: Samples) -> Energy | None:
    """Joules per generated token of the measured repetitions; an extrapolated run's energy is scaled by the
    same factor as its latency (extrapolated / timed seconds)."""
    reading = meter.reading
    if reading is None:
        return None
    tokens = len(samples.latency_e2e_s) * config.batch_size * config.generation_length
    scale = 1.0
    if samples.extrapolated is not None and sum(samples.extrapolated.measured_e2e_s) > 0:
        scale = sum(samples.latency_e2e_s) / sum(samples.extrapolated.measured_e2e_s)
    return Energy(
        source=reading.source,  # type: ignore[arg-type]
        scope=reading.scope,
        joules=reading.joules,
        seconds=reading.seconds,
        generated_tokens=tokens,
        joules_per_token=reading.joules * scale / tokens,
        extrapolated=samples.extrapolated is not None,
    )
