"""What a spec cannot run: the official samplers' preconditions over every combination the grid makes, block
diffusion's limits, and what a model's variants may ask of an engine (a family it runs, weights it converts)."""

from __future__ import annotations

from specs.controls import Controls
from specs.engines import PYTORCH, engine
from specs.model_spec import DreamAxes, LladaAxes, LladaImpl, LlamaImpl, ModelSpec
from specs.registry import family


def check_llada_combination(field: str, generation: int, axes: LladaAxes) -> None:
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


def check_block_diffusion(field: str, index: int, controls: Controls, batches: list[int]) -> None:
    """What block diffusion cannot run: a sampled draw over more than one row (the official draw takes row 0 only),
    and a kernel that takes no 4-D mask (the prefill is block-causal)."""
    if controls.temperature > 0 and max(batches) > 1:
        raise ValueError(
            f"controls.temperature: {controls.temperature} samples, and block diffusion (models.{index}) samples one "
            f"row only (the official draw takes row 0); use temperature 0, or grid.batch_sizes [1] ({field})"
        )
    if controls.attention == "flash_attention_2":
        raise ValueError(
            f"controls.attention: 'flash_attention_2' takes no block-causal mask, which block diffusion's prefill "
            f"needs (models.{index}); allowed: sdpa, eager"
        )


def check_dream_combination(field: str, generation: int, axes: DreamAxes) -> None:
    """More Dream steps than generated tokens would spend forwards on steps that commit nothing (refused, as
    LLaDA's are)."""
    for steps in axes.steps:
        if steps > generation:
            raise ValueError(
                f"{field}.steps: {steps} steps exceed generation length {generation}; allowed: at most {generation}"
            )


def check_engines(field: str, model: ModelSpec, impls: list[LladaImpl | LlamaImpl], temperature: float) -> None:
    """Every engine a model's variants name runs its family, from weights it can convert; an engine's own decode
    loop here is greedy (a diffusion model's sampler, the package's, samples in any engine)."""
    for impl in impls:
        entry = engine(impl.engine)
        if impl.engine != PYTORCH and temperature > 0 and not family(model.arch).is_diffusion:
            raise ValueError(
                f"{field}: {impl.name!r} decodes model {model.name!r} with {entry.title}'s greedy loop, and "
                f"controls.temperature is {temperature:g}; set it to 0 or drop the variant"
            )
        if model.arch not in entry.families:
            raise ValueError(
                f"{field}: {impl.name!r} runs in {entry.title}, which does not run model {model.name!r} (arch "
                f"{model.arch}); {entry.title} runs: {', '.join(entry.families)}"
            )
        if entry.needs_checkpoint and model.is_synthetic:
            raise ValueError(
                f"{field}: {impl.name!r} runs in {entry.title}, which converts a checkpoint folder, and model "
                f"{model.name!r} has synthetic weights; give it a checkpoint (source.checkpoint)"
            )
