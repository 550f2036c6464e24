"""Generated artifact sets for the report's tests: RunResult JSON files, a frozen spec and a real manifest.

Numbers follow simple cost laws (an autoregressive model: prefill + per-token decode; a diffusion model: steps x
per-step time growing with batch x sequence) with seeded noise, so figures have shape and tests can predict what
they must show. The families are LLaMA and LLaDA unless a grid names others (`FixtureGrid.families`: Qwen2.5 and
Dream, each its own speed), so a sweep can hold several pairs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import yaml

from fixture_grid import (
    A100,
    COMPILE,
    CPU_ROOFS,
    DUAL,
    GIB,
    H100,
    PREFIX_THRESHOLD,
    SMOKE_LIKE,
    VARIANTS,
    FixtureGrid,
    HardwareKind,
    _configs,
    _controls,
    _is_ar,
    _model,
    _quality_spec,
    _spec_dict,
    _speed,
    run_id_of,
)
from roofline.memory import llada_cache_bytes
from roofline.workload import Workload
from specs.artifacts import Manifest, SweepLayout, checksum_key, read_sweep_record, sha256_file
from specs.chain import RecordWriter
from specs.registry import family, preset_shape
from specs.results import (
    Environment,
    Generation,
    Memory,
    ModelProvenance,
    TrainingEvaluation,
    QualityRecord,
    RunResult,
    RunStatus,
    Samples,
)
from specs.schema import Prompts, RunConfig

# What the report's tests import from here: the grids are tests/fixture_grid.py's.
__all__ = ["A100", "COMPILE", "CPU_ROOFS", "DUAL", "H100", "PREFIX_THRESHOLD", "SMOKE_LIKE", "VARIANTS", "FixtureGrid",
           "HardwareKind", "reseal", "run_id_of", "variant_forwards", "write_sweep"]


def write_sweep(root: Path, grid: FixtureGrid = FixtureGrid()) -> Path:
    """Write spec.yaml, runs/*.json and manifest.json under root/<name>, each recorded in checksums.jsonl as a sweep
    records it; return that directory."""
    layout = SweepLayout(root / grid.name)
    layout.runs.mkdir(parents=True, exist_ok=True)
    writer = RecordWriter.open(layout.checksums, layout.root, grid.name, "sweep")
    writer.write(layout.spec, yaml.safe_dump(_spec_dict(grid), sort_keys=False).encode("utf-8"))
    rng = np.random.default_rng(1234)
    # Variants draw their noise from their own stream: a sweep's vanilla runs are the same with or without them.
    variant_rng = np.random.default_rng(5678)
    results: list[RunResult] = []
    for kind in grid.hardware:
        for config in _configs(grid, kind):
            variant = config.impl_name != "vanilla"
            result = _result(grid, kind, config, variant_rng if variant else rng)
            failed = (config.model.arch in grid.failing_families
                      or (config.model.arch, config.session or 0) in grid.failed_sessions)
            results.append(_failed(result) if failed else result)
        if grid.extra_failures:
            results.extend(_failures(grid, kind))
    runs: dict[str, str] = {}
    for result in results:
        path = layout.run_file(result.run_id)
        assert not path.exists(), f"duplicate run id {result.run_id}"
        runs[result.run_id] = writer.write(path, result.model_dump_json(indent=1).encode("utf-8"))
    manifest = Manifest(sweep=grid.name, spec_sha256=sha256_file(layout.spec), runs=runs)
    layout.manifest.write_text(manifest.model_dump_json(indent=1), encoding="utf-8")
    return layout.root


def reseal(root: Path) -> Path:
    """After a test rewrote a fixture's spec or run files in place: record their new checksums as the sweep's own
    writes and rewrite the manifest over them (what a forger would need the record's links to do)."""
    layout = SweepLayout(root)
    record = read_sweep_record(layout)
    assert record is not None
    writer = RecordWriter.open(layout.checksums, layout.root, layout.root.name, "sweep")
    for path in [layout.spec, *layout.run_files().values()]:
        if sha256_file(path) not in record.recorded(checksum_key(layout, path)):
            writer.write(path, path.read_bytes())
    runs = {run_id: sha256_file(path) for run_id, path in layout.run_files().items()}
    manifest = Manifest.model_validate_json(layout.manifest.read_text(encoding="utf-8"))
    manifest = manifest.model_copy(update={"runs": runs, "spec_sha256": sha256_file(layout.spec)})
    layout.manifest.write_text(manifest.model_dump_json(indent=1), encoding="utf-8")
    return root


# ------------------------------------------------------------------ results


def _environment(grid: FixtureGrid, kind: HardwareKind) -> Environment:
    gpu = kind.device != "cpu"
    return Environment(
        hostname="fixture-node", platform="Linux-6.1-x86_64", python="3.11.7", torch="2.5.1",
        transformers="4.46.0", flash_attn=None, cuda="12.6" if gpu else None, device=kind.device,
        gpu_count=1 if gpu else 0, driver="560.35.03" if gpu else None, attention_kernel=grid.attention,
        dtype=grid.dtype, git_commit="0123456789abcdef", image_digest="sha256:feedface" if gpu else None,
        other_gpu_processes=False if gpu else None, cpu_threads=2,
        measured_roofs=CPU_ROOFS if kind.measured_roofs else None,
    )


def _provenance(grid: FixtureGrid, arch: str) -> ModelProvenance | None:
    if not grid.unlearned_llada:
        return None
    learned = _is_ar(arch)
    return ModelProvenance(
        trained_by="llada-bench train", arch=arch, parameters=5_510_000, steps=1600, tokens_seen=1_230_000,
        wall_s=1800.0, heldout_loss_nats=4.8 if learned else 6.5,
        heldout_measure="next-token cross-entropy" if learned else "masked-diffusion bound", unigram_entropy_nats=6.6,
        training_rule="every member sees the same 1,230,000 training tokens", shipped_step=1600,
        evaluations=[TrainingEvaluation(step=k, tokens=k * 768, wall_s=k * 1.1, heldout_loss=loss)
                     for k, loss in ((800, 7.0), (1600, 4.8 if learned else 6.5))],
    )


def _per_token_llada_bytes(grid: FixtureGrid) -> int:
    return 12 << 20  # activations per (sequence x position), bytes: makes B=32, S=192 overflow 80 GiB


def _peak_bytes(grid: FixtureGrid, config: RunConfig) -> int:
    weights = 16 * GIB
    tokens = config.batch_size * config.sequence_length
    if _is_ar(config.model.arch):
        return weights + tokens * 131072 + tokens * (2 << 20)
    return weights + tokens * _per_token_llada_bytes(grid)


def _result(grid: FixtureGrid, kind: HardwareKind, config: RunConfig, rng: np.random.Generator) -> RunResult:
    run_id = run_id_of(config)
    base = {
        "run_id": run_id, "sweep": grid.name, "config": config, "weights": "synthetic" if grid.synthetic else "real",
        "started_at": "2025-01-01T00:00:00Z", "finished_at": "2025-01-01T00:01:00Z",
        "environment": _environment(grid, kind), "model_load_s": 1.5,
        "model_provenance": _provenance(grid, config.model.arch),
        "model_shape": config.model.shape() or family(config.model.arch).full_shape,
    }
    gpu = kind.device != "cpu"
    peak = _peak_bytes(grid, config)
    if peak > kind.capacity_bytes:
        memory = Memory(device="cuda", weights_bytes=16 * GIB, at_failure_allocated_bytes=kind.capacity_bytes - GIB)
        return RunResult(status=RunStatus.OOM, error="CUDA out of memory. Tried to allocate 2.00 GiB", memory=memory, **base)
    samples = _samples(_speed(grid, kind, config.model.name), config, rng, timer="cuda_event" if gpu else "perf_counter",
                       reps=grid.repetitions)
    if gpu:
        memory = Memory(device="cuda", weights_bytes=16 * GIB, peak_allocated_bytes=int(peak * 0.93),
                        peak_reserved_bytes=peak)
    else:
        # The tensors' peak follows the shapes alone; the RSS growth also drifts with what else ran (here with the
        # step count), as malloc's does.
        memory = Memory(device="cpu", weights_bytes=4 << 20, peak_tensor_bytes=(peak - 16 * GIB) // 4096,
                        peak_rss_delta_bytes=int(peak / 4096) + (config.steps or 0) * (1 << 20))
    quality, note = None, "quality disabled on this device"
    if kind.quality:
        quality = _quality(config, rng)
        note = "synthetic weights: quality not meaningful" if grid.synthetic else None
    generations = [
        Generation(prompt_id=p, token_ids=[1, 2, 3], text="a b c", useful_tokens=config.generation_length - p % 3)
        for p in config.prompt_ids
    ]
    nfe = config.generation_length if _is_ar(config.model.arch) else config.steps
    return RunResult(status=RunStatus.OK, samples=samples, memory=memory, nfe=nfe, generations=generations,
                     quality=quality, quality_note=note, cache_bytes=_cache_bytes(config),
                     preparation_s=12.0 if config.llama_impl is not None else None, **base)


def _cache_bytes(config: RunConfig) -> int | None:
    impl = config.llada_impl
    if impl is None or impl.cache == "none":
        return None
    work = Workload(prompt_len=config.prompt_length, gen_len=config.generation_length, batch=config.batch_size,
                    cache=impl.cache)
    return llada_cache_bytes(preset_shape("llada", "8b"), work)


def _variant_factor(config: RunConfig) -> float:
    """A variant's cost relative to vanilla: LLaDA's cached step (dual 0.2, prefix 0.5 of a full step at B = 1)
    and LLaMA's compiled decode pass (0.6) grow with the batch, so the dual cache and the compiled step are
    slower than vanilla at B = 32 (0.2 + 0.03 x 32 > 1; 0.6 + 0.015 x 32 > 1); Dream's captured step saves its
    host dispatch, which matters less as the batch grows (0.5 + 0.05 x B, slower than vanilla from B = 11)."""
    b = config.batch_size
    if config.llama_impl is not None:
        return 0.6 + 0.015 * b
    if config.dream_impl is not None:
        return 0.5 + 0.05 * b
    impl = config.llada_impl
    if impl is None or impl.cache == "none":
        return 1.0
    return (0.2 + 0.03 * b) if impl.cache == "dual" else (0.5 + 0.01 * b)


def variant_forwards(config: RunConfig, rep: int) -> int:
    """Forwards of repetition `rep`: the schedule's steps, or about half of them under a confidence rule."""
    steps = config.steps or 1
    if config.block_diffusion is not None:  # below threshold 1 a forward commits about 1/threshold^2 tokens
        return max(steps // 4, round(steps * config.block_diffusion.threshold ** 2) - rep % 2)
    impl = config.llada_impl
    if impl is None or not impl.parallel:
        return steps
    return max(config.num_blocks or 1, steps // 2 - rep % 2)


def _noise(rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
    return np.exp(rng.normal(0.0, 0.03, size=size))


def _samples(speed: float, config: RunConfig, rng: np.random.Generator, *, timer: str, reps: int) -> Samples:
    """Latency samples under the cost laws; `speed` multiplies every time (the device's and the family's)."""
    b, p, g = config.batch_size, config.prompt_length, config.generation_length
    factor = _variant_factor(config)
    if _is_ar(config.model.arch):
        ttft = (0.02 + 2e-5 * b * p) * speed * _noise(rng, reps)
        itl = np.array([
            [(0.022 + 3e-4 * b + 4e-7 * b * (p + i)) * speed * factor for i in range(1, g)] for _ in range(reps)
        ]) * _noise(rng, (reps, g - 1))
        latency = ttft + itl.sum(axis=1)
        return Samples(timer=timer, warmup_latency_s=[float(latency[0]) * 1.3] * 2, latency_e2e_s=latency.tolist(),
                       batch_index=list(range(reps)), ttft_s=ttft.tolist(), itl_s=itl.tolist())
    steps = config.steps or 1
    step_time = (0.03 + 8e-5 * b * config.sequence_length) * speed
    if config.llada_impl is None and config.block_diffusion is None:
        step = step_time * factor * _noise(rng, (reps, steps))
        per_step_tokens = [b * g // steps] * steps
        return Samples(timer=timer, warmup_latency_s=[float(step[0].sum()) * 1.3] * 2,
                       latency_e2e_s=step.sum(axis=1).tolist(), batch_index=list(range(reps)), step_s=step.tolist(),
                       tokens_committed=[per_step_tokens] * reps)
    # A variant: each block's first forward is a full step, its others cost `factor` of one.
    blocks = config.num_blocks or 1
    forwards = [variant_forwards(config, rep) for rep in range(reps)]
    step_s, committed = [], []
    for count in forwards:
        first = {round(i * count / blocks) for i in range(blocks)}
        times = [step_time * (1.0 if i in first else factor) for i in range(count)] * _noise(rng, count)
        step_s.append(times.tolist())
        committed.append([b * g // count + (1 if i < b * g % count else 0) for i in range(count)])
    latency = [float(sum(t)) for t in step_s]
    return Samples(timer=timer, warmup_latency_s=[latency[0] * 1.3] * 2, latency_e2e_s=latency,
                   batch_index=list(range(reps)), step_s=step_s, tokens_committed=committed, forwards=forwards)


def _quality(config: RunConfig, rng: np.random.Generator) -> list[QualityRecord]:
    """LLaMA sits at F1 0.85 / PPL 8; LLaDA climbs past it between 32 and 64 steps (smaller blocks help)."""
    records = []
    # A confidence rule costs quality: BERTScore F1 0.04 lower, perplexity 10% higher (before the noise).
    parallel = config.llada_impl is not None and config.llada_impl.parallel
    # Block diffusion: its threshold's quality, above LLaMA's at 0.9 and below it at 0.5.
    threshold = config.block_diffusion.threshold if config.block_diffusion is not None else None
    for prompt in config.prompt_ids:
        if _is_ar(config.model.arch):
            f1, ppl = 0.85, 8.0
        elif threshold is not None:
            f1, ppl = 0.85 + 0.3 * (threshold - 0.8), 8.0 - 10 * (threshold - 0.8)
        else:
            block_bonus = 0.01 * (64 - (config.block_length or 64)) / 32
            f1 = 0.90 + block_bonus - 0.25 * math.exp(-(config.steps or 1) / 20) - (0.04 if parallel else 0.0)
            ppl = (6.0 + 20.0 * math.exp(-(config.steps or 1) / 20)) * (1.1 if parallel else 1.0)
        f1 += float(rng.normal(0, 0.01))
        ppl *= float(np.exp(rng.normal(0, 0.05)))
        records.append(QualityRecord(
            prompt_id=prompt, bertscore_precision=f1 + 0.01, bertscore_recall=f1 - 0.01, bertscore_f1=f1,
            nll_per_token=math.log(ppl), gen_ppl=ppl, distinct_1=0.6, distinct_2=0.8, repeated_bigram_rate=0.02,
        ))
    return records


def _failures(grid: FixtureGrid, kind: HardwareKind) -> list[RunResult]:
    """An exception (with traceback) and a worker that died without reporting its environment."""
    out = []
    for status, batch in ((RunStatus.ERROR, 2), (RunStatus.CRASHED, 3)):
        config = RunConfig(
            model=_model(grid, grid.families[0]), batch_size=batch, prompt_length=grid.prompt_length,
            generation_length=grid.generation_lengths[0], controls=_controls(grid, kind),
            prompts=Prompts(count=grid.prompts), prompt_ids=list(range(grid.prompts)), quality=_quality_spec(grid),
            session=0 if grid.sessions > 1 else None,
        )
        error = status == RunStatus.ERROR
        out.append(RunResult(
            run_id=run_id_of(config), sweep=grid.name, config=config, status=status,
            weights="synthetic" if grid.synthetic else "real", started_at="2025-01-01T00:00:00Z",
            finished_at="2025-01-01T00:00:05Z", attempts=1 if error else 3,
            error="RuntimeError: boom" if error else "worker died 3 times",
            traceback="Traceback (most recent call last):\n  ...\nRuntimeError: boom" if error else None,
            environment=_environment(grid, kind) if error else None,
        ))
    return out


def _failed(result: RunResult) -> RunResult:
    """The run as an error artifact: its config and environment, no measurement."""
    return RunResult(
        run_id=result.run_id, sweep=result.sweep, config=result.config, status=RunStatus.ERROR, weights=result.weights,
        started_at=result.started_at, finished_at=result.finished_at, attempts=1,
        error="ValueError: the checkpoint's config contradicts its weights", traceback="Traceback ...",
        environment=result.environment,
    )
