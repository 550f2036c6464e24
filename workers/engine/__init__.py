"""The engine a run's model side runs in (specs/engines.py): the one place a run's engine is dispatched.

A `RunEngine` gives the scenario what differs between engines and nothing else: the model object a diffusion
sampler calls (the sampler itself, the official algorithm, is the package's in every engine), the decode loop an
autoregressive run steps, the bytes of weights the measured model holds, and what the run records of it. PyTorch's
is the package's own loops over transformers' model; llama.cpp's is built by workers/engine/llama_cpp_engine.py on
first use (importing the bindings only then).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from specs.engines import LLAMA_CPP, PYTORCH
from specs.results import EngineRecord
from specs.schema import RunConfig
from workers.models.loading import LoadedModel
from workers.samplers.autoregressive import ar_steps


class RunEngine(Protocol):
    name: str
    torch_tensors: bool  # the model's tensors are torch's, so the CPU profiler's tensor peak sees them
    ar_kv_cache: str | None  # what the run records as an autoregressive run's KV cache (None: the loop's own name)
    samples: bool  # decodes at a temperature > 0 (the sampled reference); llama.cpp's loop here is greedy

    def diffusion_model(self, loaded: LoadedModel) -> LoadedModel:
        """`loaded` with the model a diffusion sampler calls for each step's forward."""

    def ar_steps(self, loaded: LoadedModel, input_ids: torch.Tensor, *, n_new: int, temperature: float,
                 generator: torch.Generator | None, compiled: Any) -> Iterator[Any]:
        """The autoregressive decode loop: `next()` runs the prefill, then one decode a call."""

    def weights_bytes(self, loaded: LoadedModel) -> int:
        """Bytes of weights the measured model holds in this engine."""

    def record(self) -> EngineRecord | None:
        """What the run records of the engine (None: PyTorch, whose versions the environment already has)."""

    def attention_kernel(self, torch_kernel: str | None) -> str | None:
        """The attention the measured forward ran, given what transformers' model would have run."""


@dataclass(frozen=True)
class TorchEngine:
    """The package's own loops over transformers' model."""

    name: str = PYTORCH
    torch_tensors: bool = True
    ar_kv_cache: str | None = None
    samples: bool = True

    def diffusion_model(self, loaded: LoadedModel) -> LoadedModel:
        return loaded

    def ar_steps(self, loaded: LoadedModel, input_ids: torch.Tensor, *, n_new: int, temperature: float,
                 generator: torch.Generator | None, compiled: Any) -> Iterator[Any]:
        return ar_steps(loaded.model, input_ids, n_new=n_new, temperature=temperature, generator=generator,
                        compiled=compiled)

    def weights_bytes(self, loaded: LoadedModel) -> int:
        return loaded.weights_bytes

    def record(self) -> EngineRecord | None:
        return None

    def attention_kernel(self, torch_kernel: str | None) -> str | None:
        return torch_kernel


TORCH = TorchEngine()


def open_engine(config: RunConfig, loaded: LoadedModel) -> RunEngine:
    """The run's engine for `loaded` (llama.cpp converts the checkpoint and loads it on first use)."""
    if config.engine == LLAMA_CPP:
        from workers.engine.llama_cpp_engine import LlamaCppEngine

        return LlamaCppEngine.open(loaded, config.controls.dtype)
    return TORCH
