"""The fixture sweeps' grids: which devices, models, lengths, steps and variants a generated sweep holds, the runs
(RunConfigs) they expand to, and the frozen spec that names them (tests/report_fixtures.py writes their results)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from specs.artifacts import canonical_json
from specs.block_diffusion import BlockDiffusionSampling, schedule
from specs.registry import family
from specs.results import MeasuredRoofs
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
    # Block diffusion's thresholds (one setting each; its block is the first of `block_lengths`, sub-block 8).
    thresholds: tuple[float, ...] = (0.9,)
    # Latency multipliers per `families` entry (1 where absent): what sets each pair's crossover apart.
    family_speed: tuple[tuple[str, float], ...] = ()
    # Families every run of which failed (an error artifact, no measurement), as when a checkpoint is broken.
    failing_families: tuple[str, ...] = ()
    sessions: int = 1  # controls.sessions: the grid again in each, fresh noise
    failed_sessions: tuple[tuple[str, int], ...] = ()  # (family, session from 0): every run of it there failed


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
        sessions=grid.sessions, hardware=HardwareRequirement(gpu=kind.gpu_filter),
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
    for session in range(grid.sessions):
        common["session"] = session if grid.sessions > 1 else None
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
    if sampler == "block_diffusion":
        block = grid.block_lengths[0]
        k = schedule(grid.prompt_length, gen, block, BD_SUB_BLOCK).max_forwards
        return [RunConfig(model=model, batch_size=batch, generation_length=gen, steps=k, block_length=block,
                          block_diffusion=BlockDiffusionSampling(sub_block_length=BD_SUB_BLOCK, threshold=t), **common)
                for t in grid.thresholds]
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


BD_SUB_BLOCK = 8


def run_id_of(config: RunConfig) -> str:
    return hashlib.sha256(canonical_json(config.model_dump(mode="json")).encode()).hexdigest()[:12]


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
            **({"block_diffusion": {"thresholds": list(grid.thresholds), "block_lengths": [grid.block_lengths[0]],
                                    "sub_block_lengths": [BD_SUB_BLOCK]}} if "block_diffusion" in samplers else {}),
            **({"llama": _impl_axis(grid.llama_impls)} if grid.llama_impls else {}),
        },
        "controls": {"dtype": grid.dtype, "attention": grid.attention, "device": grid.device, "warmup": 2,
                     "repetitions": grid.repetitions, **({"sessions": grid.sessions} if grid.sessions > 1 else {})},
        "prompts": {"dataset": "specs/data/prompts.txt", "count": grid.prompts},
        "quality": _quality_spec(grid).model_dump(mode="json", exclude_none=True),
    }
