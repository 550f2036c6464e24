"""The diffusion samplers a run generates with, built from its config: one builder per sampler of the registry.

Each takes the loaded model, the run's config and its prompt batch, and returns the sampler's step iterator with
the run's settings and variant (the scenario times it, workers/measure/scenario.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specs.block_diffusion import schedule
from specs.schema import RunConfig
from workers.measure.compiled_steps import CompiledSteps
from workers.models.loading import LoadedModel
from workers.samplers.block_diffusion.sampler import BlockDiffusionSampler, block_diffusion_steps
from workers.samplers.dream.sampler import DreamSampler, dream_steps
from workers.samplers.llada.sampler import LladaSampler, llada_steps


def llada_sampler(
    loaded: LoadedModel, config: RunConfig, input_ids: torch.Tensor, *, generator: torch.Generator,
    temperature: float, compiled: CompiledSteps | None,
) -> LladaSampler:
    """LLaDA's semi-autoregressive sampler with the run's block length, remasking, CFG and variant."""
    assert config.block_length is not None and loaded.mask_token_id is not None and config.steps is not None
    impl = config.llada_impl
    graphs = None
    if impl is not None and impl.graph:
        assert compiled is not None, "the graph variant needs its CompiledSteps"
        graphs = compiled.llada_for_batch(loaded, config, input_ids)
    return llada_steps(
        loaded.model, input_ids,
        gen_length=config.generation_length,
        block_length=config.block_length,
        steps=config.steps,
        mask_id=loaded.mask_token_id,
        temperature=temperature,
        cfg_scale=config.cfg_scale,
        remasking=config.remasking or "low_confidence",
        generator=generator,
        cache=impl.cache if impl else "none",
        threshold=impl.threshold if impl else None,
        factor=impl.factor if impl else None,
        graphs=graphs,
    )  # fmt: skip


def dream_sampler(
    loaded: LoadedModel, config: RunConfig, input_ids: torch.Tensor, *, generator: torch.Generator,
    temperature: float, compiled: CompiledSteps | None,
) -> DreamSampler:
    """Dream's whole-sequence sampler with the run's alg, alg_temp, top-p and top-k, and its variant."""
    assert config.dream is not None and loaded.mask_token_id is not None and config.steps is not None
    setting = config.dream
    graphs = None
    if config.dream_impl is not None and config.dream_impl.graph:
        assert compiled is not None, "the graph variant needs its CompiledSteps"
        graphs = compiled.dream_for_batch(loaded, config, input_ids)
    return dream_steps(
        loaded.model, input_ids,
        gen_length=config.generation_length,
        steps=config.steps,
        mask_id=loaded.mask_token_id,
        alg=setting.alg,
        alg_temp=setting.alg_temp,
        temperature=temperature,
        top_p=setting.top_p,
        top_k=setting.top_k,
        generator=generator,
        graphs=graphs,
    )  # fmt: skip


def block_diffusion_sampler(
    loaded: LoadedModel, config: RunConfig, input_ids: torch.Tensor, *, generator: torch.Generator,
    temperature: float, compiled: CompiledSteps | None,
) -> BlockDiffusionSampler:
    """Fast-dLLM v2's block diffusion with the run's block, sub-block, threshold, departures and variant, generating
    exactly the run's N_out tokens: the fewest whole blocks that reach them, stopped once they are committed, the stop
    token ignored (as the autoregressive loop ignores EOS)."""
    assert config.block_diffusion is not None and config.block_length is not None and loaded.mask_token_id is not None
    setting, impl = config.block_diffusion, config.block_diffusion_impl
    graphs = None
    if impl is not None and impl.graph:
        assert compiled is not None, "the graph variant needs its CompiledSteps"
        graphs = compiled.block_diffusion_for_batch(loaded, config, input_ids)
    blocks = schedule(input_ids.shape[1], config.generation_length, config.block_length, setting.sub_block_length,
                      setting.prefill_one_block_prompt)  # fmt: skip
    return block_diffusion_steps(
        loaded.model, input_ids,
        max_new_tokens=blocks.max_new_tokens,
        gen_length=config.generation_length,
        block_length=config.block_length,
        sub_block_length=setting.sub_block_length,
        threshold=setting.threshold,
        mask_id=loaded.mask_token_id,
        temperature=temperature,
        generator=generator,
        sub_block_cache=impl is not None and impl.sub_block_cache,
        commit_mask_predictions=setting.commit_mask_predictions,
        prefill_one_block_prompt=setting.prefill_one_block_prompt,
        graphs=graphs,
    )  # fmt: skip


# The step iterator of each diffusion sampler of the registry (specs/registry.py `Family.sampler`).
DIFFUSION_SAMPLERS: dict[str, Callable[..., LladaSampler | DreamSampler | BlockDiffusionSampler]] = {
    "llada": llada_sampler,
    "dream": dream_sampler,
    "block_diffusion": block_diffusion_sampler,
}
