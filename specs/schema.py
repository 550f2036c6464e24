"""The experiment spec: the pydantic models every stage reads (YAML in, validated, frozen)."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from specs.shapes import PRESET_NAMES, Arch, ModelShape, preset_shape

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SAFE_NAME_HELP = "1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"

Dtype = Literal["bfloat16", "float16", "float32"]
Attention = Literal["sdpa", "flash_attention_2", "eager"]
Remasking = Literal["low_confidence", "random"]
Device = Literal["auto", "cpu", "cuda"]


class Frozen(BaseModel):
    """Base of every spec model: unknown keys are errors and nothing changes after validation."""

    # Infinity and NaN are never a setting (a temperature of .inf would pass `ge=0`).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _safe_name(value: str) -> str:
    # fullmatch: `$` in SAFE_NAME would also accept a name that ends in a newline.
    if not SAFE_NAME.fullmatch(value) or value in {".", ".."}:
        raise ValueError(f"{value!r} is not a safe name; use {SAFE_NAME_HELP}")
    return value


def _distinct(values: list | None) -> list | None:
    """A grid axis lists each value once: a repeat would plan the same run twice."""
    seen: list = []
    for value in values or []:
        if value in seen:
            raise ValueError(f"{value!r} is listed twice; list each value once")
        seen.append(value)
    return values


# ---------------------------------------------------------------- models


class SyntheticSource(Frozen):
    """Random-initialised weights of a named preset shape or an explicit one."""

    synthetic: Union[Literal["tiny", "small", "8b"], ModelShape]
    seed: int = 0


class CheckpointSource(Frozen):
    """A local directory or a hub id, resolved through the HF cache."""

    checkpoint: str = Field(min_length=1)
    revision: str | None = None
    tokenizer: str | None = None
    # Remote code runs only when a spec opts in by name (DESIGN: no remote code by default).
    trust_remote_code: bool = False


def _source_kind(value: object) -> str | None:
    """Pick the source's class by its key, so an error speaks of the form the user wrote."""
    if isinstance(value, dict):
        if "checkpoint" in value:
            return "CheckpointSource"
        if "synthetic" in value:
            return "SyntheticSource"
        return None
    return type(value).__name__


ModelSource = Annotated[
    Union[
        Annotated[SyntheticSource, Tag("SyntheticSource")],
        Annotated[CheckpointSource, Tag("CheckpointSource")],
    ],
    Discriminator(
        _source_kind,
        custom_error_type="source_kind",
        custom_error_message="give either 'synthetic: tiny|small|8b|{shape}' or 'checkpoint: <path or hub id>'",
    ),
]


VANILLA = "vanilla"
LladaCache = Literal["none", "prefix", "dual"]
DecodeAttention = Literal["static", "live"]  # LlamaImpl.decode_attention


def _distinct_names(impls: list) -> list:
    """Variants are told apart by name in the artifacts and the report: each name once."""
    _distinct([impl.name for impl in impls])
    return impls


class LladaImpl(Frozen):
    """One named LLaDA implementation. The default is the vanilla sampler (no cache, the step schedule).

    `cache`: `prefix` keeps the KV of everything left of the current block from the block's first step (one
    full forward) and feeds later steps only the block and what lies right of it; `dual` caches the whole
    sequence's KV at the block's first step and feeds later steps only the block's positions.
    `threshold`: each step also commits every masked position of the block whose confidence is at least
    `threshold`, never fewer than the schedule's count, so the grid's `steps` is an upper bound on the
    forwards per generation and the count that ran is recorded. `factor`: the same with the factor rule
    (the top n while the n-th confidence is at least 1 - factor / (n + 1)). With neither and no cache a
    variant is token-exact with vanilla.
    `graph`: every model forward of a step runs captured as a CUDA graph, one per input shape (vanilla: one;
    dual: the block's refresh and its cached step; prefix: the refresh and one per block), captured by hand in
    the warm-ups and replayed in the timed steps, so a step pays no per-operator host dispatch; the capture
    time is recorded as `compile_s`. It changes no number a forward computes (the same kernels, replayed): it
    is token-exact with the same variant eager. On a CPU, which has no graphs, the forward is compiled by
    inductor instead (the same static buffers).
    """

    name: str = VANILLA
    cache: LladaCache = "none"
    threshold: float | None = Field(default=None, gt=0, le=1)
    factor: float | None = Field(default=None, gt=0)
    graph: bool = False

    _name = field_validator("name")(_safe_name)

    @model_validator(mode="after")
    def _one_parallel_rule(self) -> LladaImpl:
        if self.threshold is not None and self.factor is not None:
            raise ValueError("factor: give either threshold or factor, not both")
        if self.name == VANILLA and self.is_accelerated:
            raise ValueError(f"name: {VANILLA!r} names the plain sampler; give this variant another name")
        return self

    @property
    def is_accelerated(self) -> bool:
        return self.cache != "none" or self.threshold is not None or self.factor is not None or self.graph

    @property
    def parallel(self) -> bool:
        """Whether the forwards per generation vary with the model's confidence (threshold or factor)."""
        return self.threshold is not None or self.factor is not None


class LlamaImpl(Frozen):
    """One named LLaMA implementation. The default is the eager decode loop over the preallocated KV cache;
    `compile` wraps its decode step in `torch.compile` (CUDA graphs on GPU, inductor on CPU), compiled during
    the warm-ups, which are never timed; the compile time is recorded.

    `decode_attention` (compile only) picks the compiled step's attention: `static` is transformers' kernel
    over every position of the static cache (under compile its GQA repeats each KV head for its query
    heads, so keys and values are read, copied and read again); `live` attends only over the positions
    written so far, rounded up to a multiple of 256 (one graph per bucket), each KV head shared by its query
    heads without a copy, so a decode step reads each live key and value once.
    """

    name: str = VANILLA
    compile: bool = False
    decode_attention: DecodeAttention = "static"

    _name = field_validator("name")(_safe_name)

    @model_validator(mode="after")
    def _vanilla_is_plain(self) -> LlamaImpl:
        if self.name == VANILLA and self.is_accelerated:
            raise ValueError(f"name: {VANILLA!r} names the plain decode loop; give this variant another name")
        if self.decode_attention != "static" and not self.compile:
            raise ValueError(
                f"decode_attention: {self.decode_attention!r} is the compiled decode step's attention; "
                "add compile: true or drop it"
            )
        return self

    @property
    def is_accelerated(self) -> bool:
        return self.compile


class LladaAxes(Frozen):
    """Axes that apply to LLaDA models only; they never multiply LLaMA runs."""

    steps: list[Annotated[int, Field(gt=0)]] = Field(min_length=1)
    block_lengths: list[Annotated[int, Field(gt=0)]] = Field(min_length=1)
    remasking: list[Remasking] = Field(default_factory=lambda: ["low_confidence"], min_length=1)
    cfg_scales: list[Annotated[float, Field(ge=0)]] = Field(default_factory=lambda: [0.0], min_length=1)
    impl: list[LladaImpl] = Field(default_factory=lambda: [LladaImpl()], min_length=1)

    _distinct = field_validator("steps", "block_lengths", "remasking", "cfg_scales")(_distinct)
    _distinct_impl = field_validator("impl")(_distinct_names)

    @model_validator(mode="after")
    def _rules_rank_confidence(self) -> LladaAxes:
        ranked = [impl.name for impl in self.impl if impl.parallel]
        if ranked and "random" in self.remasking:
            raise ValueError(
                f"impl: {', '.join(map(repr, ranked))} commit by the model's confidence (threshold or factor), which "
                "random remasking does not compute; use remasking [low_confidence] or drop those variants"
            )
        return self


class LlamaAxes(Frozen):
    """Axes that apply to LLaMA models only; they never multiply LLaDA runs."""

    impl: list[LlamaImpl] = Field(default_factory=lambda: [LlamaImpl()], min_length=1)

    _distinct_impl = field_validator("impl")(_distinct_names)


class ModelSpec(Frozen):
    """One model of the sweep."""

    name: str
    arch: Arch
    source: ModelSource
    chat: bool = False
    # LLaDA's [MASK] id; None = read from the checkpoint config or the synthetic tokenizer.
    mask_token_id: int | None = Field(default=None, ge=0)
    # Per-model LLaDA axes replacing grid.llada (LLaDA models only).
    llada: LladaAxes | None = None

    _name = field_validator("name")(_safe_name)

    @model_validator(mode="after")
    def _llada_only_fields(self) -> ModelSpec:
        if self.arch == "llama" and self.llada is not None:
            raise ValueError("llada: LLaDA axes (steps, block_lengths) given for a llama model; remove them")
        if self.arch == "llama" and self.mask_token_id is not None:
            raise ValueError("mask_token_id: applies to llada models only")
        if self.arch == "llada" and isinstance(self.source, CheckpointSource) and self.source.trust_remote_code:
            raise ValueError(
                "source.trust_remote_code: not supported for llada models: LLaDA's own modeling code takes no "
                "logits_to_keep and its config does not declare bidirectional attention (is_causal: false), both "
                "of which the sampler needs; drop it: LLaDA checkpoints load without remote code"
            )
        return self

    @property
    def is_synthetic(self) -> bool:
        return isinstance(self.source, SyntheticSource)

    def shape(self) -> ModelShape | None:
        """The architecture's shape when known before loading (synthetic models), else None."""
        if not isinstance(self.source, SyntheticSource):
            return None
        if isinstance(self.source.synthetic, ModelShape):
            return self.source.synthetic
        return preset_shape(self.arch, self.source.synthetic)


# ---------------------------------------------------------------- grid


class LengthPair(Frozen):
    prompt: int = Field(gt=0)
    generation: int = Field(gt=0)


class Grid(Frozen):
    """The swept axes. Lengths: either a cross product or total lengths with a prompt fraction."""

    batch_sizes: list[Annotated[int, Field(gt=0)]] = Field(min_length=1)
    prompt_lengths: list[Annotated[int, Field(gt=0)]] | None = None
    generation_lengths: list[Annotated[int, Field(gt=0)]] | None = None
    sequence_lengths: list[Annotated[int, Field(gt=1)]] | None = None
    prompt_fraction: float | None = Field(default=None, gt=0, lt=1)
    llada: LladaAxes | None = None
    llama: LlamaAxes | None = None

    _distinct = field_validator("batch_sizes", "prompt_lengths", "generation_lengths", "sequence_lengths")(_distinct)

    @model_validator(mode="after")
    def _one_length_form(self) -> Grid:
        cross = self.prompt_lengths is not None or self.generation_lengths is not None
        total = self.sequence_lengths is not None or self.prompt_fraction is not None
        if cross and total:
            raise ValueError(
                "prompt_lengths: give either prompt_lengths + generation_lengths, or sequence_lengths + prompt_fraction, not both"
            )
        if cross and (not self.prompt_lengths or not self.generation_lengths):
            raise ValueError("generation_lengths: prompt_lengths and generation_lengths must both be given")
        if total and (not self.sequence_lengths or self.prompt_fraction is None):
            raise ValueError("prompt_fraction: sequence_lengths needs prompt_fraction (e.g. 0.5)")
        if not cross and not total:
            raise ValueError("prompt_lengths: give prompt_lengths + generation_lengths, or sequence_lengths + prompt_fraction")
        if total:
            for n in self.sequence_lengths or []:
                prompt = round(n * (self.prompt_fraction or 0))
                if prompt < 1 or prompt >= n:
                    raise ValueError(f"sequence_lengths: {n} tokens with prompt_fraction {self.prompt_fraction} leave no prompt or no generation")
        return self

    def length_pairs(self) -> list[LengthPair]:
        """Every (prompt, generation) pair the grid asks for, in the order given."""
        if self.sequence_lengths is not None and self.prompt_fraction is not None:
            pairs = []
            for n in self.sequence_lengths:
                prompt = round(n * self.prompt_fraction)
                pairs.append(LengthPair(prompt=prompt, generation=n - prompt))
            return pairs
        return [
            LengthPair(prompt=p, generation=g)
            for p in self.prompt_lengths or []
            for g in self.generation_lengths or []
        ]


# ---------------------------------------------------------------- controls, prompts, quality


class HardwareRequirement(Frozen):
    """Which GPU a measurement is valid on; a worker refuses to measure elsewhere."""

    gpu: str = "any"  # "any", or a substring of the device name such as "A100"
    exclusive: bool = False  # refuse when other processes share the GPU
    allow_mismatch: bool = False  # measure anyway and record the mismatch
    # The roofline hardware profile used to predict memory (e.g. a100-sxm4-80gb); see `just roofline hardware`.
    profile: str | None = None


class Extrapolation(Frozen):
    """Time only the first `timed_steps` steps of each LLaDA generation and extrapolate its end-to-end latency.

    A vanilla LLaDA step costs the same at every step of a run (same positions, same window), so a budgeted
    sweep may stop after K steps; the artifact marks such latencies as extrapolated. The grid points named by
    `check_steps` x `check_batch_sizes` also run in full, so the sweep itself measures how good that is.
    """

    timed_steps: int = Field(gt=0)
    check_steps: list[Annotated[int, Field(gt=0)]] = Field(default_factory=list)
    check_batch_sizes: list[Annotated[int, Field(gt=0)]] | None = None  # None: every batch size of the grid


class Controls(Frozen):
    """What stays identical across every run of a sweep (study section 4.2)."""

    dtype: Dtype = "bfloat16"
    attention: Attention = "sdpa"
    device: Device = "auto"
    warmup: int = Field(default=3, ge=0)
    # Ten by default: from six up the report gives a 95% BCa CI of a median, below it only the range. A spec on
    # a tight budget (smoke, one GPU lease) sets fewer and its report says "range".
    repetitions: int = Field(default=10, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    seed: int = 0
    hardware: HardwareRequirement = HardwareRequirement()
    # Skip runs the roofline memory model predicts cannot fit on the hardware.
    skip_predicted_oom: bool = False
    # Bound on retries of a run whose worker died.
    max_retries: int = Field(default=2, ge=0)
    # LLaDA latency from the first K steps of each generation (None: every generation runs in full).
    extrapolation: Extrapolation | None = None

    @model_validator(mode="after")
    def _kernel_fits_device(self) -> Controls:
        if self.attention == "flash_attention_2" and self.device == "cpu":
            raise ValueError("attention: 'flash_attention_2' needs a CUDA device; allowed on cpu: 'sdpa', 'eager'")
        if self.skip_predicted_oom and self.hardware.profile is None:
            raise ValueError(
                "hardware.profile: skip_predicted_oom needs a roofline hardware profile, e.g. a100-sxm4-80gb"
            )
        if self.device == "cpu" and self.hardware.gpu.strip().lower() != "any" and not self.hardware.allow_mismatch:
            raise ValueError(
                f"hardware.gpu: {self.hardware.gpu!r} needs a GPU but device is 'cpu', so every run would be "
                "refused; allowed on cpu: gpu: any (or device: auto / cuda)"
            )
        if self.attention == "flash_attention_2" and self.dtype == "float32":
            raise ValueError("attention: 'flash_attention_2' runs in bfloat16 or float16 only; use dtype bfloat16")
        return self


class Prompts(Frozen):
    """Where prompts come from: a local .txt (blank-line separated) or .jsonl file, or a hub dataset."""

    dataset: str = "specs/data/prompts.txt"
    config: str | None = None  # hub dataset config, e.g. wikitext-103-raw-v1
    split: str = "validation"
    text_field: str = "text"
    count: int = Field(default=8, gt=0)
    # Lengths beyond one passage: join consecutive passages until long enough (specs/passages.py).
    join_passages: bool = False


class BertScoreSpec(Frozen):
    model: str = "packaged-minilm"  # or a local path / hub id such as roberta-large
    num_layers: int = Field(default=6, gt=0)


class PerplexitySpec(Frozen):
    evaluator: str  # a model name of this spec, or a checkpoint path / hub id


class ElboSpec(Frozen):
    samples: int = Field(default=16, gt=0)


class QualitySpec(Frozen):
    """Which quality metrics each run computes (None = that metric is off)."""

    bertscore: BertScoreSpec | None = None
    perplexity: PerplexitySpec | None = None
    elbo: ElboSpec | None = None
    # LLaMA is also scored when sampled at this temperature, as a second parity reference.
    llama_sampled_temperature: float | None = Field(default=None, gt=0)

    @property
    def enabled(self) -> bool:
        return self.bertscore is not None or self.perplexity is not None or self.elbo is not None


# ---------------------------------------------------------------- the spec


def _check_llada_combination(field: str, generation: int, axes: LladaAxes) -> None:
    """The official sampler's preconditions, checked for every combination the grid makes."""
    for block in axes.block_lengths:
        if generation % block:
            raise ValueError(
                f"{field}.block_lengths: generation length {generation} is not divisible by block length "
                f"{block}; allowed: divisors of {generation}"
            )
        blocks = generation // block
        for steps in axes.steps:
            if steps > generation:
                raise ValueError(
                    f"{field}.steps: {steps} steps exceed generation length {generation}; "
                    f"allowed: at most {generation}"
                )
            if steps % blocks:
                raise ValueError(
                    f"{field}.steps: {steps} steps are not divisible by the {blocks} blocks of generation "
                    f"{generation} / block {block}; allowed: multiples of {blocks}"
                )



class ExperimentSpec(Frozen):
    """A whole sweep as written in specs/*.yaml."""

    name: str
    description: str = ""
    models: list[ModelSpec] = Field(min_length=1)
    grid: Grid
    controls: Controls = Controls()
    prompts: Prompts = Prompts()
    quality: QualitySpec = QualitySpec()

    _name = field_validator("name")(_safe_name)

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentSpec:
        names = [m.name for m in self.models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"models: model names must be unique; repeated: {', '.join(duplicates)}")
        has_llada = any(m.arch == "llada" for m in self.models)
        if self.grid.llada is not None and not has_llada:
            raise ValueError("grid.llada: given but no model has arch 'llada'")
        if self.grid.llama is not None and not any(m.arch == "llama" for m in self.models):
            raise ValueError("grid.llama: given but no model has arch 'llama'")
        if self.quality.perplexity is not None:
            self._check_evaluator(self.quality.perplexity.evaluator)
        if self.controls.extrapolation is not None:
            self._check_extrapolation(self.controls.extrapolation)
        for index, m in enumerate(self.models):
            if m.arch == "llada" and m.llada is None and self.grid.llada is None:
                raise ValueError(f"grid.llada: model {m.name!r} is llada but neither grid.llada nor models.{index}.llada is given")
            field = f"models.{index}.llada" if m.llada is not None else "grid.llada"
            axes = self.llada_axes(m)
            for pair in self.grid.length_pairs():
                if axes is not None:
                    _check_llada_combination(field, pair.generation, axes)
                shape = m.shape()
                if shape is not None and pair.prompt + pair.generation > shape.max_position_embeddings:
                    raise ValueError(
                        f"grid: prompt {pair.prompt} + generation {pair.generation} tokens exceed model "
                        f"{m.name!r}'s max_position_embeddings {shape.max_position_embeddings}"
                    )
        return self

    def _check_evaluator(self, evaluator: str) -> None:
        named = self.model(evaluator)
        if named is not None and named.arch != "llama":
            raise ValueError(
                f"quality.perplexity.evaluator: {evaluator!r} is a {named.arch} model; the evaluator must be "
                "a causal LM (arch llama)"
            )
        if named is None and "/" not in evaluator:
            choices = ", ".join(m.name for m in self.models if m.arch == "llama") or "none"
            raise ValueError(
                f"quality.perplexity.evaluator: {evaluator!r} is neither a llama model of this spec "
                f"({choices}) nor a checkpoint (a path or a hub id such as meta-llama/Meta-Llama-3-8B)"
            )

    def _check_extrapolation(self, extrapolation: Extrapolation) -> None:
        if self.quality.enabled:
            raise ValueError(
                "controls.extrapolation: timing the first steps leaves generations unfinished, so quality cannot "
                "be scored; turn quality off (remove quality:) or remove controls.extrapolation"
            )
        steps = sorted({k for m in self.models if (axes := self.llada_axes(m)) for k in axes.steps})
        if not steps:
            raise ValueError("controls.extrapolation: applies to llada models, and this spec has none")
        unknown = [k for k in extrapolation.check_steps if k not in steps]
        if unknown:
            raise ValueError(
                f"controls.extrapolation.check_steps: {unknown} are not LLaDA step counts of the grid; allowed: {steps}"
            )
        batches = extrapolation.check_batch_sizes or []
        unknown = [b for b in batches if b not in self.grid.batch_sizes]
        if unknown:
            raise ValueError(
                f"controls.extrapolation.check_batch_sizes: {unknown} are not in grid.batch_sizes "
                f"{self.grid.batch_sizes}"
            )

    def evaluator_model(self) -> ModelSpec | None:
        """The perplexity evaluator as a model: one of the spec's, or a checkpoint it names."""
        if self.quality.perplexity is None:
            return None
        evaluator = self.quality.perplexity.evaluator
        named = self.model(evaluator)
        if named is not None:
            return named
        safe = re.sub(r"[^A-Za-z0-9._-]", "-", evaluator.strip("/"))[-64:].lstrip("-.") or "evaluator"
        return ModelSpec(name=safe, arch="llama", source=CheckpointSource(checkpoint=evaluator))

    def llada_axes(self, model: ModelSpec) -> LladaAxes | None:
        """The LLaDA axes that apply to a model (its own override first)."""
        if model.arch != "llada":
            return None
        return model.llada or self.grid.llada

    def model(self, name: str) -> ModelSpec | None:
        return next((m for m in self.models if m.name == name), None)


# ---------------------------------------------------------------- one run


class RunConfig(Frozen):
    """One unit of work on one GPU: one model at one point of the grid. Its hash is the run id."""

    model: ModelSpec
    batch_size: int = Field(gt=0)
    prompt_length: int = Field(gt=0)
    generation_length: int = Field(gt=0)
    steps: int | None = None
    block_length: int | None = None
    remasking: Remasking | None = None
    cfg_scale: float = 0.0
    controls: Controls
    prompts: Prompts
    prompt_ids: list[int]
    quality: QualitySpec
    # The perplexity evaluator resolved to a model (None when perplexity is off).
    evaluator: ModelSpec | None = None
    # LLaDA: time only the first `timed_steps` steps and extrapolate (controls.extrapolation); None: in full.
    timed_steps: int | None = Field(default=None, gt=0)
    # The implementation variant; None is vanilla (so vanilla runs keep the ids they had before variants).
    llada_impl: LladaImpl | None = None
    llama_impl: LlamaImpl | None = None

    @field_validator("llada_impl", "llama_impl")
    @classmethod
    def _vanilla_is_none(cls, impl: LladaImpl | LlamaImpl | None) -> LladaImpl | LlamaImpl | None:
        """The plain implementation is stored as None, however it was given: one config, one run id."""
        return None if impl is not None and impl.name == VANILLA else impl

    @model_validator(mode="after")
    def _impl_matches_arch(self) -> RunConfig:
        if self.llada_impl is not None and self.model.arch != "llada":
            raise ValueError(f"llada_impl: applies to llada models only; {self.model.name!r} is {self.model.arch}")
        if self.llama_impl is not None and self.model.arch != "llama":
            raise ValueError(f"llama_impl: applies to llama models only; {self.model.name!r} is {self.model.arch}")
        if self.llada_impl is not None and self.llada_impl.parallel and self.remasking == "random":
            raise ValueError("llada_impl: threshold and factor rank confidence; they need remasking low_confidence")
        return self

    @property
    def impl_name(self) -> str:
        impl = self.llada_impl or self.llama_impl
        return impl.name if impl is not None else VANILLA

    @property
    def num_blocks(self) -> int | None:
        if self.block_length is None:
            return None
        return self.generation_length // self.block_length

    @property
    def sequence_length(self) -> int:
        return self.prompt_length + self.generation_length

    @property
    def output_tokens(self) -> int:
        """Tokens generated per measured batch: B × N_out."""
        return self.batch_size * self.generation_length


__all__ = [
    "VANILLA",
    "PRESET_NAMES",
    "SAFE_NAME",
    "Attention",
    "BertScoreSpec",
    "CheckpointSource",
    "Controls",
    "Device",
    "Dtype",
    "ElboSpec",
    "ExperimentSpec",
    "Extrapolation",
    "Grid",
    "HardwareRequirement",
    "LengthPair",
    "LladaAxes",
    "LladaCache",
    "LladaImpl",
    "LlamaAxes",
    "LlamaImpl",
    "ModelSource",
    "ModelSpec",
    "PerplexitySpec",
    "Prompts",
    "QualitySpec",
    "Remasking",
    "RunConfig",
    "SyntheticSource",
]
