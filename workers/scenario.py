"""The measurement scenario: warm-ups, then R timed repetitions, every step timed, memory tracked around them.

Trackers wrap calls (STYLE 4): the samplers advance one model forward per `next()` and know nothing of
time; this module puts a timer around the whole generation (L_e2e) and one around each `next()` (LLaMA:
the prefill is TTFT, each decode an ITL sample; LLaDA: each diffusion step). Intervals are read only
after a repetition has finished, so on GPU no host sync is added inside the timed region. Raw samples
are kept; medians, IQRs and CIs are the report's job.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from specs.results import Memory, Samples
from specs.schema import RunConfig
from workers.memory import MemoryTracker
from workers.models import LoadedModel
from workers.samplers.autoregressive import ar_steps
from workers.samplers.llada import llada_steps
from workers.timing import Interval, PerfCounterTimer, Timer, timer_for


@dataclass
class TimedGeneration:
    """One generation of one prompt batch: its new tokens and the (still unread) intervals around it."""

    tokens: torch.Tensor  # [B, N_out] on the model's device
    e2e: Interval
    steps: list[Interval]
    committed: list[int] = field(default_factory=list)  # LLaDA: tokens committed per step, whole batch

    @property
    def nfe(self) -> int:
        """Model forwards of this generation: one per step for both samplers (CFG widens, not repeats)."""
        return len(self.steps)


@dataclass
class Measurement:
    samples: Samples
    memory: Memory
    outputs: dict[int, torch.Tensor]  # batch index -> new tokens [B, N_out] on the CPU (first rep of it)
    nfe: int


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
) -> TimedGeneration:
    """Generate `config.generation_length` tokens for one batch `[B, P']`, timing the whole and each step."""
    generator = torch.Generator(device=loaded.device).manual_seed(seed)
    step_intervals: list[Interval] = []
    committed: list[int] = []
    with torch.inference_mode(), timer.measure() as e2e:
        if config.model.arch == "llada":
            assert config.steps is not None and config.block_length is not None and loaded.mask_token_id is not None
            sampler = llada_steps(
                loaded.model, input_ids,
                gen_length=config.generation_length,
                block_length=config.block_length,
                steps=config.steps,
                mask_id=loaded.mask_token_id,
                temperature=temperature,
                cfg_scale=config.cfg_scale,
                remasking=config.remasking or "low_confidence",
                generator=generator,
            )  # fmt: skip
            for _ in range(config.steps):
                with timer.measure() as interval:
                    record = next(sampler)
                step_intervals.append(interval)
                committed.append(record.committed)
            assert sampler.done
            tokens = sampler.generation  # [B, N_out]
        else:
            decoder = ar_steps(
                loaded.model, input_ids, n_new=config.generation_length, temperature=temperature, generator=generator
            )
            for _ in range(config.generation_length):
                with timer.measure() as interval:
                    next(decoder)
                step_intervals.append(interval)
            assert decoder.done
            tokens = decoder.tokens  # [B, N_out]
    return TimedGeneration(tokens=tokens, e2e=e2e, steps=step_intervals, committed=committed)


def generate_untimed(
    loaded: LoadedModel, config: RunConfig, input_ids: torch.Tensor, *, seed: int, temperature: float
) -> torch.Tensor:
    """A generation outside the measurement (quality of batches no repetition ran): tokens on the CPU."""
    return generate(loaded, config, input_ids, timer=PerfCounterTimer(), seed=seed, temperature=temperature).tokens.cpu()


def measure(loaded: LoadedModel, config: RunConfig, batches: list[torch.Tensor]) -> Measurement:
    """W warm-ups on the run's own shapes (excluded), then R repetitions, repetition r on batch r mod n."""
    controls = config.controls
    timer = timer_for(loaded.device)
    warmup_s: list[float] = []
    for w in range(controls.warmup):
        b = w % len(batches)
        run = generate(loaded, config, batches[b], timer=timer, seed=batch_seed(controls.seed, b), temperature=controls.temperature)
        warmup_s.append(run.e2e.seconds())
    latency: list[float] = []
    batch_index: list[int] = []
    steps_s: list[list[float]] = []
    committed: list[list[int]] = []
    outputs: dict[int, torch.Tensor] = {}
    nfe = 0
    with MemoryTracker(loaded.device, loaded.weights_bytes) as memory:
        for r in range(controls.repetitions):
            b = r % len(batches)
            timer.synchronize()  # start every repetition from an idle device
            run = generate(loaded, config, batches[b], timer=timer, seed=batch_seed(controls.seed, b), temperature=controls.temperature)
            latency.append(run.e2e.seconds())  # reading syncs: after the timed region, never inside it
            steps_s.append([interval.seconds() for interval in run.steps])
            committed.append(run.committed)
            batch_index.append(b)
            if b not in outputs:
                outputs[b] = run.tokens.cpu()
            nfe = run.nfe
    llada = config.model.arch == "llada"
    samples = Samples(
        timer=timer.kind,
        warmup_latency_s=warmup_s,
        latency_e2e_s=latency,
        batch_index=batch_index,
        ttft_s=None if llada else [steps[0] for steps in steps_s],
        itl_s=None if llada else [steps[1:] for steps in steps_s],
        step_s=steps_s if llada else None,
        tokens_committed=committed if llada else None,
    )
    return Measurement(samples=samples, memory=memory.result(), outputs=outputs, nfe=nfe)
