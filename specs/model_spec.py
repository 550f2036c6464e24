"""A model of a spec: where its weights come from, its family (specs/registry.py), its sampler's axes and variants."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from specs.block_diffusion import BlockDiffusionAxes
from specs.engines import PYTORCH, EngineName
from specs.frozen import VANILLA, Frozen, NamedImpl, Remasking, distinct, safe_name
from specs.registry import LAYOUT_QKV_BIAS, Arch, SamplerName, family
from specs.shapes import ModelShape


class SyntheticSource(Frozen):
    """Random-initialised weights of a named preset shape or an explicit one."""

    # A preset of the model's family (specs/registry.py: LLaMA and LLaDA have 8b, Qwen2.5 and Dream 7b).
    synthetic: Union[Literal["tiny", "small", "8b", "7b"], ModelShape]
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
        custom_error_message="give either 'synthetic: tiny|small|8b|7b|{shape}' or 'checkpoint: <path or hub id>'",
    ),
]


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
    `engine`: `llama.cpp` runs each step's forward in llama.cpp (non-causal attention) while this package's sampler
    keeps the algorithm (specs/engines.py); its caches and graphs are PyTorch's, so it takes neither.
    """

    name: str = VANILLA
    cache: LladaCache = "none"
    threshold: float | None = Field(default=None, gt=0, le=1)
    factor: float | None = Field(default=None, gt=0)
    graph: bool = False
    engine: EngineName = PYTORCH
    steps: list[Annotated[int, Field(gt=0)]] | None = Field(default=None, min_length=1)

    _name = field_validator("name")(safe_name)
    _distinct_steps = field_validator("steps")(distinct)

    @model_validator(mode="after")
    def _one_parallel_rule(self) -> LladaImpl:
        if self.threshold is not None and self.factor is not None:
            raise ValueError("factor: give either threshold or factor, not both")
        if self.name == VANILLA and self.is_accelerated:
            raise ValueError(f"name: {VANILLA!r} names the plain sampler; give this variant another name")
        if self.engine != PYTORCH and (self.cache != "none" or self.graph):
            raise ValueError(f"engine: {self.engine!r} runs the forward alone; its cache and graph variants are "
                             "PyTorch's: drop cache and graph, or the engine")
        return self

    @property
    def is_accelerated(self) -> bool:
        return (self.cache != "none" or self.threshold is not None or self.factor is not None or self.graph
                or self.engine != PYTORCH)

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
    `engine`: `llama.cpp` decodes with llama.cpp's own batched greedy loop (specs/engines.py) instead of this
    package's loop over transformers; `compile` is PyTorch's, so it takes none.
    """

    name: str = VANILLA
    compile: bool = False
    decode_attention: DecodeAttention = "static"
    engine: EngineName = PYTORCH

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
        if self.engine != PYTORCH and self.compile:
            raise ValueError(f"engine: {self.engine!r} decodes with its own loop; compile is PyTorch's: drop one")
        return self

    @property
    def is_accelerated(self) -> bool:
        return self.compile or self.engine != PYTORCH


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


DreamAlg = Literal["origin", "maskgit_plus", "topk_margin", "entropy"]


class DreamSampling(Frozen):
    """One setting of Dream's sampler (`diffusion_generate`), besides its steps and the controls' temperature.

    `alg`: which masked positions a step commits: `origin` reveals each at random with the schedule's
    probability (1 - s/t from time t to s); `maskgit_plus` the most confident (top probability), `topk_margin` those with the largest margin
    between the top two probabilities, `entropy` those of lowest entropy. `alg_temp` > 0 samples that order
    instead of taking it greedily (confidence algs only). `top_p` and `top_k` filter each position's token
    distribution before sampling (with the controls' temperature > 0).
    """

    alg: DreamAlg = "entropy"
    alg_temp: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _alg_temp_orders_confidence(self) -> DreamSampling:
        if self.alg == "origin" and self.alg_temp:
            raise ValueError("alg_temp: orders the confidence algs; alg 'origin' commits at random and takes none")
        return self


class DreamImpl(NamedImpl):
    """One named Dream implementation. The default is the eager sampler. `graph`: every step's forward (the whole
    sequence, the same shape at every step) runs captured as a CUDA graph, captured in the warm-ups and replayed
    in the timed steps, so a step pays no per-operator host dispatch; inductor-compiled on a CPU. It changes no
    number a forward computes: token-exact with the eager sampler. Dream has no blocks, so LLaDA's block caches
    and confidence rules have no counterpart here."""

    graph: bool = False

    @property
    def is_accelerated(self) -> bool:
        return self.graph


class DreamAxes(Frozen):
    """Axes that apply to models whose sampler is Dream's (whole-sequence denoising, no blocks)."""

    steps: list[Annotated[int, Field(gt=0)]] = Field(min_length=1)
    algs: list[DreamAlg] = Field(default_factory=lambda: ["entropy"], min_length=1)
    alg_temp: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, gt=0)
    impl: list[DreamImpl] = Field(default_factory=lambda: [DreamImpl()], min_length=1)

    _distinct = field_validator("steps", "algs")(distinct)
    _distinct_impl = field_validator("impl")(_distinct_names)

    @model_validator(mode="after")
    def _alg_temp_orders_confidence(self) -> DreamAxes:
        if self.alg_temp and self.algs == ["origin"]:
            raise ValueError("alg_temp: orders the confidence algs; alg 'origin' commits at random and takes none")
        return self

    def settings(self) -> list[DreamSampling]:
        """One sampler setting per alg (alg_temp applies to the confidence algs only)."""
        return [
            DreamSampling(alg=alg, alg_temp=None if alg == "origin" else self.alg_temp, top_p=self.top_p, top_k=self.top_k)
            for alg in self.algs
        ]


# The spec field that holds each sampler's own axes (per model, or in the grid for every model of that sampler).
SAMPLER_AXES: dict[str, str] = {
    "llada": "llada", "dream": "dream", "block_diffusion": "block_diffusion", "autoregressive": "llama",
}


class ModelSpec(Frozen):
    """One model of the sweep. `arch` names its family in the registry (specs/registry.py), which decides how
    it loads, which sampler generates with it and how the roofline costs it."""

    name: str
    arch: Arch
    source: ModelSource
    chat: bool = False
    # The family's sampler, when a spec names it; another sampler is refused (the registry says which fits).
    sampler: SamplerName | None = None
    # A diffusion model's [MASK] id; None = read from the checkpoint config or the synthetic tokenizer.
    mask_token_id: int | None = Field(default=None, ge=0)
    # Per-model sampler axes replacing grid.llada / grid.dream / grid.block_diffusion (models of that sampler only).
    llada: LladaAxes | None = None
    dream: DreamAxes | None = None
    block_diffusion: BlockDiffusionAxes | None = None

    _name = field_validator("name")(safe_name)

    @model_validator(mode="after")
    def _fits_the_family(self) -> ModelSpec:
        entry = family(self.arch)
        if self.sampler is not None and self.sampler != entry.sampler:
            raise ValueError(
                f"sampler: {self.sampler!r} does not fit {self.arch} models ({entry.title} is {entry.paradigm}); "
                f"allowed: {entry.sampler}"
            )
        for field, axes in (("llada", self.llada), ("dream", self.dream), ("block_diffusion", self.block_diffusion)):
            if axes is not None and entry.sampler != field:
                raise ValueError(
                    f"{field}: {field} sampler axes given for a {self.arch} model, which generates with the "
                    f"{entry.sampler} sampler; remove them"
                )
        if self.mask_token_id is not None and not entry.is_diffusion:
            raise ValueError(f"mask_token_id: applies to diffusion models only; {self.arch} is {entry.paradigm}")
        if entry.is_diffusion and isinstance(self.source, CheckpointSource) and self.source.trust_remote_code:
            raise ValueError(
                f"source.trust_remote_code: not supported for {self.arch} models: the sampler needs the bidirectional "
                "attention and logits_to_keep of the package's own loading, which the checkpoint's modeling code "
                f"does not give; drop it: {entry.title} checkpoints load without remote code"
            )
        if isinstance(self.source, SyntheticSource) and isinstance(self.source.synthetic, ModelShape):
            bias = LAYOUT_QKV_BIAS[entry.layout]
            if self.source.synthetic.attention_bias != bias:
                raise ValueError(
                    f"source.synthetic.attention_bias: {self.arch} models have the {entry.layout} layout, whose q, k "
                    f"and v projections {'always' if bias else 'never'} carry a bias; allowed: {str(bias).lower()}"
                )
        if isinstance(self.source, SyntheticSource) and isinstance(self.source.synthetic, str):
            if self.source.synthetic not in entry.presets:
                raise ValueError(
                    f"source.synthetic: {self.source.synthetic!r} is not a preset of {self.arch}; allowed: "
                    f"{', '.join(entry.presets)}"
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
        return family(self.arch).preset(self.source.synthetic)
