"""A run's compiled or captured step forwards (LLaMA's `compile` decode, LLaDA's, Dream's and block diffusion's
`graph` forwards), one set per batch shape, and how the artifact names the way they ran."""

from __future__ import annotations

import torch

from specs.schema import RunConfig
from workers.measure.preparation import Preparation
from workers.models.loading import LoadedModel
from workers.samplers.block_diffusion.graphs import BlockDiffusionGraphs
from workers.samplers.compiled import CompiledDecode
from workers.samplers.dream.graphs import DreamGraphs
from workers.samplers.llada.graphs import LladaGraphs


class CompiledSteps:
    """A run's compiled or captured step forwards, one set per batch shape, kept for its untimed quality
    generations too: LLaMA's `compile` decode steps, LLaDA's `graph` forwards."""

    def __init__(self) -> None:
        self._steps: dict[tuple[int, int], CompiledDecode] = {}
        self._graphs: dict[tuple[int, int], LladaGraphs] = {}
        self._dream_graphs: dict[tuple[int, int], DreamGraphs] = {}
        self._block_graphs: dict[tuple[int, int, int], BlockDiffusionGraphs] = {}
        self.preparation = Preparation()  # every step forward's preparation, and the guard of the timed region

    def for_batch(
        self, loaded: LoadedModel, input_ids: torch.Tensor, n_new: int, decode_attention: str = "static"
    ) -> CompiledDecode:
        batch, prompt = input_ids.shape
        key = (batch, prompt + n_new)
        if key not in self._steps:
            self._steps[key] = CompiledDecode(
                loaded.model, batch=batch, capacity=prompt + n_new, decode_attention=decode_attention,
                preparation=self.preparation,
            )  # fmt: skip
        return self._steps[key]

    def llada_for_batch(self, loaded: LoadedModel, config: RunConfig, input_ids: torch.Tensor) -> LladaGraphs:
        batch, prompt = input_ids.shape
        rows = batch * (2 if config.cfg_scale > 0 else 1)  # CFG doubles the rows a forward feeds
        key = (rows, prompt + config.generation_length)
        if key not in self._graphs:
            cache = config.llada_impl.cache if config.llada_impl is not None else "none"
            self._graphs[key] = LladaGraphs(
                loaded.model, rows=rows, length=key[1], cache=cache, preparation=self.preparation
            )
        return self._graphs[key]

    def dream_for_batch(self, loaded: LoadedModel, config: RunConfig, input_ids: torch.Tensor) -> DreamGraphs:
        batch, prompt = input_ids.shape
        key = (batch, prompt + config.generation_length)
        if key not in self._dream_graphs:
            self._dream_graphs[key] = DreamGraphs(
                loaded.model, rows=batch, length=key[1], preparation=self.preparation
            )
        return self._dream_graphs[key]

    def block_diffusion_for_batch(
        self, loaded: LoadedModel, config: RunConfig, input_ids: torch.Tensor
    ) -> BlockDiffusionGraphs:
        batch, prompt = input_ids.shape
        key = (batch, prompt, config.generation_length)
        if key not in self._block_graphs:
            self._block_graphs[key] = BlockDiffusionGraphs(loaded.model, rows=batch, preparation=self.preparation)
        return self._block_graphs[key]

    @property
    def preparation_s(self) -> float | None:
        """Seconds every step forward took to prepare (None: nothing prepared)."""
        return self.preparation.seconds if self.preparation.prepared else None

    @property
    def decode_kernel(self) -> str | None:
        """The attention kernel the compiled decode steps ran (None: no LLaMA compiled step)."""
        return next((s.kernel for s in self._steps.values()), None)


def uses_compiled_steps(config: RunConfig) -> bool:
    """Whether the run's variant compiles (LLaMA `compile`) or captures (LLaDA's or Dream's `graph`) its step
    forwards."""
    return (
        (config.llama_impl is not None and config.llama_impl.compile)
        or (config.llada_impl is not None and config.llada_impl.graph)
        or (config.dream_impl is not None and config.dream_impl.graph)
        or (config.block_diffusion_impl is not None and config.block_diffusion_impl.graph)
    )


def forward_capture(config: RunConfig, device: torch.device) -> str | None:
    """How the variant's step forward runs, in words, for the artifact (None: eagerly)."""
    if not uses_compiled_steps(config):
        return None
    if device.type != "cuda":
        return "inductor"
    return "torch.compile reduce-overhead (cuda graphs)" if config.llama_impl is not None else "cuda graph"
