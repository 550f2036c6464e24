"""The experiment spec: the pydantic models every stage reads (YAML in, validated, frozen).

This module holds the whole sweep (`ExperimentSpec`) and one run of it (`RunConfig`), and re-exports the
blocks they are made of, so every stage imports the schema from here: the shared base and literal types
(`specs/frozen.py`), a model and its variants (`specs/model_spec.py`), the grid (`specs/grid.py`), and the
controls, prompts and quality metrics (`specs/controls.py`).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from specs.block_diffusion import BlockDiffusionAxes, BlockDiffusionImpl, BlockDiffusionSampling, schedule
from specs.controls import (
    BertScoreSpec,
    Controls,
    ElboSpec,
    Extrapolation,
    PACKAGED_SMOLLM2,
    HardwareRequirement,
    ParitySpec,
    PerplexitySpec,
    Prompts,
    QualitySpec,
)
from specs.combinations import check_block_diffusion, check_dream_combination, check_engines, check_llada_combination
from specs.engines import PYTORCH
from specs.frozen import SAFE_NAME, Attention, Device, Dtype, Frozen, Remasking, safe_name
from specs.grid import Grid, LengthPair
from specs.model_spec import (
    SAMPLER_AXES,
    VANILLA,
    CheckpointSource,
    DreamAlg,
    DreamAxes,
    DreamImpl,
    DreamSampling,
    LladaAxes,
    LladaCache,
    LladaImpl,
    LlamaAxes,
    LlamaImpl,
    ModelSource,
    ModelSpec,
    SyntheticSource,
)
from specs.quality_rules import quality_problem
from specs.registry import PRESET_NAMES, family
from specs.study import ControlKey

# ---------------------------------------------------------------- the spec


class ExperimentSpec(Frozen):
    """A whole sweep as written in specs/*.yaml."""

    name: str
    description: str = ""
    models: list[ModelSpec] = Field(min_length=1)
    grid: Grid
    controls: Controls = Controls()
    prompts: Prompts = Prompts()
    quality: QualitySpec = QualitySpec()
    # Spec-level notes, never part of a RunConfig (no run id depends on them), printed by the report:
    # why the sweep departs from the study's design (specs/study.py), per control, in its "Departures" table;
    departures: dict[ControlKey, str] = Field(default_factory=dict)
    # and what was edited in this spec after its runs, and why (its provenance section).
    amendments: list[str] = Field(default_factory=list)

    _name = field_validator("name")(safe_name)

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentSpec:
        names = [m.name for m in self.models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"models: model names must be unique; repeated: {', '.join(duplicates)}")
        samplers = {family(m.arch).sampler for m in self.models}
        for sampler, field in SAMPLER_AXES.items():
            if getattr(self.grid, field) is not None and sampler not in samplers:
                raise ValueError(f"grid.{field}: given but no model generates with the {sampler} sampler")
        problem = quality_problem(self)
        if problem:
            raise ValueError(problem)
        if self.quality.perplexity is not None:
            self._check_evaluator(self.quality.perplexity.evaluator)
            if self.quality.perplexity.second_evaluator is not None:
                self._check_evaluator(self.quality.perplexity.second_evaluator, "second_evaluator")
        if self.controls.extrapolation is not None:
            self._check_extrapolation(self.controls.extrapolation)
        unknown = [b for b in self.quality.batch_sizes or [] if b not in self.grid.batch_sizes]
        if unknown:
            raise ValueError(f"quality.batch_sizes: {unknown} are not in grid.batch_sizes {self.grid.batch_sizes}")
        for index, m in enumerate(self.models):
            entry = family(m.arch)
            axes_field = SAMPLER_AXES[entry.sampler]
            own = getattr(m, axes_field, None)  # a model may carry its own diffusion axes; the AR loop's are the grid's
            if entry.is_diffusion and own is None and getattr(self.grid, axes_field) is None:
                raise ValueError(
                    f"grid.{axes_field}: model {m.name!r} generates with the {entry.sampler} sampler but neither "
                    f"grid.{axes_field} nor models.{index}.{axes_field} is given"
                )
            field = f"models.{index}.{axes_field}" if own is not None else f"grid.{axes_field}"
            llada, dream = self.llada_axes(m), self.dream_axes(m)
            check_engines(f"{field}.impl", m, self.impls(m), self.controls.temperature)
            if self.block_diffusion_axes(m) is not None:
                check_block_diffusion(field, index, self.controls, self.grid.batch_sizes)
            for pair in self.grid.length_pairs():
                if llada is not None:
                    check_llada_combination(field, pair.generation, llada)
                if dream is not None:
                    check_dream_combination(field, pair.generation, dream)
                shape = m.shape()
                if shape is not None and pair.prompt + pair.generation > shape.max_position_embeddings:
                    raise ValueError(
                        f"grid: prompt {pair.prompt} + generation {pair.generation} tokens exceed model "
                        f"{m.name!r}'s max_position_embeddings {shape.max_position_embeddings}"
                    )
        return self

    def _check_evaluator(self, evaluator: str, field: str = "evaluator") -> None:
        named = self.model(evaluator)
        if named is not None and family(named.arch).is_diffusion:
            raise ValueError(
                f"quality.perplexity.{field}: {evaluator!r} is a {named.arch} model; the evaluator must be "
                "a causal LM (an autoregressive arch: llama or qwen2)"
            )
        if named is None and "/" not in evaluator and evaluator != PACKAGED_SMOLLM2:
            choices = ", ".join(m.name for m in self.models if not family(m.arch).is_diffusion) or "none"
            raise ValueError(
                f"quality.perplexity.{field}: {evaluator!r} is neither {PACKAGED_SMOLLM2} (the packaged judge), an "
                f"autoregressive model of this spec ({choices}) nor a checkpoint (a path or a hub id such as "
                "meta-llama/Meta-Llama-3-8B)"
            )

    def _check_extrapolation(self, extrapolation: Extrapolation) -> None:
        if self.quality.enabled:
            raise ValueError(
                "controls.extrapolation: timing the first steps leaves generations unfinished, so quality cannot "
                "be scored; turn quality off (remove quality:) or remove controls.extrapolation"
            )
        steps = sorted({k for m in self.models if (axes := self.llada_axes(m) or self.dream_axes(m)) for k in axes.steps})
        if not steps:
            others = [f"{m.name} ({family(m.arch).title})" for m in self.models if family(m.arch).is_diffusion]
            raise ValueError(
                "controls.extrapolation: times the first steps of LLaDA's or Dream's sampler and extrapolates the "
                "rest, and this spec has neither" + (f": {', '.join(others)} decodes block by block, a sampler "
                "that is not extrapolated" if others else " (no diffusion model)") + "; remove controls.extrapolation")
        unknown = [k for k in extrapolation.check_steps if k not in steps]
        if unknown:
            raise ValueError(
                f"controls.extrapolation.check_steps: {unknown} are not diffusion step counts of the grid; allowed: {steps}"
            )
        batches = extrapolation.check_batch_sizes or []
        unknown = [b for b in batches if b not in self.grid.batch_sizes]
        if unknown:
            raise ValueError(
                f"controls.extrapolation.check_batch_sizes: {unknown} are not in grid.batch_sizes "
                f"{self.grid.batch_sizes}"
            )

    def evaluator_model(self, second: bool = False) -> ModelSpec | None:
        """The perplexity evaluator (or the second one) as a model: one of the spec's, or a checkpoint it names
        (the packaged judge is the checkpoint the workers convert and cache under that name)."""
        if self.quality.perplexity is None:
            return None
        evaluator = self.quality.perplexity.second_evaluator if second else self.quality.perplexity.evaluator
        if evaluator is None:
            return None
        named = self.model(evaluator)
        if named is not None:
            return named
        safe = re.sub(r"[^A-Za-z0-9._-]", "-", evaluator.strip("/"))[-64:].lstrip("-.") or "evaluator"
        return ModelSpec(name=safe, arch="llama", source=CheckpointSource(checkpoint=evaluator))

    def impls(self, model: ModelSpec) -> list[LladaImpl | LlamaImpl]:
        """The LLaDA or autoregressive implementation variants that apply to a model (none for other samplers)."""
        llada = self.llada_axes(model)
        if llada is not None:
            return list(llada.impl)
        if family(model.arch).sampler == "autoregressive" and self.grid.llama is not None:
            return list(self.grid.llama.impl)
        return []

    def llada_axes(self, model: ModelSpec) -> LladaAxes | None:
        """The LLaDA sampler's axes that apply to a model (its own override first); None for other samplers."""
        if family(model.arch).sampler != "llada":
            return None
        return model.llada or self.grid.llada

    def dream_axes(self, model: ModelSpec) -> DreamAxes | None:
        """The Dream sampler's axes that apply to a model (its own override first); None for other samplers."""
        if family(model.arch).sampler != "dream":
            return None
        return model.dream or self.grid.dream

    def block_diffusion_axes(self, model: ModelSpec) -> BlockDiffusionAxes | None:
        """The block-diffusion sampler's axes that apply to a model (its own override first); None for others."""
        if family(model.arch).sampler != "block_diffusion":
            return None
        return model.block_diffusion or self.grid.block_diffusion

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
    # The perplexity evaluator resolved to a model (None when perplexity is off), and the second one if any.
    evaluator: ModelSpec | None = None
    second_evaluator: ModelSpec | None = None
    # LLaDA: time only the first `timed_steps` steps and extrapolate (controls.extrapolation); None: in full.
    timed_steps: int | None = Field(default=None, gt=0)
    # The implementation variant; None is vanilla (so vanilla runs keep the ids they had before variants).
    llada_impl: LladaImpl | None = None
    llama_impl: LlamaImpl | None = None
    # Dream's sampler setting (alg, alg_temp, top_p, top_k); None for other samplers.
    dream: DreamSampling | None = None
    dream_impl: DreamImpl | None = None
    # Block diffusion's setting (sub-block, threshold, departures) and variant; `block_length` is its block and
    # `steps` its fixed schedule's forwards (K, threshold 1: specs/block_diffusion.py `schedule`).
    block_diffusion: BlockDiffusionSampling | None = None
    block_diffusion_impl: BlockDiffusionImpl | None = None
    # Which of the spec's `controls.sessions` this run belongs to (None when the spec asks for one session, so a
    # sweep of one session keeps the ids it had before sessions existed).
    session: int | None = Field(default=None, ge=0)

    @field_validator("llada_impl", "llama_impl", "dream_impl", "block_diffusion_impl")
    @classmethod
    def _vanilla_is_none(
        cls, impl: LladaImpl | LlamaImpl | DreamImpl | BlockDiffusionImpl | None
    ) -> LladaImpl | LlamaImpl | DreamImpl | BlockDiffusionImpl | None:
        """The plain implementation is stored as None, however it was given: one config, one run id."""
        return None if impl is not None and impl.name == VANILLA else impl

    @model_validator(mode="after")
    def _impl_matches_arch(self) -> RunConfig:
        sampler = family(self.model.arch).sampler
        fields = (("llada_impl", "llada"), ("llama_impl", "autoregressive"), ("dream", "dream"), ("dream_impl", "dream"),
                  ("block_diffusion", "block_diffusion"), ("block_diffusion_impl", "block_diffusion"))
        for field, fits in fields:
            if getattr(self, field) is not None and sampler != fits:
                raise ValueError(
                    f"{field}: applies to models of the {fits} sampler only; {self.model.name!r} is {self.model.arch}"
                )
        if sampler == "dream" and self.dream is None:
            raise ValueError(f"dream: the Dream sampler's setting is missing for {self.model.name!r}")
        if sampler == "block_diffusion":
            self._check_block_schedule()
        if self.llada_impl is not None and self.llada_impl.parallel and self.remasking == "random":
            raise ValueError("llada_impl: threshold and factor rank confidence; they need remasking low_confidence")
        sessions = self.controls.sessions
        if (self.session is None) != (sessions == 1) or (self.session or 0) >= sessions:
            raise ValueError(
                f"session: {self.session} does not fit controls.sessions {sessions}; allowed: "
                + ("none (one session)" if sessions == 1 else f"0 to {sessions - 1}")
            )
        return self

    def _check_block_schedule(self) -> None:
        setting = self.block_diffusion
        if setting is None or self.block_length is None:
            raise ValueError(f"block_diffusion: the setting and block_length are missing for {self.model.name!r}")
        if self.block_length % setting.sub_block_length:
            raise ValueError(f"block_diffusion.sub_block_length: {setting.sub_block_length} does not divide "
                             f"block_length {self.block_length}")  # fmt: skip
        k = schedule(self.prompt_length, self.generation_length, self.block_length, setting.sub_block_length,
                     setting.prefill_one_block_prompt).max_forwards  # fmt: skip
        if self.steps != k:
            raise ValueError(f"steps: block diffusion's are its schedule's forwards at threshold 1, {k}, not {self.steps}")

    @property
    def impl_name(self) -> str:
        impl = self.llada_impl or self.llama_impl or self.dream_impl or self.block_diffusion_impl
        return impl.name if impl is not None else VANILLA

    @property
    def engine(self) -> str:
        """The engine this run's model side runs in (specs/engines.py): its variant's, else PyTorch."""
        impl = self.llada_impl or self.llama_impl
        return impl.engine if impl is not None else PYTORCH

    @property
    def commit_rule(self) -> str | None:
        """Which positions a diffusion step commits, in words: LLaDA's remasking, or Dream's alg (@ its alg_temp)."""
        if self.dream is not None:
            return self.dream.alg + (f"@{self.dream.alg_temp:g}" if self.dream.alg_temp else "")
        if self.block_diffusion is not None:
            return f"threshold@{self.block_diffusion.threshold:g}/sub{self.block_diffusion.sub_block_length}"
        return self.remasking

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
    "BlockDiffusionAxes",
    "BlockDiffusionImpl",
    "BlockDiffusionSampling",
    "PRESET_NAMES",
    "SAFE_NAME",
    "Attention",
    "BertScoreSpec",
    "CheckpointSource",
    "Controls",
    "Device",
    "DreamAlg",
    "DreamAxes",
    "DreamImpl",
    "DreamSampling",
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
    "PACKAGED_SMOLLM2",
    "ParitySpec",
    "PerplexitySpec",
    "Prompts",
    "QualitySpec",
    "Remasking",
    "RunConfig",
    "SyntheticSource",
]
