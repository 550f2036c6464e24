"""Generated artifact sets for the report's tests: RunResult JSON files, a frozen spec and a real manifest.

Numbers follow simple cost laws (an autoregressive model: prefill + per-token decode; a diffusion model: steps x
per-step time growing with batch x sequence) with seeded noise, so figures have shape and tests can predict what
they must show. The families are LLaMA and LLaDA unless a grid names others (`FixtureGrid.families`: Qwen2.5 and
Dream, each its own speed), so a sweep can hold several pairs.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from roofline.memory import llada_cache_bytes
from specs.artifacts import (
    Manifest,
    SweepLayout,
    canonical_json,
    checksum_key,
    read_sweep_record,
    sha256_file,
)
from specs.chain import RecordWriter
from specs.registry import family, preset_shape
from specs.results import (
    Environment,
    Generation,
    MeasuredRoofs,
    Memory,
    ModelProvenance,
    TrainingEvaluation,
    QualityRecord,
    RunResult,
    RunStatus,
    Samples,
)
from specs.schema import (
    BertScoreSpec,
    CheckpointSource,
    Controls,
    DreamImpl,
    DreamSampling,
    HardwareRequirement,
    LladaImpl,
    LlamaImpl,
    ModelSpec,
    PerplexitySpec,
    Prompts,
    QualitySpec,
    RunConfig,
    SyntheticSource,
)

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
GIB = 1 << 30


@dataclass(frozen=True)
class HardwareKind:
    """One device the fixture's runs land on, and how fast and big it is."""

    device: str
    gpu_filter: str  # the spec's hardware requirement; also keeps run ids distinct per device
    speed: float = 1.0  # latency multiplier
    capacity_bytes: int = 80 * GIB
    quality: bool = True
    measured_roofs: bool = False  # the worker measured this device's roofs (CPU runs need them for a roofline)


@dataclass(frozen=True)
class FixtureGrid:
    name: str = "fixture"
    batch_sizes: tuple[int, ...] = (1, 8, 32)
    prompt_length: int = 64
    generation_lengths: tuple[int, ...] = (64, 128)
    steps: tuple[int, ...] = (16, 32, 64)
    block_lengths: tuple[int, ...] = (32, 64)
    dtype: str = "bfloat16"
    attention: str = "sdpa"
    device: str = "cuda"
    repetitions: int = 5
    prompts: int = 8
    synthetic: str | None = None  # a preset name for synthetic weights, None = real checkpoints
    hardware: tuple[HardwareKind, ...] = field(
        default_factory=lambda: (
            HardwareKind(A100, "A100", speed=1.0, quality=True),
            HardwareKind(H100, "H100", speed=0.55, quality=False),
        )
    )
    extra_failures: bool = True  # one error run and one crashed run (no environment)
    unlearned_llada: bool = False  # both models ship a training log; LLaDA's held-out loss is at unigram level
    # Accelerated variants run beside every vanilla point of their arch (cost laws in `_variant_factor`).
    llada_impls: tuple[LladaImpl, ...] = ()
    llama_impls: tuple[LlamaImpl, ...] = ()
    dream_impls: tuple[DreamImpl, ...] = ()
    # The registry families that run, autoregressive and diffusion alike; each model is named '<arch>-<size>'. An
    # entry 'qwen2#b' is a second model of that family, named 'qwen2-b-<size>'.
    families: tuple[str, ...] = ("llama", "llada")
    dream_algs: tuple[str, ...] = ("entropy",)  # Dream's remasking algorithms (one curve each)
    # Latency multipliers per `families` entry (1 where absent): what sets each pair's crossover apart.
    family_speed: tuple[tuple[str, float], ...] = ()
    # Families every run of which failed (an error artifact, no measurement), as when a checkpoint is broken.
    failing_families: tuple[str, ...] = ()


DUAL = LladaImpl(name="dual-cache", cache="dual")
PREFIX_THRESHOLD = LladaImpl(name="prefix-t09", cache="prefix", threshold=0.9)
COMPILE = LlamaImpl(name="static-compile", compile=True)
# One hardware with quality, six repetitions (a CI on each side of a speedup), two batch sizes where the variants
# pay off and one (B = 32) where the dual cache and the compiled step are slower than vanilla.
VARIANTS = FixtureGrid(
    name="variants", batch_sizes=(1, 8, 32), generation_lengths=(64,), steps=(16, 32), block_lengths=(32,),
    repetitions=6, hardware=(HardwareKind(A100, "A100", speed=1.0, quality=True),), extra_failures=False,
    llada_impls=(DUAL, PREFIX_THRESHOLD), llama_impls=(COMPILE,),
)

SMOKE_LIKE = FixtureGrid(
    name="smoke", batch_sizes=(1, 4), prompt_length=32, generation_lengths=(32, 64), steps=(8, 16, 32),
    block_lengths=(32,), dtype="float32", device="cpu", repetitions=3, synthetic="tiny",
    hardware=(HardwareKind("cpu", "any", speed=0.05, capacity_bytes=1 << 62, quality=True, measured_roofs=True),),
    extra_failures=False,
)

# Roofs a worker on a 2-core CPU measures in float32 (workers/measure/calibrate.py), fixed for the tests.
CPU_ROOFS = MeasuredRoofs(
    device="cpu", dtype="float32", threads=1, matmul_flops_per_s=80e9, vector_ops_per_s=4e9,
    memory_bandwidth_bytes_per_s=15e9, dispatch_s=2e-6, memory_bytes=8 * GIB, method="fixture", wall_s=1.0,
)


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
            results.append(_failed(result) if config.model.arch in grid.failing_families else result)
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


# ------------------------------------------------------------------ configs


def _model(grid: FixtureGrid, entry: str) -> ModelSpec:
    """The model of a `families` entry ('llama', or 'qwen2#b' for a second model of a family)."""
    arch, _, tag = entry.partition("#")
    size = grid.synthetic or family(arch).full_size
    name = f"{arch}-{tag}-{size}" if tag else f"{arch}-{size}"
    if grid.synthetic:
        return ModelSpec(name=name, arch=arch, source=SyntheticSource(synthetic=grid.synthetic))
    return ModelSpec(name=name, arch=arch, source=CheckpointSource(checkpoint=family(arch).hub_ids[0]))


def _is_ar(entry: str) -> bool:
    return not family(entry.partition("#")[0]).is_diffusion


def _evaluator(grid: FixtureGrid) -> ModelSpec | None:
    """The perplexity evaluator: the grid's first autoregressive model (None without one)."""
    first = next((a for a in grid.families if _is_ar(a)), None)
    return _model(grid, first) if first is not None else None


def _speed(grid: FixtureGrid, kind: HardwareKind, model: str) -> float:
    entry = next((e for e in grid.families if _model(grid, e).name == model), "")
    return kind.speed * dict(grid.family_speed).get(entry, 1.0)


def _controls(grid: FixtureGrid, kind: HardwareKind) -> Controls:
    return Controls(
        dtype=grid.dtype, attention=grid.attention, device=grid.device, warmup=2, repetitions=grid.repetitions,
        hardware=HardwareRequirement(gpu=kind.gpu_filter),
    )


def _quality_spec(grid: FixtureGrid) -> QualitySpec:
    evaluator = _evaluator(grid)
    return QualitySpec(bertscore=BertScoreSpec(),
                       perplexity=PerplexitySpec(evaluator=evaluator.name) if evaluator is not None else None)


def _configs(grid: FixtureGrid, kind: HardwareKind) -> list[RunConfig]:
    common = {
        "controls": _controls(grid, kind), "prompts": Prompts(count=grid.prompts),
        "prompt_ids": list(range(grid.prompts)), "quality": _quality_spec(grid), "prompt_length": grid.prompt_length,
    }
    configs: list[RunConfig] = []
    for gen in grid.generation_lengths:
        for batch in grid.batch_sizes:
            for arch in grid.families:
                configs += _configs_of(grid, arch, gen, batch, common)
    return configs


def _configs_of(grid: FixtureGrid, entry: str, gen: int, batch: int, common: dict) -> list[RunConfig]:
    """One model's runs at one generation length and batch: its sampler's grid (and variants)."""
    model = _model(grid, entry)
    sampler = family(model.arch).sampler
    if sampler == "autoregressive":
        ar = RunConfig(model=model, batch_size=batch, generation_length=gen, **common)
        return [ar, *(ar.model_copy(update={"llama_impl": impl}) for impl in grid.llama_impls)]
    if sampler == "dream":
        dream = [RunConfig(model=model, batch_size=batch, generation_length=gen, steps=steps,
                           dream=DreamSampling(alg=alg), **common)
                 for steps in grid.steps if steps <= gen for alg in grid.dream_algs]
        return [c for config in dream
                for c in (config, *(config.model_copy(update={"dream_impl": impl}) for impl in grid.dream_impls))]
    configs: list[RunConfig] = []
    for block in grid.block_lengths:
        if gen % block:
            continue
        for steps in grid.steps:
            if steps > gen or steps % (gen // block):
                continue
            llada = RunConfig(model=model, batch_size=batch, generation_length=gen, steps=steps, block_length=block,
                              remasking="low_confidence", **common)
            configs += [llada, *(llada.model_copy(update={"llada_impl": impl}) for impl in grid.llada_impls)]
    return configs


def run_id_of(config: RunConfig) -> str:
    return hashlib.sha256(canonical_json(config.model_dump(mode="json")).encode()).hexdigest()[:12]


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
    return llada_cache_bytes(preset_shape("llada", "8b"), cache=impl.cache, batch=config.batch_size,
                             prompt_len=config.prompt_length, gen_len=config.generation_length)


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
    if config.llada_impl is None:
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
    for prompt in config.prompt_ids:
        if _is_ar(config.model.arch):
            f1, ppl = 0.85, 8.0
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


def _impl_axis(impls: tuple[LladaImpl, ...] | tuple[LlamaImpl, ...]) -> dict:
    """`impl: [vanilla, variants...]` as a spec writes it (nothing when the grid has no variants)."""
    if not impls:
        return {}
    return {"impl": [{"name": "vanilla"}, *(impl.model_dump(exclude_defaults=True) for impl in impls)]}


def _spec_dict(grid: FixtureGrid) -> dict:
    source = {"synthetic": grid.synthetic} if grid.synthetic else None
    models = []
    for entry in grid.families:
        model = _model(grid, entry)
        models.append({"name": model.name, "arch": model.arch,
                       "source": dict(source) if source else {"checkpoint": model.source.checkpoint}})  # type: ignore[union-attr]
    samplers = {family(_model(grid, entry).arch).sampler for entry in grid.families}
    return {
        "name": grid.name,
        "description": "generated by tests/report_fixtures.py",
        "models": models,
        "grid": {
            "batch_sizes": list(grid.batch_sizes), "prompt_lengths": [grid.prompt_length],
            "generation_lengths": list(grid.generation_lengths),
            **({"llada": {"steps": list(grid.steps), "block_lengths": list(grid.block_lengths),
                          **_impl_axis(grid.llada_impls)}} if "llada" in samplers else {}),
            **({"dream": {"steps": list(grid.steps), "algs": list(grid.dream_algs), **_impl_axis(grid.dream_impls)}}
               if "dream" in samplers else {}),
            **({"llama": _impl_axis(grid.llama_impls)} if grid.llama_impls else {}),
        },
        "controls": {"dtype": grid.dtype, "attention": grid.attention, "device": grid.device, "warmup": 2,
                     "repetitions": grid.repetitions},
        "prompts": {"dataset": "specs/data/prompts.txt", "count": grid.prompts},
        "quality": _quality_spec(grid).model_dump(mode="json", exclude_none=True),
    }
