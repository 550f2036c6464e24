"""A model of a spec: where its weights come from, its architecture, its LLaDA or LLaMA variants and axes."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from specs.frozen import Frozen, Remasking, distinct, safe_name
from specs.shapes import Arch, ModelShape, preset_shape


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
    distinct([impl.name for impl in impls])
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
    time is part of `preparation_s`. It changes no number a forward computes (the same kernels, replayed): it
    is token-exact with the same variant eager. On a CPU, which has no graphs, the forward is compiled by
    inductor instead (the same static buffers).
    `steps`: the grid's step counts this variant runs at (default: every one), e.g. only where quality is at
    parity, so a sweep can afford a variant without multiplying every step count; a planning choice, never part
    of a run's config.
    """

    name: str = VANILLA
    cache: LladaCache = "none"
    threshold: float | None = Field(default=None, gt=0, le=1)
    factor: float | None = Field(default=None, gt=0)
    graph: bool = False
    steps: list[Annotated[int, Field(gt=0)]] | None = Field(default=None, min_length=1)

    _name = field_validator("name")(safe_name)
    _distinct_steps = field_validator("steps")(distinct)

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

    _name = field_validator("name")(safe_name)

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

    _distinct = field_validator("steps", "block_lengths", "remasking", "cfg_scales")(distinct)
    _distinct_impl = field_validator("impl")(_distinct_names)

    @model_validator(mode="after")
    def _impl_steps_in_the_grid(self) -> LladaAxes:
        for impl in self.impl:
            missing = [s for s in impl.steps or [] if s not in self.steps]
            if missing:
                raise ValueError(f"impl: {impl.name!r} steps {missing} are not among the steps swept; allowed: "
                                 f"{', '.join(map(str, self.steps))}")
        return self

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

    _name = field_validator("name")(safe_name)

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
